"""Time .tile schedules on the GPU, checked, against cuBLAS in the same process.

    python bench/variants.py examples/hgemm.tile examples/ladder/*.tile --size 4096x4096x4096

A thin script over `tiledsl.commands.bench` (what `tiledsl bench` runs): every kernel is
checked with both oracles before its time counts, cuBLAS runs on the same inputs,
times are CUDA-event medians over inputs rotated past the L2. Prints the table and
writes the JSON record (device, versions, date, rows) to bench/results/. Exit
status 1 if any check failed.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from tiledsl.commands import bench
from tiledsl.commands.run import parse_size
from tiledsl.gpu.runtime import device_info


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--size", action="append", default=None, metavar="MxNxK")
    p.add_argument("--out", default=None, help="JSON path (default: bench/results/variants-DATE)")
    p.add_argument("--triton", action="store_true", help="add the Triton baseline")
    args = p.parse_args()
    sizes = [parse_size(s) for s in args.size or ["4096x4096x4096"]]
    settings = bench.Settings(
        repeat=30, baselines=("cublas", "triton") if args.triton else ("cublas",)
    )
    rows = bench.measure([(Path(f).stem, f) for f in args.files], sizes, settings)
    print(bench.table(rows))
    out = Path(args.out or f"bench/results/variants-{datetime.date.today()}.json")
    bench.save_json(bench.record(rows, settings, device_info()), out)
    print(f"wrote {out}")
    sys.exit(0 if all(r.ok or r.skipped for r in rows) else 1)


if __name__ == "__main__":
    main()
