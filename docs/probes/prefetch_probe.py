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

import re

from source_variants import arguments, compare, kernel_source

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
    ap = arguments(__doc__, "examples/tuned/small_m_cluster.tuned.tile", "small_m_cluster_2")
    ap.add_argument(
        "--show", action="store_true", help="print the prefetch variant's source and stop"
    )
    args = ap.parse_args()
    k, launch, source = kernel_source(args.tile, args.kernel)
    if args.show:
        print(prefetch(source))
        return
    compare(k, launch, source, VARIANTS, args)


if __name__ == "__main__":
    main()
