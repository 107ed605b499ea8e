"""The Hopper rungs (examples/hopper/) against cuBLAS and Triton, at the shapes of issue 17.

    python3 bench/hopper.py [--size MxNxK ...] [--repeat N] [--out PATH.json]
                            [--only] [FILE.tile ...]

Times every .tile under examples/hopper/ (and any FILE given) with `tiledsl bench`'s code
(`tiledsl.commands.bench`): each result checked with the exact and the statistical oracle
before its time counts, cuBLAS (cupy.matmul, f16 C) and Triton (tl.dot, f16 C) timed in
the same process on the same inputs. Default sizes: 4096³, 8192³ and the projections of
Llama-2-7B at 2048 and 8192 tokens (M x 12288 x 4096, M x 4096 x 4096, M x 22016 x 4096,
M x 4096 x 11008).

Per size, the best tiledsl row against the fastest cuBLAS and the fastest Triton time of
the run at that size (so that a slow baseline sample flatters nothing), the target being
≥ 1.0x both; then the geometric mean. Prints the table and the verdicts and writes both as
JSON (default bench/results/hopper-GPU-DATE.json). Exits 1 when a row fails its check; a
target missed is reported, not an error.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from best import ROOT, default_out

from tiledsl.commands import bench
from tiledsl.commands.run import parse_size
from tiledsl.gpu.runtime import device_info

HOPPER = ROOT / "examples" / "hopper"
LLAMA = [
    f"{m}x{n}x{k}"
    for m in (2048, 8192)
    for n, k in ((12288, 4096), (4096, 4096), (22016, 4096), (4096, 11008))
]
SIZES = ["4096x4096x4096", "8192x8192x8192", *LLAMA]


def verdicts(rows: list[dict]) -> list[dict]:
    """Per size: the best checked tiledsl row against the fastest cuBLAS and Triton."""
    out = []
    for size in sorted({tuple(r["size"]) for r in rows}):
        at = [r for r in rows if tuple(r["size"]) == size and r["ok"] and r["time_ms"]]

        def fastest(kind: str, rows=at) -> float | None:
            return min((r["time_ms"] for r in rows if r["kind"] == kind), default=None)

        mine = [r for r in at if r["kind"] == "tiledsl"]
        best = min(mine, key=lambda r: r["time_ms"], default=None)
        cublas, triton = fastest("cublas"), fastest("triton")
        x_cublas = cublas / best["time_ms"] if best and cublas else None
        x_triton = triton / best["time_ms"] if best and triton else None
        out.append(
            {
                "size": list(size),
                "best": best["label"] if best else None,
                "tflops": best["tflops"] if best else None,
                "ratio_to_cublas": x_cublas,
                "ratio_to_triton": x_triton,
                "met": bool(x_cublas and x_cublas >= 1.0 and (x_triton is None or x_triton >= 1.0)),
            }
        )
    return out


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def render(found: list[dict]) -> str:
    lines = [
        f"{'size':<16} {'best':<22} {'TFLOP/s':>8} {'x cuBLAS':>9} {'x Triton':>9}  ≥ 1.0x both"
    ]
    for v in found:
        cells = [
            f"{v[key]:{width}.{digits}f}" if v[key] else " " * (width - 1) + "-"
            for key, width, digits in (
                ("tflops", 8, 1),
                ("ratio_to_cublas", 9, 3),
                ("ratio_to_triton", 9, 3),
            )
        ]
        lines.append(
            f"{bench.size_label(tuple(v['size'])):<16} {v['best'] or '-':<22} "
            f"{' '.join(cells)}  {'MET' if v['met'] else 'MISSED'}"
        )
    for key in ("ratio_to_cublas", "ratio_to_triton"):
        mean = geomean([v[key] for v in found if v[key]])
        lines.append(
            f"geometric mean {key.removeprefix('ratio_to_')}: " + (f"{mean:.3f}x" if mean else "-")
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("files", nargs="*", help="more .tile files to time beside examples/hopper/")
    p.add_argument("--only", action="store_true", help="time the FILEs given, not examples/hopper/")
    p.add_argument("--size", action="append", metavar="MxNxK", help="repeatable")
    p.add_argument("--repeat", type=int, default=30, help="timed runs per row (default 30)")
    p.add_argument("--out", default=None, help="JSON path (default bench/results/hopper-GPU-DATE)")
    args = p.parse_args()
    files = ([] if args.only else sorted(HOPPER.glob("*.tile"))) + [Path(f) for f in args.files]
    sizes = [parse_size(s) for s in (args.size or SIZES)]
    settings = bench.Settings(repeat=args.repeat, warmup=5)
    rows = bench.measure([(f.stem, str(f)) for f in files], sizes, settings)
    print(bench.table(rows))
    found = verdicts([r.to_json() for r in rows])
    print()
    print(render(found))
    document = bench.record(rows, settings, device_info())
    document["targets"] = found
    out = Path(args.out) if args.out else default_out("hopper")
    bench.save_json(document, out)
    print(f"wrote {out}")
    if not all(r.ok or r.skipped for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
