# ruff: noqa: E501  (the embedded CUDA keeps its own line lengths)
"""Probe (not part of tiledsl): what do cp.async's shared-memory stores cost for a given
row pitch and lane mapping? Copies one A-like tile (128 rows x 64 f16, 128-byte global
lines) or B-like tile (64 x 256) per step, 512 threads, again and again.

    python3 docs/probes/store_probe.py [--variant NAME] [--iters N]

Mappings: "rows" gives each 8-lane phase one 128-byte global line (what tiledsl emits);
"blocks" gives each phase the 8 16-byte slots of one 128-byte-aligned shared-memory block
(a padded row's chunks then come from at most two global lines; pad slots idle). Run
under Nsight Compute's source counters for the wavefronts per LDGSTS, and it prints the
time per step.
"""

import argparse
import os
import subprocess
import tempfile

import cupy as cp
import numpy as np

KERNEL = r"""
#include <cuda_fp16.h>
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(gmem));
}
extern "C" __global__ void __launch_bounds__(512) copies_@NAME@(const half* __restrict__ A, int K, int iters, int* sink)
{
    constexpr int ROWS = @ROWS@, COLS = @COLS@, PITCH = @PITCH@;  // elements
    constexpr int CHUNKS = COLS / 8, SLOTS = PITCH / 8;          // 16-byte chunks per row, per pitch
    constexpr bool BLOCKS = @BLOCKS@;
    constexpr int VECTORS = BLOCKS ? ROWS * SLOTS : ROWS * CHUNKS;
    constexpr int ITS = (VECTORS + 511) / 512;
    extern __shared__ __align__(128) unsigned char smem[];
    half* tile = reinterpret_cast<half*>(smem);
    for (int i = 0; i < iters; ++i) {
        const half* src = A + (size_t)blockIdx.x * ROWS * K + (size_t)(i % (K / COLS)) * COLS;
        #pragma unroll
        for (int it = 0; it < ITS; ++it) {
            const int v = threadIdx.x + it * 512;
            const int r = BLOCKS ? v / SLOTS : v / CHUNKS, c = BLOCKS ? v % SLOTS : v % CHUNKS;
            if (v < VECTORS && c < CHUNKS)
                cp_async16(&tile[r * PITCH + c * 8], &src[(size_t)r * K + c * 8]);
        }
        asm volatile("cp.async.commit_group;\n" ::);
        asm volatile("cp.async.wait_group 0;\n" ::);
        __syncthreads();
    }
    if (threadIdx.x == 0 && tile[7] == half(12345.0f)) sink[0] = 1;
}
"""

#: name: (rows, cols, pitch, blocks)
VARIANTS = {
    "a_rows_128B": (128, 64, 64, False),
    "a_rows_144B": (128, 64, 72, False),
    "a_blocks_144B": (128, 64, 72, True),
    "a_rows_176B": (128, 64, 88, False),
    "a_blocks_176B": (128, 64, 88, True),
    "b_rows_512B": (64, 256, 256, False),
    "b_rows_528B": (64, 256, 264, False),
    "b_blocks_528B": (64, 256, 264, True),
}


def build(name):
    rows, cols, pitch, blocks = VARIANTS[name]
    src = (
        KERNEL.replace("@NAME@", name)
        .replace("@ROWS@", str(rows))
        .replace("@COLS@", str(cols))
        .replace("@PITCH@", str(pitch))
        .replace("@BLOCKS@", "true" if blocks else "false")
    )
    tmp = tempfile.mkdtemp()
    cu, cubin = os.path.join(tmp, "k.cu"), os.path.join(tmp, "k.cubin")
    open(cu, "w").write(src)
    subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-O3", "-o", cubin, cu], check=True)
    fn = cp.RawModule(path=cubin).get_function(f"copies_{name}")
    fn.max_dynamic_shared_size_bytes = rows * pitch * 2
    return fn, rows * pitch * 2, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", action="append")
    ap.add_argument("--iters", type=int, default=256)
    args = ap.parse_args()
    K = 4096
    A = cp.asarray(np.random.default_rng(0).standard_normal((132 * 128, K)).astype(np.float16))
    sink = cp.zeros(1, cp.int32)
    for name in args.variant or VARIANTS:
        fn, smem, rows = build(name)
        grid = (132 * 128) // rows

        def run(fn=fn, grid=grid, smem=smem):
            fn((grid,), (512,), (A, np.int32(K), np.int32(args.iters), sink), shared_mem=smem)

        run()
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(10):
            run()
        stop.record()
        stop.synchronize()
        ns = cp.cuda.get_elapsed_time(start, stop) / 10 / args.iters * 1e6
        print(f"{name:16s} {ns:8.1f} ns per step (all blocks)", flush=True)


if __name__ == "__main__":
    main()
