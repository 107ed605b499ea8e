# ruff: noqa: E501  (the embedded CUDA keeps its own line lengths)
"""Go/no-go probe (not part of tiledsl): how fast is a cp.async + wgmma GEMM of the shape
tiledsl could emit (no TMA, no warp specialisation) on this GPU?

    python3 docs/probes/wgmma_probe.py [--size 4096]

Generates CUDA for a few (BM, BN, warpgroups, stages, wgmma depth, descriptor) variants,
builds each with nvcc for sm_90a, checks it against cupy's f32 matmul and times it
beside cupy.matmul (cuBLAS) on the same f16 inputs.
"""

import argparse
import json
import os
import subprocess
import tempfile

import cupy as cp
import numpy as np

HEADER = r"""
#include <cuda_fp16.h>
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
}
__device__ __forceinline__ unsigned long long desc(const void* p, unsigned lbo, unsigned sbo) {
    unsigned long long a = static_cast<unsigned>(__cvta_generic_to_shared(p));
    return ((a & 0x3FFFF) >> 4) | ((unsigned long long)(lbo >> 4) << 16)
         | ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}
"""


def wgmma_helper(n):
    regs = n // 2
    outs = ", ".join(f"%{i}" for i in range(regs))
    cons = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    return f"""
__device__ __forceinline__ void wgmma_m64n{n}k16(float (&d)[{regs}], unsigned long long da, unsigned long long db) {{
    asm volatile("{{\\n"
        "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16 "
        "{{{outs}}}, %{regs}, %{regs + 1}, 1, 1, 1, 0, 1;\\n"
        "}}\\n"
        : {cons}
        : "l"(da), "l"(db));
}}
"""


KERNEL = r"""
constexpr int BM = @BM@, BN = @BN@, BK = 64, STAGES = @S@, WG_M = @WGM@, WG_N = @WGN@;
constexpr int THREADS = WG_M * WG_N * 128;
constexpr int WN = BN / WG_N, WM = BM / WG_M, MI = WM / 64;  // a warpgroup: MI wgmmas of 64 x WN
constexpr int DEPTH = @DEPTH@;  // wgmma groups left in flight at the end of a step
constexpr int AHEAD = STAGES - 1 - DEPTH;
constexpr int A_STAGE = BM * BK, B_STAGE = BK * BN;  // elements
extern "C" __global__ void __launch_bounds__(THREADS, 1)
probe(const half* __restrict__ A, const half* __restrict__ B, float* __restrict__ C, int M, int N, int K)
{
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    half* smem = reinterpret_cast<half*>((reinterpret_cast<size_t>(smem_raw) + 1023) & ~size_t(1023));
    half* As = smem;
    half* Bs = smem + STAGES * A_STAGE;
    const int tiles_m = M / BM, tiles_n = N / BN, pid = blockIdx.x;
    const int width = 8 * tiles_n, group = pid / width, first_m = group * 8;
    const int group_m = min(tiles_m - first_m, 8);
    const int bm = first_m + pid % width % group_m, bn = pid % width / group_m;
    const int wg = threadIdx.x / 128, wgm = wg / WG_N, wgn = wg % WG_N;
    const int lane = threadIdx.x % 32, warp_in_wg = threadIdx.x % 128 / 32;
    float acc[MI][WN / 2];
    #pragma unroll
    for (int i = 0; i < MI; ++i)
        #pragma unroll
        for (int q = 0; q < WN / 2; ++q) acc[i][q] = 0.0f;
    const int KT = K / BK;
    auto load = [&](int kt) {
        const int s = kt % STAGES;
        half* as = As + s * A_STAGE;
        half* bs = Bs + s * B_STAGE;
        #pragma unroll
        for (int it = 0; it < BM * 8 / THREADS; ++it) {
            const int v = threadIdx.x + it * THREADS, r = v / 8, c = v % 8;
            cp_async16(as + r * 64 + ((c ^ (r & 7)) * 8), A + (long long)(bm * BM + r) * K + kt * BK + c * 8);
        }
        #pragma unroll
        for (int it = 0; it < BK * BN / 8 / THREADS; ++it) {
            const int v = threadIdx.x + it * THREADS, r = v / (BN / 8), cc = v % (BN / 8);
            const int p = cc / 8, c = cc % 8;
            cp_async16(bs + p * BK * 64 + r * 64 + ((c ^ (r & 7)) * 8), B + (long long)(kt * BK + r) * N + bn * BN + cc * 8);
        }
    };
    #pragma unroll
    for (int s = 0; s < AHEAD; ++s) {
        if (s < KT) load(s);
        cp_async_commit();
    }
    for (int kt = 0; kt < KT; ++kt) {
        cp_async_wait<AHEAD - 1>();
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
        if (kt + AHEAD < KT) load(kt + AHEAD);
        cp_async_commit();
        const half* as = As + (kt % STAGES) * A_STAGE + wgm * WM * 64;
        const half* bs = Bs + (kt % STAGES) * B_STAGE + wgn * (WN / 64) * BK * 64;
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        #pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            #pragma unroll
            for (int i = 0; i < MI; ++i) {
                const unsigned long long da = desc(as + i * 64 * 64 + kk * 16, 16, 1024);
                const unsigned long long db = desc(bs + kk * 16 * 64, @LBO@, @SBO@);
                wgmma_m64n@WN@k16(acc[i], da, db);
            }
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(DEPTH) : "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    const int g = lane / 4, t = lane % 4 * 2;
    #pragma unroll
    for (int i = 0; i < MI; ++i) {
        const int row = bm * BM + wgm * WM + i * 64 + warp_in_wg * 16 + g;
        #pragma unroll
        for (int j = 0; j < WN / 8; ++j) {
            const int col = bn * BN + wgn * WN + j * 8 + t;
            *reinterpret_cast<float2*>(&C[(long long)row * N + col]) = make_float2(acc[i][j * 4], acc[i][j * 4 + 1]);
            *reinterpret_cast<float2*>(&C[(long long)(row + 8) * N + col]) = make_float2(acc[i][j * 4 + 2], acc[i][j * 4 + 3]);
        }
    }
}
"""


def source(v):
    text = KERNEL
    for key, val in v.items():
        text = text.replace(f"@{key}@", str(val))
    return HEADER + wgmma_helper(v["BN"] // v["WGN"]) + text


def smem_bytes(v):
    return v["S"] * (v["BM"] * 64 + 64 * v["BN"]) * 2 + 1024


def bench(fn, reps=40):
    for _ in range(5):
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, action="append")
    ap.add_argument("--json")
    args = ap.parse_args()
    sizes = args.size or [4096]
    variants = []
    for bm, bn, wgm, wgn, s in [
        (128, 256, 2, 1, 4),
        (128, 256, 2, 1, 3),
        (256, 128, 2, 1, 4),
        (128, 128, 1, 1, 4),
        (256, 128, 2, 1, 3),
        (128, 256, 1, 2, 4),
    ]:
        for depth in (0, 1):
            if s - 1 - depth < 1:
                continue
            for lbo in (None, "SWAP"):
                v = dict(BM=bm, BN=bn, WGM=wgm, WGN=wgn, S=s, DEPTH=depth)
                v["WN"] = bn // wgn
                if lbo is None:
                    v["LBO"], v["SBO"] = "64 * 64 * 2", 1024
                else:
                    v["LBO"], v["SBO"] = 1024, "64 * 64 * 2"
                variants.append(v)
    nvcc = "nvcc"
    rows = []
    for size in sizes:
        M = N = K = size
        rng = np.random.default_rng(0)
        A = cp.asarray(rng.integers(-2, 3, (M, K)).astype(np.float16))
        B = cp.asarray(rng.integers(-2, 3, (K, N)).astype(np.float16))
        ref = A.astype(cp.float32) @ B.astype(cp.float32)
        cublas_ms = bench(lambda a=A, b=B: cp.matmul(a, b))
        flops = 2.0 * M * N * K
        print(f"size {size}: cuBLAS {flops / cublas_ms / 1e9:.1f} TFLOP/s", flush=True)
        for v in variants:
            name = f"{v['BM']}x{v['BN']} wg{v['WGM']}x{v['WGN']} s{v['S']} d{v['DEPTH']} lbo={v['LBO']}"
            if smem_bytes(v) > 232448:
                print(f"{name}: skip (smem {smem_bytes(v)})")
                continue
            with tempfile.TemporaryDirectory() as tmp:
                cu = os.path.join(tmp, "k.cu")
                open(cu, "w").write(source(v))
                cubin = os.path.join(tmp, "k.cubin")
                r = subprocess.run(
                    [
                        nvcc,
                        "-cubin",
                        "-gencode=arch=compute_90a,code=sm_90a",
                        "-O3",
                        "-std=c++17",
                        "-Xptxas",
                        "-v",
                        "-o",
                        cubin,
                        cu,
                    ],
                    capture_output=True,
                    text=True,
                )
                if r.returncode:
                    print(f"{name}: nvcc failed\n{r.stderr[-2000:]}")
                    continue
                regs = [l for l in r.stderr.splitlines() if "registers" in l]
                mod = cp.RawModule(path=cubin)
                fn = mod.get_function("probe")
            fn.max_dynamic_shared_size_bytes = smem_bytes(v)
            C = cp.zeros((M, N), cp.float32)
            threads = v["WGM"] * v["WGN"] * 128
            grid = (M // v["BM"]) * (N // v["BN"])
            args_ = (A, B, C, np.int32(M), np.int32(N), np.int32(K))
            smem = smem_bytes(v)

            def run(fn=fn, grid=grid, threads=threads, args_=args_, smem=smem):
                fn((grid,), (threads,), args_, shared_mem=smem)

            run()
            cp.cuda.Device().synchronize()
            ok = bool(cp.array_equal(C, ref))
            ms = bench(run) if ok else float("nan")
            tf = flops / ms / 1e9 if ok else 0.0
            print(
                f"{name}: {'ok' if ok else 'WRONG'} {tf:.1f} TFLOP/s ({tf / (flops / cublas_ms / 1e9):.2f}x) {regs[-1].strip() if regs else ''}",
                flush=True,
            )
            rows.append(
                dict(size=size, variant=name, ok=ok, tflops=tf, cublas=flops / cublas_ms / 1e9)
            )
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
