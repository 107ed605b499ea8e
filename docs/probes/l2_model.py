"""Model (not a measurement; runs on the CPU): the DRAM bytes a persistent Hopper kernel's
loads cost when L2 is an LRU cache, for whole tiles, stream-K and stream_k_aligned.

    python3 docs/probes/l2_model.py [--size 2048x4096x11008] [--l2-mb 50]

Each cluster (`cluster 2 x 1` of 128 x 256 tiles, BK = 64: the stream_k rung's
schedule) takes one K step per time unit: it reads its two blocks' 128 x 64 slices of A
(16 KB each) and the 64 x 256 slice of B they share (32 KB, fetched once and multicast);
`--cluster-m 1`: blocks alone.
Every unit of A and B goes through one LRU cache of the L2's size; a miss is a read of
DRAM. The clusters' work is the compiler's own split (tiledsl.ir.grid: `stream_k_split`,
`stream_k_piece`, the grouped raster), so the model's pieces are the kernel's. What it
leaves out: the partial sums' traffic, the fix-ups' waits, L2's two partitions and its
real replacement policy, and the time a miss costs: it says how many bytes each order asks
of DRAM, and at what rate if each K step took the same time.

Its question: does stream-K's last round, whose shares start all along K, miss L2 where a
round of whole tiles does not, and does taking each share's tiles last first
(`stream_k_aligned`) bring that back to whole tiles' level?
"""

from __future__ import annotations

import argparse
from collections import OrderedDict

from tiledsl.ir.expr import Var, evaluate
from tiledsl.ir.grid import raster_steps, stream_k_piece, stream_k_split, stream_k_tiles

BM, BN, BK, GROUP_M = 128, 256, 64, 8
A_BYTES, B_BYTES = BM * BK * 2, BK * BN * 2  # one block's slice of A, the cluster's of B


def cluster_tile(t: int, ctiles_m: int, ctiles_n: int) -> tuple[int, int]:
    env = {"pid": t, "tiles_m": ctiles_m, "tiles_n": ctiles_n}
    steps = raster_steps("grouped", GROUP_M)
    for name, e in steps.items():
        env[name] = evaluate(e, env)
    return env["bm"], env["bn"]


def schedules(kind: str, tiles: int, blocks: int, k_steps: int) -> list[list[tuple[int, int]]]:
    """Each cluster's (tile, K step) in the order it takes them: `tiles`, `stream_k` (as
    built: a last round fuller than SK_MAX_FILL runs whole), `stream_k unbounded` (every
    last round split, pieces in order) or `stream_k_aligned`."""
    out = []
    for pid in range(blocks):
        if kind == "tiles":
            mine = [(t, kt) for t in range(pid, tiles, blocks) for kt in range(k_steps)]
            out.append(mine)
            continue
        aligned = kind == "stream_k_aligned"
        # stream-K unbounded: its split of every last round (as stream_k_aligned's), taken
        # in order: what bench/results/stream-k-unbounded-h200-2026-12-02.json measured
        every_round = kind != "stream_k"
        env = {"tiles": tiles, "blocks": blocks, "pid": pid, "K": k_steps}
        for name, e in stream_k_split(Var("K"), aligned=every_round).items():
            env[name] = evaluate(e, env)
        mine = [
            (t, kt)
            for t in range(pid, env["dp_tiles"], blocks)  # whole tiles first
            for kt in range(k_steps)
        ]
        start, stop = (evaluate(e, env) for e in stream_k_tiles())
        for u in range(start, stop):
            at = {**env, "u": u}
            for name, e in stream_k_piece(aligned).items():
                at[name] = evaluate(e, at)
            mine += [(at["tile"], kt) for kt in range(at["k_lo"], at["k_hi"])]
        out.append(mine)
    return out


def dram_bytes(kind: str, size: tuple[int, int, int], clusters: int, cm: int, l2_bytes: int):
    """(DRAM bytes per time unit, the operands' bytes) over the kernel's time units, for
    clusters of `cm` x 1 blocks."""
    m, n, k = size
    ctiles_m, ctiles_n = -(-m // (BM * cm)), -(-n // BN)
    k_steps = -(-k // BK)
    work = schedules(kind, ctiles_m * ctiles_n, clusters, k_steps)
    places = [cluster_tile(t, ctiles_m, ctiles_n) for t in range(ctiles_m * ctiles_n)]
    cache: OrderedDict = OrderedDict()
    held = 0
    per_unit = []
    for time in range(max(len(w) for w in work)):
        missed = 0
        for mine in work:
            if time >= len(mine):
                continue
            tile, kt = mine[time]
            cbm, cbn = places[tile]
            loads = [(("A", cm * cbm + r, kt), A_BYTES) for r in range(cm)]
            loads.append((("B", cbn, kt), B_BYTES))
            for key, nbytes in loads:
                if key in cache:
                    cache.move_to_end(key)
                    continue
                missed += nbytes
                cache[key] = nbytes
                held += nbytes
                while held > l2_bytes:
                    _, evicted = cache.popitem(last=False)
                    held -= evicted
        per_unit.append(missed)
    operands = 2 * (m * k + k * n)
    return per_unit, operands


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="2048x4096x11008")
    ap.add_argument("--cluster-m", type=int, default=2, help="blocks along M a cluster")
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--l2-mb", type=float, default=50.0)
    ap.add_argument("--step-us", type=float, default=0.6, help="one K step's time")
    args = ap.parse_args()
    size = tuple(int(x) for x in args.size.split("x"))
    l2 = int(args.l2_mb * 2**20)
    clusters = args.sms // args.cluster_m
    print(
        f"{args.size}, {clusters} clusters of {args.cluster_m} x 1, L2 {args.l2_mb} MB (LRU), "
        f"a K step {args.step_us} µs"
    )
    print(
        f"{'order':18} {'units':>5} {'DRAM MB':>8} {'x operands':>10} {'last round: MB':>14} "
        f"{'TB/s':>6}"
    )
    for kind in ("tiles", "stream_k", "stream_k unbounded", "stream_k_aligned"):
        per_unit, operands = dram_bytes(kind, size, clusters, args.cluster_m, l2)
        k_steps = -(-size[2] // BK)
        last = per_unit[k_steps:] if len(per_unit) > k_steps else per_unit
        rate = sum(last) / (len(last) * args.step_us * 1e-6) / 1e12
        print(
            f"{kind:18} {len(per_unit):5} {sum(per_unit) / 1e6:8.1f} "
            f"{sum(per_unit) / operands:10.2f} {sum(last) / 1e6:14.1f} {rate:6.2f}"
        )


if __name__ == "__main__":
    main()
