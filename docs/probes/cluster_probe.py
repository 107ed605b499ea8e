"""Probe (not part of tiledsl): what does a cluster cost a few-token kernel, and is the cost
paid once per launch or once per K step?

On the H200 (2026-12-04, bench/results/tune-small_m_cluster_space-h200-2026-12-04.jsonl)
every clustered point of the few-token spaces ran slower than the same tile without a
cluster, up to 46 % at 64 and 128 tokens (128 x 4096 x 4096, 64 x 64 tiles, 12 stages:
17.0 µs alone, 19.0 in `cluster 2 x 1`, 19.5 in `cluster 1 x 2`), where cuBLAS runs
clusters of these tiles faster than tiledsl runs them alone. This probe times one
schedule written with each cluster shape at a sweep of K (the same M and N, so the same
blocks and tiles), through tiledsl's own launcher, oracles and timing loop (`tiledsl
bench`'s code: every row exact-checked first, cuBLAS beside it, rounds interleaved), and
fits each variant's median time as `fixed + per_step * K / BK`. A cluster whose extra cost
sits in `fixed` pays at launch and exit (the cluster barrier at start and end, the
co-scheduling of its blocks); one whose extra cost sits in `per_step` pays in the pipeline
(the remote releases, the multicast copies, the coupling of the blocks' stages).

    python3 docs/probes/cluster_probe.py [--tile FILE] [--kernel NAME] [--m 128] [--n 4096]
                                         [--k 512 1024 2048 4096 8192] [--rounds 3]
                                         [--cluster 1x1 2x1 1x2]

The default schedule is `small_m_cluster_2` of examples/tuned/small_m_cluster.tuned.tile
(64 x 64 x 64, m64n64k16, 12 stages, persistent, TMA epilogue).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from tiledsl.commands import bench
from tiledsl.frontend.formatter import format_program
from tiledsl.frontend.parser import parse

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TILE = ROOT / "examples" / "tuned" / "small_m_cluster.tuned.tile"


def kernel_text(tile: Path, name: str | None) -> str:
    """The one kernel `name` of `tile` (its first without a name), as its own file's text."""
    program = parse(tile.read_text(), str(tile))
    kernels = tuple(k for k in program.kernels if name in (None, k.name))
    if not kernels:
        sys.exit(f"cluster_probe: no kernel {name!r} in {tile}")
    return format_program(replace(program, kernels=kernels[:1]))


def with_cluster(text: str, cm: int, cn: int) -> str:
    """`text` with its cluster line set to `cluster CM x CN` (added before `swizzle` or
    `target` when it has none), the kernel renamed after it."""
    text = re.sub(r"^kernel (\w+)", rf"kernel \1_c{cm}x{cn}", text, count=1, flags=re.M)
    line = f"cluster {cm} x {cn}"
    if re.search(r"^\s*cluster\b", text, re.M):
        return re.sub(r"^(\s*)cluster\b.*$", rf"\g<1>{line}", text, count=1, flags=re.M)
    return re.sub(r"^(\s*)(swizzle|target)\b", rf"\g<1>{line}\n\g<1>\2", text, count=1, flags=re.M)


def fit(ks: list[int], ms: list[float], bk: int) -> tuple[float, float]:
    """Least squares `ms = fixed + per_step * K / bk`: (fixed µs, per-step ns)."""
    steps = np.array(ks, dtype=float) / bk
    per_step, fixed = np.polyfit(steps, np.array(ms) * 1e3, 1)
    return float(fixed), float(per_step * 1e3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tile", type=Path, default=DEFAULT_TILE)
    ap.add_argument("--kernel", default="small_m_cluster_2")
    ap.add_argument("--m", type=int, default=128)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192])
    ap.add_argument("--cluster", nargs="+", default=["1x1", "2x1", "1x2"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()

    base = kernel_text(args.tile, args.kernel)
    block = re.search(r"^\s*block\s+\d+\s*x\s*\d+\s*x\s*(\d+)", base, re.M)
    if block is None:
        sys.exit(f"cluster_probe: {args.kernel} has no block line")
    bk = int(block.group(1))
    folder = Path(tempfile.mkdtemp(prefix="cluster_probe_"))
    entries = []
    for shape in args.cluster:
        cm, cn = (int(v) for v in shape.split("x"))
        path = folder / f"c{cm}x{cn}.tile"
        path.write_text(with_cluster(base, cm, cn))
        entries.append((f"c{cm}x{cn}", str(path)))
    sizes = [(args.m, args.n, k) for k in args.k]
    settings = bench.Settings(
        repeat=args.repeat, warmup=10, baselines=("cublas",), rounds=args.rounds
    )
    rows = bench.measure(entries, sizes, settings)
    print(bench.table(rows))
    if not all(r.ok or r.skipped for r in rows):
        sys.exit("cluster_probe: a row failed its check")

    def fastest_median_ms(label: str, size) -> float:
        # the fastest of a label's rows at a size (every variant has a cuBLAS row of its own)
        times = [
            r.timing.median_ms for r in rows if r.label == label and r.size == size and r.timing
        ]
        return min(times)

    print(f"\nfit: median µs = fixed + per_step x K / {bk}, at {args.m} x {args.n} x K")
    labels = [label for label, _ in entries] + ["cuBLAS"]
    for label in labels:
        ms = [fastest_median_ms(label, s) for s in sizes]
        fixed, per_step = fit(args.k, ms, bk)
        times = "  ".join(f"K={k}: {t * 1e3:6.1f}" for k, t in zip(args.k, ms, strict=True))
        print(f"{label:8} fixed {fixed:6.2f} µs  per step {per_step:6.1f} ns   {times}")


if __name__ == "__main__":
    main()
