"""Whether a test may run a command in a private mount namespace (``unshare --mount``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

UNSHARE = shutil.which("unshare")


def private_mounts() -> bool:
    """Root, and allowed a mount namespace (an unprivileged container is not)."""
    if sys.platform != "linux" or os.geteuid() != 0 or UNSHARE is None:
        return False
    probe = subprocess.run([UNSHARE, "--mount", "true"], capture_output=True, timeout=30)
    return probe.returncode == 0
