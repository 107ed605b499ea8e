"""Probe (not part of tiledsl): the direct path with each weight row read 256 or 512 bytes
an instruction, through a warp's own shared-memory slabs, against the direct path's
lane-layout loads (64 bytes of each of 8 rows an instruction).

Why: docs/probes/direct_read.py measured on an H100 (2026-12-06) that reading the weights
in the direct kernel's order, 16 bytes a lane straight into mma.sync's layout (each
instruction 64 bytes of each of 8 rows), reaches 0.76-0.79 of the memory bound at 1 x 4096
x 11008, while the same rows read a warp a row, 512 bytes of one row an instruction, reach
0.89-0.91, as fast as a stream over the whole matrix. This kernel reads as the fast reader
does and multiplies what it read:

- a block owns 16 weight rows and all K; its WARPS warps take chunks of CH columns in turn
  (chunk c to warp c % WARPS), as the K teams of `warps_k` do;
- a warp copies its chunk (16 rows x CH columns) with `cp.async` into one of STAGES slabs
  of its own (CH / 8 lanes a row: 512 bytes of a row an instruction at CH = 256, 256 at
  128), STAGES - 1 chunks ahead of the one it multiplies; no block barrier, only the warp's
  own `cp.async.wait_group` and `__syncwarp`;
- ldmatrix reads the A fragments (the weights, m16 x k16) from the slab, rows padded by 16
  bytes so that its eight row addresses fall in different banks; the tokens' B fragments
  come straight from global memory (32-bit words, L1 and L2 hits: every block reads them);
- the warps' sums are added in shared memory in warp order, as direct_gemv.py does.

Checked bit for bit against cuBLAS (integer inputs), then timed beside cuBLAS, the read
floor and direct_gemv.py's lane-layout kernel at its usual best (16 rows, 8 warps, U 4).

    python3 docs/probes/direct_rows.py [--m 1 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cupy as cp

from tiledsl.gpu.runtime import device_arch, l2_bytes
from tiledsl.gpu.timing import CudaClock, rotation_count

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "docs" / "probes"))
from direct_gemv import Direct, read_floor_ms, timed  # noqa: E402
from shapes import MEMORY_TARGET, PROJECTIONS, copy_bandwidth, operand_bytes  # noqa: E402

ROWS_SOURCE = r"""
#include <cuda_fp16.h>
#define CONSTANTS

constexpr int PITCH = CH + 8;           // a slab's row, in halves: 16 bytes of pad
constexpr int SLAB = 16 * PITCH;        // 16 weight rows
constexpr int ROW_VECTORS = CH / 8;     // 16-byte vectors of a row's chunk
constexpr int LANE_VECTORS = 16 * ROW_VECTORS / 32;

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void copy16(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(smem_u32(dst)), "l"(src));
}
__device__ __forceinline__ void ldmatrix_x4(unsigned& r0, unsigned& r1, unsigned& r2,
                                            unsigned& r3, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem_u32(p)));
}
__device__ __forceinline__ void mma16816(float* d, unsigned a0, unsigned a1, unsigned a2,
                                         unsigned a3, unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
                 " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

extern "C" __global__ void __launch_bounds__(WARPS * 32)
rows_NAME(const half* __restrict__ w, const half* __restrict__ x, half* __restrict__ y,
          int m, int n, int k) {
    extern __shared__ __align__(128) unsigned char smem[];
    half* mine = reinterpret_cast<half*>(smem) + (threadIdx.x >> 5) * STAGES * SLAB;
    float* partial = reinterpret_cast<float*>(smem);  // after the loop: [WARPS][NT][4][32]
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, tig = lane & 3;
    const int row0 = blockIdx.x * 16;
    const int chunks = k / CH;
    const int count = chunks > warp ? (chunks - warp + WARPS - 1) / WARPS : 0;
    // the warp's i-th chunk (the block's chunk warp + i * WARPS) into slab i % STAGES
    auto issue = [&](int i) {
        if (i < count) {
            const long long kb = (long long)(warp + i * WARPS) * CH;
            half* slab = mine + (i % STAGES) * SLAB;
            #pragma unroll
            for (int j = 0; j < LANE_VECTORS; ++j) {
                const int v = lane + 32 * j, r = v / ROW_VECTORS, c = 8 * (v % ROW_VECTORS);
                copy16(slab + r * PITCH + c, w + (long long)(row0 + r) * k + kb + c);
            }
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
    float acc[NT][4];
    #pragma unroll
    for (int t = 0; t < NT; ++t)
        #pragma unroll
        for (int i = 0; i < 4; ++i) acc[t][i] = 0.f;
    #pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) issue(s);
    #pragma unroll 1
    for (int i = 0; i < count; ++i) {
        issue(i + STAGES - 1);
        asm volatile("cp.async.wait_group %0;" :: "n"(STAGES - 1) : "memory");
        __syncwarp();
        const half* slab = mine + (i % STAGES) * SLAB;
        const long long kb = (long long)(warp + i * WARPS) * CH;
        #pragma unroll
        for (int s = 0; s < CH / 16; ++s) {
            unsigned a0, a1, a2, a3;  // rows 0-7 | 8-15 of columns 0-7, then of 8-15
            ldmatrix_x4(a0, a1, a2, a3, slab + (lane & 15) * PITCH + 16 * s + 8 * (lane >> 4));
            #pragma unroll
            for (int t = 0; t < NT; ++t) {
                const int token = t * 8 + g;
                unsigned b0 = 0, b1 = 0;
                if (token < m) {
                    const half* xp = x + (long long)token * k + kb + 16 * s + 2 * tig;
                    b0 = *reinterpret_cast<const unsigned*>(xp);
                    b1 = *reinterpret_cast<const unsigned*>(xp + 8);
                }
                mma16816(acc[t], a0, a1, a2, a3, b0, b1);
            }
        }
        __syncwarp();  // every lane has read the slab before a later copy refills it
    }
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();  // every warp done with its slabs: they hold the partial sums now
    #pragma unroll
    for (int t = 0; t < NT; ++t)
        #pragma unroll
        for (int i = 0; i < 4; ++i) partial[((warp * NT + t) * 4 + i) * 32 + lane] = acc[t][i];
    __syncthreads();
    const int outputs = NT * 4 * 32;
    for (int o = threadIdx.x; o < outputs; o += WARPS * 32) {
        float sum = 0.f;
        for (int v = 0; v < WARPS; ++v) sum += partial[v * outputs + o];
        const int l = o & 31, i = (o >> 5) & 3, t = o >> 7;
        const int row = row0 + (l >> 2) + 8 * (i >> 1);
        const int token = t * 8 + 2 * (l & 3) + (i & 1);
        if (token < m) y[(long long)token * n + row] = __float2half_rn(sum);
    }
}
"""

#: (WARPS, STAGES, CH) of the variants: at most 227 KB of slabs a block.
SHAPES = [
    (4, 2, 256),
    (4, 3, 256),
    (8, 2, 256),
    (4, 3, 128),
    (8, 2, 128),
    (8, 3, 128),
    (8, 4, 128),
    (16, 2, 128),
]
SMEM_LIMIT = 227 * 1024


class Rows:
    """One variant, compiled for NT token tiles."""

    def __init__(self, warps: int, stages: int, ch: int, nt: int):
        self.warps, self.stages, self.ch, self.nt = warps, stages, ch, nt
        name = f"{warps}_{stages}_{ch}_{nt}"
        constants = "".join(
            f"#define {key} {value}\n"
            for key, value in (("WARPS", warps), ("STAGES", stages), ("CH", ch), ("NT", nt))
        )
        source = ROWS_SOURCE.replace("rows_NAME", f"rows_{name}").replace(
            "#define CONSTANTS\n", constants
        )
        self.kernel = cp.RawKernel(source, f"rows_{name}", options=("-arch=sm_90a", "-std=c++17"))
        self.shared = max(warps * stages * 16 * (ch + 8) * 2, warps * nt * 4 * 32 * 4)
        self.kernel.max_dynamic_shared_size_bytes = self.shared

    @property
    def name(self) -> str:
        return (
            f"rows: warps {self.warps}, stages {self.stages}, {self.ch * 2} B a row"
            f" ({self.kernel.num_regs} regs)"
        )

    def fits(self, n: int, k: int) -> bool:
        return n % 16 == 0 and k % self.ch == 0 and self.shared <= SMEM_LIMIT

    def __call__(self, w, x, y, m: int, n: int, k: int) -> None:
        self.kernel(
            (n // 16,),
            (32 * self.warps,),
            (w, x, y, cp.int32(m), cp.int32(n), cp.int32(k)),
            shared_mem=self.shared,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--show", type=int, default=4, help="variants printed per shape")
    args = ap.parse_args()
    clock = CudaClock(device_arch())
    rate = copy_bandwidth()
    print(f"copy rate {rate / 1e12:.2f} TB/s; the target: {MEMORY_TARGET} of the bound", flush=True)
    rng = cp.random.RandomState(1)
    variants: dict[int, list] = {}
    for n, k in PROJECTIONS:
        weight_bytes = 2 * n * k
        count = rotation_count(weight_bytes, l2_bytes())
        weights = [rng.randint(-2, 3, (n, k)).astype(cp.float16) for _ in range(count)]
        floor = read_floor_ms(weights, weight_bytes, clock, args.rounds)
        for m in args.m:
            nt = (m + 7) // 8
            if nt not in variants:
                lanes = [Direct(1, 8, 4, 0, nt), Direct(1, 8, 2, 0, nt)]  # the lane layout
                variants[nt] = lanes + [Rows(*shape, nt) for shape in SHAPES]
            tokens = rng.randint(-2, 3, (m, k)).astype(cp.float16)
            want = cp.matmul(tokens, weights[0].T)
            theirs_out = cp.empty((m, n), cp.float16)
            cublas = [
                lambda w=w, x=tokens, out=theirs_out: cp.matmul(x, w.T, out=out) for w in weights
            ]
            cublas_ms = timed(cublas, clock, args.rounds)
            bound_ms = operand_bytes((m, n, k)) / rate * 1e3
            rows, wrong = [], []
            for v in variants[nt]:
                if not v.fits(n, k) or v.kernel.local_size_bytes:
                    continue
                y = cp.full((m, n), cp.nan, cp.float16)
                v(weights[0], tokens, y, m, n, k)
                if not bool(cp.all(y.view(cp.uint16) == want.view(cp.uint16))):
                    wrong.append(v.name)
                    continue
                calls = [
                    lambda w=w, v=v, y=y, x=tokens, size=(m, n, k): v(w, x, y, *size)
                    for w in weights
                ]
                rows.append((timed(calls, clock, args.rounds), v.name))
            rows.sort()
            print(
                f"{m}x{n}x{k}: bound {bound_ms * 1e3:.1f} µs; read floor {floor * 1e3:.1f} µs"
                f" ({bound_ms / floor:.3f}); cuBLAS {cublas_ms * 1e3:.1f} µs"
                f" ({bound_ms / cublas_ms:.3f})",
                flush=True,
            )
            lane_best = min((r for r in rows if not r[1].startswith("rows:")), default=None)
            shown = rows[: args.show] + ([lane_best] if lane_best not in rows[: args.show] else [])
            for ms, name in [r for r in shown if r is not None]:
                print(
                    f"    {name:44} {ms * 1e3:7.1f} µs  {bound_ms / ms:.3f} of bound"
                    f"  {cublas_ms / ms:.3f}x cuBLAS",
                    flush=True,
                )
            if wrong:
                print(f"    WRONG ({len(wrong)}): {', '.join(wrong[:4])}", flush=True)
        del weights


if __name__ == "__main__":
    main()
