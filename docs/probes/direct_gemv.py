"""Probe (not part of tiledsl): a few-token product whose weights go straight from global
memory into mma.sync's registers, timed as `tiledsl bench` times a kernel, beside the read
floor (read_floor.py's plain 16-byte reader) and cuBLAS, against bench/shapes.py's memory
bound.

Why: at M <= 64 the product is a read of the N x K weights, and a plain read of them reaches
0.90-0.93 of the bound at N x K = 4096 x 11008 and 12288 x 4096 on the H200, where tiledsl's
TMA + wgmma kernels reach 0.75-0.80 (performance.md, "where a few-token kernel loses to a
read of its weights"). Their weights pass through shared memory, an mbarrier and a
producer warp before any tensor-core work; the read's go from DRAM to registers with every
warp's loads in flight at once. This kernel reads as the read does and multiplies what it
read:

- a block owns 16 x MT weight rows (MT m16 tiles) and all K; its WARPS warps split K in
  chunks of 32 x U columns, chunk c to warp c % WARPS;
- in a chunk each lane loads U 16-byte vectors of each of its two rows of every m-tile
  (rows g and g + 8, g = lane / 4, columns 8 x (lane % 4) + 32 u) with
  `ld.global.nc.L1::no_allocate`, and the same columns of the tokens (token g of each
  8-token n tile; none past M);
- each vector holds 8 consecutive K columns = two k16 steps of `mma.sync.m16n8k16` once K
  is permuted within each 32-column group: fragment column 2t, 2t+1 of step s is column
  8t + 4s + {0, 1}, fragment column 2t + 8, 2t + 9 is 8t + 4s + {2, 3}. The weights are the
  instruction's A (rows = output features), the tokens its B ("col": K-contiguous, as x
  is stored), so both operands use the same permutation and the sum is the same sum over
  K, added in another order;
- after the K loop each warp puts its accumulators in shared memory and the block adds the
  WARPS partial sums in warp order (the same bits on every run) and writes y = x W^T in f16.

PIPE=1 loads chunk c + WARPS into a second set of registers before multiplying chunk c.
Every variant is checked against cuBLAS's result (integer inputs in [-2, 2]: both sums
exact in f32, both rounded once to f16, so equal bit for bit) before its time counts.

    python3 docs/probes/direct_gemv.py [--m 1 16 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import cupy as cp

from tiledsl.gpu.runtime import device_arch, l2_bytes
from tiledsl.gpu.timing import CudaClock, median, rotation_count, time_calls

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))  # the shapes benchmark's bound: its copy, its bytes
sys.path.insert(0, str(ROOT / "docs" / "probes"))
from read_floor import LDG_SOURCE, NEVER  # noqa: E402
from shapes import (  # noqa: E402
    MEMORY_BOUND_M,
    MEMORY_TARGET,
    PROJECTIONS,
    copy_bandwidth,
    operand_bytes,
)

DIRECT_SOURCE = r"""
#include <cuda_fp16.h>
#define CONSTANTS

__device__ __forceinline__ uint4 weight_vector(const half* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ unsigned word(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

__device__ __forceinline__ void mma16816(float* d, unsigned a0, unsigned a1, unsigned a2,
                                         unsigned a3, unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
                 " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// One chunk's loads: U vectors of rows g and g + 8 of every m tile, and of token g of
// every n tile (zero past M).
#define LOAD_CHUNK(wv, xv, kb)                                                        \
    _Pragma("unroll") for (int mt = 0; mt < MT; ++mt)                                 \
    _Pragma("unroll") for (int h = 0; h < 2; ++h)                                     \
    _Pragma("unroll") for (int u = 0; u < U; ++u)                                     \
        wv[mt][h][u] = weight_vector(w + (long long)(row0 + mt * 16 + g + 8 * h) * k \
                                     + (kb) + 32 * u + 8 * tig);                      \
    _Pragma("unroll") for (int t = 0; t < NT; ++t)                                    \
    _Pragma("unroll") for (int u = 0; u < U; ++u)                                     \
        xv[t][u] = (t * 8 + g < m)                                                    \
            ? *(const uint4*)(x + (long long)(t * 8 + g) * k + (kb) + 32 * u + 8 * tig) \
            : make_uint4(0, 0, 0, 0);

// Two k16 steps a vector: step s takes words 2s (columns 8t+4s+{0,1}) and 2s+1 (+{2,3}).
#define MMA_CHUNK(wv, xv)                                                             \
    _Pragma("unroll") for (int u = 0; u < U; ++u)                                     \
    _Pragma("unroll") for (int s = 0; s < 2; ++s)                                     \
    _Pragma("unroll") for (int mt = 0; mt < MT; ++mt)                                 \
    _Pragma("unroll") for (int t = 0; t < NT; ++t)                                    \
        mma16816(acc[mt][t], word(wv[mt][0][u], 2 * s), word(wv[mt][1][u], 2 * s),    \
                 word(wv[mt][0][u], 2 * s + 1), word(wv[mt][1][u], 2 * s + 1),        \
                 word(xv[t][u], 2 * s), word(xv[t][u], 2 * s + 1));

extern "C" __global__ void __launch_bounds__(WARPS * 32)
direct_NAME(const half* __restrict__ w, const half* __restrict__ x, half* __restrict__ y,
            int m, int n, int k) {
    extern __shared__ float partial[];  // [WARPS][MT][NT][4][32]: each warp's sums
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, tig = lane & 3;
    const int row0 = blockIdx.x * 16 * MT;
    const int chunks = k / (32 * U);
    float acc[MT][NT][4];
    #pragma unroll
    for (int mt = 0; mt < MT; ++mt)
        #pragma unroll
        for (int t = 0; t < NT; ++t)
            #pragma unroll
            for (int i = 0; i < 4; ++i) acc[mt][t][i] = 0.f;
    uint4 wv[MT][2][U], xv[NT][U];
#if PIPE
    uint4 wn[MT][2][U], xn[NT][U];
    if (warp < chunks) { LOAD_CHUNK(wv, xv, warp * 32 * U) }
    for (int c = warp; c < chunks; c += WARPS) {
        if (c + WARPS < chunks) { LOAD_CHUNK(wn, xn, (c + WARPS) * 32 * U) }
        MMA_CHUNK(wv, xv)
        #pragma unroll
        for (int mt = 0; mt < MT; ++mt)
            #pragma unroll
            for (int h = 0; h < 2; ++h)
                #pragma unroll
                for (int u = 0; u < U; ++u) wv[mt][h][u] = wn[mt][h][u];
        #pragma unroll
        for (int t = 0; t < NT; ++t)
            #pragma unroll
            for (int u = 0; u < U; ++u) xv[t][u] = xn[t][u];
    }
#else
    #pragma unroll 1
    for (int c = warp; c < chunks; c += WARPS) {
        LOAD_CHUNK(wv, xv, c * 32 * U)
        MMA_CHUNK(wv, xv)
    }
#endif
    #pragma unroll
    for (int mt = 0; mt < MT; ++mt)
        #pragma unroll
        for (int t = 0; t < NT; ++t)
            #pragma unroll
            for (int i = 0; i < 4; ++i)
                partial[(((warp * MT + mt) * NT + t) * 4 + i) * 32 + lane] = acc[mt][t][i];
    __syncthreads();
    // The block's sums, each over the warps in warp order: (mt, t, i, lane) per thread.
    const int outputs = MT * NT * 4 * 32;
    for (int o = threadIdx.x; o < outputs; o += WARPS * 32) {
        float sum = 0.f;
        for (int v = 0; v < WARPS; ++v) sum += partial[v * outputs + o];
        const int l = o & 31, i = (o >> 5) & 3, t = (o >> 7) % NT, mt = (o >> 7) / NT;
        const int row = row0 + mt * 16 + (l >> 2) + 8 * (i >> 1);
        const int token = t * 8 + 2 * (l & 3) + (i & 1);
        if (token < m) y[(long long)token * n + row] = __float2half_rn(sum);
    }
}
"""

MTS = (1, 2, 4)
WARPSES = (4, 8)  # 16 warps cap a thread at 128 registers: every such variant spilled
US = (2, 4)
PIPES = (0, 1)


class Direct:
    """One variant of the kernel, compiled for NT token tiles."""

    def __init__(self, mt: int, warps: int, u: int, pipe: int, nt: int):
        self.mt, self.warps, self.u, self.pipe, self.nt = mt, warps, u, pipe, nt
        name = f"{mt}_{warps}_{u}_{pipe}_{nt}"
        constants = f"#define MT {mt}\n#define NT {nt}\n#define U {u}\n#define WARPS {warps}\n"
        source = DIRECT_SOURCE.replace("direct_NAME", f"direct_{name}").replace(
            "#define CONSTANTS\n", constants + f"#define PIPE {pipe}\n"
        )
        self.kernel = cp.RawKernel(source, f"direct_{name}", options=("-arch=sm_90a",))
        self.shared = warps * mt * nt * 4 * 32 * 4
        self.kernel.max_dynamic_shared_size_bytes = self.shared

    @property
    def name(self) -> str:
        return (
            f"rows {16 * self.mt}, warps {self.warps}, U {self.u}, pipe {self.pipe}"
            f" ({self.kernel.num_regs} regs)"
        )

    def fits(self, n: int, k: int) -> bool:
        return n % (16 * self.mt) == 0 and k % (32 * self.u) == 0

    def __call__(self, w, x, y, m: int, n: int, k: int) -> None:
        self.kernel(
            (n // (16 * self.mt),),
            (32 * self.warps,),
            (w, x, y, cp.int32(m), cp.int32(n), cp.int32(k)),
            shared_mem=self.shared,
        )


def timed(calls, clock, rounds: int) -> float:
    """The median over `rounds` of time_calls' median ms."""
    return median([time_calls(calls, clock, warmup=5, repeat=30).median_ms for _ in range(rounds)])


def read_floor_ms(weights, weight_bytes, clock, rounds) -> float:
    """The fastest of read_floor.py's plain 16-byte readers (its sweep's usual winners)."""
    sink = cp.zeros(1, cp.uint32)
    best = float("inf")
    for unroll in (4, 8):
        source = LDG_SOURCE.replace("UNROLL", str(unroll)).replace("NEVER", f"{NEVER}u")
        kernel = cp.RawKernel(source, f"read_ldg_{unroll}", options=("-arch=sm_90a",))
        for blocks, threads in ((264, 1024), (528, 512), (1056, 256), (528, 1024)):
            calls = [
                lambda w=w, kernel=kernel, blocks=blocks, threads=threads: kernel(
                    (blocks,), (threads,), (w, cp.int64(weight_bytes // 16), sink)
                )
                for w in weights
            ]
            ms = timed(calls, clock, rounds)
            best = min(best, ms)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=int, nargs="+", default=[1, 16, MEMORY_BOUND_M])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--show", type=int, default=3, help="variants printed per shape")
    args = ap.parse_args()
    clock = CudaClock(device_arch())
    rate = copy_bandwidth()
    print(f"copy rate {rate / 1e12:.2f} TB/s; the target: {MEMORY_TARGET} of the bound", flush=True)
    rng = cp.random.RandomState(1)
    variants: dict[int, list[Direct]] = {}
    for n, k in PROJECTIONS:
        weight_bytes = 2 * n * k
        count = rotation_count(weight_bytes, l2_bytes())
        weights = [rng.randint(-2, 3, (n, k)).astype(cp.float16) for _ in range(count)]
        floor = read_floor_ms(weights, weight_bytes, clock, args.rounds)
        for m in args.m:
            nt = (m + 7) // 8
            if nt not in variants:
                variants[nt] = [
                    Direct(mt, warps, u, pipe, nt)
                    for mt, warps, u, pipe in itertools.product(MTS, WARPSES, US, PIPES)
                ]
            tokens = rng.randint(-2, 3, (m, k)).astype(cp.float16)
            want = cp.matmul(tokens, weights[0].T)
            theirs_out = cp.empty((m, n), cp.float16)
            cublas = [
                lambda w=w, x=tokens, out=theirs_out: cp.matmul(x, w.T, out=out) for w in weights
            ]
            cublas_ms = timed(cublas, clock, args.rounds)
            bound_ms = operand_bytes((m, n, k)) / rate * 1e3
            rows = []
            wrong = []
            for v in variants[nt]:
                if not v.fits(n, k) or v.kernel.local_size_bytes:
                    continue  # a shape it does not divide, or registers spilled to memory
                y = cp.full((m, n), cp.nan, cp.float16)
                v(weights[0], tokens, y, m, n, k)
                if not bool(cp.all(y.view(cp.uint16) == want.view(cp.uint16))):
                    wrong.append(v.name)
                    continue
                calls = [
                    lambda w=w, v=v, y=y, x=tokens, size=(m, n, k): v(w, x, y, *size)
                    for w in weights
                ]
                ms = timed(calls, clock, args.rounds)
                rows.append((ms, v.name))
            rows.sort()
            print(
                f"{m}x{n}x{k}: bound {bound_ms * 1e3:.1f} µs; read floor {floor * 1e3:.1f} µs"
                f" ({bound_ms / floor:.3f});"
                f" cuBLAS {cublas_ms * 1e3:.1f} µs ({bound_ms / cublas_ms:.3f})",
                flush=True,
            )
            for ms, name in rows[: args.show]:
                print(
                    f"    {name:34} {ms * 1e3:7.1f} µs  {bound_ms / ms:.3f} of bound"
                    f"  {cublas_ms / ms:.3f}x cuBLAS",
                    flush=True,
                )
            if wrong:
                print(f"    WRONG ({len(wrong)}): {', '.join(wrong[:4])}", flush=True)
        del weights


if __name__ == "__main__":
    main()
