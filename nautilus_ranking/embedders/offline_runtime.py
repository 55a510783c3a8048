"""onnxruntime imported with its telemetry off: the model runs offline.

The official onnxruntime wheels, the pinned 1.31.1 among them, carry Microsoft's 1DS
telemetry, on by default (its Privacy.md). Importing the module creates it: a device id and an
event queue under ``~/.cache/Microsoft/DeveloperTools/.onnxruntime/`` at once, then
an uploader that looks up ``mobile.events.data.microsoft.com`` every few seconds
(measured: the first lookup 4-6 s after load, 6 lookups in 25 s of ``serve``).
``onnxruntime.disable_telemetry_events()`` comes too late and leaves the uploader
running; the one switch that stops all of it is the environment variable
``ORT_DISABLE_TELEMETRY=1``, read once, when onnxruntime is first imported.

So nautilus sets it before its import, unless the operator set it (``0`` turns the
telemetry back on, deliberately). An application that imported onnxruntime before
nautilus did has already started the telemetry: that is said once, with the fix.
"""

from __future__ import annotations

import functools
import os
import sys
from types import ModuleType

from nautilus_ranking.log import get_logger

logger = get_logger("nautilus_ranking.embedders.onnx")

#: onnxruntime's own switch: any value but empty or ``0`` turns its telemetry off.
TELEMETRY_VARIABLE = "ORT_DISABLE_TELEMETRY"


def import_onnxruntime() -> ModuleType:
    """onnxruntime, imported with its telemetry off unless the operator asked for it."""
    if not os.environ.get(TELEMETRY_VARIABLE, "").strip():
        already = "onnxruntime" in sys.modules
        os.environ[TELEMETRY_VARIABLE] = "1"  # for this import and any child process
        if already:
            _imported_before()
    import onnxruntime

    runtime: ModuleType = onnxruntime
    return runtime


@functools.cache
def _imported_before() -> None:
    """The one warning a process gets when onnxruntime was imported before nautilus could
    turn its telemetry off; its non-essential events are stopped (what still can be)."""
    import onnxruntime

    onnxruntime.disable_telemetry_events()
    logger.warning(
        "onnxruntime_telemetry_on",
        reason="onnxruntime was imported before nautilus, with ORT_DISABLE_TELEMETRY unset: "
        "its telemetry started at that import",
        fix="set ORT_DISABLE_TELEMETRY=1 in the environment before the process starts",
    )
