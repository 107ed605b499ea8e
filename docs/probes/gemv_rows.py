"""Probe (not part of tiledsl): a few-token product computed the way a read of the
weights reads them. Does a kernel that multiplies keep the row reader's rate?

The direct path (`mma m16n8k16`, `stages 0`) loses 0.07-0.09 of the memory bound to a
read of its weights at 1 x 4096 x 11008 on the H100, and its loads alone ("tiles": 64
bytes of each of 8 rows an instruction) read slower than a warp a row ("rows": 512
bytes of one row an instruction, 0.89-0.91 of the bound; docs/probes/direct_read.py).
With one token the product needs no tensor core: a row of C is a dot product, 2 flops a
weight, about nothing beside the read. So this kernel is the row reader with the math:

- `gemv U split S`: a warp a weight row (8 a block), its lanes on consecutive 16-byte
  vectors of the row (512 bytes an instruction), U vectors a lane in flight, loaded with
  `ld.global.nc.L1::no_allocate` (the weights stream past L1); the token's matching
  vectors by `__ldg` (8 warps and every block read the same ones: L1 and L2 hits), each
  pair of halves converted and added into the lane's f32 sum by `fma`; the warp's sums
  added by a butterfly of shuffles (a fixed tree: the same bits every run). S > 1: each
  row's K in S parts, a block a part; each part's sums go to a workspace, and the block
  that draws a tile's last ticket (an `atom.add.acq_rel.gpu`, as `split_k` does) adds the
  S parts in part order and stores C, so the bits do not depend on which part finished
  last.

Timed as `tiledsl bench` times (an event pair around each call, behind the hold kernel,
weights rotated past 2 x L2), beside cuBLAS (`x @ W.T`), the direct path's tuned split
file as `tiledsl.load` would call it, and the row reader; each kernel's C first compared
bit for bit with cuBLAS's (small integers: every sum exact in f32, C rounded once).

    python3 docs/probes/gemv_rows.py [--sizes 1x4096x11008 ...] [--rounds 3]
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
from direct_read import row_reader  # noqa: E402
from shapes import copy_bandwidth, operand_bytes  # noqa: E402

import tiledsl.driver as driver  # noqa: E402
from tiledsl.gpu import runtime  # noqa: E402
from tiledsl.gpu.timing import CudaClock, rotation_count, time_calls  # noqa: E402
from tiledsl.tune.dispatch import choose_kernel, read_table, table_path  # noqa: E402

GEMV_SOURCE = r"""
#include <cuda_fp16.h>
__device__ __forceinline__ uint4 stream_load(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ float dot8(uint4 w, uint4 x, float sum) {
    const __half2* wh = reinterpret_cast<const __half2*>(&w);
    const __half2* xh = reinterpret_cast<const __half2*>(&x);
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 a = __half22float2(wh[i]), b = __half22float2(xh[i]);
        sum = fmaf(a.x, b.x, sum);
        sum = fmaf(a.y, b.y, sum);
    }
    return sum;
}
extern "C" __global__ void __launch_bounds__(256)
gemv_UNROLL_SPLIT(const uint4* __restrict__ x, const uint4* __restrict__ w, __half* c,
                  float* work, unsigned* tickets, int n, int k) {
    // a warp a row (8 a block); block b: rows (b / SPLIT) * 8 + warp, part b % SPLIT of K
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int tile = blockIdx.x / SPLIT, part = blockIdx.x % SPLIT;
    const int row = tile * 8 + warp;
    const int vectors = k / 8, lo = part * vectors / SPLIT, hi = (part + 1) * vectors / SPLIT;
    float sum = 0.0f;
    if (row < n) {
        const uint4* r = w + (long long)row * vectors;
        for (int i = lo + lane; i < hi; i += 32 * UNROLL) {
            uint4 v[UNROLL];
            #pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                v[u] = i + 32 * u < hi ? stream_load(r + i + 32 * u) : make_uint4(0, 0, 0, 0);
            #pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                if (i + 32 * u < hi) sum = dot8(v[u], __ldg(x + i + 32 * u), sum);
        }
    }
    #pragma unroll
    for (int d = 16; d > 0; d /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, d);
    if (SPLIT == 1) {
        if (lane == 0 && row < n) c[row] = __float2half_rn(sum);
        return;
    }
    __shared__ unsigned ticket;
    if (lane == 0) work[blockIdx.x * 8 + warp] = sum;
    __syncthreads();  // every warp's part stored before the ticket releases them
    if (threadIdx.x == 0) {
        unsigned t;
        asm volatile("atom.add.acq_rel.gpu.u32 %0, [%1], 1;\n"
                     : "=r"(t) : "l"(tickets + tile) : "memory");
        ticket = t;
        if (t == SPLIT - 1) tickets[tile] = 0;  // the last part: ready for the next launch
    }
    __syncthreads();
    if (ticket != SPLIT - 1 || lane != 0 || row >= n) return;
    float total = 0.0f;
    for (int p = 0; p < SPLIT; ++p) total += __ldcg(work + (tile * SPLIT + p) * 8 + warp);
    c[row] = __float2half_rn(total);
}
"""

#: (unroll, split) of the GEMV kernels.
GEMVS = [(4, 1), (8, 1), (4, 2), (8, 2), (4, 4)]


def gemv(unroll: int, split: int):
    source = GEMV_SOURCE.replace("UNROLL_SPLIT", f"{unroll}_{split}")
    source = source.replace("UNROLL", str(unroll)).replace("SPLIT", str(split))
    kernel = cp.RawKernel(source, f"gemv_{unroll}_{split}", options=("-arch=sm_90a",))
    state: dict[int, tuple] = {}

    def launch(x, w, c, n: int, k: int) -> None:
        tiles = -(-n // 8)
        if tiles not in state:
            state[tiles] = (cp.zeros(tiles * split * 8, cp.float32), cp.zeros(tiles, cp.uint32))
        work, tickets = state[tiles]
        kernel((tiles * split,), (256,), (x, w, c, work, tickets, np.int32(n), np.int32(k)))

    return f"gemv {unroll}" + (f" split {split}" if split > 1 else ""), launch


def direct_split(size):
    """The direct path's tuned split file, as tiledsl.load calls it at `size`: (C, call)."""
    tile = ROOT / "examples/tuned/few_tokens_direct_split.tuned.tile"
    compiled = driver.compile_file(tile)
    table = read_table(table_path(tile))
    chosen = choose_kernel(tuple(compiled.kernels), size, table=table)
    index = [k.name for k in compiled.kernels].index(chosen.kernel.name)
    arch = runtime.device_arch()
    arch = arch + "a" if arch == "sm_90" else arch
    source = compiled.source_for((chosen.kernel,))
    run = runtime.launcher(
        runtime.load_module(source, arch, name="gemv_direct.cu"), compiled.launches[index]
    )
    g = chosen.kernel.gemm.as_written
    m, n, _ = size
    c = cp.zeros(m * n, cp.float16)

    def call(x, w) -> None:
        run({g.a.name: x.ravel(), g.b.name: w.ravel(), g.c.name: c}, chosen.params)

    return chosen.kernel.name, c, call


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--sizes",
        nargs="+",
        default=["1x4096x11008", "1x12288x4096", "1x4096x4096", "1x22016x4096"],
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    rate = copy_bandwidth()
    clock = CudaClock(runtime.device_arch())
    sink = cp.zeros(1, cp.uint32)
    gemvs = [gemv(*g) for g in GEMVS]
    readers = [row_reader(4, 1), row_reader(4, 2)]
    print(
        f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; "
        f"copy rate {rate / 1e12:.2f} TB/s"
    )
    for text in args.sizes:
        size = tuple(int(v) for v in text.split("x"))
        m, n, k = size
        assert m == 1 and k % 8 == 0, "the probe's GEMV takes one token and K a multiple of 8"
        rng = np.random.default_rng(1)
        count = rotation_count(operand_bytes(size), runtime.l2_bytes())
        xs = [cp.asarray(rng.integers(-2, 3, (m, k)).astype(np.float16)) for _ in range(count)]
        ws = [cp.asarray(rng.integers(-2, 3, (n, k)).astype(np.float16)) for _ in range(count)]
        x32, w32 = (cp.asnumpy(v).astype(np.float32) for v in (xs[0], ws[0]))
        want = (x32 @ w32.T).astype(np.float16).ravel()  # exact sums, rounded once
        c = cp.zeros(m * n, cp.float16)
        work = {"cuBLAS": [lambda x=x, w=w: x @ w.T for x, w in zip(xs, ws)]}
        name, direct_c, direct = direct_split(size)
        direct(xs[0], ws[0])
        assert (cp.asnumpy(direct_c) == want).all(), name
        work[f"direct ({name})"] = [lambda x=x, w=w, f=direct: f(x, w) for x, w in zip(xs, ws)]
        for label, launch in gemvs:
            c.fill(0)
            launch(xs[0], ws[0], c, n, k)
            launch(xs[0], ws[0], c, n, k)  # twice: the tickets left at zero
            assert (cp.asnumpy(c) == want).all(), label
            work[label] = [
                lambda x=x, w=w, f=launch, c=c, n=n, k=k: f(x, w, c, n, k) for x, w in zip(xs, ws)
            ]
        for label, read in readers:
            work[f"read: {label}"] = [lambda w=w, f=read, n=n, k=k: f(w, n, k, sink) for w in ws]
        times: dict[str, list[float]] = {name: [] for name in work}
        order = list(work)
        for round_ in range(args.rounds):
            shift = round_ % len(order)
            for label in order[shift:] + order[:shift]:
                t = time_calls(work[label], clock, repeat=args.repeat)
                times[label].append(t.median_ms)
        bound_ms = operand_bytes(size) / rate * 1e3
        print(
            f"\n{text}: the bound {bound_ms * 1e3:.1f} µs; median over {args.rounds} rounds "
            "(every C bit-exact)"
        )
        for label in order:
            ms = float(np.median(times[label]))
            print(f"  {label:34} {ms * 1e3:7.2f} µs  {bound_ms / ms:.3f} of the bound", flush=True)


if __name__ == "__main__":
    main()
