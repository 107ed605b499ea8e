"""`tiledsl tune`: search a file's tuning space for its fastest point that passes both oracles.

    status = tune_file(text, "space.tile", size=None, budget=None, kernel=None,
                       record=None, output=None, jobs=16, dry_run=False, timer_factory=gpu_timer)

The steps, each a function here:

1. **expand** (`tiledsl.tune.space`): every combination of the `{…}` sets, each a plain file.
2. **prune** before any GPU compiler runs: each point is compiled to source (analysis,
   passes, emission: `driver.compile_program`) in worker processes on every CPU core; a
   point that the analysis refuses (threads, registers, shared memory, divisibility, …)
   or that cannot run the size is pruned, with its first located reason.
3. **choose**: a point whose result is in the record (same schedule text, size, device
   and compiler, status ok) is reused, not timed again; so is one whose text is new but
   whose generated kernel is one the record timed (`code_key`: a space that gains a set,
   `warps_k 8` becoming `warps_k 8 runs 1`, respells its old points without changing
   their code). The others are timed; with a
   budget of N, the first N in a fixed pseudo-random order (the sha256 of each point's
   text): a sample spread over the space, the same on every run, so that a rerun with
   the same budget times the next N and the record grows into the whole space.
4. **time**, through a timer (`tiledsl.tune.workers.GpuTimer`; a fake in the tests), which
   checks each candidate with the exact and the statistical oracle before its time counts.
5. **record** each result as a JSON line as it arrives (`tiledsl.tune.record`; a killed
   run keeps what it measured), write the best point as a plain `.tile` file, and end
   with a summary line.

Exit status: 0 when a best point was written and no candidate failed; 1 when a
candidate failed a check or did not compile (the best is still written), when no
point is feasible or none passed, or without a GPU (`--dry-run` lists the points).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..commands.run import SizeError, check_size
from ..driver import compile_program
from ..errors import Loc, TileError, UsageError
from ..files import check_outputs, write_outputs
from ..frontend.parser import parse
from ..frontend.syntax import Program
from ..ir.expr import Const
from ..ir.nodes import KernelIR
from ..progress import Progress
from .record import Result, Size, entry, read_record, record_key, reusable, size_text, tflops
from .space import Point, expand

#: The size a space is timed at unless --size says otherwise (a declaration's literal wins).
DEFAULT_EXTENT = 4096
#: Lines of the closing table of the fastest points.
TOP = 5


@dataclass(frozen=True)
class Verdict:
    reason: str | None  # why the point is pruned; None: it is feasible
    size: Size | None  # the size it was checked at (None: it did not compile)
    vendor: str = ""
    code: str = ""  # the point's code_key ("" when it did not compile)


class Timer(Protocol):
    device: str  # the GPU's name, part of the record's key
    compiler: str  # e.g. "nvrtc 13.0", part of the record's key

    def measure(self, points: list[Point], size: Size, jobs: int) -> Iterable[tuple[Point, Result]]:
        """A result for every point, in any order, as each is ready."""


# ---------------------------------------------------------------- pruning


def verdict(program: Program, size: Size | None = None) -> Verdict:
    """Whether a point compiles (to source) and runs `size` (None: the default size)."""
    (one,) = verdicts_at(program, [size])
    return one


def verdicts_at(program: Program, sizes: list[Size | None]) -> list[Verdict]:
    """`verdict` at each size, the point compiled once: what a point's source needs does
    not depend on the size, only whether the kernel can run it (`check_size`)."""
    try:
        compiled = compile_program(program)
    except TileError as err:
        return [Verdict(brief(err), size) for size in sizes]
    kernel, code = compiled.kernels[0], code_key(compiled)
    out = []
    for size in sizes:
        size = size or default_size(kernel)
        try:
            check_size(kernel, size)
        except SizeError as err:
            out.append(Verdict(f"at {size_text(size)}: {err}", size, kernel.target.vendor, code))
            continue
        idle = idle_cluster_blocks(kernel, size)
        if idle:  # located at the point's `cluster` line, as a compile error would be
            idle = f"{cluster_loc(program)}: at {size_text(size)}: {idle}"
        out.append(Verdict(idle, size, kernel.target.vendor, code))
    return out


def code_key(compiled) -> str:
    """What a point compiles to, as a key: the sha256 of its generated source without its
    comments (which quote the directives as written, and their lines) and of its launch
    descriptions. Two points of one key run the same kernel the same way, so a time
    recorded for one holds for the other."""
    digest = hashlib.sha256()
    for line in compiled.source.splitlines():
        code = _without_comment(line).rstrip()
        if code:
            digest.update(code.encode() + b"\n")
    for launch in compiled.launches:
        digest.update(json.dumps(launch.to_json(), sort_keys=True).encode())
    return digest.hexdigest()


def _without_comment(line: str) -> str:
    """`line` up to its `//` comment: the first `//` outside a string literal."""
    start = 0
    while (at := line.find("//", start)) >= 0:
        if line.count('"', 0, at) % 2 == 0:
            return line[:at]
        start = at + 2
    return line


def cluster_loc(program: Program) -> Loc:
    """Where the point's `cluster` directive stands (in the space file)."""
    (kernel,) = program.kernels
    directive = kernel.directive("cluster")
    return directive.loc if directive is not None else kernel.loc


def idle_cluster_blocks(kernel: KernelIR, size: Size) -> str | None:
    """Why a cluster wider than C's tiles along M or N is no point to time at `size`: its
    blocks past C's edge run their pipeline on zero-filled loads and store nothing, so the
    same point with the cluster cut to C's tiles does all the work with fewer blocks."""
    for axis, parts, extent, tile in zip("MN", kernel.cluster, size, kernel.schedule.block):
        tiles = -(-extent // tile)
        if parts > tiles:
            return (
                f"cluster {kernel.cluster[0]} x {kernel.cluster[1]}: {axis} = {extent} is "
                f"{tiles} block tile(s) of {tile}, so {parts - tiles} of the cluster's {parts} "
                f"blocks along {axis} would compute nothing"
            )
    return None


def brief(err: TileError) -> str:
    """The first diagnostic on one line, `file:line:col: message`, and how many more."""
    first = err.first
    more = len(err.diagnostics) - 1
    return f"{first.loc}: {first.message}" + (f" (+{more} more)" if more else "")


def default_size(kernel) -> Size:
    """DEFAULT_EXTENT in each of M, N, K that the declarations leave open (as written)."""
    g = kernel.gemm.as_written
    m, n, k = (d.value if isinstance(d, Const) else DEFAULT_EXTENT for d in (g.m, g.n, g.k))
    return (m, n, k)


def cpu_cores() -> int:
    """The CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def parallel_map(fn: Callable, items: list[tuple], jobs: int, always_spawn=False) -> Iterator:
    """`fn(*item)` for each item, in order: on `jobs` worker processes, or here when one
    would do (one job or one item), unless `always_spawn`.

    The workers are spawned, not forked: the calling process may hold a CUDA
    context, which a forked child must not touch (and fork copies it anyway). So a
    script that calls this must keep its top level under `if __name__ == "__main__":`,
    as multiprocessing requires (the `tiledsl` command and `python -m` do).
    """
    if not items:
        return
    if (jobs <= 1 or len(items) <= 1) and not always_spawn:
        yield from (fn(*item) for item in items)
        return
    context = multiprocessing.get_context("spawn")
    workers = max(1, min(jobs, len(items)))
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        chunk = max(1, len(items) // (4 * workers))
        yield from pool.map(_apply, [fn] * len(items), items, chunksize=chunk)


def _apply(fn: Callable, item: tuple):
    return fn(*item)


def prune(points: list[Point], size: Size | None, jobs: int) -> list[Verdict]:
    (at_size,) = prune_sizes(points, [size], jobs)
    return at_size


def prune_sizes(points: list[Point], sizes: list[Size | None], jobs: int) -> list[list[Verdict]]:
    """Per size, each point's verdict; each point compiled to source once for all sizes
    (`tiledsl tune --sizes` prunes a space at every shape of a suite)."""
    with Progress(len(points), "prune") as bar:
        per_point = []
        for vs in parallel_map(verdicts_at, [(p.program, list(sizes)) for p in points], jobs):
            bar.step()
            per_point.append(vs)
    return [[vs[i] for vs in per_point] for i in range(len(sizes))]


# ---------------------------------------------------------------- choosing


def sample_order(point: Point) -> str:
    """The budget's order: pseudo-random, fixed, and independent of the other points."""
    return hashlib.sha256(point.text.encode()).hexdigest()


def choose(feasible: list[Point], recorded: set[str], budget: int | None) -> tuple[list, int]:
    """The points to time (in expansion order) and how many the budget leaves for later."""
    fresh = [p for p in feasible if p.text not in recorded]
    if budget is None or len(fresh) <= budget:
        return fresh, 0
    picked = {p.text for p in sorted(fresh, key=sample_order)[:budget]}
    return [p for p in fresh if p.text in picked], len(fresh) - budget


def counted(count: int, noun: str) -> str:
    """`1 point`, `2 points`."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


# ---------------------------------------------------------------- the outcome


@dataclass
class Outcome:
    file: str
    size: Size
    device: str
    compiler: str
    points: int
    pruned: int
    results: list[tuple[Point, Result]]  # timed in this run and reused, in arrival order
    left: int  # feasible points the budget left untimed
    seconds: float

    @property
    def best(self) -> tuple[Point, Result] | None:
        ranked = self.ranked()
        return ranked[0] if ranked else None

    def ranked(self) -> list[tuple[Point, Result]]:
        """The points that passed, fastest first (a tie keeps the order they came in)."""
        ok = [(p, r) for p, r in self.results if r.status == "ok"]
        return sorted(ok, key=lambda pr: _timed_ms(pr[1]))

    @property
    def failed(self) -> list[tuple[Point, Result]]:
        return [(p, r) for p, r in self.results if r.status != "ok"]


def _timed_ms(result: Result) -> float:
    """The median of a result that passed: an "ok" result is timed."""
    assert result.time_ms is not None
    return result.time_ms


def describe(size: Size, result: Result) -> str:
    """`0.412 ms  333.6 TFLOP/s  0.38x cuBLAS`, or the failure."""
    if result.status != "ok":
        return f"{result.status.upper()}: {result.detail}"
    assert result.time_ms is not None  # an ok result is timed
    text = f"{result.time_ms:.3f} ms {tflops(size, result.time_ms):6.1f} TFLOP/s"
    if result.cublas_ms:
        text += f"  {result.cublas_ms / result.time_ms:.2f}x cuBLAS"
    return text


def summary(o: Outcome) -> str:
    """The closing line, after Triton's autotuner: what was searched, and the winner."""
    reused = sum(r.reused for _, r in o.results)
    failed = len(o.failed)
    counts = f"{reused} reused" + (f", {failed} failed" if failed else "")
    line = (
        f"tune: {counted(o.points, 'point')}, {o.pruned} pruned, {len(o.results)} timed ({counts})"
    )
    if o.left:
        line += f", {o.left} left by --budget"
    line += f" in {o.seconds:.1f} s"
    best = o.best
    if best is None:
        return line + "; no point passed its checks"
    point, result = best
    ms = _timed_ms(result)
    line += f"; best {ms:.3f} ms {tflops(o.size, ms):.1f} TFLOP/s"
    if result.cublas_ms:
        line += f" ({result.cublas_ms / ms:.2f}x cuBLAS)"
    return f"{line}: {point.label}"


def best_file(o: Outcome) -> str:
    """The best point as a plain `.tile` file: a comment saying whence, then its text."""
    best = o.best
    assert best is not None  # written only when a point passed
    point, r = best
    assert r.time_ms is not None  # an ok result is timed
    ratio = f", {r.cublas_ms / r.time_ms:.2f}x cuBLAS" if r.cublas_ms else ""
    return (
        f"# The fastest point of {Path(o.file).name} that `tiledsl tune` found at "
        f"{size_text(o.size)}\n"
        f"# on {r.device or o.device} ({o.compiler}): {r.time_ms:.3f} ms, "
        f"{tflops(o.size, r.time_ms):.1f} TFLOP/s{ratio}; both oracles passed.\n"
        f"# Chosen: {point.label}.\n" + point.text
    )


# ---------------------------------------------------------------- the command


def tune_file(
    text: str,
    file: str,
    *,
    size: Size | None,
    budget: int | None,
    kernel: str | None,
    record: Path | None,
    output: Path | None,
    jobs: int,
    dry_run: bool,
    timer_factory: Callable[[], Timer | None],
) -> int:
    """Run `tiledsl tune` on a file's text; prints as it goes and returns the exit status.

    Raises TileError (the space itself is wrong) and UsageError (no such kernel, or
    several and none chosen).
    """
    started = time.monotonic()
    check_outputs([p for p in (record, output) if p is not None], inputs=[Path(file)])
    program = parse(text, file)
    try:
        points = expand(program, kernel)
    except ValueError as err:  # no such kernel, or several and none chosen
        raise UsageError(str(err)) from None
    verdicts = prune(points, size, jobs)
    feasible = []
    for point, v in zip(points, verdicts):
        if v.reason is None:
            feasible.append(point)
        else:
            print(f"pruned  {point.label}: {v.reason}")
    if not feasible:
        print(f"tiledsl tune: error: all {len(points)} points are pruned (above)", file=sys.stderr)
        return 1
    # Every point has the file's operands and target (sets hold numbers only): ask one.
    first = next(v for v in verdicts if v.reason is None)
    size = first.size
    assert size is not None  # a feasible point compiled, at this size
    if dry_run:
        return _dry_run(points, feasible, size, budget)
    timer = timer_factory() if first.vendor == "cuda" else None
    if timer is None:
        chosen, _ = choose(feasible, set(), budget)
        why = (
            "timing needs a CUDA GPU that CuPy sees, and there is none (`tiledsl doctor` says why)"
            if first.vendor == "cuda"
            else f"tune times CUDA kernels, and this space targets {first.vendor}"
        )
        print(
            f"would time {len(chosen)} of the {len(feasible)} feasible points at {size_text(size)}"
        )
        print(f"tiledsl tune: error: {why}; --dry-run lists the points", file=sys.stderr)
        return 1
    outcome = search_points(file, points, verdicts, feasible, size, budget, record, jobs, timer)
    outcome.seconds = time.monotonic() - started  # the whole search, expansion included
    return _finish(outcome, output)


def _dry_run(all_points: list[Point], feasible: list[Point], size: Size, budget: int | None) -> int:
    chosen, left = choose(feasible, set(), budget)
    picked = {p.text for p in chosen}
    for point in feasible:
        print(f"{'time' if point.text in picked else 'later':<7} {point.label}")
    pruned = len(all_points) - len(feasible)
    line = (
        f"tune --dry-run: {counted(len(all_points), 'point')}, {pruned} pruned, "
        f"{len(chosen)} to time at {size_text(size)}"
    )
    print(line + (f", {left} left by --budget" if left else "") + " (the record is not read)")
    return 0


def search_points(file, points, verdicts, feasible, size, budget, record, jobs, timer) -> Outcome:
    """Steps 3 to 5 at one size (the record read and appended to, the chosen points timed),
    for `tune_file` and for each shape of `tiledsl tune --sizes` (tiledsl.tune.suite)."""
    record = record or Path.cwd() / f"tune-{Path(file).stem}.jsonl"
    entries = read_record(record)
    texts = {p.text for p in feasible}
    reused = {
        t: r for t, r in reusable(entries, size, timer.device, timer.compiler).items() if t in texts
    }
    code_of = {p.text: v.code for p, v in zip(points, verdicts, strict=True)}
    by_code = reusable(entries, size, timer.device, timer.compiler, key="code")
    respelled = {
        p.text: by_code[code_of[p.text]]
        for p in feasible
        if p.text not in reused and code_of[p.text] in by_code
    }
    reused.update(respelled)
    chosen, left = choose(feasible, set(reused), budget)
    if reused:
        print(
            f"reused {len(reused)} results from {record} (same size, device and compiler"
            + (f"; {len(respelled)} of them by their generated code" if respelled else "")
            + ")"
        )
    results = [(p, reused[p.text]) for p in feasible if p.text in reused]
    keys = {record_key(e) for e in entries}

    def line(point: Point, result: Result) -> dict:
        """The record's line for `point`'s result at this size, with its code's key."""
        return entry(point, size, timer.device, timer.compiler, file, result, code_of[point.text])

    record.parent.mkdir(parents=True, exist_ok=True)
    with record.open("a") as log, Progress(len(chosen), "tune") as bar:
        for point, v in zip(points, verdicts):
            if v.reason is None:
                continue
            pruned_line = line(point, Result("pruned", detail=v.reason))
            if record_key(pruned_line) not in keys:  # once per point, not once per run
                log.write(json.dumps(pruned_line) + "\n")
        bar.step("compiling")  # the bar counts results: 0 until the first arrives
        for point, result in timer.measure(chosen, size, jobs):
            results.append((point, result))
            log.write(json.dumps(line(point, result)) + "\n")
            log.flush()
            shown = f"{describe(size, result)}  {point.label}"
            bar.step(shown)
            if not bar.active:
                print(f"tune {len(results) - len(reused):>3}/{len(chosen)}  {shown}")
        finalists = _finalists(results) if hasattr(timer, "retime") else []
        if finalists:  # timed on several GPUs: the fastest few again, side by side on one
            print(f"re-timing the fastest {len(finalists)} on one GPU (they were timed on several)")
            again = {p.text: r for p, r in timer.retime(finalists, size)}
            results = [(p, again.get(p.text, r)) for p, r in results]
            for point in finalists:
                log.write(json.dumps(line(point, again[point.text])) + "\n")
    pruned = sum(v.reason is not None for v in verdicts)
    return Outcome(file, size, timer.device, timer.compiler, len(points), pruned, results, left, 0)


#: How many of the fastest points are re-timed on one GPU when several GPUs timed them.
FINALISTS = 3


def _finalists(results: list[tuple[Point, Result]]) -> list[Point]:
    """The fastest points measured in this run, when more than one GPU measured them: GPUs of
    one model still differ by a percent or two, so the best is chosen on one of them."""
    timed = [(p, r) for p, r in results if r.status == "ok" and r.gpu is not None]
    if len({r.gpu for _, r in timed}) < 2:
        return []
    return [p for p, _ in sorted(timed, key=lambda pr: _timed_ms(pr[1]))[:FINALISTS]]


def _finish(outcome: Outcome, output: Path | None) -> int:
    ranked = outcome.ranked()
    if ranked:
        where = f"{size_text(outcome.size)} on {outcome.device} ({outcome.compiler})"
        print(f"fastest of {len(ranked)} at {where}:")
        for point, result in ranked[:TOP]:
            mark = "  (recorded)" if result.reused else ""
            print(f"  {describe(outcome.size, result)}  {point.label}{mark}")
    for point, result in outcome.failed:
        print(f"failed  {point.label}: {result.status}: {result.detail}", file=sys.stderr)
    if outcome.best is not None:
        path = output or Path.cwd() / f"{Path(outcome.file).stem}.best.tile"
        write_outputs({path: best_file(outcome)}, inputs=[Path(outcome.file)])
        print(f"wrote {path}")
    print(summary(outcome))
    return 0 if outcome.best is not None and not outcome.failed else 1
