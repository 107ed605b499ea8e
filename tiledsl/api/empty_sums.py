"""C where K = 0: every element is a sum over nothing (zero), then the epilogue.

    write_empty_sums(kernel, out, biases, values, library)

torch's `addmm` and cuBLAS give the same (beta·C, plus a bias, where the call asks for
them; zeros for a plain product). No kernel computes it: a TMA tensor map cannot have a
dimension of 0, and a tile loop of no K steps would store its zero accumulators through
every path's epilogue, a launch for what one element-wise pass on the caller's arrays
does. So the caller's own array library computes it, with the kernel's epilogue
(tiledsl.ir.epilogue.Epilogue.apply: each step one float32 operation rounded to nearest,
as the kernel rounds it), then rounds to C's type: numpy on the CPU, CuPy on the GPU on
its current stream, and a torch tensor through CuPy views (DLPack) on torch's current
stream, as a launch would run.
"""

from __future__ import annotations

import importlib

from ..ir.epilogue import Epilogue
from ..ir.nodes import KernelIR


def write_empty_sums(kernel: KernelIR, out, biases: dict, values: dict, library: str) -> None:
    """C (`out`, the caller's array, in place) as `kernel`'s epilogue makes a zero
    accumulator: `biases` are the epilogue's vectors by name, `values` the call's runtime
    alpha and beta."""
    epilogue = Epilogue.of(kernel.schedule, kernel.gemm)
    if epilogue is None and kernel.gemm.accumulate:
        return  # C += a sum over nothing: C as it is
    if library == "torch":
        _torch(epilogue, out, biases, values)
        return
    xp = importlib.import_module("numpy" if library == "numpy" else "cupy")
    out[...] = _sums(epilogue, out, biases, values, xp)


def _sums(epilogue: Epilogue | None, c_old, biases: dict, values: dict, xp):
    """float32 values of C for a zero accumulator (`xp`: numpy or CuPy)."""
    zero = xp.zeros(c_old.shape, xp.float32)
    if epilogue is None:
        return zero
    bound = epilogue.bound(values)
    return bound.apply(
        zero,
        c_old.astype(xp.float32) if bound.reads_c else None,
        {name: biases[name].astype(xp.float32) for name in bound.bias_operands},
        xp,
    )


def _torch(epilogue: Epilogue | None, out, biases: dict, values: dict) -> None:
    """The sums for torch tensors: float32 copies made by torch (CuPy has no bfloat16),
    viewed by CuPy on torch's current stream, the result rounded into `out` by torch."""
    import cupy
    import torch

    stream = torch.cuda.current_stream(out.device)
    with cupy.cuda.ExternalStream(stream.cuda_stream):
        c_old = cupy.from_dlpack(out.float())
        vectors = {name: cupy.from_dlpack(v.float()) for name, v in biases.items()}
        sums = _sums(epilogue, c_old, vectors, values, cupy)
        out.copy_(torch.from_dlpack(sums))
