# ruff: noqa: E501  (the printed table keeps its own line lengths)
"""Probe (not part of tiledsl): what does a warp coordinate spelled as a constant buy a
64-row tile? Since 2026-12-04 (evening) tiledsl writes a warp coordinate along an axis
of one warp as `0` (`const int wm = 0, wn = 0;`); before, it wrote `warp / WARPS_N` and
`warp % WARPS_N`, which nvcc folds only for `% 1`: with one consumer warpgroup along M
(every 64-row tile) it built each A descriptor of the K loop in vector registers (in the
SASS of small_m_2's K step, 72 instructions with 8 R2UR and 25 vector LOP3 / IMAD / VIADD
against 59 with none and 6). This times both spellings of the same kernel through
tiledsl's own launcher, oracles and timing loop, beside cuBLAS, rounds in rotated order.

    python3 docs/probes/warp_index_probe.py [--tile FILE] [--kernel NAME] [--rounds 4]
                                            [--data ints normal] SIZE ...

Variants: `emitted` (the constant) and `computed` (the coordinates as tiledsl wrote them
before: `wm = warp / WARPS_N`, `wn = warp % WARPS_N`, or `wn` read from lane 0 where the
block has several warps along N, as it still is). Both pass both oracles before they count.
"""

import argparse
import re
from pathlib import Path

import cupy as cp
import numpy as np

import tiledsl.driver as driver
from tiledsl.commands.run import Report, check_size, gpu_checks, kernel_calls
from tiledsl.gpu import runtime
from tiledsl.gpu.baselines import cublas
from tiledsl.gpu.timing import CudaClock, rotated_sets, time_calls

PLACE = re.compile(r"const int wm = 0, wn = (0|__shfl_sync\(0xffffffffu, warp % WARPS_N, 0\));")


def computed(src: str) -> str:
    """The coordinates of one warp spelled as tiledsl spelled them before."""
    found = PLACE.findall(src)
    assert len(found) == 1, f"expected one `const int wm = 0, ...` line, found {len(found)}"
    wn = "warp % WARPS_N" if found[0] == "0" else found[0]
    return PLACE.sub(f"const int wm = warp / WARPS_N, wn = {wn};", src)


VARIANTS = {"emitted": lambda s: s, "computed": computed}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("sizes", nargs="+")
    ap.add_argument("--tile", default="examples/tuned/small_m.tuned.tile")
    ap.add_argument("--kernel", default="small_m_2")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--data", nargs="+", default=["ints"])
    args = ap.parse_args()
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes]

    compiled = driver.compile_file(Path(args.tile))
    names = [k.name for k in compiled.kernels]
    index = names.index(args.kernel)
    k, launch = compiled.kernels[index], compiled.launches[index]
    source = compiled.source_for((k,))
    arch = runtime.device_arch()
    arch = arch + "a" if arch == "sm_90" else arch
    runs = {
        name: runtime.launcher(
            runtime.load_module(edit(source), arch, name=f"probe_{name}.cu"), launch
        )
        for name, edit in VARIANTS.items()
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
                    t = time_calls(
                        work[name], clock, warmup=10, repeat=args.repeat, set_bytes=set_bytes
                    )
                    results.append((size, data, name, t.median_ms))
                    print(
                        f"{'x'.join(map(str, size)):>16} {data:6} r{round_} {name:9} {t.median_ms * 1e3:8.2f} us",
                        flush=True,
                    )
            cp.cuda.Device().synchronize()
    print(
        f"\nsummary ({args.kernel}): median over rounds in µs, and x the fastest cuBLAS median of the size and data"
    )
    for size in sizes:
        for data in args.data:
            rows = [r for r in results if r[0] == size and r[1] == data]
            best = min(r[3] for r in rows if r[2] == "cuBLAS")
            line = f"{'x'.join(map(str, size)):>16} {data:6}"
            for name in [*runs, "cuBLAS"]:
                ms = float(np.median([r[3] for r in rows if r[2] == name]))
                line += f" | {name} {ms * 1e3:.2f} ({best / ms:.3f})"
            print(line)


if __name__ == "__main__":
    main()
