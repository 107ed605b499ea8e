"""The record of `tiledsl tune`: one JSON line per measured (or pruned) point.

    entries = read_record(Path("tune-space.jsonl"))
    reused = reusable(entries, (4096, 4096, 4096), "NVIDIA H200", "nvrtc 13.0")
    line = entry(point, size, device, compiler, "space.tile", Result("ok", 0.41, 0.16))

A line holds the point's canonical text (`schedule`: a whole plain `.tile` file, the
key), the key of the code it compiles to (`code`, tiledsl.tune.search.code_key: a point
respelled, its code unchanged, is reused by it), a label of what was chosen, the space
file, the size, the device's name, the compiler and its version, the status, the median
time, TFLOP/s, cuBLAS's time at the same size on the same device, what the checks said,
tiledsl's version and the date.

Two measurements are comparable when schedule (or the code it compiles to), size, device
and compiler agree (`record_key`); only passes are reused, so a failure is tried again on
every run.
"""

from __future__ import annotations

import datetime
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from .space import Point

Size = tuple[int, int, int]


@dataclass(frozen=True)
class Result:
    status: str  # one of STATUSES ("worker died": its GPU worker exited while on it)
    time_ms: float | None = None  # the median, counted only when both oracles passed
    cublas_ms: float | None = None  # cuBLAS at the same size on the same device
    detail: str = ""  # the checks passed, or what failed
    device: str = ""
    reused: bool = False  # read from the record, not measured in this run
    gpu: int | None = None  # which GPU of the host measured it (its CUDA ordinal)


def size_text(size: Size) -> str:
    return "x".join(map(str, size))


def tflops(size: Size, ms: float | None) -> float | None:
    m, n, k = size
    return 2 * m * n * k / (ms * 1e9) if ms else None


def speed_text(size: Size, ms: float | None) -> str:
    """How fast a point ran at `size`, as the written files' comments say it."""
    return f"{ms:.3f} ms, {tflops(size, ms):.1f} TFLOP/s" if ms else "untimed"


STATUSES = ("ok", "failed check", "compile error", "run error", "worker died", "pruned")


def read_record(path: Path, warn=None) -> list[dict]:
    """The record's valid entries. A line that is not UTF-8, not a JSON object, or not of
    the record's schema (`entry_problem`), such as a torn last write, is skipped, and
    `warn` (default: a line on stderr) is told which line and why."""
    if warn is None:
        warn = _warn_on_stderr
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as err:
        warn(f"{path}: cannot read the record ({err.strerror or err}); starting without it")
        return []
    entries = []
    for number, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            entry = json.loads(raw.decode("utf-8"))
            problem = entry_problem(entry)
        except UnicodeDecodeError:
            problem = "it is not UTF-8 text"
        except json.JSONDecodeError as err:
            problem = f"it is not JSON ({err.msg})"
        if problem:
            warn(f"{path}:{number}: skipped a record line: {problem}")
        else:
            entries.append(entry)
    return entries


def entry_problem(entry) -> str | None:
    """Why `entry` is not a line `entry()` writes, or None."""
    if not isinstance(entry, dict):
        return "it is not a JSON object"
    for name in ("schedule", "device", "compiler", "status"):
        if not isinstance(entry.get(name), str):
            return f"'{name}' is not a string"
    if entry["status"] not in STATUSES:
        return f"'status' is {entry['status']!r}, not one of {', '.join(STATUSES)}"
    size = entry.get("size")
    if not (
        isinstance(size, list)
        and len(size) == 3
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in size)
    ):
        return "'size' is not a list of three positive integers"
    for name in ("time_ms", "cublas_ms"):
        value = entry.get(name)
        if value is not None and not _positive(value):
            return f"'{name}' is {value!r}, not a positive number of milliseconds"
    if entry["status"] == "ok" and entry.get("time_ms") is None:
        return "a measured point ('ok') has no 'time_ms'"
    if not isinstance(entry.get("detail", ""), str):
        return "'detail' is not a string"
    return None


def _positive(value) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _warn_on_stderr(message: str) -> None:
    print(f"tiledsl tune: warning: {message}", file=sys.stderr)


def record_key(entry: dict) -> tuple:
    """What makes two measurements comparable: schedule text, size, device, compiler."""
    size = tuple(entry.get("size") or ())
    return entry.get("schedule"), size, entry.get("device"), entry.get("compiler")


def reusable(
    entries: list[dict], size: Size, device: str, compiler: str, key: str = "schedule"
) -> dict[str, Result]:
    """Recorded results measured ok at this size on this device by this compiler, by their
    schedule text (or, `key="code"`, by the key of their code; lines written before the
    record kept it have none).

    Only passes are reused: a failure is tried again, so that it is seen on every run
    until it is fixed. Of two lines for one point the later wins.
    """
    found = {}
    for e in entries:
        _, at, recorded_on, by = record_key(e)
        if (at, recorded_on, by) != (size, device, compiler) or not isinstance(e.get(key), str):
            continue
        if e.get("status") == "ok" and e.get("time_ms"):
            found[e[key]] = Result(
                "ok", e["time_ms"], e.get("cublas_ms"), e.get("detail", ""), device, reused=True
            )
    return found


def entry(
    point: Point, size: Size, device: str, compiler: str, file: str, r: Result, code: str = ""
) -> dict:
    """One record line: the schedule's canonical text is the key, with size, device,
    compiler; `code` the key of the code it compiles to, where known."""
    return {
        "schedule": point.text,
        **({"code": code} if code else {}),
        "point": point.label,
        "file": file,
        "size": list(size),
        "device": r.device or device,
        "compiler": compiler,
        "status": r.status,
        "gpu": r.gpu,
        "time_ms": r.time_ms,
        "tflops": tflops(size, r.time_ms),
        "cublas_ms": r.cublas_ms,
        "detail": r.detail,
        "tiledsl": __version__,
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
    }
