"""Probe (not part of tiledsl): few tokens on the tensor cores, the weights read a row at a
time. Does mma.sync keep the row reader's rate when its fragments come from row-read
weights?

At 16 and 64 tokens the product needs the tensor cores (each weight multiplied 16 or 64
times), but mma.sync's lane layout reads 64 bytes of each of 8 rows an instruction (the
direct path; docs/probes/direct_read.py's "tiles" readers, 0.76-0.79 of the memory bound
at 4096 x 11008 on the H100) where a warp on one row, 512 bytes an instruction, reads
0.88-0.91 and the fma path (one token, the same reads) reaches 0.86. The wgmma kernels
(TMA boxes) and cuBLAS sit at 0.82 there on the H100, 0.68-0.80 on the H200. This kernel
reads like the row reader and moves each vector once through shared memory into the
mma's layout:

- `rows L split S warps W`: a warp on 16 weight rows (W warps a block, 16 W rows), its
  lanes L to a row on consecutive 16-byte vectors (L = 32: 512 bytes of one row an
  instruction; L = 16: 256 bytes of each of 2 rows), a step of K (8 L halves) a turn; the
  next step's 16 L / 2 vectors a lane are loaded (`ld.global.nc.L1::no_allocate`) while
  this step's are stored into the warp's own slab (XOR-swizzled 16-byte chunks, no bank
  conflicts), read back by `ldmatrix.x4` as A fragments (a `__syncwarp` between: no block
  barrier in the loop) and multiplied with `mma.sync.m16n8k16` (swapped operands: the
  weight rows are the instruction's M, the tokens its N);
- the tokens of the block's part of K are staged into shared memory once, at the start
  (after the first weight loads are in flight), and read by `ldmatrix.x4` as B fragments;
- S > 1: each row's K in S parts, a block a part; the parts' f32 sums go to a workspace
  and the block that draws a tile's last ticket (`atom.add.acq_rel.gpu`, as `split_k`)
  adds them in part order and stores C (the same bits every run).

Timed as `tiledsl bench` times (an event pair around each call, behind the hold kernel,
inputs rotated past 2 x L2), beside cuBLAS (`x @ W.T`), the one file
(`examples/tuned/llama2_7b.tuned.tile`, the kernel its table picks, as `tiledsl.load` calls
it) and the row reader; each kernel's C first compared bit for bit with the exact product
(small integers: every sum exact in f32, C rounded once).

    python3 docs/probes/rows_mma.py [--sizes 16x4096x11008 ...] [--rounds 3]
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
from read_floor import NEVER  # noqa: E402
from shapes import copy_bandwidth, operand_bytes  # noqa: E402

import tiledsl.driver as driver  # noqa: E402
from tiledsl.gpu import runtime  # noqa: E402
from tiledsl.gpu.timing import CudaClock, rotation_count, time_calls  # noqa: E402
from tiledsl.tune.dispatch import choose_kernel, read_table, table_path  # noqa: E402

ROWS_MMA_SOURCE = r"""
#include <cuda_fp16.h>
constexpr int WARPS = @WARPS@;               // warps a block, 16 weight rows each
constexpr int LANES_A_ROW = @LANES@;          // lanes on one row in a load instruction
constexpr int ROWS_A_LOAD = 32 / LANES_A_ROW;
constexpr int LOADS = 16 / ROWS_A_LOAD;     // load instructions a step, for 16 rows
constexpr int CHUNKS = LANES_A_ROW;         // 16-byte chunks of a row a step
constexpr int STEP = 8 * CHUNKS;            // halves of K a step
constexpr int NB = @TOKENS@ / 8;              // the mma's n8 blocks of tokens
constexpr int DEPTH = @DEPTH@;               // steps of vectors in flight a warp
constexpr int GROUP = @GROUP@;               // k16 pieces whose fragments load before their mmas
constexpr int ACCS = @ACCS@;                 // sets of accumulators (shorter mma chains)

__device__ __forceinline__ uint4 stream_load(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ void ldmatrix4(unsigned (&r)[4], const void* p) {
    const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

extern "C" __global__ void __launch_bounds__(32 * WARPS, 1)
@NAME@(const uint4* __restrict__ x, const uint4* __restrict__ w, __half* c, float* work,
     unsigned* tickets, int n, int k, int width_max, unsigned* sink) {
    extern __shared__ uint4 smem[];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int tile = blockIdx.x / @SPLIT@, part = blockIdx.x % @SPLIT@;
    const int steps = k / STEP, lo = part * steps / @SPLIT@, hi = (part + 1) * steps / @SPLIT@;
    const int width = (hi - lo) * CHUNKS;  // chunks of a token row in shared memory
    uint4* tokens = smem;                  // @TOKENS@ rows of `width` chunks, chunk ^ (row % 8)
    uint4* slab = smem + @TOKENS@ * width_max + warp * 16 * CHUNKS;  // 16 rows x CHUNKS
    const int vectors = k / 8;             // 16-byte vectors of a row
    const int row0 = tile * 16 * WARPS + warp * 16;
    // lane's row and chunk in load instruction j: row j * ROWS_A_LOAD + lane / LANES_A_ROW
    const int my_row = lane / LANES_A_ROW, my_chunk = lane % LANES_A_ROW;
    const uint4* wrow = w + (long long)(row0 + my_row) * vectors + my_chunk;
    // DEPTH steps' vectors in flight: register set dd holds step lo + dd, lo + DEPTH + dd, ...
    uint4 v[DEPTH][LOADS];
    #pragma unroll
    for (int dd = 0; dd < DEPTH; ++dd)
        #pragma unroll
        for (int j = 0; j < LOADS; ++j)
            if (lo + dd < hi)
                v[dd][j] =
                    stream_load(wrow + (long long)j * ROWS_A_LOAD * vectors + (lo + dd) * CHUNKS);
    // the block's tokens for its part of K, once (the first weights are in flight)
    for (int i = threadIdx.x; @STAGE@ && i < @TOKENS@ * width; i += 32 * WARPS) {
        const int r = i / width, ch = i % width;
        tokens[r * width + (ch ^ (r % 8))] = __ldg(x + (long long)r * vectors + lo * CHUNKS + ch);
    }
    __syncthreads();
    float d[ACCS][NB][4];  // ACCS sets of accumulators: pieces u % ACCS, added at the end
    #pragma unroll
    for (int h = 0; h < ACCS; ++h)
        #pragma unroll
        for (int b = 0; b < NB; ++b) d[h][b][0] = d[h][b][1] = d[h][b][2] = d[h][b][3] = 0.0f;
    // ldmatrix.x4 addresses: matrix q = lane / 8, its row lane % 8
    const int q = lane / 8, qr = lane % 8;
    const int a_row = qr + 8 * (q % 2), a_half = q / 2;    // A: rows 0-7 / 8-15, k 0-7 / 8-15
    const int b_tok = qr + 8 * (q / 2), b_half = q % 2;    // B: tokens +0 / +8, k 0-7 / 8-15
    unsigned fold = 0;  // the parts-off variants: what they read, folded into a word
    for (int s0 = lo; s0 < hi; s0 += DEPTH) {
        #pragma unroll
        for (int dd = 0; dd < DEPTH; ++dd) {
            const int s = s0 + dd;
            if (s >= hi) break;
            #pragma unroll
            for (int j = 0; j < LOADS; ++j) {  // this step's vectors into the warp's slab
                const int r = j * ROWS_A_LOAD + my_row;
                if (@EXCHANGE@) slab[r * CHUNKS + (my_chunk ^ (r % 8))] = v[dd][j];
                else fold ^= v[dd][j].x ^ v[dd][j].y ^ v[dd][j].z ^ v[dd][j].w;
            }
            __syncwarp();
            if (s + DEPTH < hi) {  // the step DEPTH on: in flight during this step's math
                #pragma unroll
                for (int j = 0; j < LOADS; ++j)
                    v[dd][j] = stream_load(wrow + (long long)j * ROWS_A_LOAD * vectors +
                                           (s + DEPTH) * CHUNKS);
            }
            #pragma unroll
            for (int u0 = 0; @EXCHANGE@ && u0 < CHUNKS / 2; u0 += GROUP) {  // GROUP k16 pieces
                unsigned a[GROUP][4], f[GROUP][NB / 2][4];
                #pragma unroll
                for (int e = 0; e < GROUP; ++e) {  // every fragment of the group first
                    const int u = u0 + e, ach = 2 * u + a_half;
                    ldmatrix4(a[e], slab + a_row * CHUNKS + (ach ^ (a_row % 8)));
                    const int bch = (s - lo) * CHUNKS + 2 * u + b_half;
                    #pragma unroll
                    for (int b = 0; @MATH@ && b < NB; b += 2) {
                        const int tok = 8 * b + b_tok;
                        ldmatrix4(f[e][b / 2], tokens + tok * width + (bch ^ (tok % 8)));
                    }
                }
                #pragma unroll
                for (int e = 0; e < GROUP; ++e) {
                    if (!@MATH@) {
                        fold ^= a[e][0] ^ a[e][1] ^ a[e][2] ^ a[e][3];
                        continue;
                    }
                    #pragma unroll
                    for (int b = 0; b < NB; b += 2) {
                        mma16816(d[(u0 + e) % ACCS][b], a[e], f[e][b / 2][0], f[e][b / 2][1]);
                        mma16816(d[(u0 + e) % ACCS][b + 1], a[e], f[e][b / 2][2], f[e][b / 2][3]);
                    }
                }
            }
            __syncwarp();  // every lane's ldmatrix done before the slab is written again
        }
    }
    #pragma unroll
    for (int h = 1; h < ACCS; ++h)
        #pragma unroll
        for (int b = 0; b < NB; ++b)
            #pragma unroll
            for (int e = 0; e < 4; ++e) d[0][b][e] += d[h][b][e];
    if (!@MATH@) {
        if (fold == NEVER) sink[0] = fold;
        return;
    }
    const int g = lane / 4, t = lane % 4;
    if (@SPLIT@ > 1) {
        float* mine = work + ((long long)blockIdx.x * WARPS + warp) * (32 * NB * 4) + lane;
        #pragma unroll
        for (int b = 0; b < NB; ++b)
            #pragma unroll
            for (int e = 0; e < 4; ++e) mine[(b * 4 + e) * 32] = d[0][b][e];
        __shared__ unsigned ticket;
        __syncthreads();  // every warp's part stored before the ticket releases them
        if (threadIdx.x == 0) {
            unsigned got;
            asm volatile("atom.add.acq_rel.gpu.u32 %0, [%1], 1;\n"
                         : "=r"(got) : "l"(tickets + tile) : "memory");
            ticket = got;
            if (got == @SPLIT@ - 1) tickets[tile] = 0;  // the last part: ready for the next launch
        }
        __syncthreads();
        if (ticket != @SPLIT@ - 1) return;
        #pragma unroll
        for (int b = 0; b < NB; ++b)
            #pragma unroll
            for (int e = 0; e < 4; ++e) {
                float total = 0.0f;
                for (int p = 0; p < @SPLIT@; ++p)
                    total += __ldcg(work + (((long long)(tile * @SPLIT@ + p)) * WARPS + warp) *
                                    (32 * NB * 4) + (b * 4 + e) * 32 + lane);
                d[0][b][e] = total;
            }
    }
    #pragma unroll
    for (int b = 0; b < NB; ++b)  // d: rows g and g + 8 (weights), tokens 2t and 2t + 1
        #pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int row = row0 + g + 8 * (e / 2), tok = 8 * b + 2 * t + e % 2;
            c[(long long)tok * n + row] = __float2half_rn(d[0][b][e]);
        }
}
"""

#: (lanes a row, split, warps) of the kernels (those whose tokens fit shared memory run).
ROWS_MMAS = [
    (32, 1, 8),
    (32, 2, 8),
    (32, 4, 8),
    (16, 2, 8),
    (16, 4, 8),
    (16, 8, 8),
    (32, 2, 4),
    (32, 4, 4),
    (16, 4, 4),
]
SMEM_LIMIT = 227 * 1024
SINK = cp.zeros(1, cp.uint32)


#: What the parts-off variants leave out (the full kernel: all three on). "no mma" leaves
#: out everything after the loop with the mmas (the split's partial sums, ticket, adds and
#: C's store): its time is the loop's reads, exchange and fragment loads alone.
PARTS = {
    "full": (1, 1, 1),
    "no mma": (1, 1, 0),
    "loads only": (1, 0, 0),
    "loads only, no tokens": (0, 0, 0),
}
#: The shape of the parts-off variants: the fastest of the probe's first run at 16 x 4096
#: x 11008 on the H100 (bench/results/rows-mma-h100-2026-12-06.txt).
PARTS_SHAPE = (32, 4, 8)


#: (lanes a row, split, warps, depth, group, accumulator sets) of `--deeper`'s kernels: the
#: first run's forms (depth, group and sets 1) with the next steps' vectors in flight, each
#: group's fragments loaded before its mmas, two mma chains.
DEEPER = [
    (32, 4, 8, 1, 1, 1),
    (32, 4, 8, 1, 4, 2),
    (32, 4, 8, 2, 4, 2),
    (16, 4, 8, 2, 4, 2),
    (16, 4, 8, 4, 4, 2),
    (16, 2, 8, 2, 4, 2),
    (16, 4, 4, 4, 4, 2),
    (32, 2, 4, 2, 4, 2),
]


def rows_mma(
    lanes: int,
    split: int,
    warps: int,
    tokens: int,
    parts: str = "full",
    depth: int = 1,
    group: int = 1,
    accs: int = 1,
):
    stage, exchange, math = PARTS[parts]
    name = f"rows_mma_{lanes}_{split}_{warps}_{tokens}_{stage}{exchange}{math}_{depth}{group}{accs}"
    rows_a_block = 16 * warps
    source = (
        ROWS_MMA_SOURCE.replace("@NAME@", name)
        .replace("@LANES@", str(lanes))
        .replace("@SPLIT@", str(split))
        .replace("@TOKENS@", str(tokens))
        .replace("@WARPS@", str(warps))
        .replace("@DEPTH@", str(depth))
        .replace("@GROUP@", str(group))
        .replace("@ACCS@", str(accs))
        .replace("@STAGE@", str(stage))
        .replace("@EXCHANGE@", str(exchange))
        .replace("@MATH@", str(math))
        .replace("NEVER", f"{NEVER}u")
    )
    kernel = cp.RawKernel(source, name, options=("-arch=sm_90a",))
    state: dict[tuple[int, int], tuple] = {}

    def smem_bytes(k: int) -> tuple[int, int]:
        steps = k // (8 * lanes)
        width_max = -(-steps // split) * lanes
        return width_max, 16 * (stage * tokens * width_max + exchange * warps * 16 * lanes)

    def fits(n: int, k: int) -> bool:
        return n % rows_a_block == 0 and k % (8 * lanes) == 0 and smem_bytes(k)[1] <= SMEM_LIMIT

    def launch(x, w, c, n: int, k: int) -> None:
        tiles = n // rows_a_block
        if (tiles, k) not in state:
            width_max, smem = smem_bytes(k)
            kernel.max_dynamic_shared_size_bytes = smem
            state[tiles, k] = (
                cp.zeros(tiles * split * warps * 32 * tokens // 2, cp.float32),
                cp.zeros(tiles, cp.uint32),
                width_max,
                smem,
            )
        work, tickets, width_max, smem = state[tiles, k]
        kernel(
            (tiles * split,),
            (32 * warps,),
            (x, w, c, work, tickets, np.int32(n), np.int32(k), np.int32(width_max), SINK),
            shared_mem=smem,
        )

    label = f"rows {lanes}" + (f" split {split}" if split > 1 else "") + f" warps {warps}"
    if (depth, group, accs) != (1, 1, 1):
        label += f" depth {depth} group {group} chains {accs}"
    label += "" if parts == "full" else f" ({parts})"
    return label, fits, launch


def one_file(size):
    """The one file's kernel for `size`, as tiledsl.load calls it: (name, C, call)."""
    tile = ROOT / "examples/tuned/llama2_7b.tuned.tile"
    compiled = driver.compile_file(tile)
    chosen = choose_kernel(tuple(compiled.kernels), size, table=read_table(table_path(tile)))
    index = [k.name for k in compiled.kernels].index(chosen.kernel.name)
    arch = runtime.device_arch()
    arch = arch + "a" if arch == "sm_90" else arch
    run = runtime.launcher(
        runtime.load_module(compiled.source_for((chosen.kernel,)), arch, name="rows_mma.cu"),
        compiled.launches[index],
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
        default=["16x4096x11008", "16x12288x4096", "16x22016x4096", "16x4096x4096"],
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument(
        "--parts",
        action="store_true",
        help="time the fastest form without parts (mmas and fix-up, exchange, tokens)",
    )
    ap.add_argument(
        "--deeper",
        action="store_true",
        help="time forms with more steps in flight, grouped fragment loads and two mma chains",
    )
    args = ap.parse_args()
    rate = copy_bandwidth()
    clock = CudaClock(runtime.device_arch())
    sink = cp.zeros(1, cp.uint32)
    print(
        f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; "
        f"copy rate {rate / 1e12:.2f} TB/s"
    )
    for text in args.sizes:
        size = tuple(int(v) for v in text.split("x"))
        m, n, k = size
        assert m % 16 == 0, "the probe's kernels take a multiple of 16 tokens"
        kernels = [rows_mma(*shape, m) for shape in ROWS_MMAS]
        if args.parts:
            kernels = [rows_mma(*PARTS_SHAPE, m, parts) for parts in PARTS]
        if args.deeper:
            kernels = [rows_mma(*f[:3], m, "full", *f[3:]) for f in DEEPER]
        rng = np.random.default_rng(1)
        count = rotation_count(operand_bytes(size), runtime.l2_bytes())
        xs = [cp.asarray(rng.integers(-2, 3, (m, k)).astype(np.float16)) for _ in range(count)]
        ws = [cp.asarray(rng.integers(-2, 3, (n, k)).astype(np.float16)) for _ in range(count)]
        x32, w32 = (cp.asnumpy(v).astype(np.float32) for v in (xs[0], ws[0]))
        want = (x32 @ w32.T).astype(np.float16).ravel()  # exact sums, rounded once
        work = {"cuBLAS": [lambda x=x, w=w: x @ w.T for x, w in zip(xs, ws)]}
        name, file_c, file_call = one_file(size)
        file_call(xs[0], ws[0])
        assert (cp.asnumpy(file_c) == want).all(), name
        work[f"one file ({name})"] = [lambda x=x, w=w, f=file_call: f(x, w) for x, w in zip(xs, ws)]
        for label, fits, launch in kernels:
            if not fits(n, k):
                print(f"  ({label}: does not fit {text})")
                continue
            c = cp.zeros(m * n, cp.float16)
            launch(xs[0], ws[0], c, n, k)
            launch(xs[0], ws[0], c, n, k)  # twice: the tickets left at zero
            got = cp.asnumpy(c)
            if "(" not in label:  # a parts-off variant computes no C
                assert (got == want).all(), f"{label}: {(got != want).sum()} of {got.size} differ"
            work[label] = [
                lambda x=x, w=w, f=launch, c=c, n=n, k=k: f(x, w, c, n, k) for x, w in zip(xs, ws)
            ]
        label, read = row_reader(4, 1)
        work[f"read: {label}"] = [lambda w=w, f=read, n=n, k=k: f(w, n, k, sink) for w in ws]
        times: dict[str, list[float]] = {name: [] for name in work}
        order = list(work)
        for round_ in range(args.rounds):
            shift = round_ % len(order)
            for label in order[shift:] + order[:shift]:
                t = time_calls(work[label], clock, repeat=args.repeat)
                times[label].append(t.median_ms)
        bound_ms = operand_bytes(size) / rate * 1e3
        cublas_ms = float(np.median(times["cuBLAS"]))
        print(
            f"\n{text}: the bound {bound_ms * 1e3:.1f} µs; median over {args.rounds} rounds "
            "(every C bit-exact)"
        )
        for label in order:
            ms = float(np.median(times[label]))
            print(
                f"  {label:40} {ms * 1e3:7.2f} µs  {bound_ms / ms:.3f} of the bound  "
                f"{cublas_ms / ms:.3f}x cuBLAS",
                flush=True,
            )


if __name__ == "__main__":
    main()
