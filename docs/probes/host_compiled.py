"""Probe (not part of tiledsl): what one call of a linear layer costs the host at one token,
eager and inside a `torch.compile`d function, for the one file's torch op and for torch.

At one token a projection's GPU time is 15-60 µs, about what the host spends issuing it,
so a block of several calls can be bound by the host: examples/python/mlp.py at one token
ran tiledsl's block at 0.90x torch's eager and 0.50x under torch.compile (H100,
2026-12-06). Each call is timed on its own with perf_counter_ns (the device synchronised
every 50 calls, untimed, so that no call waits for the GPU), the median of 400 kept;
then cProfile says where the compiled tiledsl call spends it.

    python3 docs/probes/host_compiled.py [--file examples/tuned/llama2_7b.tuned.tile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import torch

import tiledsl.torch

CALLS, SYNC_EVERY = 400, 50


def median_host_us(fn) -> tuple[float, float]:
    """(median, 10th percentile) of the host's microseconds per call."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    times = []
    for i in range(CALLS):
        started = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - started)
        if i % SYNC_EVERY == SYNC_EVERY - 1:
            torch.cuda.synchronize()
    times.sort()
    return times[len(times) // 2] / 1e3, times[len(times) // 10] / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", default="examples/tuned/llama2_7b.tuned.tile")
    ap.add_argument("--size", default="1x4096x11008", metavar="MxNxK")
    args = ap.parse_args()
    m, n, k = (int(v) for v in args.size.split("x"))
    x = torch.randn(m, k, device="cuda").half()
    w = (torch.randn(n, k, device="cuda") / 100).half()  # as nn.Linear keeps it
    op = tiledsl.torch.register(args.file, "linear")
    compiled = torch.compile(lambda x, w: op(x, w.t()), fullgraph=True)
    torch_compiled = torch.compile(lambda x, w: x @ w.t(), fullgraph=True)
    calls = {
        "op eager": lambda: op(x, w.t()),
        "op compiled": lambda: compiled(x, w),
        "torch eager": lambda: x @ w.t(),
        "torch compiled": lambda: torch_compiled(x, w),
    }
    for name, fn in calls.items():
        median, p10 = median_host_us(fn)
        print(f"{name:16} host µs per call: median {median:.1f}, p10 {p10:.1f}")
    profile = cProfile.Profile()
    profile.enable()
    for i in range(300):
        compiled(x, w)
        if i % SYNC_EVERY == SYNC_EVERY - 1:
            torch.cuda.synchronize()
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
