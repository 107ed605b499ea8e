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

import re

from source_variants import arguments, compare, kernel_source

PLACE = re.compile(r"const int wm = 0, wn = (0|__shfl_sync\(0xffffffffu, warp % WARPS_N, 0\));")


def computed(src: str) -> str:
    """The coordinates of one warp spelled as tiledsl spelled them before."""
    found = PLACE.findall(src)
    assert len(found) == 1, f"expected one `const int wm = 0, ...` line, found {len(found)}"
    wn = "warp % WARPS_N" if found[0] == "0" else found[0]
    return PLACE.sub(f"const int wm = warp / WARPS_N, wn = {wn};", src)


VARIANTS = {"emitted": lambda s: s, "computed": computed}


def main() -> None:
    args = arguments(__doc__, "examples/tuned/small_m.tuned.tile", "small_m_2").parse_args()
    compare(*kernel_source(args.tile, args.kernel), VARIANTS, args)


if __name__ == "__main__":
    main()
