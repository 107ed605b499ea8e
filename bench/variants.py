"""Time any .tile schedules on this GPU, checked, against cuBLAS in the same process.

    python3 bench/variants.py FILE.tile [FILE.tile ...] [--size MxNxK ...] [--triton]
                              [--out PATH.json]
    python3 bench/variants.py examples/hgemm.tile examples/ladder/*.tile

A thin script over `tiledsl bench`'s code (`tiledsl.commands.bench`): every kernel of
every file is checked with both oracles before its time counts, cuBLAS (and with
--triton, Triton) runs on the same inputs, times are CUDA-event medians over inputs
rotated past the L2. Prints the table and writes the JSON record (device, versions, date,
rows; default bench/results/variants-GPU-DATE.json). Exit status 1 if any check failed.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from tiledsl.commands import bench
from tiledsl.commands.run import parse_size
from tiledsl.gpu.runtime import device_info

ROOT = Path(__file__).resolve().parent.parent


def default_out(name: str) -> Path:
    """bench/results/NAME-GPU-DATE.json: the name a canonical result keeps."""
    gpu = device_info()["name"].removeprefix("NVIDIA ").lower().replace(" ", "-")
    return ROOT / "bench" / "results" / f"{name}-{gpu}-{datetime.date.today()}.json"


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("files", nargs="+", metavar="FILE.tile")
    p.add_argument(
        "--size", action="append", default=None, metavar="MxNxK", help="repeatable; default 4096³"
    )
    p.add_argument("--out", help="JSON path (default bench/results/variants-GPU-DATE)")
    p.add_argument("--triton", action="store_true", help="add the Triton baseline")
    args = p.parse_args()
    sizes = [parse_size(s) for s in args.size or ["4096x4096x4096"]]
    settings = bench.Settings(
        repeat=30, baselines=("cublas", "triton") if args.triton else ("cublas",)
    )
    rows = bench.measure([(Path(f).stem, f) for f in args.files], sizes, settings)
    print(bench.table(rows))
    out = Path(args.out) if args.out else default_out("variants")
    bench.save_json(bench.record(rows, settings, device_info()), out)
    print(f"wrote {out}")
    sys.exit(0 if all(r.ok or r.skipped for r in rows) else 1)


if __name__ == "__main__":
    main()
