"""The optimization ladder of the RTX 5080 seed, generated from .tile files, on this GPU.

    python bench/ladder.py [--size 4096x4096x4096] [--out bench/results/ladder.json]

Each rung is a .tile file under examples/ladder/ (v6 keeps B's tile as Bs[N][K],
which tiledsl expresses with B stored N x K: see its comment); the last row is
examples/hgemm.tile, the best schedule. Every result is checked with the exact
oracle before its time counts; cuBLAS is timed in the same process on the same
inputs. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from variants import measure, save, table  # noqa: E402

from tiledsl.run import parse_size  # noqa: E402

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
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--size", default="4096x4096x4096")
    p.add_argument("--out", default=f"bench/results/ladder-{datetime.date.today()}.json")
    args = p.parse_args()
    rows = measure(RUNGS, [parse_size(args.size)])
    print()
    print(table(rows))
    save(rows, Path(args.out))
    if not all(r["ok"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
