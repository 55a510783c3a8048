"""The ``NAUTILUS_*`` environment of a deployment manifest, for ``nautilus-ranking config``.

``nautilus-ranking config --strict --manifest deploy/k8s/deployment.yaml`` checks a
manifest's settings without deploying it, so a pipeline rejects ``graph:hgih``
before it ships. Read here:

- Kubernetes (multi-document YAML): the containers of every Deployment,
  StatefulSet, DaemonSet or Pod; ``env`` entries with a ``value``,
  ``valueFrom.configMapKeyRef`` and ``envFrom.configMapRef`` resolved against the
  ConfigMaps in the same file (``env`` wins over ``envFrom``, as in Kubernetes);
- compose: every service's ``environment`` (mapping or ``KEY=VALUE`` list) and
  ``env_file``;
- ``--env-file``: a dotenv file.

A value the file cannot show (a Secret, a field reference, a ConfigMap that is
not in the file, a compose ``${VAR}``) is reported as a problem of the manifest:
the gate cannot vouch for it. Secret values are never read or printed.

A Kubernetes container is also checked for what would make it crash-loop or starve
(``container_checks.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from dotenv import dotenv_values

from nautilus_ranking.errors import Problem, cut
from nautilus_ranking.service.container_checks import container_problems
from nautilus_ranking.settings.model import ConfigError, NautilusSettings
from nautilus_ranking.settings.unknown_variables import is_setting_or_typo

_WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "Pod")
_PREFIX = "NAUTILUS_"


@dataclass
class Target:
    """One container's (or compose service's) environment, as the manifest sets it."""

    where: str
    env: dict[str, str]
    problems: list[Problem] = field(default_factory=list)


def _is_ours(name: object) -> bool:
    return isinstance(name, str) and name.upper().startswith(_PREFIX)


def _judged(name: object) -> bool:
    """One of our settings or a typo of one: the Nautilus broker's own ``NAUTILUS_*``
    variables and an operator's own (a DSN its YAML expands, often from a Secret) are
    not ours to check."""
    return is_setting_or_typo(name, NautilusSettings)


#: The largest manifest read (bytes).
MAX_MANIFEST_BYTES = 16 << 20


def _fail(path: str | Path, reason: str, valid: str) -> ConfigError:
    return ConfigError((Problem("--manifest", str(path), reason, valid),))


def read_env_file(path: str | Path) -> dict[str, str]:
    """``KEY=VALUE`` lines (``export``, quotes and ``#`` comments as in dotenv)."""
    from nautilus_ranking.sources.seeds import FileRefusedError, read_text_file

    try:
        text = read_text_file(
            Path(path), "env file", MAX_MANIFEST_BYTES, "a dotenv file of KEY=VALUE lines"
        )
    except FileRefusedError as exc:
        reason = "no such file" if not Path(path).exists() else str(exc)
        raise ConfigError(
            (Problem("--env-file", str(path), reason, "a dotenv file of KEY=VALUE lines"),)
        ) from None
    return {k: v or "" for k, v in dotenv_values(stream=io.StringIO(text)).items()}


def read_manifest(path: str | Path) -> list[Target]:
    """Every container or compose service that sets a ``NAUTILUS_*`` variable."""
    from nautilus_ranking.sources.seeds import FileRefusedError, read_text_file
    from nautilus_ranking.sources.yaml_file import DepthBoundedLoader

    try:  # a regular file only, bounded (/dev/zero never ends, a FIFO waits for a writer)
        text = read_text_file(
            Path(path), "manifest", MAX_MANIFEST_BYTES, "a Kubernetes or compose YAML file"
        )
        # bounded nesting: a document deeper than Python's recursion limit is refused
        loaded = yaml.load_all(text, Loader=DepthBoundedLoader)
        documents = [d for d in loaded if isinstance(d, dict)]
    except FileRefusedError as exc:
        raise _fail(path, f"cannot read it ({exc})", "a readable file") from None
    except (yaml.YAMLError, RecursionError) as exc:
        reason = (
            str(exc).splitlines()[0] if isinstance(exc, yaml.YAMLError) else "nested too deeply"
        )
        raise _fail(path, f"not valid YAML ({reason})", "Kubernetes or compose YAML") from None
    targets: list[Target] = []
    for document in documents:
        if isinstance(document.get("services"), dict):
            targets.extend(_compose(document["services"], Path(path).parent))
    config_maps = {
        str(d.get("metadata", {}).get("name")): d.get("data") or {}
        for d in documents
        if d.get("kind") == "ConfigMap"
    }
    for document in documents:
        if document.get("kind") in _WORKLOADS:
            targets.extend(_workload(document, config_maps))
    found = [t for t in targets if any(_judged(k) for k in t.env) or t.problems]
    if not found:
        raise _fail(
            path,
            "no container or compose service sets a NAUTILUS_* variable",
            "a Deployment, StatefulSet, DaemonSet, Pod or compose file",
        )
    return found


def _workload(document: Mapping[str, Any], config_maps: Mapping[str, Any]) -> list[Target]:
    kind = document["kind"]
    name = (document.get("metadata") or {}).get("name", "?")
    spec = document.get("spec") or {}
    pod = spec if kind == "Pod" else ((spec.get("template") or {}).get("spec") or {})
    targets = []
    for container in pod.get("containers") or []:
        if not isinstance(container, dict):
            continue
        target = Target(f"{kind}/{name} container {container.get('name', '?')}", {})
        for source in container.get("envFrom") or []:
            _env_from(source, config_maps, target)
        for entry in container.get("env") or []:
            if isinstance(entry, dict) and _judged(entry.get("name")):
                _env_entry(entry, config_maps, target)
        if any(_judged(k) for k in target.env):  # a sidecar is not ours to judge
            target.problems.extend(container_problems(container, target.env))
        targets.append(target)
    return targets


def _env_from(source: Any, config_maps: Mapping[str, Any], target: Target) -> None:
    if not isinstance(source, dict):
        return
    prefix = str(source.get("prefix") or "")
    ref = source.get("configMapRef")
    if isinstance(ref, dict):
        data = config_maps.get(str(ref.get("name")))
        if data is None:
            target.problems.append(
                Problem(
                    "envFrom",
                    cut(str(ref.get("name"))),
                    "ConfigMap not in this file; not checked",
                    ", ".join(config_maps) or "a ConfigMap in the same file",
                )
            )
            return
        for key, value in data.items():
            target.env[prefix + str(key)] = "" if value is None else str(value)
    elif isinstance(source.get("secretRef"), dict):
        target.problems.append(
            Problem(
                "envFrom",
                cut(str(source["secretRef"].get("name"))),
                "a Secret's variables cannot be checked here",
                "NAUTILUS_* in a ConfigMap or env",
            )
        )


def _env_entry(entry: Mapping[str, Any], config_maps: Mapping[str, Any], target: Target) -> None:
    name = str(entry["name"])
    if "value" in entry:
        value = entry["value"]
        target.env[name] = (
            "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        )
        return
    ref = (entry.get("valueFrom") or {}).get("configMapKeyRef")
    if isinstance(ref, dict):
        data = config_maps.get(str(ref.get("name")))
        if data is not None and ref.get("key") in data:
            target.env[name] = str(data[ref["key"]])
            return
        target.problems.append(
            Problem(
                name,
                f"configMapKeyRef {ref.get('name')}/{ref.get('key')}",
                "not found in this file; not checked",
                ", ".join(config_maps) or "(no ConfigMap)",
            )
        )
        return
    target.problems.append(
        Problem(
            name,
            "(valueFrom)",
            "a Secret or field reference cannot be checked here",
            "a value or a configMapKeyRef",
        )
    )


def _compose(services: Mapping[str, Any], base: Path) -> list[Target]:
    targets = []
    for service, spec in services.items():
        if not isinstance(spec, dict):
            continue
        target = Target(f"compose service {service}", {})
        env_files = spec.get("env_file") or []
        for item in [env_files] if isinstance(env_files, str | dict) else env_files:
            file = item.get("path") if isinstance(item, dict) else item
            target.env.update(read_env_file(base / str(file)))
        environment = spec.get("environment") or {}
        entries = (
            environment.items()
            if isinstance(environment, dict)
            else (
                str(e).partition("=")[::2] if "=" in str(e) else (str(e), None) for e in environment
            )
        )
        for key, value in entries:
            if not _judged(key):
                continue
            if value is None:
                target.problems.append(
                    Problem(
                        str(key),
                        "(from the host)",
                        "no value in the file; not checked",
                        "KEY=VALUE",
                    )
                )
            elif "${" in str(value):
                target.problems.append(
                    Problem(
                        str(key),
                        cut(str(value)),
                        "interpolated at deploy time; not checked",
                        "a literal value",
                    )
                )
            else:
                target.env[str(key)] = str(value).lower() if isinstance(value, bool) else str(value)
        targets.append(target)
    return targets


@contextlib.contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """Settings read from ``env`` alone: this process's ``NAUTILUS_*`` variables and the
    working directory's ``.env`` are set aside meanwhile (and restored after)."""
    saved = {k: v for k, v in os.environ.items() if _is_ours(k)}
    env_file = NautilusSettings.model_config.get("env_file")
    for key in saved:
        del os.environ[key]
    os.environ.update({k: v for k, v in env.items() if _is_ours(k)})
    NautilusSettings.model_config["env_file"] = None
    try:
        yield
    finally:
        for key in [k for k in os.environ if _is_ours(k)]:
            del os.environ[key]
        os.environ.update(saved)
        NautilusSettings.model_config["env_file"] = env_file


def with_manifest(
    run: Callable[[argparse.Namespace], int],
) -> Callable[[argparse.Namespace], int]:
    """``nautilus-ranking config`` over a manifest's (or an env file's) environment instead of
    this process's; the manifest's own problems print on stderr and fail ``--strict``."""

    def checked(args: argparse.Namespace) -> int:
        env_file, manifest = getattr(args, "env_file", None), getattr(args, "manifest", None)
        if not env_file and not manifest:
            return run(args)
        base = read_env_file(env_file) if env_file else {}
        targets = (
            [Target(f"{t.where}", {**base, **t.env}, t.problems) for t in read_manifest(manifest)]
            if manifest
            else [Target(f"env file {env_file}", base)]
        )
        status = 0
        for target in targets:
            print(f"nautilus-ranking: checking {target.where}", file=sys.stderr)
            with environment(target.env):
                status = max(status, run(args))
            for problem in target.problems:
                print(f"nautilus-ranking: {target.where}: {problem.message}", file=sys.stderr)
            if target.problems and args.strict:
                status = max(status, 1)
        return status

    return checked
