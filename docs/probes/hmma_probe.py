# ruff: noqa: E501  (the embedded CUDA keeps its own line lengths)
"""Ceiling probe (not part of tiledsl): how fast can HMMA (what WMMA and mma.sync compile to
on sm_90) go on this GPU, and how close is a generated WMMA kernel to that?

    python3 docs/probes/hmma_probe.py [--tile FILE] [--size 4096] [--json OUT]

1. peak: warps that do nothing but independent mma.sync.m16n8k16 (f16 and f32
   accumulation), no memory traffic: the instruction's throughput ceiling.
2. the .tile file's kernel as tiledsl emits it, timed beside the same source with its
   cp.async copies removed (shared memory and HMMA only: the ceiling of that schedule's
   inner loop, with no global traffic) and cuBLAS on the same inputs.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import cupy as cp
import numpy as np

PEAK = r"""
#include <cuda_fp16.h>
extern "C" __global__ void peak_@ACC@(float* out, int iters)
{
    constexpr int CHAINS = @CHAINS@;
    unsigned a[4] = {threadIdx.x, threadIdx.x * 3u, threadIdx.x * 5u, threadIdx.x * 7u};
    unsigned b[2] = {threadIdx.x * 11u, threadIdx.x * 13u};
#if @F32@
    float d[CHAINS][4] = {};
#else
    unsigned d[CHAINS][2] = {};
#endif
    for (int it = 0; it < iters; ++it) {
        #pragma unroll
        for (int c = 0; c < CHAINS; ++c) {
#if @F32@
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
                : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};\n"
                : "+r"(d[c][0]), "+r"(d[c][1])
                : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
        }
    }
    float s = 0.0f;
    #pragma unroll
    for (int c = 0; c < CHAINS; ++c) s += (float)d[c][0];
    if (s == 1234.5f) out[0] = s;  // keeps the chains alive
}
"""

CP_ASYNC_16 = 'asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\\n" :: "r"(dst), "l"(gmem));'


def nvcc_cubin(source: str, arch: str = "sm_90") -> tuple[str, str]:
    tmp = tempfile.mkdtemp()
    cu, cubin = os.path.join(tmp, "k.cu"), os.path.join(tmp, "k.cubin")
    open(cu, "w").write(source)
    r = subprocess.run(
        ["nvcc", "-cubin", f"-arch={arch}", "-O3", "-std=c++17", "-Xptxas", "-v", "-o", cubin, cu],
        capture_output=True,
        text=True,
    )
    if r.returncode:
        sys.exit(f"nvcc failed:\n{r.stderr[-3000:]}")
    return cubin, "; ".join(line.strip() for line in r.stderr.splitlines() if "registers" in line)


def bench(fn, reps=30):
    for _ in range(3):
        fn()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return float(np.median(times))


def peak(rows):
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    out = cp.zeros(1, cp.float32)
    for acc in ("f16", "f32"):
        for chains in (4, 8):
            src = PEAK.replace("@ACC@", acc).replace("@CHAINS@", str(chains))
            src = src.replace("@F32@", "1" if acc == "f32" else "0")
            cubin, regs = nvcc_cubin(src)
            fn = cp.RawModule(path=cubin).get_function(f"peak_{acc}")
            iters = 4096
            for warps in (4, 8, 16):
                for blocks_per_sm in (1, 2):
                    blocks = sms * blocks_per_sm
                    ms = bench(
                        lambda fn=fn, b=blocks, w=warps, n=iters: fn(
                            (b,), (w * 32,), (out, np.int32(n))
                        )
                    )
                    flops = 2.0 * 16 * 8 * 16 * chains * iters * warps * blocks
                    tf = flops / ms / 1e9
                    print(
                        f"peak mma.sync m16n8k16 {acc} acc: {chains} chains, {warps} warps x {blocks_per_sm} block(s)/SM: {tf:7.1f} TFLOP/s",
                        flush=True,
                    )
                    rows.append(
                        dict(
                            probe="peak",
                            acc=acc,
                            chains=chains,
                            warps=warps,
                            blocks_per_sm=blocks_per_sm,
                            tflops=tf,
                        )
                    )


def generated(tile, sizes, rows):
    tmp = tempfile.mkdtemp()
    cu = os.path.join(tmp, "k.cu")
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from tiledsl.cli import main; sys.exit(main())",
            "compile",
            tile,
            "-o",
            cu,
        ],
        check=True,
    )
    launch = json.load(open(cu + ".launch.json"))[0]
    source = open(cu).read()
    assert CP_ASYNC_16 in source
    variants = {"as emitted": source, "no global copies": source.replace(CP_ASYNC_16, "")}
    name = launch["kernel"]
    for size in sizes:
        M = N = K = size
        rng = np.random.default_rng(0)
        A = cp.asarray(rng.integers(-2, 3, (M, K)).astype(np.float16))
        B = cp.asarray(rng.integers(-2, 3, (K, N)).astype(np.float16))
        flops = 2.0 * M * N * K
        cublas = flops / bench(lambda a=A, b=B: cp.matmul(a, b)) / 1e9
        print(f"size {size}: cuBLAS {cublas:.1f} TFLOP/s", flush=True)
        c_dtype = cp.float16 if "half* __restrict__ C" in source else cp.float32
        for label, src in variants.items():
            cubin, regs = nvcc_cubin(src)
            fn = cp.RawModule(path=cubin).get_function(name)
            smem = launch["dynamic_shared_memory_bytes"]
            fn.max_dynamic_shared_size_bytes = smem
            C = cp.zeros((M, N), c_dtype)
            bm, bn, _ = launch["block_tile"]
            grid = (M // bm) * (N // bn)
            args = (A, B, C, np.int32(M), np.int32(N), np.int32(K))

            def run(fn=fn, grid=grid, args=args, smem=smem):
                fn((grid,), (launch["block"]["x"],), args, shared_mem=smem)

            tf = flops / bench(run) / 1e9
            print(
                f"  {name} {label}: {tf:7.1f} TFLOP/s ({tf / cublas:.2f}x cuBLAS)  {regs}",
                flush=True,
            )
            rows.append(
                dict(
                    probe="generated", tile=tile, variant=label, size=size, tflops=tf, cublas=cublas
                )
            )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tile", action="append", default=[])
    ap.add_argument("--size", type=int, action="append")
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    peak(rows)
    for tile in args.tile:
        generated(tile, args.size or [4096], rows)
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
