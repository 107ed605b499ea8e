"""Probe (not part of tiledsl): the few-token kernels' time as `tiledsl bench` takes it (an
event pair around each call) against their time in a stream of calls (one event pair
around many calls queued back to back, as a model's layers launch them), beside cuBLAS and
an empty kernel, and both against the memory bound.

bench/shapes.py judges M <= 64 against 0.85 of the memory bound: the operands' bytes over
the device-to-device copy rate of the run, the copy timed over 1 GiB, where the timing
loop's own cost (3.5 µs for an empty kernel: launch_floor.py) is lost, while a 15-30 µs
kernel pays all of it. Timed back to back, a launch's setup overlaps the previous
kernel, so the same kernels' time per call there says how much of the gap to the bound
is the kernel's and how much the loop's. Each kernel is the canonical shapes run's pick
(bench/results/shapes-*.json, `targets[].best`), called through tiledsl.load on CuPy
arrays (a swapped pick, `swap_operands`, on the weights as torch keeps them, N x K rows),
inputs rotated past 2 x L2 in both modes.

    python3 docs/probes/stream_rate.py [--result bench/results/shapes-h200-2026-12-05.json]
                                       [--calls 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cupy as cp

import tiledsl
from tiledsl.gpu.runtime import device_arch, l2_bytes
from tiledsl.gpu.timing import CudaClock, median, rotation_count, time_calls

ROOT = Path(__file__).resolve().parents[2]
RESULT = ROOT / "bench" / "results" / "shapes-h200-2026-12-05.json"
sys.path.insert(0, str(ROOT / "bench"))  # the shapes benchmark's bound: its copy, its bytes
from shapes import MEMORY_BOUND_M, copy_bandwidth, operand_bytes  # noqa: E402


def pick(label: str) -> tuple[Path, str | None, bool]:
    """(file, kernel, swapped) of a shapes run's best label, e.g.
    `few_tokens_swapped.tuned:few_tokens_swapped_3 (C^T)` (a run before `swap_operands`,
    which timed that file at N x M x K) or `stream_k`."""
    swapped = label.endswith(" (C^T)") or "swapped" in label
    label = label.removesuffix(" (C^T)")
    if ":" in label:
        stem, kernel = label.split(":")
        return ROOT / "examples" / "tuned" / f"{stem}.tile", kernel, swapped
    tuned = ROOT / "examples" / "tuned" / f"{label}.tile"
    return (
        (tuned if tuned.exists() else ROOT / "examples" / "hopper" / f"{label}.tile"),
        None,
        swapped,
    )


def operands(size, swapped: bool, count: int):
    """`count` sets of (x, W, y), integers in [-2, 2]: x the M x K tokens, y the M x N
    product, W the weights as the kernel reads them: N x K rows for a swapped kernel (as
    torch keeps a Linear's), else K x N rows (the few-token files' `B: f16[K, N] row`)."""
    m, n, k = size
    rng = cp.random.RandomState(1)
    return [
        (
            rng.randint(-2, 3, (m, k)).astype(cp.float16),
            rng.randint(-2, 3, (n, k) if swapped else (k, n)).astype(cp.float16),
            cp.empty((m, n), cp.float16),
        )
        for _ in range(count)
    ]


def back_to_back_ms(calls, clock: CudaClock, count: int) -> float:
    """ms per call of `count` calls queued behind the hold kernel, one event pair around
    them all."""
    for call in calls:  # warm: compiled, loaded, every set touched
        call()
    clock.synchronize()
    clock.hold(1.0 + 0.05 * count)
    start, stop = clock.event(), clock.event()
    clock.record(start)
    for i in range(count):
        calls[i % len(calls)]()
    clock.record(stop)
    clock.synchronize()
    return clock.elapsed_ms(start, stop) / count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--result", type=Path, default=RESULT)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-m", type=int, default=MEMORY_BOUND_M)
    args = ap.parse_args()
    clock = CudaClock(device_arch())
    rate = copy_bandwidth()
    empty = cp.RawKernel('extern "C" __global__ void empty() {}', "empty")
    print(
        f"copy rate {rate / 1e12:.2f} TB/s; µs per call, each (an event pair around each, "
        "as tiledsl bench) / back to back; `of bound` = bound / time"
    )
    print(
        f"{'shape':16} {'kernel':44} {'ours each':>9} {'b2b':>6} {'cuBLAS each':>11} "
        f"{'b2b':>6} {'empty b2b':>9} {'of bound each':>13} {'b2b':>5} {'cuBLAS b2b':>10}"
    )
    targets = json.loads(args.result.read_text())["targets"]
    rounds = range(args.rounds)
    for target in targets:
        size = tuple(target["size"])
        m, n, k = size
        if m > args.max_m:
            continue
        file, name, swapped = pick(target["best"])
        kern = tiledsl.load(file, kernel=name)
        bytes_moved = operand_bytes(size)
        sets = operands(size, swapped, rotation_count(bytes_moved, l2_bytes()))
        if swapped:  # y = x W^T: B = W^T, a column-major view of the N x K weights
            ours = [lambda s=s, kern=kern: kern(s[0], s[1].T, out=s[2]) for s in sets]
            cublas = [lambda s=s: cp.matmul(s[0], s[1].T, out=s[2]) for s in sets]
        else:
            ours = [lambda s=s, kern=kern: kern(s[0], s[1], out=s[2]) for s in sets]
            cublas = [lambda s=s: cp.matmul(s[0], s[1], out=s[2]) for s in sets]
        blank = [lambda: empty((132,), (256,), ())]
        each, b2b = {}, {}
        for label, calls in (("ours", ours), ("cublas", cublas), ("empty", blank)):
            each[label] = median(
                [
                    time_calls(calls, clock, warmup=5, repeat=30).median_ms
                    for _ in range(args.rounds)
                ]
            )
            b2b[label] = median([back_to_back_ms(calls, clock, args.calls) for _ in rounds])
        bound_ms = bytes_moved / rate * 1e3
        print(
            f"{'x'.join(map(str, size)):16} {target['best'][:44]:44} "
            f"{each['ours'] * 1e3:9.1f} {b2b['ours'] * 1e3:6.1f} {each['cublas'] * 1e3:11.1f} "
            f"{b2b['cublas'] * 1e3:6.1f} {b2b['empty'] * 1e3:9.2f} "
            f"{bound_ms / each['ours']:13.3f} {bound_ms / b2b['ours']:5.3f} "
            f"{bound_ms / b2b['cublas']:10.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
