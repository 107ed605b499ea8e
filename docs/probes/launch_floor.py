"""Probe (not part of tiledsl): what a launch costs in tiledsl's timing loop, by launch shape.

    python3 docs/probes/launch_floor.py

An empty kernel timed by `tiledsl.gpu.timing.time_calls` (an event pair around each run,
the runs queued behind the hold kernel) at several launch shapes: blocks, threads per
block, dynamic shared memory, and a cluster. Whatever a GEMM of that launch shape does,
it pays at least this; a difference between shapes is a cost a schedule could choose.
"""

import cupy as cp

from tiledsl.gpu.timing import CudaClock, time_calls

SHAPES = [  # (blocks, threads, dynamic shared memory bytes, cluster)
    (1, 32, 0, 1),
    (132, 128, 0, 1),
    (132, 384, 0, 1),
    (132, 384, 100_000, 1),
    (132, 384, 200_000, 1),
    (132, 384, 230_000, 1),
    (132, 256, 140_000, 1),
    (132, 384, 200_000, 2),
    (264, 128, 60_000, 1),
]


def main() -> None:
    clock = CudaClock("sm_90a")
    for blocks, threads, smem, cluster in SHAPES:
        source = 'extern "C" __global__ void empty() {}'
        if cluster > 1:
            source = f'extern "C" __global__ void __cluster_dims__({cluster}, 1, 1) empty() {{}}'
        kernel = cp.RawKernel(source, "empty", options=("-arch=sm_90a",))
        kernel.max_dynamic_shared_size_bytes = smem

        def call(kernel=kernel, blocks=blocks, threads=threads, smem=smem):
            kernel((blocks,), (threads,), (), shared_mem=smem)

        t = time_calls([call], clock, warmup=20, repeat=200)
        print(
            f"{blocks:4} blocks x {threads:3} threads, {smem:7} B shared, cluster {cluster}: "
            f"median {t.median_ms * 1e3:5.2f} us (min {t.min_ms * 1e3:5.2f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
