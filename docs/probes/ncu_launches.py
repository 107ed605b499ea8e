"""Probe (not part of tiledsl): launches for ncu to profile, and nothing else. Each kernel
named (FILE:KERNEL) three times at one size, on the exact oracle's inputs, then cuBLAS
(`cupy.matmul`, y = x W^T with W as torch keeps it) three times, so that ncu's report
holds both in one process:

    ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
        --launch-count 14 python3 docs/probes/ncu_launches.py MxNxK FILE:KERNEL ...

(bench/results/ncu-direct-split-h100-2026-12-06.txt: the direct path's split and unsplit
kernels at 1 x 4096 x 11008.)
"""

import sys

import cupy as cp
import numpy as np

from tiledsl.driver import compile_file
from tiledsl.gpu.runtime import device_arch, launcher, load_module
from tiledsl.interp.oracle import make_inputs, to_storage
from tiledsl.ir.targets import build_arch

m, n, k = (int(x) for x in sys.argv[1].split("x"))
for spec in sys.argv[2:]:
    path, name = spec.split(":")
    compiled = compile_file(path)
    index = [kk.name for kk in compiled.kernels].index(name)
    kernel, launch = compiled.kernels[index], compiled.launches[index]
    module = load_module(compiled.source_for((kernel,)), build_arch(device_arch(), (kernel,)))
    run = launcher(module, launch)
    g = kernel.gemm.as_written
    inputs = make_inputs(g, m, n, k, "exact", np.random.default_rng(1))
    arrays = {
        g.a.name: cp.asarray(to_storage(g.a, inputs.a)),
        g.b.name: cp.asarray(to_storage(g.b, inputs.b)),
        g.c.name: cp.zeros((m, n), cp.float16),
    }
    for _ in range(3):
        run(arrays, g.size_env(m, n, k))
    cp.cuda.Device().synchronize()
rng = np.random.default_rng(2)
a = cp.asarray(rng.standard_normal((m, k)).astype(np.float16))
w = cp.asarray(rng.standard_normal((n, k)).astype(np.float16))
for _ in range(3):
    c = cp.matmul(a, w.T)
cp.cuda.Device().synchronize()
print("done")
