"""Time .tile schedules on the GPU, exact-checked, against cuBLAS in the same process.

    python bench/variants.py examples/hgemm.tile examples/ladder/*.tile --size 4096x4096x4096

Prints a table and writes JSON to bench/results/ (GPU, sizes and date included).
`tiledsl bench` will replace this once it exists; bench/ladder.py uses `measure`.
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

from tiledsl.driver import compile_file
from tiledsl.run import parse_size, run_gpu
from tiledsl.runtime import device_name


def measure(entries: list[tuple[str, str]], sizes, repeat: int = 30) -> list[dict]:
    """entries: (label, .tile path). One row per kernel and size; failures are rows too."""
    rows = []
    for label, file in entries:
        compiled = compile_file(file)
        for kernel, launch in zip(compiled.kernels, compiled.launches):
            for size in sizes:
                report = run_gpu(kernel, compiled.source, launch, size, repeat=repeat)
                m, n, k = size
                rows.append(
                    {
                        "label": label,
                        "file": file,
                        "kernel": kernel.name,
                        "size": list(size),
                        "ok": report.ok,
                        "checks": [c.detail for c in report.checks],
                        "time_ms": report.time_ms,
                        "tflops": report.tflops,
                        "cublas_ms": report.cublas_ms,
                        "cublas_tflops": 2 * m * n * k / (report.cublas_ms * 1e9)
                        if report.cublas_ms
                        else None,
                        "ratio_to_cublas": report.cublas_ms / report.time_ms
                        if report.time_ms
                        else None,
                    }
                )
                print(report.render(), flush=True)
    return rows


def table(rows: list[dict]) -> str:
    out = [
        f"{'schedule':<28} {'size':<16} {'exact':<6} {'ms':>8} {'TFLOP/s':>8} "
        f"{'cuBLAS':>8} {'ratio':>6}"
    ]
    for r in rows:
        size = "x".join(map(str, r["size"]))
        if r["time_ms"]:
            out.append(
                f"{r['label']:<28} {size:<16} {'PASS' if r['ok'] else 'FAIL':<6} "
                f"{r['time_ms']:>8.3f} {r['tflops']:>8.1f} {r['cublas_tflops']:>8.1f} "
                f"{r['ratio_to_cublas']:>6.2f}"
            )
        else:
            out.append(f"{r['label']:<28} {size:<16} {'FAIL':<6}")
    return "\n".join(out)


def save(rows: list[dict], path: Path) -> None:
    record = {
        "device": device_name(),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "rows": rows,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {path}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("files", nargs="+")
    p.add_argument("--size", action="append", default=None)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    sizes = [parse_size(s) for s in args.size or ["4096x4096x4096"]]
    rows = measure([(Path(f).stem, f) for f in args.files], sizes)
    print()
    print(table(rows))
    save(rows, Path(args.out or f"bench/results/variants-{datetime.date.today()}.json"))


if __name__ == "__main__":
    main()
