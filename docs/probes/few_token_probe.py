# ruff: noqa: E501  (the embedded CUDA keeps its own line lengths)
"""Probe (not part of tiledsl): where does a few-token kernel's time go, and does a split-K
fix-up through distributed shared memory pay? Edits the CUDA that tiledsl emits for
small_m_2 (examples/tuned/small_m.tuned.tile: 64 x 64 tiles, 8 stages, `persistent
split_k 2`), then launches it through tiledsl's own launcher and timing loop.

    python3 docs/probes/few_token_probe.py bench 64x4096x4096 64x4096x11008 ...
    python3 docs/probes/few_token_probe.py timeline 64x4096x4096
    python3 docs/probes/few_token_probe.py floor

`bench`: `tiledsl bench`'s measurement (both oracles, then the timed loop beside cuBLAS),
two rounds, of small_m_2 as emitted (its fix-up through the global workspace and a flag)
and of the DSMEM variant: the two slices of a tile are one thread-block cluster; the
second slice's consumer threads `st.async` their partial sums into the owner's shared
memory, each 16-byte store completing its bytes on an mbarrier of the owner's, which its
first thread waits on (no gpu-scope fence, no flag, no L2 round trip).

`timeline`: the DSMEM variant (its global workspace then unused) writes `%globaltimer`
at seven points of every block into the workspace, for one launch, beside the launch
loop's median; and again with M, N, K and the grid made compile-time constants (what
the kernel's index arithmetic costs before its first TMA copy).

Each also with the mbarriers initialised one per thread instead of all by thread 0.

`floor`: an empty kernel of the same launch shape in the same timing loop.

Its exact-text edits are of the CUDA tiledsl emitted before the launch-scalars pass (the
grid arithmetic in the kernel, `const int blocks = gridDim.x;`, no `Divisor` arguments),
and its DSMEM variant relies on that kernel reading the grid itself. It ran at commit
6e2ffff; run it from there: `git worktree add /tmp/probe 6e2ffff && cd /tmp/probe`.
"""

import dataclasses
import sys
from pathlib import Path

import cupy as cp
import numpy as np

import tiledsl.driver as driver
from tiledsl.commands import bench
from tiledsl.commands.run import check_size, kernel_calls
from tiledsl.gpu import runtime
from tiledsl.gpu.timing import CudaClock, rotated_sets, time_calls

SCHEDULE = """kernel @NAME@ {
    A: f16[M, K] row
    B: f16[K, N] row
    C: f16[M, N] row
    C[m, n] = A[m, k] * B[k, n]
    block 64 x 64 x 64
    mma m64n64k16
    stages 8
    copy tma
    warp_specialize
    persistent split_k 2
    swizzle grouped 8
    epilogue_via tma
    target cuda sm_90
}
"""

HELPERS = r'''
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ unsigned cluster_address(const void* p, unsigned rank) {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote)
                 : "r"(static_cast<unsigned>(__cvta_generic_to_shared(p))), "r"(rank));
    return remote;
}
__device__ __forceinline__ void st_async_f32x4(unsigned addr, float4 v, unsigned bar) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];\n"
                 :: "r"(addr), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(bar) : "memory");
}
__device__ __forceinline__ void arrive_expect_tx_remote(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cluster.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbarrier_wait_cluster(unsigned long long* bar, unsigned parity) {
    asm volatile("{\n .reg .pred p;\n WAIT_%=:\n"
                 " mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n"
                 " @!p bra WAIT_%=;\n}\n" :: "r"(static_cast<unsigned>(__cvta_generic_to_shared(bar))), "r"(parity) : "memory");
}
__device__ __forceinline__ void stamp(float* ws, int slot) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    reinterpret_cast<unsigned long long*>(ws)[blockIdx.x * 16 + slot] = t;
}
'''

# small_m_2's shared memory as emitted: the mbarriers end at byte 139392; the owner's
# partial sum (64 x 64 f32) goes after one more mbarrier, 128-byte aligned
BAR_AT, PARTIALS_AT, PARTIAL_BYTES = 139392, 139520, 16384
POINTS = ["entry", "init done", "first TMA issued", "first stage landed", "mainloop end",
          "fix-up done", "C stored", "producer past setmaxnreg", "producer before 1st wait"]


def must(src: str, old: str, new: str, count: int = 1) -> str:
    assert src.count(old) == count, (old, src.count(old))
    return src.replace(old, new)


def dsmem(src: str) -> str:
    """small_m_2's fix-up through the owner's shared memory, in clusters of 2."""
    src = must(src, "// Until `threads` threads", HELPERS + "// Until `threads` threads")
    src = must(src, 'extern "C" __global__\n', 'extern "C" __global__\n__cluster_dims__(2, 1, 1)\n')
    src = must(src, "    if (threadIdx.x == 0) {\n        for (int s = 0; s < STAGES; ++s) {",
               f"    unsigned long long* partials_bar = reinterpret_cast<unsigned long long*>(smem + {BAR_AT});\n"
               f"    float4* Ps = reinterpret_cast<float4*>(smem + {PARTIALS_AT});\n"
               "    const unsigned rank = blockIdx.x % 2;\n"
               "    if (threadIdx.x == 0) {\n        mbarrier_init(&partials_bar[0], 1);\n        for (int s = 0; s < STAGES; ++s) {")
    src = must(src, "    __syncthreads();  // the barriers are initialised", "    cluster_sync();  // the barriers are initialised")
    src = must(src, "float4* partial = reinterpret_cast<float4*>(workspace) + (pid) * (PARTIAL_FLOATS / 4);",
               "const unsigned remote = cluster_address(Ps, 0); const unsigned remote_bar = cluster_address(&partials_bar[rank - 1], 0);")
    src = must(src, "__stcg(&partial[((i * 1 + j) * 8 + v) * CONSUMER_THREADS + threadIdx.x], make_float4(",
               "st_async_f32x4(remote + 16u * (((i * 1 + j) * 8 + v) * CONSUMER_THREADS + threadIdx.x), make_float4(")
    src = must(src, "make_float4(acc[i][j][4 * v + 0], acc[i][j][4 * v + 1], acc[i][j][4 * v + 2], acc[i][j][4 * v + 3]));",
               "make_float4(acc[i][j][4 * v + 0], acc[i][j][4 * v + 1], acc[i][j][4 * v + 2], acc[i][j][4 * v + 3]), remote_bar);")
    src = must(src, "if (threadIdx.x == 0) signal_flag(&flags[pid]);",
               "if (threadIdx.x == 0) arrive_expect_tx_remote(cluster_address(&partials_bar[rank - 1], 0), PARTIAL_FLOATS * 4);")
    src = must(src, "if (threadIdx.x == 0) wait_flag(&flags[c]);", "if (threadIdx.x == 0) mbarrier_wait_cluster(&partials_bar[c - pid - 1], 0);")
    src = must(src, "const float4* partial = reinterpret_cast<const float4*>(workspace) + (c) * (PARTIAL_FLOATS / 4);",
               "const float4* partial = Ps + (c - pid - 1) * (PARTIAL_FLOATS / 4);")
    src = must(src, "const float4 sum = __ldcg(&partial[", "const float4 sum = (partial[")
    tail = "        if (lane == 0) tma_store_wait_read();  // the TMA stores have read Cs before the block exits\n    }\n}"
    return must(src, tail, tail[:-1] + "    cluster_sync();  // the owner's partial sums have landed before either exits\n}")


def parallel_init(src: str) -> str:
    """The mbarriers initialised by one thread each (lanes 0..STAGES-1), not all by thread 0."""
    return must(
        src,
        "    if (threadIdx.x == 0) {\n        mbarrier_init(&partials_bar[0], 1);\n        for (int s = 0; s < STAGES; ++s) {\n"
        "            mbarrier_init(&full[s], 1);\n            mbarrier_init(&empty[s], 1);\n        }\n        mbarrier_init_fence();\n    }",
        "    if (threadIdx.x < STAGES) {\n        if (threadIdx.x == 0) mbarrier_init(&partials_bar[0], 1);\n"
        "        mbarrier_init(&full[threadIdx.x], 1);\n        mbarrier_init(&empty[threadIdx.x], 1);\n        mbarrier_init_fence();\n    }",
    )


def stamped(src: str, size=None) -> str:
    """The DSMEM variant with %globaltimer stamps; `size`: M, N, K and a 132-block grid
    as constants."""
    src = must(src, "    extern __shared__ __align__(1024) unsigned char smem_base[];",
               "    if (threadIdx.x == 0) stamp(workspace, 0);\n    extern __shared__ __align__(1024) unsigned char smem_base[];")
    src = must(src, "    cluster_sync();  // the barriers are initialised", "    cluster_sync();\n    if (threadIdx.x == 0) stamp(workspace, 1);\n    //")
    src = must(src, "                    tma_load_2d(&Bs[step % STAGES][0][0][0], &map_B, bn * BN, kt * BK, &full[step % STAGES]);\n                }\n            }\n        }",
               "                    tma_load_2d(&Bs[step % STAGES][0][0][0], &map_B, bn * BN, kt * BK, &full[step % STAGES]);\n                    if (kt == k_lo) stamp(workspace, 2);\n                }\n            }\n        }")
    landed = "                mbarrier_wait(&full[step % STAGES], step / STAGES % 2);  // this step's tiles have landed\n"
    i = src.rfind(landed)
    src = src[:i] + landed + "                if (threadIdx.x == 0 && kt == k_lo) stamp(workspace, 3);\n" + src[i + len(landed):]
    src = must(src, "            wgmma_wait<0>();  // every wgmma has read its tiles and written its accumulators\n            if (k_lo < k_hi) {",
               "            wgmma_wait<0>();\n            if (threadIdx.x == 0) stamp(workspace, 4);\n            if (k_lo < k_hi) {")
    store = "                // C leaves by TMA, 64 columns of the warpgroup's at a time\n                #pragma unroll\n                for (int h = 0; h < 1; ++h) {\n                    if (lane == 0) tma_store_wait_read();"
    src = must(src, store, "                if (threadIdx.x == 0) stamp(workspace, 5);\n" + store)
    done = "        if (lane == 0) tma_store_wait_read();  // the TMA stores have read Cs before the block exits\n"
    src = must(src, done, done + "        if (threadIdx.x == 0) stamp(workspace, 6);\n")
    dec = "        setmaxnreg_dec<PRODUCER_REGISTERS>();  // registers back to the consumers\n"
    src = must(src, dec, dec + "        if (lane == 0) stamp(workspace, 7);\n")
    first = "                for (int kt = k_lo; kt < k_hi; ++kt) {\n                    const int step = dp_rounds * k_steps + u * k_steps + kt - sk_first;\n"
    src = must(src, first, first + "                    if (kt == k_lo) stamp(workspace, 8);\n")
    if size is not None:
        src = must(src, "    const int blocks = gridDim.x;", "    const int blocks = 132;")
        src = must(src, "    if (threadIdx.x == 0) stamp(workspace, 0);\n",
                   "    if (threadIdx.x == 0) stamp(workspace, 0);\n"
                   f"    M = {size[0]}; N = {size[1]}; K = {size[2]};\n")
    return src


def compiled(name: str):
    path = Path(f"/tmp/{name}.tile")
    path.write_text(SCHEDULE.replace("@NAME@", name))
    return path, driver.compile_file(path)


def clustered(launch):
    extra = PARTIALS_AT - BAR_AT + PARTIAL_BYTES
    return dataclasses.replace(launch, cluster_size=2, smem_bytes=launch.smem_bytes + extra)


def run_bench(sizes) -> None:
    original = driver.compile_file

    def with_dsmem(path, target=None, *a, **kw):  # what `tiledsl bench` compiles
        c = original(path, target, *a, **kw)
        if "dsmem" not in str(path):
            return c
        return dataclasses.replace(c, source=dsmem(c.source), launches=tuple(map(clustered, c.launches)))

    workspace, _ = compiled("small_m_2")
    shared, _ = compiled("small_m_2_dsmem")
    driver.compile_file = with_dsmem
    for round_ in (1, 2):
        rows = bench.measure([("workspace", str(workspace)), ("dsmem", str(shared))], sizes,
                             bench.Settings(repeat=40, baselines=("cublas",)), progress=False)
        print(f"== round {round_}\n{bench.table(rows)}")


def run_timeline(size, constants: bool, parallel: bool = False) -> None:
    _, c = compiled("small_m_2_timeline")
    k, launch = c.kernels[0], clustered(c.launches[0])
    source = stamped(dsmem(c.source), size if constants else None)
    run = runtime.launcher(runtime.load_module(source, "sm_90a", name=f"timeline{int(constants)}.cu"), launch)
    sizes = check_size(k, size)
    sets, set_bytes = rotated_sets(size, 0, "ints")
    calls = kernel_calls(k, run, sizes, size, sets)
    timing = time_calls(calls, CudaClock("sm_90a"), warmup=10, repeat=40, set_bytes=set_bytes)
    workspace = run.scratch["workspace"]
    for launch_ in range(2):
        workspace.fill(0)
        calls[launch_ % len(calls)]()
        cp.cuda.Device().synchronize()
        t = workspace.view(cp.uint64)[: run.sms * 16].reshape(run.sms, 16).get().astype(np.int64)
        base = t[:, 0].min()
        print(f"{'x'.join(map(str, size))}, constants {constants}, parallel init {parallel}: launch loop median "
              f"{timing.median_ms * 1000:.1f} us; one launch (us after the first block's entry):")
        for j, name in enumerate(POINTS):
            col = t[:, j][t[:, j] > 0] - base
            print(f"   {name:26s} min {col.min() / 1e3:6.2f} median {np.median(col) / 1e3:6.2f} "
                  f"max {col.max() / 1e3:6.2f}  ({len(col)} blocks)")


def run_floor() -> None:
    """An empty kernel of small_m_2's launch shape (132 blocks of 256 threads, the same
    dynamic shared memory) in the same timing loop: what a launch costs outside a kernel."""
    _, c = compiled("small_m_2")
    empty = cp.RawKernel('extern "C" __global__ void empty() {}', "empty")
    empty.max_dynamic_shared_size_bytes = c.launches[0].smem_bytes
    call = [lambda: empty((132,), (256,), (), shared_mem=c.launches[0].smem_bytes)]
    timing = time_calls(call, CudaClock("sm_90a"), warmup=10, repeat=100)
    print(f"empty kernel, 132 x 256 threads, {c.launches[0].smem_bytes} bytes of shared memory: "
          f"median {timing.median_ms * 1000:.2f} us (min {timing.min_ms * 1000:.2f})")


if __name__ == "__main__":
    what, *shapes = sys.argv[1:]
    sizes = [tuple(int(v) for v in s.split("x")) for s in shapes]
    if what == "bench":
        run_bench(sizes)
    elif what == "floor":
        run_floor()
    else:
        for size in sizes:
            for constants, parallel in ((False, False), (False, True), (True, False), (True, True)):
                run_timeline(size, constants, parallel)
