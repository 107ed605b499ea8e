"""What a Python call of a tiledsl kernel costs the host, against a bare launch and torch.

    python3 bench/call_overhead.py [--calls N] [--size MxNxK] [--out PATH.json]

Times, per call, the host's time to issue a tiny product (default 128 x 128 x 64 with
examples/main.tile, the kernel the README runs: on an H200 the persistent Hopper kernel)
on the GPU, each call timed on its own with perf_counter_ns and the median of N calls
(default 10,000) kept:

  bare launch           the kernel's CUDA function called with its arguments built once
                        (CuPy's launch: what no Python caller can go below)
  tiledsl, out=         k(A, B, out=C) on torch tensors: the plan looked up, the addresses,
                        the stream, the launch
  tiledsl               k(A, B): the same and a new C (torch.empty)
  tiledsl op            torch.ops.tiledsl.NAME(A, B) (tiledsl.torch.register): the custom
                        operator's dispatch on top
  tiledsl, CuPy         k(A, B, out=C) on CuPy arrays
  torch.matmul, out=    torch.matmul(A, B, out=C) (cuBLAS), and torch.matmul(A, B)

Every few hundred calls the device is synchronised (untimed), so that the launch queue
never fills and no call waits for the GPU. Each product is checked once, exactly, before
it is timed. Prints the table and writes it as JSON (default
bench/results/call-overhead-GPU-DATE.json).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from best import ROOT, default_out, device_info  # noqa: E402

SYNC_EVERY = 200


def median_call_us(call, calls: int, sync) -> float:
    """The median host time of one call, in microseconds."""
    for _ in range(50):  # warm: the module, the launcher, the plan, the tensor maps
        call()
    sync()
    times = []
    for i in range(calls):
        start = time.perf_counter_ns()
        call()
        times.append(time.perf_counter_ns() - start)
        if i % SYNC_EVERY == SYNC_EVERY - 1:
            sync()
    sync()
    return statistics.median(times) / 1000


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--calls", type=int, default=10_000)
    p.add_argument("--size", default="128x128x64", metavar="MxNxK")
    p.add_argument("--file", default=str(ROOT / "examples" / "main.tile"))
    p.add_argument("--out", default=None)
    p.add_argument(
        "--profile", action="store_true", help="also print where the tiledsl calls spend it"
    )
    args = p.parse_args()

    import cupy
    import torch

    import tiledsl
    import tiledsl.torch

    m, n, k = (int(x) for x in args.size.split("x"))
    kernel = tiledsl.load(args.file)
    rng = np.random.default_rng(0)
    a_np = rng.integers(-2, 3, (m, k)).astype(np.float16)
    b_np = rng.integers(-2, 3, (k, n)).astype(np.float16)
    col = kernel.gemm.b.layout == "col"  # B as the file declares it (col: W.t(), a view)
    a = torch.from_numpy(a_np).cuda()
    b = (
        torch.from_numpy(np.ascontiguousarray(b_np.T)).cuda().t()
        if col
        else torch.from_numpy(b_np).cuda()
    )
    c = kernel(a, b)
    expected = torch.from_numpy(a_np.astype(np.float64) @ b_np.astype(np.float64)).cuda()
    assert torch.equal(c.double(), expected.half().double()), "the kernel's product is wrong"
    op = tiledsl.torch.register(kernel, "call_overhead")
    assert torch.equal(op(a, b), c)
    cb = cupy.asarray(np.ascontiguousarray(b_np.T)).T if col else cupy.asarray(b_np)
    ca, cc = cupy.asarray(a_np), cupy.empty((m, n), cupy.float16)

    # the bare launch: the plan's launcher, its arguments built once, called directly
    plan = next(iter(kernel._plans.values()))
    launcher = kernel._gpu[plan.choice.kernel.name]
    pointers = {"A": a.data_ptr(), "B": b.data_ptr(), "C": c.data_ptr()}
    grid, bare_args, _staged = launcher.arguments(pointers, plan.choice.sizes)
    block, shared = (launcher.launch.threads,), launcher.launch.smem_bytes
    stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)

    sync = torch.cuda.synchronize
    rows = {
        "bare launch": lambda: launcher.fn(grid, block, bare_args, shared, stream),
        "tiledsl, out=": lambda: kernel(a, b, out=c),
        "tiledsl": lambda: kernel(a, b),
        "tiledsl op": lambda: op(a, b),
        "tiledsl, CuPy": lambda: kernel(ca, cb, out=cc),
        "torch.matmul, out=": lambda: torch.matmul(a, b, out=c),
        "torch.matmul": lambda: torch.matmul(a, b),
    }
    results = {name: median_call_us(call, args.calls, sync) for name, call in rows.items()}
    if args.profile:
        _profile({name: rows[name] for name in ("tiledsl, out=", "tiledsl op")}, sync)
    bare = results["bare launch"]
    lines = [
        f"host time per call, median of {args.calls} calls, {m}x{n}x{k} f16 "
        f"({plan.choice.kernel.name}; {device_info()['name']})",
        f"{'call':<22}{'µs':>8}{'over bare':>11}",
    ]
    for name, us in results.items():
        lines.append(f"{name:<22}{us:8.2f}{us - bare:+11.2f}")
    print("\n".join(lines))
    out = Path(args.out) if args.out else default_out("call-overhead")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "device": device_info(),
                "date": time.strftime("%Y-%m-%d"),
                "size": [m, n, k],
                "file": str(Path(args.file).relative_to(ROOT))
                if Path(args.file).is_relative_to(ROOT)
                else args.file,
                "kernel": plan.choice.kernel.name,
                "calls": args.calls,
                "median_us": results,
                "over_bare_us": {name: us - bare for name, us in results.items()},
            },
            indent=2,
        )
        + "\n"
    )
    out.with_suffix(".txt").write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


def _profile(rows: dict, sync) -> None:
    """cProfile's functions by own time over 2,000 calls of each row."""
    import cProfile
    import pstats

    for name, call in rows.items():
        profiler = cProfile.Profile()
        profiler.enable()
        for i in range(2000):
            call()
            if i % SYNC_EVERY == 0:
                sync()
        profiler.disable()
        print(f"--- {name}")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(14)


if __name__ == "__main__":
    main()
