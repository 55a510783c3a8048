"""A tiny progress bar on stderr, drawn only on a terminal (never in a pipe or a log),
naming what is being tried."""

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
        self.what = ""  # what is being tried, shown after the label
        self.done = 0
        self._started = time.monotonic()
        self._drawn = 0.0

    def trying(self, what: str) -> None:
        """Name what the next steps work on ("ranking: near duplicates on")."""
        self.what = what
        self._draw(force=True)

    def step(self, count: int = 1) -> None:
        self.done = min(self.total, self.done + count)
        self._draw(force=self.done == self.total)

    def _draw(self, force: bool) -> None:
        now = time.monotonic()
        if self.enabled and (force or now - self._drawn >= _REDRAW_S):
            self._drawn = now
            filled = round(_WIDTH * self.done / self.total)
            elapsed = now - self._started
            label = f"{self.label}: {self.what[:40]}" if self.what else self.label
            self.stream.write(
                f"\r\033[K{label} [{'#' * filled}{'.' * (_WIDTH - filled)}] "
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
