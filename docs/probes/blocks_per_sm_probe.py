"""Probe (not part of tiledsl): what `blocks_per_sm N` buys a kernel, as an A/B in one
process. The kernel's emitted source with `__launch_bounds__(THREADS, 1)` made
`(THREADS, N)` for each N given (exactly what the directive emits, less its comment and
constant), each checked by both oracles, then timed beside cuBLAS in rotated rounds
(docs/probes/source_variants.py).

    python3 docs/probes/blocks_per_sm_probe.py SIZE ... [--tile T] [--kernel K]
                                               [--blocks 1 2 4] [--rounds R] [--repeat N]

e.g. `--kernel d8_w8 --blocks 1 2 3 4 1x4096x11008 1x12288x4096` with the default tile,
docs/probes/blocks_per_sm.tile (bench/results/blocks-per-sm-h100-2026-12-06.txt).
"""

import re

from source_variants import arguments, compare, kernel_source

BOUNDS = re.compile(r"::THREADS, 1\)")


def capped(blocks: int):
    """The source with ptxas asked to fit `blocks` blocks per multiprocessor."""

    def edit(source: str) -> str:
        assert len(BOUNDS.findall(source)) == 1, "expected one __launch_bounds__(THREADS, 1)"
        return BOUNDS.sub(f"::THREADS, {blocks})", source)

    return edit


def main() -> None:
    ap = arguments(__doc__, "docs/probes/blocks_per_sm.tile", "d8_w8")
    ap.add_argument("--blocks", nargs="+", type=int, default=[1, 2, 4])
    args = ap.parse_args()
    variants = {f"{n} block{'s' if n > 1 else ''}": capped(n) for n in args.blocks}
    compare(*kernel_source(args.tile, args.kernel), variants, args)


if __name__ == "__main__":
    main()
