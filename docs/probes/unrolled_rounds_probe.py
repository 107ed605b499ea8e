"""Probe (not part of tiledsl): whether the direct path reads faster with its K teams'
rounds unrolled, so that nvcc may issue one round's loads before the last round's mmas
(ncu on an H100, 2026-12-06: the split kernel at 1 x 4096 x 11008 spends 83 % of its warps'
cycles waiting on a load, `long scoreboard`, at 48 % occupancy, limited by registers;
bench/results/ncu-direct-split-h100-2026-12-06.txt). The emitted source's loop over the
rounds `for (int kr = ...` given `#pragma unroll N` for each N, each variant checked by both
oracles, then timed beside cuBLAS in rotated rounds (docs/probes/source_variants.py).

    python3 docs/probes/unrolled_rounds_probe.py SIZE ... [--tile T] [--kernel K]
                                                 [--unroll 1 2 4] [--rounds R] [--repeat N]
"""

import re

from source_variants import arguments, compare, kernel_source

ROUNDS = re.compile(r"(\n *)(for \(int kr = 0;)")


def unrolled(times: int):
    """The source with the rounds' loop unrolled `times` times (1: as emitted)."""

    def edit(source: str) -> str:
        assert len(ROUNDS.findall(source)) == 1, "expected one loop over the K teams' rounds"
        if times == 1:
            return source
        return ROUNDS.sub(rf"\1#pragma unroll {times}\1\2", source)

    return edit


def main() -> None:
    ap = arguments(
        __doc__, "examples/tuned/few_tokens_direct_split.tuned.tile", "few_tokens_direct_split_3"
    )
    ap.add_argument("--unroll", nargs="+", type=int, default=[1, 2, 4])
    args = ap.parse_args()
    variants = {f"unroll {n}": unrolled(n) for n in args.unroll}
    compare(*kernel_source(args.tile, args.kernel), variants, args)


if __name__ == "__main__":
    main()
