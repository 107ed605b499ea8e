# ruff: noqa: E501  (the embedded CUDA keeps its own line lengths)
"""Probe (not part of tiledsl): does an L2 prefetch of a block's first tiles, issued before
the mbarriers are initialised, take the first load's DRAM latency off a few-token kernel?

At 64 x 4096 x 4096 (docs/performance.md, "Where a few-token kernel's time goes") the first
TMA copy left 1.5 µs after the first block started (0.86 µs with the sizes made
constants, which the launch-scalars pass approaches) and landed 0.9 µs later, while the
whole kernel streams B for 7.7 µs: its prologue is about a sixth of its time. `cp.async.bulk.prefetch.tensor.2d.L2` needs no mbarrier, so
the producer's elected thread can ask for its first tile's first STAGES steps of A and B
at the kernel's first instruction, while thread 0 initialises the barriers; the TMA loads
that follow then read L2.

    python3 docs/probes/prefetch_probe.py [--tile FILE] [--kernel NAME] [--rounds 4] SIZE ...

Variants, both checked by both oracles before they count, timed through tiledsl's own
launcher and timing loop beside cuBLAS, rounds in rotated order: `emitted`, and
`prefetch` (the emitted source with the producer's first-tile coordinates and its TMA
loads copied, as L2 prefetches of steps 0 .. STAGES - 1, in front of the barriers'
initialisation). For kernels that take whole tiles (`persistent` without a split of K:
default small_m_cluster_2, 64 x 64 tiles, 12 stages); a split kernel's later slices would
prefetch the wrong K steps.
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

PREFETCH_HELPER = r"""
// probe: a box of the tensor map into L2 only (no shared memory, no mbarrier)
__device__ __forceinline__ void tma_prefetch_2d(const TensorMap* map, int x, int y) {
    asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];\n"
                 :: "l"(map), "r"(x), "r"(y) : "memory");
}
"""

INIT = "    if (threadIdx.x == 0) {\n        for (int s = 0; s < STAGES; ++s) {\n"
LOAD = re.compile(
    r"tma_load_2d\(&\w+\[[^\]]*\](?:\[[^\]]*\])*, (&map_\w+), (.+), &full\[step % STAGES\]\);"
)


def prefetch(src: str) -> str:
    """The emitted source with the first tile's first STAGES steps prefetched into L2."""
    assert "split_k" not in src.lower() and "sk_first" not in src, "whole tiles only"
    assert src.count(INIT) == 1, "expected one barrier initialisation by thread 0"
    producer = src[src.index("// the producer warpgroup") :]
    producer = producer[: producer.index("} else {  // the consumer")]
    head = producer[producer.index("for (int tl = 0;") :]
    coordinates = head[head.index("\n") + 1 : head.index("// block steps along K")]
    coordinates = coordinates.replace("pid + tl * blocks", "pid")
    loads = LOAD.findall(producer)
    assert loads, "no TMA loads in the producer"
    body = "\n".join(f"            tma_prefetch_2d({m}, {args});" for m, args in loads)
    block = (
        "    if (warp == WARPS_M * WARPS_N && lane == 0 && pid < tiles) {  // probe: the first tile's first STAGES steps into L2\n"
        + "\n".join("        " + line.strip() for line in coordinates.strip().splitlines())
        + "\n        for (int kt = 0; kt < min(STAGES, (K + BK - 1) / BK); ++kt) {\n"
        + body
        + "\n        }\n    }\n"
    )
    src = src.replace(INIT, block + INIT)
    return src.replace('extern "C" __global__', PREFETCH_HELPER + 'extern "C" __global__', 1)


VARIANTS = {"emitted": lambda s: s, "prefetch": prefetch}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("sizes", nargs="+")
    ap.add_argument("--tile", default="examples/tuned/small_m_cluster.tuned.tile")
    ap.add_argument("--kernel", default="small_m_cluster_2")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--data", nargs="+", default=["ints"])
    ap.add_argument(
        "--show", action="store_true", help="print the prefetch variant's source and stop"
    )
    args = ap.parse_args()
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes]

    compiled = driver.compile_file(Path(args.tile))
    index = [k.name for k in compiled.kernels].index(args.kernel)
    k, launch = compiled.kernels[index], compiled.launches[index]
    source = compiled.source_for((k,))
    if args.show:
        print(prefetch(source))
        return
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
