"""Which profile ranks a request, and what its caller may still override.

A caller's key (``NAUTILUS_SERVE_API_KEYS_FILE``) grants a default profile and a set it
may name; a request may name one of those. To a caller with a key, a name its key does
not allow is a 403 whether or not such a profile exists (two answers would let a caller
enumerate the names by trying them), and no answer lists the other profiles: a caller
learns only what its own key allows (:func:`allowed`). Without a keys file any profile
may be named, and an unknown name is a 422.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nautilus_ranking.errors import cut
from nautilus_ranking.profiles.build import NAME, Profile, Profiles
from nautilus_ranking.request.errors import ProblemError


@dataclass(frozen=True)
class Grant:
    """What one API key allows: its default profile (None: the global knobs) and the
    profiles it may name (its default among them)."""

    default: str | None = None
    allowed: frozenset[str] = frozenset()

    def allows(self, name: str) -> bool:
        return name == self.default or name in self.allowed


#: A plain key line: the global knobs, no profile to name.
PLAIN = Grant()


def choose(profiles: Profiles, asked: str | None, grant: Grant | None) -> Profile | None:
    """The profile that ranks a request naming ``asked`` (None: none named) from a
    caller with ``grant`` (None: no keys file, any profile may be named); None: the
    global knobs."""
    if asked is None:
        default = grant.default if grant is not None else None
        return profiles.by_name.get(default) if default is not None else None
    if grant is not None and not (isinstance(asked, str) and grant.allows(asked)):
        raise ProblemError(
            403,
            "profile-forbidden",
            "Profile not allowed",
            f"this key may not use profile {cut(asked)!r}",
            extra={"field": "profile", "value": cut(asked), "valid": _valid(grant)},
        )
    if not isinstance(asked, str) or asked not in profiles.by_name:
        raise ProblemError(
            422,
            "unknown-profile",
            "Unknown profile",
            f"no profile named {cut(asked)!r} is configured",
            extra={"field": "profile", "value": cut(asked), "valid": _valid(grant)},
        )
    return profiles.by_name[asked]


def allowed(profiles: Profiles, grant: Grant | None) -> dict[str, object]:
    """What a caller may ask for: its default profile and the ones it may name."""
    if grant is None:
        return {"default": None, "allowed": list(profiles.names)}
    names = sorted(n for n in profiles.names if grant.allows(n))
    return {"default": grant.default, "allowed": names}


def _valid(grant: Grant | None) -> str:
    """The valid choices as an error may say them: never the other profiles' names."""
    if grant is None:
        return "a configured profile's name (nautilus-ranking config lists them)"
    return "a profile this key allows (GET /v1/profiles lists them)"


def check_overrides(profile: Profile, given: Mapping[str, object]) -> None:
    """403 when a request overrides a knob its profile does not let callers override;
    ``given``: each override the request carries, by field, with the value it gave."""
    refused = [name for name in given if name not in profile.overrides]
    if refused:
        allowed_names = ", ".join(sorted(profile.overrides)) or "none"
        raise ProblemError(
            403,
            "overrides-forbidden",
            "Overrides forbidden",
            f"profile {profile.name!r} does not let its callers override "
            f"{', '.join(refused)} (it allows: {allowed_names})",
            extra={
                "field": refused[0],
                "value": cut(given[refused[0]]),
                "profile": profile.name,
                "valid": allowed_names,
            },
        )


def profile_argument(value: object) -> str:
    """A request's ``profile`` field: a name, or a 422."""
    if isinstance(value, str) and NAME.fullmatch(value):
        return value
    raise ProblemError(
        422,
        "unknown-profile",
        "Unknown profile",
        f"no profile named {cut(value)!r} is configured",
        extra={"field": "profile", "value": cut(value), "valid": "a profile's name"},
    )


#: The ``profile`` request field's schema (only where profiles are configured).
PROFILE_FIELD: dict[str, object] = {
    "type": "string",
    "pattern": "^[a-z0-9_]{1,64}$",
    "description": "the ranking profile to rank with (one your key allows)",
}


def take_profile(payload: object, configured: bool) -> tuple[object, str | None]:
    """A request body without its ``profile`` field, and the name it gave. Without
    profiles configured the body is left whole: ``profile`` is then a field no request
    has (422), as before profiles existed."""
    if not configured or not isinstance(payload, dict) or "profile" not in payload:
        return payload, None
    rest = dict(payload)
    value = rest.pop("profile")
    return rest, None if value is None else profile_argument(value)
