"""A tiny progress bar on stderr, drawn only on a terminal (never in a pipe or a log)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

_WIDTH = 28
_REDRAW_S = 0.1


class Progress:
    """``Progress(total, "fetching")``; ``step()`` after each item; ``close()`` at the end."""

    def __init__(
        self, total: int, label: str, stream: TextIO | None = None, enabled: bool | None = None
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = (self.stream.isatty() if enabled is None else enabled) and total > 0
        self.total = total
        self.label = label
        self.done = 0
        self._started = time.monotonic()
        self._drawn = 0.0

    def step(self, count: int = 1) -> None:
        self.done = min(self.total, self.done + count)
        now = time.monotonic()
        if self.enabled and (now - self._drawn >= _REDRAW_S or self.done == self.total):
            self._drawn = now
            filled = round(_WIDTH * self.done / self.total)
            elapsed = now - self._started
            self.stream.write(
                f"\r{self.label} [{'#' * filled}{'.' * (_WIDTH - filled)}] "
                f"{self.done}/{self.total} {elapsed:5.1f}s"
            )
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r\033[K")  # erase the bar: stderr stays clean for logs
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
