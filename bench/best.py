"""The tuned schedules against cuBLAS, judged against their performance targets, on this GPU.

    python3 bench/best.py [--size 4096x4096x4096 --size 8192x8192x8192] [--out PATH.json]
                          [FILE.tile ...]
    python3 bench/best.py --from-json RUN.json [FILE.tile ...]   # judge a run again, no GPU

Times every .tile under examples/tuned/ (and any FILE given) with `tiledsl bench`'s code
(`tiledsl.commands.bench`): each result checked with the exact and the statistical oracle
before its time counts, cuBLAS (cupy.matmul on the same f16 inputs) timed in the same
process, CUDA-event medians over inputs rotated past the L2. Then, per size, the best row
of each class against its target (the ratio against the fastest cuBLAS time of the run at
that size, so a slow cuBLAS sample meets nothing):

    WMMA, any accumulation     >= 410 TFLOP/s and >= 0.56x cuBLAS
    WMMA, f32 accumulation     >= 0.50x cuBLAS
    any path, f32 accumulation >= 450 TFLOP/s and >= 0.60x cuBLAS

Prints the table and the verdicts and writes both as JSON (default
bench/results/best-GPU-DATE.json). Exits 1 when a row fails its check (a target missed is
reported, not an error: the numbers are the result). docs/performance.md has the
measured table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

from tiledsl.commands import bench
from tiledsl.commands.run import parse_size
from tiledsl.driver import compile_file
from tiledsl.gpu.runtime import device_info

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


def verdicts(rows: list[dict], schedules: dict[str, object]) -> list[dict]:
    """Per size and target class, the best checked row against the target.

    The ratio is taken against the fastest cuBLAS time measured at that size in the run
    (every tiledsl row gets its own cuBLAS row; on the H200 those vary by up to 20%,
    725-892 TFLOP/s at 8192³ in one run), so that a slow cuBLAS sample cannot meet a
    target for us. `rows` are `bench.Row.to_json()` dicts, as the JSON keeps them.
    """
    out = []
    for size in sorted({tuple(r["size"]) for r in rows}):
        at_size = [r for r in rows if tuple(r["size"]) == size and r["ok"] and r["time_ms"]]
        cublas = min((r["time_ms"] for r in at_size if r["kind"] == "cublas"), default=None)
        mine = [r for r in at_size if r["kind"] == "tiledsl"]
        for name, member, min_tflops, min_ratio in TARGETS:
            members = [r for r in mine if member(schedules[r["kernel"]])]
            best = max(members, key=lambda r: r["tflops"], default=None)
            ratio = cublas / best["time_ms"] if best and cublas else None
            met = (
                best is not None
                and best["tflops"] >= min_tflops
                and ratio is not None
                and ratio >= min_ratio
            )
            out.append(
                {
                    "size": list(size),
                    "class": name,
                    "best": best["label"] if best else None,
                    "tflops": best["tflops"] if best else None,
                    "cublas_tflops": 2 * size[0] * size[1] * size[2] / (cublas * 1e9)
                    if cublas
                    else None,
                    "ratio_to_cublas": ratio,
                    "target_tflops": min_tflops or None,
                    "target_ratio": min_ratio,
                    "met": met,
                }
            )
    return out


def render(found: list[dict]) -> str:
    lines = [
        f"{'size':<16} {'class':<28} {'best':<24} {'TFLOP/s':>8} {'cuBLAS':>7} "
        f"{'x cuBLAS':>9}  target"
    ]
    for v in found:
        size = bench.size_label(tuple(v["size"]))
        target = (f">= {v['target_tflops']:.0f} and " if v["target_tflops"] else "") + (
            f">= {v['target_ratio']:.2f}x"
        )
        tflops = f"{v['tflops']:8.1f}" if v["tflops"] else "       -"
        ratio = f"{v['ratio_to_cublas']:9.2f}" if v["ratio_to_cublas"] else "        -"
        ratio = (f"{v['cublas_tflops']:7.1f} " if v["cublas_tflops"] else "      - ") + ratio
        verdict = "MET" if v["met"] else "MISSED"
        lines.append(
            f"{size:<16} {v['class']:<28} {v['best'] or '-':<24} {tflops} {ratio}  "
            f"{target}: {verdict}"
        )
    return "\n".join(lines)


def best_at(rows: list[dict], size: tuple) -> tuple[dict | None, float | None, float | None]:
    """At `size`: the fastest checked tiledsl row, and the fastest cuBLAS and Triton times
    of the run (a slow baseline sample flatters nothing)."""
    at = [r for r in rows if tuple(r["size"]) == size and r["ok"] and r["time_ms"]]

    def fastest(kind: str) -> float | None:
        return min((r["time_ms"] for r in at if r["kind"] == kind), default=None)

    mine = [r for r in at if r["kind"] == "tiledsl"]
    return min(mine, key=lambda r: r["time_ms"], default=None), fastest("cublas"), fastest("triton")


def default_out(name: str) -> Path:
    """bench/results/NAME-GPU-DATE.json: the name a canonical result keeps."""
    gpu = device_info()["name"].removeprefix("NVIDIA ").lower().replace(" ", "-")
    return ROOT / "bench" / "results" / f"{name}-{gpu}-{datetime.date.today()}.json"


def timing_arguments(p: argparse.ArgumentParser) -> None:
    """--repeat and --rounds, as bench/hopper.py and bench/shapes.py take them."""
    p.add_argument("--repeat", type=int, default=30, help="timed runs per row (default 30)")
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="time each row and its baselines this many times, taking turns (default 1)",
    )


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("files", nargs="*", help="more .tile files to time beside examples/tuned/")
    p.add_argument(
        "--size", action="append", metavar="MxNxK", help="repeatable; default 4096³ and 8192³"
    )
    p.add_argument("--out", default=None, help="JSON path (default bench/results/best-GPU-DATE)")
    p.add_argument(
        "--from-json",
        metavar="PATH",
        help="no GPU: read the rows of an earlier run's JSON and judge them again "
        "(FILEs name the extra schedules that run timed)",
    )
    args = p.parse_args()
    files = sorted(TUNED.glob("*.tile")) + [Path(f) for f in args.files]
    schedules = {k.name: k.schedule for f in files for k in compile_file(f).kernels}
    if args.from_json:
        document = json.loads(Path(args.from_json).read_text())
        found = verdicts(document["rows"], schedules)
        print(render(found))
        document["targets"] = found
        out = Path(args.out) if args.out else Path(args.from_json).with_suffix(".judged.json")
        bench.save_json(document, out)
        print(f"wrote {out}")
        return
    sizes = [parse_size(s) for s in (args.size or ["4096x4096x4096", "8192x8192x8192"])]
    entries = [(f.stem, str(f)) for f in files]
    settings = bench.Settings(repeat=50, baselines=("cublas",))
    rows = bench.measure(entries, sizes, settings)
    print(bench.table(rows))
    found = verdicts([r.to_json() for r in rows], schedules)
    print()
    print(render(found))
    document = bench.record(rows, settings, device_info())
    document["targets"] = found
    out = Path(args.out) if args.out else default_out("best")
    bench.save_json(document, out)
    print(f"wrote {out}")
    if not all(r.ok or r.skipped for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
