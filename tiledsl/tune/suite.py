"""`tiledsl tune FILE --sizes SUITE`: the space searched at every shape of a suite, and the
winners written as one `.tile` file of kernels with a dispatch table beside it.

    status = tune_suite(text, "space.tile", sizes, budget=None, kernel=None, record=None,
                        output=None, jobs=16, timer_factory=gpu_timer)

Each shape is one `tiledsl tune` search (tiledsl.tune.search: prune at that shape, each
point compiled to source once for the whole suite and only its size checked per shape;
reuse the record, time the rest, both oracles before a time counts), all sharing one
record and one timer. The fastest point of each shape becomes a kernel of the output file
(`STEM.tuned.tile`, or -o): a point that wins several shapes is one kernel, named
NAME_1, NAME_2, … in the order of the shapes it first won, each under a comment saying
which shapes and how fast. The table (`tiledsl.tune.dispatch`, beside the output as
`STEM.tuned.dispatch.json`) maps every tuned shape to its kernel; `tiledsl run`,
`tiledsl bench`, `tiledsl check --size` and `tiledsl.load` read it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ..errors import UsageError
from ..files import check_outputs, write_outputs
from ..frontend.formatter import format_program
from ..frontend.parser import parse
from .dispatch import Entry, Table, table_path
from .record import Size, size_text, speed_text, tflops
from .search import Outcome, Timer, describe, prune_sizes, search_points
from .space import Point, expand


def tune_suite(
    text: str,
    file: str,
    sizes: list[Size],
    *,
    budget: int | None,
    kernel: str | None,
    record: Path | None,
    output: Path | None,
    jobs: int,
    timer_factory: Callable[[], Timer | None],
    time_limit: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Search the space at every shape of `sizes`; write the kernels and the table. Returns
    the exit status: 0 when every shape has a best point and no candidate failed.

    With `time_limit` (seconds), no shape is started once that much time has passed: the
    shapes searched by then are written, the others named, and the status is 1; a rerun
    with the same record reuses what was timed."""
    output = output or Path.cwd() / f"{Path(file).stem}.tuned.tile"
    table_file = table_path(output)
    check_outputs([p for p in (record, output, table_file) if p is not None], inputs=[Path(file)])
    program = parse(text, file)
    try:
        points = expand(program, kernel)
    except ValueError as err:  # no such kernel, or several and none chosen
        raise UsageError(str(err)) from None
    search = _Search(file, points, budget, record, jobs, timer_factory)
    ok = True
    started = clock()
    pruned_at = prune_sizes(points, list(sizes), jobs)  # each point compiled once
    for number, (size, verdicts) in enumerate(zip(sizes, pruned_at, strict=True)):
        if time_limit is not None and clock() - started >= time_limit:
            left = ", ".join(size_text(s) for s in sizes[number:])
            print(
                f"tune: the time limit ({time_limit:g} s) is reached; not searched: {left} "
                "(a rerun with the same record resumes)"
            )
            ok = False
            break
        searched = search.at(size, verdicts)
        if searched is None:  # no GPU to time on: said so, nothing written
            return 1
        ok &= searched
    if not search.won:
        print("tiledsl tune: error: no shape of the suite has a best point", file=sys.stderr)
        return 1
    assert search.timer is not None  # a shape was searched
    tile, table = _kernels_and_table(file, output, search.won, search.timer)
    write_outputs(
        {output: tile, table_file: table.to_text()},
        inputs=[Path(file)],
    )
    print(f"wrote {output} ({len({e.kernel for e in table.entries})} kernel(s)) and {table_file}")
    return 0 if ok else 1


class _Search:
    """One shape's search after another, sharing the record and the timer (made at the
    first shape that has a point to time); the winners in `won`."""

    def __init__(self, file: str, points, budget, record, jobs: int, timer_factory) -> None:
        self.file, self.points, self.budget, self.record = file, points, budget, record
        self.jobs, self.timer_factory = jobs, timer_factory
        self.timer: Timer | None = None
        self.won: list[tuple[Size, Outcome]] = []

    def at(self, size: Size, verdicts) -> bool | None:
        """Search `size`: whether it found a best point and no candidate failed (None: no
        timer could be made, so nothing can be searched)."""
        feasible = [p for p, v in zip(self.points, verdicts, strict=True) if v.reason is None]
        if not feasible:
            print(f"{size_text(size)}: every point is pruned (`tiledsl tune --size` says why)")
            return False
        if self.timer is None:
            self.timer = _timer(verdicts, self.timer_factory)
            if self.timer is None:
                return None
        outcome = search_points(
            self.file,
            self.points,
            verdicts,
            feasible,
            size,
            self.budget,
            self.record,
            self.jobs,
            self.timer,
        )
        for point, result in outcome.failed:
            print(f"failed  {point.label}: {result.status}: {result.detail}", file=sys.stderr)
        if outcome.best is None:
            print(f"{size_text(size)}: no point passed")
            return False
        point, result = outcome.best
        print(f"best at {size_text(size)}: {describe(size, result)}  {point.label}")
        self.won.append((size, outcome))
        return not outcome.failed


def _timer(verdicts, timer_factory) -> Timer | None:
    """The timer of the first shape that has a feasible point (a CUDA one's), or None,
    having said why there is none."""
    first = next(v for v in verdicts if v.reason is None)
    timer = timer_factory() if first.vendor == "cuda" else None
    if timer is None:
        print(
            "tiledsl tune: error: timing needs a CUDA GPU that CuPy sees, and there is "
            "none (`tiledsl doctor` says why)",
            file=sys.stderr,
        )
    return timer


def _kernels_and_table(file: str, output: Path, won, timer) -> tuple[str, Table]:
    """The output file's text (a kernel per distinct winner) and its table."""
    names: dict[str, str] = {}  # a winning point's text -> its kernel's name
    winners: dict[str, tuple[Point, list[str]]] = {}
    entries = []
    for size, outcome in won:
        point, result = outcome.best
        if point.text not in names:
            base = point.program.kernels[0].name
            names[point.text] = f"{base}_{len(names) + 1}"
            winners[point.text] = (point, [])
        name = names[point.text]
        ms = result.time_ms
        winners[point.text][1].append(f"{size_text(size)} ({speed_text(size, ms)})")
        entries.append(Entry(size, name, ms, tflops(size, ms), point.label))
    parts = [
        f"# The fastest points of {Path(file).name} that `tiledsl tune --sizes` found, one kernel\n"
        f"# per winner, on {timer.device} ({timer.compiler}); both oracles passed for each.\n"
        f"# {table_path(output).name} says which kernel each shape takes.\n"
    ]
    for text, (point, shapes) in winners.items():
        kernel = replace(point.program.kernels[0], name=names[text])
        body = format_program(replace(point.program, kernels=(kernel,)))
        parts.append(f"\n# {names[text]}: {point.label}; fastest at {', '.join(shapes)}\n" + body)
    table = Table(output.name, tuple(entries), timer.device, timer.compiler)
    return "".join(parts), table
