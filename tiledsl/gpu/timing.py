"""Kernel timing that a user can trust: CUDA events, warm-up, median, rotated inputs.

    sets = operand_sets(gemm, (m, n, k), rotation_count(bytes_per_set, l2), cupy)
    calls = [lambda a=a, b=b: launch(a, b) for a, b in sets]
    timing = time_calls(calls, CudaClock(arch))      # Timing(median_ms, min_ms, ...)

What each choice guards against:

- **Events around each run, median of many**: one slow run (a clock ramp, another
  process) moves a mean, not a median; min and max are kept to show the spread.
- **Warm-up**: the first launches pay for module loading, clocks ramping up and
  cuBLAS choosing its algorithm.
- **Rotated inputs**: repeated runs on one A and B measure a warm L2 (50 MiB on
  the H200 holds all of A and B up to about 4096 x 4096 in f16). Run i reads input
  set i mod S, with S chosen so the sets together exceed twice the L2.
- **A hold before the timed runs**: an event pair brackets a launch only if the GPU
  is still busy when the CPU records them; otherwise the CPU's launch cost (tens of
  microseconds through Python) lands inside the time. A one-thread kernel spins on
  the GPU's global timer for longer than the CPU needs to queue every timed run,
  so the runs execute back to back behind it, each bracketed tightly.

`Clock` is the seam for tests: a fake clock whose events read a simulated time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

MAX_SETS = 64

HOLD_SOURCE = r"""
extern "C" __global__ void tiledsl_hold(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
"""


@dataclass(frozen=True)
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float
    runs: int
    sets: int  # input sets rotated through
    set_bytes: int  # bytes of A and B in one set
    round_medians_ms: tuple[float, ...] = ()  # `time_rounds`: each round's median

    def describe(self) -> str:
        """`median of 30 runs over 7 input sets (112 MiB of A and B)`; with rounds,
        `median of 3 rounds' medians, 30 runs each, over ...`."""
        total = self.sets * self.set_bytes / 2**20
        rounds = len(self.round_medians_ms)
        runs = (
            f"{rounds} rounds' medians, {self.runs // rounds} runs each,"
            if rounds > 1
            else f"{self.runs} runs"
        )
        return f"median of {runs} over {self.sets} input set(s) ({total:.0f} MiB of A and B)"

    def to_json(self) -> dict:
        return {
            "median_ms": self.median_ms,
            "min_ms": self.min_ms,
            "max_ms": self.max_ms,
            "runs": self.runs,
            "input_sets": self.sets,
            "input_bytes": self.sets * self.set_bytes,
            **({"round_medians_ms": list(self.round_medians_ms)} if self.round_medians_ms else {}),
        }


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def rotation_count(set_bytes: int, l2_bytes: int, factor: int = 2) -> int:
    """The fewest input sets whose bytes together exceed `factor` x the L2 (at most MAX_SETS)."""
    return max(1, min(MAX_SETS, factor * l2_bytes // max(set_bytes, 1) + 1))


def operand_bytes(size: tuple[int, int, int], itemsize: int = 2) -> int:
    """Bytes of A (M x K) and B (K x N) together."""
    m, n, k = size
    return (m * k + k * n) * itemsize


#: What the timed operands hold: `ints`, integers in [-2, 2] (the default: the values the
#: exact oracle checks), or `normal`, standard normal values rounded to f16 (the values of
#: a real model, whose products toggle more of the tensor cores' bits and draw more power:
#: at a power-limited clock the two can time differently).
DATA_KINDS = ("ints", "normal")


def operand_sets(size: tuple[int, int, int], count: int, xp, seed: int | None = None, data="ints"):
    """`count` pairs (A, B) of flat f16 arrays (`data`: see DATA_KINDS), made on the device.

    The values are random, so a flat array is the storage of a random matrix in
    either layout: the same pairs serve any kernel and, through views, cuBLAS.
    """
    m, n, k = size
    rng = xp.random.RandomState(seed)

    def values(count: int):
        if data == "normal":
            return rng.standard_normal(size=count).astype(xp.float16)
        return rng.randint(-2, 3, size=count).astype(xp.float16)

    return [(values(m * k), values(k * n)) for _ in range(count)]


def rotated_sets(size: tuple[int, int, int], seed: int | None = None, data: str = "ints"):
    """(sets, bytes of one set) on the current CUDA device, enough to get past its L2."""
    import cupy

    from .runtime import l2_bytes

    set_bytes = operand_bytes(size)
    count = rotation_count(set_bytes, l2_bytes())
    return operand_sets(size, count, cupy, seed, data), set_bytes


class CudaClock:
    """CUDA events on the current stream, and the hold kernel (compiled once, cached)."""

    def __init__(self, arch: str):
        self.arch = arch
        self._hold: Callable[..., object] | None = None  # a CuPy RawKernel, once compiled

    def event(self):
        import cupy

        return cupy.cuda.Event()

    def record(self, event) -> None:
        event.record()

    def elapsed_ms(self, start, stop) -> float:
        import cupy

        return cupy.cuda.get_elapsed_time(start, stop)

    def synchronize(self) -> None:
        import cupy

        cupy.cuda.Device().synchronize()

    def hold(self, ms: float) -> None:
        import cupy

        from . import runtime

        if self._hold is None:
            module = runtime.load_module(HOLD_SOURCE, self.arch, name="tiledsl_hold.cu")
            self._hold = module.get_function("tiledsl_hold")
        self._hold((1,), (1,), (cupy.uint64(int(ms * 1e6)),))


def time_calls(
    calls: Sequence[Callable[[], object]],
    clock,
    *,
    warmup: int = 10,
    repeat: int = 50,
    set_bytes: int = 0,
) -> Timing:
    """Median milliseconds of one call, run i being `calls[i % len(calls)]`."""
    if not calls or repeat < 1:
        raise ValueError("time_calls needs at least one call and one run")
    count = len(calls)
    launch_s = []  # the CPU's cost of a call (a first call may compile or tune: the median)
    for i in range(max(warmup, count)):  # every set once at least: all of them touched
        started = time.perf_counter()
        calls[i % count]()
        launch_s.append(time.perf_counter() - started)
    clock.synchronize()
    # Long enough for the CPU to queue every timed run (and its two events) behind it.
    clock.hold(min(1000.0, 1.0 + 2e3 * repeat * (median(launch_s) + 20e-6)))
    events = [(clock.event(), clock.event()) for _ in range(repeat)]
    for i, (start, stop) in enumerate(events):
        clock.record(start)
        calls[i % count]()
        clock.record(stop)
    clock.synchronize()
    times = [clock.elapsed_ms(start, stop) for start, stop in events]
    return Timing(median(times), min(times), max(times), repeat, count, set_bytes)


def time_rounds(
    call_lists: Sequence[Sequence[Callable[[], object]]],
    clock,
    rounds: int = 1,
    **options,
) -> list[Timing]:
    """`time_calls` of each list of calls, `rounds` times over, interleaved: round r times
    every list once, starting at list r (mod their count), so that none is always timed
    first or right after the same one. A list's timing is the median of its rounds'
    medians, its min and max over every run. What this guards against: the GPU's clock
    and temperature drift over seconds, and one row timed in a slow spell while the row
    it is compared with (its cuBLAS) was timed in a fast one.
    """
    if rounds < 1:
        raise ValueError("time_rounds needs at least one round")
    count = len(call_lists)
    per_list: list[list[Timing]] = [[] for _ in range(count)]
    for r in range(rounds):
        for i in [(r + j) % count for j in range(count)]:
            per_list[i].append(time_calls(call_lists[i], clock, **options))
    if rounds == 1:
        return [timings[0] for timings in per_list]
    return [_merged(timings) for timings in per_list]


def _merged(timings: list[Timing]) -> Timing:
    medians = tuple(t.median_ms for t in timings)
    first = timings[0]
    return Timing(
        median(medians),
        min(t.min_ms for t in timings),
        max(t.max_ms for t in timings),
        sum(t.runs for t in timings),
        first.sets,
        first.set_bytes,
        medians,
    )
