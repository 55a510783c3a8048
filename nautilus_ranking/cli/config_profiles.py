"""``nautilus-ranking config``'s profiles: each profile's effective knobs and where each came from.

Read as ``serve`` reads them at start-up, but reported rather than warned about or
raised: the command lists every problem (and ``--strict`` fails on any), among them a
profile's boost naming a source the sources file (or the Nautilus broker's
``nautilus.yaml``) lacks, and an agent id the broker's file does not list.
"""

from __future__ import annotations

from typing import Any

from nautilus_ranking.profiles.build import Profiles
from nautilus_ranking.settings.knobs import PER_PROFILE
from nautilus_ranking.settings.model import NautilusSettings


def profiles_json(profiles: Profiles, settings: NautilusSettings) -> dict[str, Any]:
    """Each profile's effective per-profile knobs, by variable, with where each came from."""
    out: dict[str, Any] = {}
    for name, profile in sorted(profiles.by_name.items()):
        effective = profile.settings(settings)
        values = effective.model_dump(mode="json")
        out[name] = {
            "ranking_enabled": effective.ranking_enabled,
            "agents": list(profile.agents),
            "overrides": sorted(profile.overrides),
            "knobs": {
                k.variable: {
                    "value": values[k.field],
                    "from": profile.origins[k.field] if k.field in profile.values else "global",
                }
                for k in PER_PROFILE
            },
        }
    return out


def profiles_text(profiles: Profiles, settings: NautilusSettings) -> str:
    """The profiles as ``nautilus-ranking config`` prints them to a person."""
    shown = profiles_json(profiles, settings)
    if not shown:
        return ""
    lines = ["", "profiles:"]
    for name, profile in shown.items():
        lines.append(
            f"  {name}: ranking {'on' if profile['ranking_enabled'] else 'off'}; "
            f"agents: {', '.join(profile['agents']) or '(none)'}; "
            f"overrides: {', '.join(profile['overrides']) or 'none'}"
        )
        rows = [(var, _shown(k["value"]), k["from"]) for var, k in profile["knobs"].items()]
        width = max(len(r[0]) for r in rows)
        value_width = max(len(r[1]) for r in rows)
        lines.extend(f"    {v:<{width}}  {s:<{value_width}}  {f}" for v, s, f in rows)
    return "\n".join(lines)


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return ",".join(f"{k}:{v}" for k, v in value.items()) or "(unset)"
    if value is None:
        return "(unset)"
    return str(value).lower() if isinstance(value, bool) else str(value)
