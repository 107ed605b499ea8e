"""The tuned schedules against cuBLAS, and issue 8's targets, on this GPU.

    python bench/best.py [--size 4096x4096x4096 --size 8192x8192x8192]
                         [--out bench/results/best-DATE.json] [FILE.tile ...]

Times every .tile under examples/tuned/ (and any FILE given) with `tiledsl.bench`, the
measurement `tiledsl bench` makes: each result checked with the exact and the
statistical oracle before its time counts, cuBLAS (cupy.matmul on the same f16 inputs)
timed in the same process, CUDA-event medians over inputs rotated past the L2. Then,
per size, the best row of each class against the targets:

    WMMA, any accumulation     >= 410 TFLOP/s and >= 0.56x cuBLAS
    WMMA, f32 accumulation     >= 0.50x cuBLAS
    any path, f32 accumulation >= 450 TFLOP/s and >= 0.60x cuBLAS

Prints the table and the verdicts and writes both as JSON. Exits 1 when a row fails
its check (a target missed is reported, not an error: the numbers are the result).
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from tiledsl import bench
from tiledsl.driver import compile_file
from tiledsl.run import parse_size
from tiledsl.runtime import device_info

ROOT = Path(__file__).resolve().parent.parent
TUNED = ROOT / "examples" / "tuned"



def _wmma(s) -> bool:
    return s.instruction == "wmma"


def _wmma_f32(s) -> bool:
    return s.instruction == "wmma" and s.accumulate == "f32"


def _f32(s) -> bool:
    return s.accumulate == "f32"


#: (class, which schedules belong to it, minimum TFLOP/s, minimum ratio to cuBLAS)
TARGETS = [
    ("WMMA, any accumulation", _wmma, 410.0, 0.56),
    ("WMMA, f32 accumulation", _wmma_f32, 0, 0.50),
    ("any path, f32 accumulation", _f32, 450.0, 0.60),
]


def verdicts(rows: list[bench.Row], schedules: dict[str, object]) -> list[dict]:
    out = []
    for size in sorted({r.size for r in rows}):
        mine = [r for r in rows if r.kind == "tiledsl" and r.size == size and r.ok and r.ms]
        for name, member, min_tflops, min_ratio in TARGETS:
            members = [r for r in mine if member(schedules[r.kernel])]
            best = max(members, key=lambda r: r.tflops, default=None)
            met = (
                best is not None
                and best.tflops >= min_tflops
                and best.ratio is not None
                and best.ratio >= min_ratio
            )
            out.append(
                {
                    "size": list(size),
                    "class": name,
                    "best": best.label if best else None,
                    "tflops": best.tflops if best else None,
                    "ratio_to_cublas": best.ratio if best else None,
                    "target_tflops": min_tflops or None,
                    "target_ratio": min_ratio,
                    "met": met,
                }
            )
    return out


def render(found: list[dict]) -> str:
    lines = [f"{'size':<16} {'class':<28} {'best':<24} {'TFLOP/s':>8} {'x cuBLAS':>9}  target"]
    for v in found:
        size = bench.size_label(tuple(v["size"]))
        target = (f">= {v['target_tflops']:.0f} and " if v["target_tflops"] else "") + (
            f">= {v['target_ratio']:.2f}x"
        )
        tflops = f"{v['tflops']:8.1f}" if v["tflops"] else "       -"
        ratio = f"{v['ratio_to_cublas']:9.2f}" if v["ratio_to_cublas"] else "        -"
        verdict = "MET" if v["met"] else "MISSED"
        lines.append(
            f"{size:<16} {v['class']:<28} {v['best'] or '-':<24} {tflops} {ratio}  "
            f"{target}: {verdict}"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="*", help="more .tile files to time beside examples/tuned/")
    p.add_argument("--size", action="append", help="MxNxK (repeatable; default 4096³, 8192³)")
    p.add_argument("--out", default=f"bench/results/best-{datetime.date.today()}.json")
    args = p.parse_args()
    sizes = [parse_size(s) for s in (args.size or ["4096x4096x4096", "8192x8192x8192"])]
    files = sorted(TUNED.glob("*.tile")) + [Path(f) for f in args.files]
    entries = [(f.stem, str(f)) for f in files]
    schedules = {k.name: k.schedule for f in files for k in compile_file(f).kernels}
    settings = bench.Settings(repeat=50, baselines=("cublas",))
    rows = bench.measure(entries, sizes, settings)
    print(bench.table(rows))
    found = verdicts(rows, schedules)
    print()
    print(render(found))
    document = bench.record(rows, settings, device_info())
    document["targets"] = found
    bench.save_json(document, Path(args.out))
    print(f"wrote {args.out}")
    if not all(r.ok or r.skipped for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
