"""A one-line progress bar for long sweeps, drawn only on a terminal.

    with Progress(12, "bench") as bar:
        for item in work:
            bar.step(f"hgemm 4096x4096x4096")   # before the item: says what runs now
            ...

On a terminal (the stream's `isatty()`), the line is redrawn in place with `\\r`
and erased at the end; anywhere else (a pipe, a log file, CI) nothing is written,
so logs keep only the results.
"""

from __future__ import annotations

import shutil
import sys
import time


class Progress:
    def __init__(
        self, total: int, label: str = "", stream=None, width: int = 24, enabled: bool = True
    ):
        self.total = max(total, 1)
        self.label = label
        self.stream = sys.stderr if stream is None else stream
        self.width = width
        self.done = -1
        self.started = time.monotonic()
        self.active = enabled and bool(getattr(self.stream, "isatty", lambda: False)())
        self._drawn = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def step(self, what: str = "") -> None:
        """Start the next item (`what` names it)."""
        self.done = min(self.done + 1, self.total)
        if not self.active:
            return
        filled = self.width * self.done // self.total
        bar = "#" * filled + "." * (self.width - filled)
        elapsed = time.monotonic() - self.started
        line = f"{self.label} [{bar}] {self.done}/{self.total} {elapsed:5.0f}s {what}"
        columns = shutil.get_terminal_size((80, 24)).columns
        line = line[: max(columns - 1, 10)]
        self.stream.write("\r" + line.ljust(self._drawn))
        self.stream.flush()
        self._drawn = len(line)

    def close(self) -> None:
        """Erase the bar, so that what is printed next starts on a clean line."""
        if self.active and self._drawn:
            self.stream.write("\r" + " " * self._drawn + "\r")
            self.stream.flush()
            self._drawn = 0
