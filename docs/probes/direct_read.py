"""Probe (not part of tiledsl): the direct path's reads without its math. Where does the
direct path (`mma m16n8k16`, `stages 0`) lose to a plain read of the weights at few
tokens: in the order it reads them, or in the rest of the kernel (its mmas, the K teams'
adds, the launch of whole tiles)?

Readers of the same weights, timed in one process beside the tuned direct kernel and
cuBLAS on the same rotated input sets (tiledsl's own launcher and timing loop):

- `tiles W`: the direct kernel's loads exactly (blocks of 16 weight rows, W warps a block
  on K steps of 128 in turn, each lane 16 bytes of rows g and g + 8 at column
  32 j + 8 (lane % 4) of each 32-column group j), folded into a word instead of
  multiplied: the direct kernel less its mmas, its adds and its stores;
- `tiles W fronts F`: the block's W warps in F groups, group f on the f-th run of 1/F of
  the tile's K steps (its warps on those in turn): F places along K a block reads at
  once, with the same blocks and the same sum in one block (built since as `warps_k W
  runs F`);
- `tiles W split S`: each tile's K cut into S parts, a block each (S x the blocks, each
  1/S as long): whether the kernel's tail (the last blocks of a long K) costs;
- `tiles W rotated`: tile b starts its K loop 13 b steps into its rows, wrapping round,
  so that the blocks do not all read the same columns at once;
- `rows U`: a warp a weight row, its lanes on consecutive 16-byte vectors (512 bytes of
  the row an instruction where the direct path's lanes read 64 bytes of each of 8 rows),
  U instructions in flight, 8 rows a block (and `split S`: each row in S parts, a block
  each): whether the bytes of one row an instruction reads are what the tiles lose by;
- `stream`: the read floor's plain reader (docs/probes/read_floor.py: every thread 16-byte
  vectors, UNROLL in flight, blocks striding over the whole matrix) at its best launch.

    python3 docs/probes/direct_read.py [--sizes 1x4096x11008 1x12288x4096] [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cupy as cp
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(Path(__file__).parent))
from read_floor import LDG_SOURCE, NEVER  # noqa: E402
from shapes import copy_bandwidth, operand_bytes  # noqa: E402

import tiledsl.driver as driver  # noqa: E402
from tiledsl.commands.run import Report, check_size, gpu_checks, kernel_calls  # noqa: E402
from tiledsl.gpu import runtime  # noqa: E402
from tiledsl.gpu.baselines import cublas  # noqa: E402
from tiledsl.gpu.timing import CudaClock, rotated_sets, time_calls  # noqa: E402

TILES_SOURCE = r"""
extern "C" __global__ void __launch_bounds__(32 * TEAMS)
read_tiles_TEAMS_FRONTS_SPLIT_ROTATE(const unsigned short* __restrict__ w, int n, int k,
                                     unsigned* sink) {
    // block: tile blockIdx.x / SPLIT (16 rows), part blockIdx.x % SPLIT of its K steps;
    // its teams in FRONTS groups, group f on the f-th of FRONTS runs of the part's steps
    constexpr int GROUP = TEAMS / FRONTS;
    const int lane = threadIdx.x % 32, team = threadIdx.x / 32;
    const int g = lane / 4, t = lane % 4, front = team / GROUP;
    const int row0 = (blockIdx.x / SPLIT) * 16 + g;
    const int steps = k / 128, part = blockIdx.x % SPLIT;
    const int lo = part * steps / SPLIT, hi = (part + 1) * steps / SPLIT;
    const int first = lo + front * (hi - lo) / FRONTS, last = lo + (front + 1) * (hi - lo) / FRONTS;
    const unsigned short* r0 = w + (long long)row0 * k + 8 * t;
    const unsigned short* r1 = r0 + 8LL * k;
    unsigned fold = 0;
    for (int at = first + team % GROUP; at < last; at += GROUP) {
        uint4 v[8];
        // ROTATE: tile b starts 13 b steps into its row, wrapping round (split 1 only)
        const int step = ROTATE ? (at + 13 * (int)blockIdx.x) % steps : at;
        #pragma unroll
        for (int j = 0; j < 4; ++j) {  // the step's four 32-column groups, two rows each
            const bool in = row0 < n;
            const int col = step * 128 + 32 * j;
            const uint4 zero = make_uint4(0, 0, 0, 0);
            v[2 * j] = in ? __ldg(reinterpret_cast<const uint4*>(r0 + col)) : zero;
            v[2 * j + 1] = in ? __ldg(reinterpret_cast<const uint4*>(r1 + col)) : zero;
        }
        #pragma unroll
        for (int i = 0; i < 8; ++i) fold ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
    }
    if (fold == NEVER) sink[0] = fold;
}
"""

ROWS_SOURCE = r"""
extern "C" __global__ void __launch_bounds__(256)
read_rows_UNROLL_SPLIT(const uint4* __restrict__ w, int n, int k, unsigned* sink) {
    // a warp a row (8 a block), its lanes on consecutive 16-byte vectors: 512 bytes of the
    // row an instruction, UNROLL of them in flight; part blockIdx.x % SPLIT of the row
    const int lane = threadIdx.x % 32;
    const int row = (blockIdx.x / SPLIT) * 8 + threadIdx.x / 32, part = blockIdx.x % SPLIT;
    const int vectors = k / 8, lo = part * vectors / SPLIT, hi = (part + 1) * vectors / SPLIT;
    const uint4* r = w + (long long)row * vectors;
    unsigned fold = 0;
    if (row < n) {
        for (int i = lo + lane; i < hi; i += 32 * UNROLL) {
            uint4 v[UNROLL];
            #pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                v[u] = i + 32 * u < hi ? __ldg(r + i + 32 * u) : make_uint4(0, 0, 0, 0);
            #pragma unroll
            for (int u = 0; u < UNROLL; ++u) fold ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
        }
    }
    if (fold == NEVER) sink[0] = fold;
}
"""
#: (unroll, split) of the row readers.
ROW_READERS = [(4, 1), (8, 1), (4, 2), (4, 4)]

#: (teams, fronts, split, rotate) of the tile readers.
TILE_READERS = [
    (8, 1, 1, 0),
    (16, 1, 1, 0),
    (8, 1, 1, 1),
    (8, 2, 1, 0),
    (16, 4, 1, 0),
    (8, 1, 2, 0),
    (8, 1, 4, 0),
    (16, 1, 2, 0),
]
#: (unroll, blocks, threads) of the stream reader: the read floor's best launches.
STREAM_READERS = [(4, 528, 512), (8, 264, 1024), (4, 1056, 256)]


def tile_reader(teams: int, fronts: int, split: int, rotate: int):
    name = f"read_tiles_{teams}_{fronts}_{split}_{rotate}"
    source = (
        TILES_SOURCE.replace("TEAMS_FRONTS_SPLIT_ROTATE", f"{teams}_{fronts}_{split}_{rotate}")
        .replace("ROTATE", str(rotate))
        .replace("TEAMS", str(teams))
        .replace("FRONTS", str(fronts))
        .replace("SPLIT", str(split))
        .replace("NEVER", f"{NEVER}u")
    )
    kernel = cp.RawKernel(source, name, options=("-arch=sm_90a",))

    def launch(w, n: int, k: int, sink) -> None:
        kernel((-(-n // 16) * split,), (32 * teams,), (w, np.int32(n), np.int32(k), sink))

    label = (
        f"tiles {teams}"
        + (f" fronts {fronts}" if fronts > 1 else "")
        + (f" split {split}" if split > 1 else "")
        + (" rotated" if rotate else "")
    )
    return label, launch


def row_reader(unroll: int, split: int):
    source = (
        ROWS_SOURCE.replace("UNROLL_SPLIT", f"{unroll}_{split}")
        .replace("UNROLL", str(unroll))
        .replace("SPLIT", str(split))
        .replace("NEVER", f"{NEVER}u")
    )
    kernel = cp.RawKernel(source, f"read_rows_{unroll}_{split}", options=("-arch=sm_90a",))

    def launch(w, n: int, k: int, sink) -> None:
        kernel((-(-n // 8) * split,), (256,), (w, np.int32(n), np.int32(k), sink))

    return f"rows {unroll}" + (f" split {split}" if split > 1 else ""), launch


def stream_reader(unroll: int, blocks: int, threads: int):
    source = LDG_SOURCE.replace("UNROLL", str(unroll)).replace("NEVER", f"{NEVER}u")
    kernel = cp.RawKernel(source, f"read_ldg_{unroll}", options=("-arch=sm_90a",))

    def launch(w, n: int, k: int, sink) -> None:
        kernel((blocks,), (threads,), (w, cp.int64(n * k * 2 // 16), sink))

    return f"stream {unroll}, {blocks} x {threads}", launch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", nargs="+", default=["1x4096x11008", "1x12288x4096"])
    ap.add_argument("--tile", default="examples/tuned/few_tokens_direct.tuned.tile")
    ap.add_argument("--kernel", default="few_tokens_direct_1")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    compiled = driver.compile_file(Path(args.tile))
    index = [k.name for k in compiled.kernels].index(args.kernel)
    k, launch = compiled.kernels[index], compiled.launches[index]
    arch = runtime.device_arch()
    arch = arch + "a" if arch == "sm_90" else arch
    run = runtime.launcher(
        runtime.load_module(compiled.source_for((k,)), arch, name="direct_read.cu"), launch
    )
    clock = CudaClock(arch)
    readers = [tile_reader(*r) for r in TILE_READERS]
    readers += [row_reader(*r) for r in ROW_READERS]
    readers += [stream_reader(*r) for r in STREAM_READERS]
    sink = cp.zeros(1, cp.uint32)
    rate = copy_bandwidth()
    print(f"copy rate {rate / 1e12:.2f} TB/s; kernel {k.name} of {args.tile}")
    for text in args.sizes:
        size = tuple(int(v) for v in text.split("x"))
        m, n, kk = size
        sizes = check_size(k, size)
        report = Report(k.name, size, "probe")
        gpu_checks(k, run, sizes, size, np.random.default_rng(1), report, Path("/tmp"))
        assert all(c.ok for c in report.checks), report.checks
        sets, set_bytes = rotated_sets(size, 0, "ints")
        work = {"direct kernel": kernel_calls(k, run, sizes, size, sets)}
        work["cuBLAS"] = cublas().calls(k.gemm, size, sets)
        for label, read in readers:
            work[label] = [
                lambda b=b, read=read, n=n, kk=kk: read(b, n, kk, sink) for _a, b in sets
            ]
        times: dict[str, list[float]] = {name: [] for name in work}
        order = list(work)
        for round_ in range(args.rounds):
            shift = round_ % len(order)
            for name in order[shift:] + order[:shift]:
                t = time_calls(work[name], clock, repeat=args.repeat, set_bytes=set_bytes)
                times[name].append(t.median_ms)
        bound_ms = operand_bytes(size) / rate * 1e3
        print(f"\n{text}: the bound {bound_ms * 1e3:.1f} µs; median over {args.rounds} rounds")
        for name in order:
            ms = float(np.median(times[name]))
            print(f"  {name:28} {ms * 1e3:7.2f} µs  {bound_ms / ms:.3f} of the bound", flush=True)


if __name__ == "__main__":
    main()
