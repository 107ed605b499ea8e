"""Probe (not part of tiledsl): the fastest read of the weights alone, timed as `tiledsl bench`
times a kernel, against the memory bound bench/shapes.py judges M <= 64 by.

At M <= 64 a product's time is the read of B (the N x K weights): A and C are under 1 % of
the bytes. A kernel that only reads B, as fast as a read can go, is therefore a floor no
GEMM at that shape can pass; if even it stays under MEMORY_TARGET (0.85) of the bound as
timed, no kernel can meet the target there, and the gap between it and a GEMM is what a
GEMM could still win. Two readers, each over a sweep of launch shapes, the fastest taken:

- `ldg`: every thread loads 16-byte vectors (`ld.global.nc.L1::no_allocate`), UNROLL
  independent loads in flight before it uses them, blocks striding over the whole matrix;
  the vectors are folded into one word that is written only if it equals a value no input
  gives (so the loads stay);
- `bulk`: one thread a block streams its share through shared memory by the TMA unit
  (`cp.async.bulk` of CHUNK bytes into STAGES slots, completion counted on an mbarrier per
  slot, each slot refilled as soon as it has landed): the copy engine tiledsl's kernels
  read with, without any compute behind it. Its fastest is printed beside the fastest of
  all ("TMA alone"): whether the copy engine comes as near the bound as plain loads do.

Each is timed by `tiledsl.gpu.timing.time_calls` (an event pair around each call, the calls
queued behind the hold kernel), on copies of B rotated past 2 x L2, beside cuBLAS's
product at the same shape (swapped as the canonical run's picks are: W x^T), and the bound
is bench/shapes.py's: the operands' bytes (A, B and C) over its device-to-device copy rate
of this run.

    python3 docs/probes/read_floor.py [--m 1 16 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cupy as cp

from tiledsl.gpu.runtime import device_arch, l2_bytes
from tiledsl.gpu.timing import CudaClock, median, rotation_count, time_calls

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))  # the shapes benchmark's bound: its copy, its bytes
from shapes import (  # noqa: E402
    MEMORY_BOUND_M,
    MEMORY_TARGET,
    PROJECTIONS,
    copy_bandwidth,
    operand_bytes,
)

#: A value no sum of the inputs' bits is taken to equal: the write that keeps the loads live.
NEVER = 0x9E3779B9

LDG_SOURCE = r"""
extern "C" __global__ void __launch_bounds__(1024)
read_ldg_UNROLL(const uint4* __restrict__ w, long long vectors, unsigned* sink) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    unsigned fold = 0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < vectors;
         i += stride * UNROLL) {
        uint4 v[UNROLL];
        #pragma unroll
        for (int u = 0; u < UNROLL; ++u) {  // UNROLL loads in flight before any is used
            const long long j = i + u * stride;
            if (j < vectors) {
                asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                             : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                             : "l"(w + j));
            } else {
                v[u] = make_uint4(0, 0, 0, 0);
            }
        }
        #pragma unroll
        for (int u = 0; u < UNROLL; ++u) fold ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    if (fold == NEVER) sink[0] = fold;
}
"""

BULK_SOURCE = r"""
extern "C" __global__ void __launch_bounds__(32)
read_bulk_CHUNK_STAGES(const char* __restrict__ w, long long chunks, unsigned* sink) {
    extern __shared__ __align__(128) char slots[];  // STAGES x CHUNK bytes
    __shared__ __align__(8) unsigned long long full[STAGES];
    if (threadIdx.x != 0) return;
    const unsigned bar0 = (unsigned)__cvta_generic_to_shared(&full[0]);
    const unsigned slot0 = (unsigned)__cvta_generic_to_shared(slots);
    for (int s = 0; s < STAGES; ++s)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar0 + 8 * s));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    // this block's chunks: blockIdx.x, + gridDim.x, ...; the n-th of them goes to slot n % STAGES
    const long long mine = (chunks - blockIdx.x + gridDim.x - 1) / gridDim.x;
    auto issue = [&](long long n) {
        const int s = (int)(n % STAGES);
        const char* src = w + (blockIdx.x + n * gridDim.x) * (long long)CHUNK;
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                     :: "r"(bar0 + 8 * s), "r"(CHUNK) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                     " [%0], [%1], %2, [%3];"
                     :: "r"(slot0 + s * CHUNK), "l"(src), "r"(CHUNK), "r"(bar0 + 8 * s)
                     : "memory");
    };
    for (long long n = 0; n < mine && n < STAGES; ++n) issue(n);
    for (long long n = 0; n < mine; ++n) {
        const int s = (int)(n % STAGES);
        const unsigned parity = (unsigned)((n / STAGES) & 1);
        unsigned done = 0;
        while (!done) {
            asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;"
                         " selp.u32 %0, 1, 0, p; }"
                         : "=r"(done) : "r"(bar0 + 8 * s), "r"(parity) : "memory");
        }
        if (n + STAGES < mine) issue(n + STAGES);
    }
    if (((const unsigned*)slots)[0] == NEVER) sink[0] = 1;
}
"""

LDG_UNROLLS = (2, 4, 8)
LDG_LAUNCHES = [
    (blocks, threads) for blocks in (132, 264, 528, 1056) for threads in (256, 512, 1024)
]
#: (CHUNK bytes, STAGES) of the TMA readers: 4 to 16 slots of 8 to 32 KB.
BULK_SHAPES = [(16384, 8), (16384, 12), (32768, 6), (8192, 16), (16384, 4), (8192, 8)]
BULK_BLOCKS = (132, 264, 396, 528)  # one to four blocks an SM, where their slots fit


def kernels():
    """(name, launch(buffer, bytes, sink)) of every reader variant."""
    arch = ("-arch=sm_90a",)
    out = []
    for unroll in LDG_UNROLLS:
        source = LDG_SOURCE.replace("UNROLL", str(unroll)).replace("NEVER", f"{NEVER}u")
        kernel = cp.RawKernel(source, f"read_ldg_{unroll}", options=arch)
        for blocks, threads in LDG_LAUNCHES:

            def launch(w, nbytes, sink, kernel=kernel, blocks=blocks, threads=threads):
                kernel((blocks,), (threads,), (w, cp.int64(nbytes // 16), sink))

            out.append((f"ldg unroll {unroll}, {blocks} x {threads}", launch))
    for chunk, stages in BULK_SHAPES:
        source = (
            BULK_SOURCE.replace("CHUNK_STAGES", f"{chunk}_{stages}")
            .replace("CHUNK", str(chunk))
            .replace("STAGES", str(stages))
            .replace("NEVER", f"{NEVER}u")
        )
        kernel = cp.RawKernel(source, f"read_bulk_{chunk}_{stages}", options=arch)
        kernel.max_dynamic_shared_size_bytes = chunk * stages
        for blocks in BULK_BLOCKS:
            if chunk * stages * (blocks // 132) > 220_000:
                continue  # that many blocks an SM would not fit: the same as fewer

            def launch(w, nbytes, sink, kernel=kernel, blocks=blocks, chunk=chunk, stages=stages):
                kernel(
                    (blocks,),
                    (32,),
                    (w, cp.int64(nbytes // chunk), sink),
                    shared_mem=chunk * stages,
                )

            out.append((f"bulk {chunk // 1024} KB x {stages}, {blocks} blocks", launch))
    return out


def fastest_reads(readers, weights, weight_bytes, sink, clock, rounds) -> dict:
    """{family: (the name, the median ms)} of the fastest reader of each family ("ldg",
    "bulk") over `weights`, rotated: how near the TMA unit alone comes to plain loads."""
    best: dict[str, tuple[str, float]] = {}
    for name, launch in readers:
        calls = [lambda w=w, launch=launch: launch(w, weight_bytes, sink) for w in weights]
        ms = median(
            [time_calls(calls, clock, warmup=5, repeat=30).median_ms for _ in range(rounds)]
        )
        family = name.split()[0]
        if ms < best.get(family, ("", float("inf")))[1]:
            best[family] = (name, ms)
    return best


def cublas_ms(tokens, weights, n: int, k: int, clock, rounds) -> float:
    """cuBLAS's y = x W^T (W: the N x K weights, as torch keeps a Linear's), rotated."""
    out = cp.empty((tokens.shape[0], n), cp.float16)
    calls = [lambda w=w, out=out: cp.matmul(tokens, w.reshape(n, k).T, out=out) for w in weights]
    return median([time_calls(calls, clock, warmup=5, repeat=30).median_ms for _ in range(rounds)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=int, nargs="+", default=[1, 16, MEMORY_BOUND_M])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    clock = CudaClock(device_arch())
    rate = copy_bandwidth()
    readers = kernels()
    sink = cp.zeros(1, cp.uint32)
    print(f"copy rate {rate / 1e12:.2f} TB/s; the target: {MEMORY_TARGET} of the bound")
    print(
        f"{'shape':16} {'bound µs':>8} {'read µs':>7} {'of bound':>8}  {'the fastest reader':34}"
        f" {'cuBLAS µs':>9} {'of bound':>8}"
    )
    rng = cp.random.RandomState(1)
    for n, k in PROJECTIONS:
        weight_bytes = 2 * n * k  # bulk chunks and 16-byte vectors divide it at these shapes
        count = rotation_count(weight_bytes, l2_bytes())
        weights = [rng.randint(-2, 3, n * k).astype(cp.float16) for _ in range(count)]
        best = fastest_reads(readers, weights, weight_bytes, sink, clock, args.rounds)
        name, read_ms = min(best.values(), key=lambda pick: pick[1])
        bulk_name, bulk_ms = best["bulk"]
        for m in args.m:
            tokens = rng.randint(-2, 3, (m, k)).astype(cp.float16)
            theirs = cublas_ms(tokens, weights, n, k, clock, args.rounds)
            bound_ms = operand_bytes((m, n, k)) / rate * 1e3
            print(
                f"{f'{m}x{n}x{k}':16} {bound_ms * 1e3:8.1f} {read_ms * 1e3:7.1f} "
                f"{bound_ms / read_ms:8.3f}  {name:34} {theirs * 1e3:9.1f} "
                f"{bound_ms / theirs:8.3f}  (TMA alone: {bulk_ms * 1e3:.1f} µs,"
                f" {bound_ms / bulk_ms:.3f}, {bulk_name})",
                flush=True,
            )
        del weights


if __name__ == "__main__":
    main()
