"""Which Nautilus broker (``nautilus-rkm``) the attachment was tested against.

The attachment replaces a private attribute the broker's ``from_config`` sets
(``Broker._synthesizer``) and wraps the instance's ``arequest``: both are the
broker's internals, not its API, so a version this was not tested on may have moved
them. Attaching to one works if it can, and says so in one warning.
"""

from __future__ import annotations

from importlib import metadata

from nautilus_ranking.log import get_logger

logger = get_logger("nautilus_ranking.upstream")

#: The broker's distribution on the package index.
BROKER_DISTRIBUTION = "nautilus-rkm"
#: The broker versions the attachment is tested against (tests/upstream/, in CI).
TESTED_BROKER_VERSIONS: tuple[str, ...] = ("0.3.0",)


def installed_broker_version() -> str | None:
    """The installed ``nautilus-rkm`` version; None when it is not installed."""
    try:
        return metadata.version(BROKER_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


def check_broker_version(version: str | None = None) -> bool:
    """True when ``version`` (default: the installed one) is a tested version; else one
    ``upstream_broker_untested`` warning naming it and the tested ones."""
    found = installed_broker_version() if version is None else version
    if found in TESTED_BROKER_VERSIONS:
        return True
    logger.warning(
        "upstream_broker_untested",
        broker=BROKER_DISTRIBUTION,
        version=found or "(not installed)",
        tested=", ".join(TESTED_BROKER_VERSIONS),
        action=(
            "attached anyway; the ranking relies on the broker's internals "
            "(Broker._synthesizer, Broker.arequest), so check its answers, or install "
            f"{BROKER_DISTRIBUTION}=={TESTED_BROKER_VERSIONS[-1]}"
        ),
    )
    return False
