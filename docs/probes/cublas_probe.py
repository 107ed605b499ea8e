# ruff: noqa: E501  (the report lines are one f-string each)
"""Probe (not part of tiledsl): which kernels cuBLAS runs at a shape, read by Nsight Compute.

    ncu --clock-control none --profile-from-start off --section LaunchStats \\
        --metrics gpu__time_duration.sum --csv --page details \\
        python3 docs/probes/cublas_probe.py 64x4096x4096 512x4096x4096 ... > cublas.csv
    python3 docs/probes/cublas_probe.py --summary cublas.csv

The first form runs `cupy.matmul` (f16 A and B, f16 C: what `tiledsl bench` times as
cuBLAS) three times at each shape on normal data, with a marker kernel (a one-thread
kernel named after the shape) before each shape's calls, the profiler on only around
them (the inputs are made first); the second turns the report into
one line per cuBLAS launch: the shape, the kernel's name (nvjet's name says its tile,
stages, cluster and split), its grid, block, cluster, registers, shared memory and time.
"""

import csv
import sys
from collections import defaultdict


def run(sizes: list[str]) -> None:
    import cupy as cp

    for label in sizes:
        m, n, k = (int(v) for v in label.split("x"))
        marker = cp.RawKernel(f'extern "C" __global__ void shape_{label}() {{}}', f"shape_{label}")
        a = cp.random.standard_normal((m, k)).astype(cp.float16)
        b = cp.random.standard_normal((k, n)).astype(cp.float16)
        c = cp.empty((m, n), cp.float16)
        cp.cuda.Device().synchronize()
        cp.cuda.profiler.start()
        marker((1,), (1,), ())
        for _ in range(3):
            cp.matmul(a, b, out=c)
        cp.cuda.Device().synchronize()
        cp.cuda.profiler.stop()


def summary(path: str) -> None:
    rows: dict[str, dict[str, str]] = defaultdict(dict)
    names: dict[str, str] = {}
    with open(path) as f:
        lines = [line for line in f if line.startswith('"')]
    for r in csv.DictReader(lines):
        rows[r["ID"]][r["Metric Name"]] = r["Metric Value"]
        names[r["ID"]] = r["Kernel Name"]
    shape = "?"
    seen = set()
    for i in sorted(rows, key=int):
        name, m = names[i], rows[i]
        if name.startswith("shape_"):
            shape = name[len("shape_") :]
            continue
        key = (shape, name)
        cluster = "x".join(m.get(f"Cluster Dimension {d}", "?") for d in "XYZ")
        print(
            f"{shape:>16} {'(again)' if key in seen else '':8}{name[:70]:70} grid {m.get('Grid Size', '?'):>6} "
            f"block {m.get('Block Size', '?'):>4} cluster {cluster:7} regs {m.get('Registers Per Thread', '?'):>4} "
            f"smem {m.get('Dynamic Shared Memory Per Block', '?'):>8} {m.get('gpu__time_duration.sum', '?'):>8}"
        )
        seen.add(key)


if __name__ == "__main__":
    if sys.argv[1] == "--summary":
        summary(sys.argv[2])
    else:
        run(sys.argv[1:])
