"""One error family and one renderer, in the GCC style editors understand.

    examples/bad.tile:7:23: error: expected an integer after 'x', found end of line
        block   128 x 128 x
                          ^
    note: a block tile is written BM x BN x BK, e.g. 128 x 128 x 32

`Loc` is excluded from IR equality (``compare=False`` where it is a field) so
that structurally equal IR compares equal wherever it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Loc:
    """A position in a `.tile` file: 1-based line and column, plus the end of the span."""

    file: str
    line: int
    col: int
    end_line: int = 0
    end_col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NOWHERE = Loc("<tiledsl>", 0, 0)

#: Diagnostics one report shows (clang stops at 20): the rest are only counted.
MAX_SHOWN = 50


@dataclass(frozen=True)
class Diagnostic:
    """One located problem: what is wrong, where, and (in `notes`) how to fix it."""

    loc: Loc
    message: str
    notes: tuple[str, ...] = ()
    severity: str = "error"

    def render(self, source: str | None) -> str:
        return self.render_lines(source_lines(source) if source is not None else None)

    def render_lines(self, lines: list[str] | None) -> str:
        """The report, quoting the source from `lines` (the file split once: see
        `source_lines`), so that a file with many errors renders in linear time."""
        out = [f"{self.loc}: {self.severity}: {self.message}"]
        if lines is not None and 1 <= self.loc.line <= len(lines):
            out.append("    " + _printable(lines[self.loc.line - 1]))
            width = 1
            if self.loc.end_line == self.loc.line and self.loc.end_col > self.loc.col:
                width = self.loc.end_col - self.loc.col
            out.append("    " + " " * (self.loc.col - 1) + "^" + "~" * (width - 1))
        out.extend(f"note: {note}" for note in self.notes)
        return "\n".join(out)


def source_lines(source: str) -> list[str]:
    """The file's lines as the parser counts them: split at '\\n' only (Lark's line
    counter), a trailing '\\r' dropped. `str.splitlines` also splits at form feeds,
    U+2028 and other separators, and would quote another line than the one meant."""
    return [line.removesuffix("\r") for line in source.split("\n")]


def _printable(text: str) -> str:
    """A source line with one terminal column per character, so that the caret lines up:
    tabs and other control or separator characters (in comments) are shown as spaces."""
    return "".join(ch if ch.isprintable() else " " for ch in text)


class TileError(Exception):
    """Everything wrong with one `.tile` file, reported together (exit status 1).

    ``str(err)`` is the rendered report; ``err.diagnostics`` keeps the parts so
    that tests can assert (line, column, message).
    """

    def __init__(
        self, diagnostics: list[Diagnostic] | tuple[Diagnostic, ...], source: str | None = None
    ):
        self.diagnostics = tuple(diagnostics)
        self.source = source
        super().__init__(self.diagnostics[0].message if self.diagnostics else "")

    def __str__(self) -> str:
        return self.render()

    def render(self, limit: int | None = MAX_SHOWN) -> str:
        """The diagnostics (the first `limit`, then a count of the rest), source quoted."""
        lines = source_lines(self.source) if self.source is not None else None
        shown = self.diagnostics if limit is None else self.diagnostics[:limit]
        out = [d.render_lines(lines) for d in shown]
        if len(self.diagnostics) > len(shown):
            hidden = len(self.diagnostics) - len(shown)
            out.append(f"note: {hidden} more error(s) not shown; fix the ones above first")
        return "\n".join(out)

    def with_source(self, source: str) -> TileError:
        return TileError(self.diagnostics, source)

    @property
    def first(self) -> Diagnostic:
        return self.diagnostics[0]


def error(loc: Loc, message: str, *notes: str) -> TileError:
    """A single-diagnostic error, for code that stops at its first problem."""
    return TileError([Diagnostic(loc, message, tuple(notes))])


@dataclass
class Collector:
    """Gathers every semantic error of a file, so that a user fixes it in one round."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def add(self, loc: Loc, message: str, *notes: str) -> None:
        self.diagnostics.append(Diagnostic(loc, message, tuple(notes)))

    def raise_if_any(self, source: str | None = None) -> None:
        if self.diagnostics:
            ordered = sorted(self.diagnostics, key=lambda d: (d.loc.file, d.loc.line, d.loc.col))
            raise TileError(ordered, source)


class UsageError(Exception):
    """A command-line mistake (exit status 2), not a problem in the file."""


class TileWarning(UserWarning):
    """Something a call should know but that does not stop it: e.g. a dispatch table that
    picks a kernel for a shape far from every shape it was tuned at."""


class ToolchainError(Exception):
    """A compiler failed on generated code: carries its log, the source path and the command."""

    def __init__(self, message: str, log: str = "", source_path: str = "", command: str = ""):
        self.log = log
        self.source_path = source_path
        self.command = command
        parts = [message]
        if source_path:
            parts.append(f"generated source: {source_path}")
        if command:
            parts.append(f"reproduce with: {command}")
        if log:
            parts.append(log.rstrip())
        super().__init__("\n".join(parts))
