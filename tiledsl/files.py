"""The files a command reads and writes: the `.tile` input, and outputs written all or none.

    text, name = read_source("examples/hgemm.tile")          # UsageError / TileError
    write_outputs({Path("k.cu"): source, Path("k.cu.launch.json"): launch},
                  inputs=[Path("k.tile")])                   # UsageError / OutputError

Reading: a path that is a directory, missing or unreadable is a usage error (exit 2);
a FIFO, `/dev/stdin` or a process substitution is read like a file. The text must be
UTF-8: a bad byte is a located error at its line and column. A file is at most
`MAX_SOURCE_BYTES` long, so that its cost is bounded before it is parsed.

Writing: every output of a command is checked first (not an input of the command,
not a directory, not a device, no two the same), then written to a temporary file
beside its target, and only when all are written are they renamed into place. A
failure at any point (a full disk, a file-size limit, a directory that cannot be
made) removes the temporaries and any directory made for them: the old files stay
as they were and nothing half-written is left.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from .errors import Diagnostic, Loc, TileError, UsageError
from .limits import MAX_SOURCE_BYTES


class OutputError(Exception):
    """An output could not be written (exit status 1); nothing of the command was kept."""


def read_source(path: str) -> tuple[str, str]:
    """The UTF-8 text of the `.tile` file at `path`, and the name errors will show."""
    if path == "":
        raise UsageError("the input file name is empty")
    file = Path(path)
    if file.is_dir():
        raise UsageError(f"{path} is a directory, not a .tile file")
    if not file.exists():
        raise UsageError(f"no such file: {path}")
    try:
        with open(file, "rb") as f:
            data = f.read(MAX_SOURCE_BYTES + 1)
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror or err}") from None
    if len(data) > MAX_SOURCE_BYTES:
        raise UsageError(
            f"{path} is longer than {MAX_SOURCE_BYTES} bytes, the most tiledsl reads "
            "(a schedule is a few kilobytes): is it a .tile file?"
        )
    return decode_source(data, path), path


def decode_source(data: bytes, name: str) -> str:
    """`data` as UTF-8 text, or a TileError at the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line_start = data.rfind(b"\n", 0, err.start) + 1
        line = data.count(b"\n", 0, err.start) + 1
        col = len(data[line_start : err.start].decode("utf-8", errors="replace")) + 1
        shown = data.decode("utf-8", errors="replace")
        bad = data[err.start : err.end].hex(" ")
        raise TileError(
            [
                Diagnostic(
                    Loc(name, line, col, line, col + 1),
                    f"byte 0x{bad} is not UTF-8 text",
                    ("a .tile file is UTF-8 text; save it as UTF-8, or delete the character",),
                )
            ],
            shown,
        ) from None


def check_outputs(paths, inputs=()) -> list[Path]:
    """The real files `paths` name, or a UsageError if one may not be written (an input,
    a directory, a device; two the same)."""
    targets = [_target(Path(path), inputs) for path in paths]
    if len(set(targets)) < len(targets):
        raise UsageError(
            "two outputs of this command name the same file: " + ", ".join(map(str, paths))
        )
    return targets


def write_outputs(outputs: dict[Path, str | bytes], inputs=()) -> None:
    """Write every output, or none of them (see the module's text)."""
    targets = dict(zip(check_outputs(outputs, inputs), outputs.values()))
    made: list[Path] = []
    written: list[tuple[str, Path]] = []
    current = next(iter(targets), None)
    try:
        for current, data in targets.items():
            _make_parents(current.parent, made)
            written.append((_write_temporary(current, data), current))
        for temporary, current in written:
            os.replace(temporary, current)
    except OSError as err:
        for temporary, _ in written:
            Path(temporary).unlink(missing_ok=True)
        for folder in reversed(made):
            try:
                folder.rmdir()
            except OSError:
                pass
        raise OutputError(
            f"cannot write {current}: {err.strerror or err}; nothing was written"
        ) from None


def _target(path: Path, inputs) -> Path:
    """The real file `path` names (links followed), refused if it may not be replaced."""
    if str(path) == "":
        raise UsageError("an output file name is empty")
    real = Path(os.path.realpath(path))
    for source in inputs:
        if real == Path(os.path.realpath(source)) or _same_file(real, Path(source)):
            raise UsageError(
                f"the output {path} is the input {source}: refusing to overwrite it; "
                "choose another output path"
            )
    if real.is_dir():
        raise UsageError(f"the output {path} is a directory; give a file path")
    if real.exists() and not stat.S_ISREG(real.stat().st_mode):
        raise UsageError(
            f"the output {path} is not a regular file (a device, a pipe or a socket): "
            "outputs are written atomically, to regular files; leave out -o to print"
        )
    return real


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _make_parents(folder: Path, made: list[Path]) -> None:
    """Make `folder` and the parents it lacks, adding each one made to `made` (outermost
    first) as it is made: a failure part of the way (a name too long for the file system)
    leaves `made` holding the ones to remove."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    if not folder.is_dir():
        raise OSError(20, "Not a directory", str(folder))
    for each in reversed(missing):
        each.mkdir()
        made.append(each)


def _write_temporary(target: Path, data: str | bytes) -> str:
    """A new file beside `target` holding `data`, with the mode a plain write would give."""
    raw = data.encode() if isinstance(data, str) else data
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.chmod(temporary, _mode(target))
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return temporary


def _mode(target: Path) -> int:
    """The existing file's permissions, else what open() gives a new file under the umask."""
    if target.exists():
        return stat.S_IMODE(target.stat().st_mode)
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
