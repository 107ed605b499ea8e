# ruff: noqa: E501  (the printed table keeps its own line lengths)
"""Shared by the probes that time edits of one emitted kernel (warp_index_probe.py,
prefetch_probe.py): the kernel's source, and an A/B of its variants beside cuBLAS through
tiledsl's own launcher, oracles and timing loop, rounds in rotated order.

    args = arguments(__doc__, tile="examples/tuned/small_m.tuned.tile", kernel="small_m_2").parse_args()
    k, launch, source = kernel_source(args.tile, args.kernel)
    compare(k, launch, source, {"emitted": lambda s: s, "edited": edit}, args)
"""

import argparse
from pathlib import Path

import cupy as cp
import numpy as np

import tiledsl.driver as driver
from tiledsl.commands.run import Report, check_size, gpu_checks, kernel_calls
from tiledsl.gpu import runtime
from tiledsl.gpu.baselines import cublas
from tiledsl.gpu.timing import CudaClock, rotated_sets, time_calls


def arguments(description: str, tile: str, kernel: str) -> argparse.ArgumentParser:
    """SIZE ..., --tile, --kernel, --rounds, --repeat and --data."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("sizes", nargs="+")
    ap.add_argument("--tile", default=tile)
    ap.add_argument("--kernel", default=kernel)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--data", nargs="+", default=["ints"])
    return ap


def kernel_source(tile: str, kernel: str):
    """(the kernel's IR, its launch, the source of it alone) of one kernel of a file."""
    compiled = driver.compile_file(Path(tile))
    index = [k.name for k in compiled.kernels].index(kernel)
    k = compiled.kernels[index]
    return k, compiled.launches[index], compiled.source_for((k,))


def compare(k, launch, source: str, variants: dict, args) -> None:
    """Each variant (a name: an edit of `source`) checked by both oracles at each size, then
    timed beside cuBLAS, `args.rounds` rounds in rotated order; a summary of the medians."""
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes]
    arch = runtime.device_arch()
    arch = arch + "a" if arch == "sm_90" else arch
    runs = {
        name: runtime.launcher(runtime.load_module(edit(source), arch, name=f"probe_{name}.cu"), launch)
        for name, edit in variants.items()
    }
    clock = CudaClock(arch)
    base = cublas()
    results = []
    for size in sizes:
        sizes_ = check_size(k, size)
        for name, run in runs.items():
            report = Report(k.name, size, "probe")
            gpu_checks(k, run, sizes_, size, np.random.default_rng(1), report, Path("/tmp"))
            bad = [c for c in report.checks if not c.ok]
            print(f"{'x'.join(map(str, size))} {name}: {'PASS' if not bad else 'FAIL ' + str(bad)}")
            assert not bad
        for data in args.data:
            sets, set_bytes = rotated_sets(size, 0, data)
            work = {name: kernel_calls(k, run, sizes_, size, sets) for name, run in runs.items()}
            work["cuBLAS"] = base.calls(k.gemm, size, sets)
            order = list(work)
            for round_ in range(args.rounds):
                shift = round_ % len(order)  # each round in another order
                for name in order[shift:] + order[:shift]:
                    t = time_calls(work[name], clock, warmup=10, repeat=args.repeat, set_bytes=set_bytes)
                    results.append((size, data, name, t.median_ms))
                    print(f"{'x'.join(map(str, size)):>16} {data:6} r{round_} {name:9} {t.median_ms * 1e3:8.2f} us", flush=True)
            cp.cuda.Device().synchronize()
    print(f"\nsummary ({k.name}): median over rounds in µs, and x the fastest cuBLAS median of the size and data")
    for size in sizes:
        for data in args.data:
            rows = [r for r in results if r[0] == size and r[1] == data]
            best = min(r[3] for r in rows if r[2] == "cuBLAS")
            line = f"{'x'.join(map(str, size)):>16} {data:6}"
            for name in [*runs, "cuBLAS"]:
                ms = float(np.median([r[3] for r in rows if r[2] == name]))
                line += f" | {name} {ms * 1e3:.2f} ({best / ms:.3f})"
            print(line)
