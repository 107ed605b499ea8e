"""The optimization ladder of the RTX 5080 seed, generated from .tile files, on this GPU.

    python bench/ladder.py [--size 4096x4096x4096] [--out bench/results/ladder.json]
                           [--plot ladder.png]

Each rung is a .tile file under examples/ladder/ (v6 keeps B's tile as Bs[N][K],
which tiledsl expresses with B stored N x K: see its comment); the last row is
examples/hgemm.tile, the best schedule. Measured by `tiledsl.commands.bench` (what
`tiledsl bench` runs): every result is checked with the exact and the statistical
oracle before its time counts, cuBLAS is timed in the same process on the same
inputs, times are CUDA-event medians over inputs rotated past the L2. Prints a
table and writes JSON.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from tiledsl.commands import bench
from tiledsl.commands.run import parse_size
from tiledsl.gpu.runtime import device_info

RUNGS = [
    ("v1 naive (global)", "examples/ladder/v1.tile"),
    ("v2 shared-memory tiling", "examples/ladder/v2.tile"),
    ("v3 warp coarsening 2x2", "examples/ladder/v3.tile"),
    ("v4 cp.async double buffer", "examples/ladder/v4.tile"),
    ("v5 padding", "examples/ladder/v5.tile"),
    ("v6 Bs[N][K] (B given N x K)", "examples/ladder/v6.tile"),
    ("v7 128x128 block", "examples/ladder/v7.tile"),
    ("hgemm: 128x128x64, 3 stages", "examples/hgemm.tile"),
]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="4096x4096x4096")
    p.add_argument("--out", default=f"bench/results/ladder-{datetime.date.today()}.json")
    p.add_argument("--plot", default=None, help="also draw the rungs' TFLOP/s (matplotlib)")
    args = p.parse_args()
    settings = bench.Settings(repeat=30, baselines=("cublas",))
    rows = bench.measure(RUNGS, [parse_size(args.size)], settings)
    print(bench.table(rows))
    bench.save_json(bench.record(rows, settings, device_info()), Path(args.out))
    print(f"wrote {args.out}")
    if args.plot:
        missing = bench.matplotlib_missing()
        if missing:
            print(f"warning: {missing}; no plot", file=sys.stderr)
        else:
            bench.plot(rows, Path(args.plot), title=device_info()["name"])
            print(f"wrote {args.plot}")
    if not all(r.ok or r.skipped for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
