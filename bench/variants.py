"""Time several .tile schedules on the GPU, exact-checked, against cuBLAS in the same process.

    python bench/variants.py examples/hgemm.tile examples/ladder/*.tile --size 4096x4096x4096

Prints a table and writes JSON to bench/results/ (the GPU, sizes and date included).
`tiledsl bench` will replace this script once it exists.
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

from tiledsl.driver import compile_file
from tiledsl.run import parse_size, run_gpu
from tiledsl.runtime import device_name


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("files", nargs="+")
    p.add_argument("--size", action="append", default=None)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    sizes = [parse_size(s) for s in args.size or ["4096x4096x4096"]]
    rows = []
    for file in args.files:
        compiled = compile_file(file)
        for kernel, launch in zip(compiled.kernels, compiled.launches):
            for size in sizes:
                report = run_gpu(kernel, compiled.source, launch, size)
                rows.append(
                    {
                        "file": file,
                        "kernel": kernel.name,
                        "size": list(size),
                        "ok": report.ok,
                        "checks": [c.detail for c in report.checks],
                        "time_ms": report.time_ms,
                        "tflops": report.tflops,
                        "cublas_ms": report.cublas_ms,
                        "ratio_to_cublas": (report.cublas_ms / report.time_ms)
                        if report.time_ms
                        else None,
                    }
                )
                print(report.render(), flush=True)
    print(
        f"\n{'file':<34} {'size':<16} {'ok':<5} {'ms':>8} {'TFLOP/s':>8} {'cuBLAS':>8} {'ratio':>6}"
    )
    for r in rows:
        size = "x".join(map(str, r["size"]))
        if r["time_ms"]:
            cublas = 2 * r["size"][0] * r["size"][1] * r["size"][2] / (r["cublas_ms"] * 1e9)
            print(
                f"{r['file']:<34} {size:<16} {str(r['ok']):<5} {r['time_ms']:>8.3f} "
                f"{r['tflops']:>8.1f} {cublas:>8.1f} {r['ratio_to_cublas']:>6.2f}"
            )
        else:
            print(f"{r['file']:<34} {size:<16} {str(r['ok']):<5}")
    record = {
        "device": device_name(),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "rows": rows,
    }
    out = Path(args.out or f"bench/results/variants-{datetime.date.today()}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
