"""Which Nautilus broker (``nautilus-rkm``) the attachment was tested against, and
every private seam of it that the attachment touches.

The attachment lives on the broker's internals, not its API: a version this was not
tested on may have moved any of them. Attaching to one works if it can, and says so in
one warning; a seam that is missing (:func:`seam_missing`) is named in one warning and
the broker's own behaviour stays (the ranked route or tool is not added, the
vocabulary is empty, ...).
"""

from __future__ import annotations

from importlib import metadata

from nautilus_ranking.log import get_logger

logger = get_logger("nautilus_ranking.upstream")

#: The broker's distribution on the package index.
BROKER_DISTRIBUTION = "nautilus-rkm"
#: The broker versions the attachment is tested against (tests/upstream/, in CI).
TESTED_BROKER_VERSIONS: tuple[str, ...] = ("0.3.0",)

#: Every private seam of the broker we use, and what it is used for (all tested on
#: :data:`TESTED_BROKER_VERSIONS`). Public API we also rely on (``Broker.from_config``,
#: ``arequest``, ``sources``, ``config``, ``on_reload``) is not listed.
SEAMS: dict[str, str] = {
    "Broker._synthesizer": "the synthesizer from_config hard-codes, replaced by ours",
    "Broker.arequest (instance attribute)": "wrapped to carry the intent to merge",
    "nautilus.cli.broker_for_serve": "wrapped by `serve` to attach to the broker it builds",
    "nautilus.transport.fastapi_app.create_app": "wrapped by `serve` to add the ranked route",
    "APIRoute POST /v1/request: endpoint(body, request) and its dependencies": "the "
    "ranked route calls the stock handler under the stock auth dependencies",
    "nautilus.transport.mcp_server.create_server": "wrapped by `serve` to add the ranked tool",
    "FastMCP._tool_manager.get_tool('nautilus_request').fn": "the ranked tool calls the "
    "stock tool (auth, session, byte bound); the feedback tool, its caller checks",
    "FastMCP._tool_manager.remove_tool('nautilus_request')": "with "
    "NAUTILUS_UPSTREAM_REQUEST_TOOLS=ranked, the stock tool leaves tools/list",
    "nautilus.analysis.pattern_matching.build_keyword_map": "the routing vocabulary",
    "Broker._adapters": "the pgvector adapters given our embedder as their default",
    "PgVectorAdapter._broker_default_embedder": "replaced (while it is the broker's "
    "refusing NoopEmbedder) by our query vectors",
}

_missing_said: set[str] = set()


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
            f"({'; '.join(SEAMS)}), so check its answers, or install "
            f"{BROKER_DISTRIBUTION}=={TESTED_BROKER_VERSIONS[-1]}"
        ),
    )
    return False


def seam_missing(seam: str, action: str) -> None:
    """One ``upstream_seam_missing`` warning (per seam and process): ``seam`` (a key of
    :data:`SEAMS`) is not where the tested versions have it; ``action`` says what is
    done instead (the broker's own behaviour)."""
    if seam not in SEAMS:
        raise KeyError(f"{seam!r} is not a declared seam (nautilus_ranking/upstream/version.py)")
    if seam in _missing_said:
        return
    _missing_said.add(seam)
    logger.warning(
        "upstream_seam_missing",
        seam=seam,
        used_for=SEAMS[seam],
        broker_version=installed_broker_version() or "(not installed)",
        tested=", ".join(TESTED_BROKER_VERSIONS),
        action=action,
    )
