"""The optimization ladder of the RTX 5080 write-up, generated from .tile files, on this GPU.

    python3 bench/ladder.py [--size 4096x4096x4096] [--out PATH.json] [--plot ladder.png]

Each rung is a .tile file under examples/ladder/ (v6 keeps B's tile as Bs[N][K],
which tiledsl expresses with B stored N x K: see its comment); the last row is
examples/hgemm.tile, the best hand-written schedule. Measured by `tiledsl bench`'s code
(`tiledsl.commands.bench`): every result is checked with the exact and the statistical
oracle before its time counts, cuBLAS is timed in the same process on the same inputs,
times are CUDA-event medians over inputs rotated past the L2. Prints a table and writes
the JSON record (default bench/results/ladder-GPU-DATE.json); exit status 1 if a check
failed. docs/performance.md has the measured ladder.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from pathlib import Path

from tiledsl.commands import bench
from tiledsl.commands.run import parse_size
from tiledsl.gpu.runtime import device_info

ROOT = Path(__file__).resolve().parent.parent
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


def default_out(name: str) -> Path:
    """bench/results/NAME-GPU-DATE.json: the name a canonical result keeps."""
    gpu = device_info()["name"].removeprefix("NVIDIA ").lower().replace(" ", "-")
    return ROOT / "bench" / "results" / f"{name}-{gpu}-{datetime.date.today()}.json"


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--size", default="4096x4096x4096", metavar="MxNxK")
    p.add_argument("--out", default=None, help="JSON path (default bench/results/ladder-GPU-DATE)")
    p.add_argument("--plot", default=None, help="also draw the rungs' TFLOP/s (matplotlib)")
    args = p.parse_args()
    settings = bench.Settings(repeat=30, baselines=("cublas",))
    rungs = [(label, os.path.relpath(ROOT / path)) for label, path in RUNGS]
    rows = bench.measure(rungs, [parse_size(args.size)], settings)
    print(bench.table(rows))
    out = Path(args.out) if args.out else default_out("ladder")
    bench.save_json(bench.record(rows, settings, device_info()), out)
    print(f"wrote {out}")
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
