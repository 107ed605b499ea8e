"""The on-disk kernel cache: compiled cubins under `TILEDSL_CACHE_DIR`.

    key = cache_key(source, pipeline=("smem-tiling", ...), target="cuda sm_90", arch="sm_90",
                    compiler="nvrtc", compiler_version="13.0", options=(...))
    entry = fetch(key, lambda: compile_to_cubin(source), meta={...})
    entry.path, entry.hit          # the cubin's file; whether it was there already

What the key covers. A cubin is a function of the text the compiler reads, the
compiler, its version and options, and the architecture. tiledsl keys on the
*emitted source* (its sha256) rather than on the schedule's canonical text: the
source is a pure function of the canonical schedule, the pass pipeline, the target
and the tiledsl code that wrote it, so it changes whenever any of them does, and it
also changes when an emitter is fixed in a development checkout whose version
number stays put, where a key on the schedule text would hand out a stale binary.
The price is that the source names the .tile file and the lines its directives sit
on, so moving a directive recompiles once. The pipeline, target, architecture,
compiler, its version and options, the file name the line info records and
tiledsl's version are in the key as well, and every entry has a JSON sidecar
saying what it was built from.

Writes are atomic: the bytes go to a temporary file in the cache directory, are
flushed to disk, and are renamed over the final name with `os.replace`, so a reader
sees the whole cubin or none. The sidecar (written second) holds the cubin's
sha256; an entry whose cubin does not match its sidecar, or that has none, is a
miss and is rebuilt. A cache directory that cannot be written costs the cache,
never the run.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import __version__

FORMAT = 1  # bump when the layout of an entry changes


def cache_dir() -> Path:
    """`$TILEDSL_CACHE_DIR`, else `$XDG_CACHE_HOME/tiledsl`, else `~/.cache/tiledsl`."""
    if os.environ.get("TILEDSL_CACHE_DIR"):
        return Path(os.environ["TILEDSL_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tiledsl"


def key_fields(
    source: str,
    *,
    pipeline: tuple[str, ...],
    target: str,
    arch: str,
    compiler: str,
    compiler_version: str,
    options: tuple[str, ...],
    name: str = "",
) -> dict:
    """Everything a cached binary depends on, as a JSON-ready record (also the sidecar)."""
    return {
        "format": FORMAT,
        "tiledsl": __version__,
        "source_sha256": hashlib.sha256(source.encode()).hexdigest(),
        "pipeline": list(pipeline),
        "target": target,
        "arch": arch,
        "compiler": compiler,
        "compiler_version": compiler_version,
        "options": list(options),
        "name": name,  # the file name the line info records
    }


def cache_key(source: str, **fields) -> str:
    """The sha256 of `key_fields(source, **fields)` in canonical JSON: an entry's file name."""
    return digest(key_fields(source, **fields))


def digest(fields: dict) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Entry:
    path: Path  # the cubin: in the cache, or a scratch file when the cache is off or failed
    hit: bool
    note: str  # one line for the user: what happened and where
    scratch: bool = False  # a temporary file, removed when the process exits


def fetch(
    fields: dict,
    build: Callable[[], bytes],
    *,
    directory: Path | None = None,
    use_cache: bool = True,
) -> Entry:
    """The binary for `fields`: read from the cache, or made by `build()` and stored.

    With `use_cache=False` the cache is neither read nor written: `build()` runs and
    its bytes go to a scratch file (the loader takes a path), removed at exit.
    """
    key = digest(fields)
    if not use_cache:
        return Entry(_scratch(key, build()), False, "kernel cache: off (--no-cache)", True)
    directory = cache_dir() if directory is None else directory
    binary, sidecar = directory / f"{key}.cubin", directory / f"{key}.json"
    if _valid(binary, sidecar):
        return Entry(binary, True, f"kernel cache: hit {binary}")
    data = build()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(binary, data)
        record = dict(fields, sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
        write_atomic(sidecar, (json.dumps(record, indent=2, sort_keys=True) + "\n").encode())
    except OSError as err:
        note = f"kernel cache: miss, not saved ({type(err).__name__}: {err})"
        return Entry(_scratch(key, data), False, note, True)
    return Entry(binary, False, f"kernel cache: miss, saved to {binary}")


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that a reader sees the old file or the whole new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def entries(directory: Path | None = None) -> list[Path]:
    """The cubins in the cache (for `tiledsl doctor`)."""
    directory = cache_dir() if directory is None else directory
    return sorted(directory.glob("*.cubin")) if directory.is_dir() else []


def _valid(binary: Path, sidecar: Path) -> bool:
    """Whether the entry is whole: a sidecar that is a JSON object naming the cubin's
    sha256. Anything else (missing, unreadable, not UTF-8, not an object) is a miss."""
    try:
        record = json.loads(sidecar.read_text(encoding="utf-8"))
        if not isinstance(record, dict):
            return False
        return hashlib.sha256(binary.read_bytes()).hexdigest() == record.get("sha256")
    except (OSError, ValueError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return False


def _scratch(key: str, data: bytes) -> Path:
    # Kept until exit: a loader may read the file lazily (CuPy loads per device on first use).
    folder = Path(tempfile.mkdtemp(prefix="tiledsl-kernel-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / f"{key}.cubin"
    path.write_bytes(data)
    return path
