"""What a tiledsl kernel is measured against: cuBLAS and, where installed, Triton.

Both run in the same process, on the tiledsl kernel's own f16 inputs (views of the
same device memory, in the kernel's layouts), and both write an **f16 C** with f32
accumulation: `cupy.matmul` on f16 arrays returns f16 (cuBLAS accumulates in f32),
and the Triton kernel here does the same, the standard choice for both. A tiledsl
kernel with an f32 C therefore writes twice their output bytes; the table shows
each row's C type. Their results are judged by the same two oracles as tiledsl's,
for an f16 output (`baseline_gemm`): exact (the integer sums rounded once to f16)
and statistical (the f32-accumulation bound plus half an f16 ulp).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..interp.oracle import from_storage
from ..ir.gemm import Gemm


@dataclass(frozen=True)
class Baseline:
    name: str  # as the table shows it
    kind: str  # "cublas" or "triton"
    unavailable: str | None  # why it cannot run here, or None
    run: Callable | None = None  # (a, b, out): out[:] = a @ b, on wrapped arrays
    wrap: Callable = lambda array: array  # CuPy array -> what `run` takes (same memory)

    def matmul(self, a, b, out) -> None:
        """out[:] = a @ b for CuPy arrays: logical M x K and K x N views, an M x N f16 out."""
        assert self.run is not None  # only an available baseline runs
        self.run(self.wrap(a), self.wrap(b), self.wrap(out))

    def calls(self, gemm: Gemm, size: tuple[int, int, int], sets) -> list:
        """One call per input set (flat A, B in the kernel's layouts), all into one f16 C.

        The views are made and wrapped here, once, so that a timed call is a launch and
        nothing else (no DLPack exchange, which may synchronize).
        """
        import cupy

        run = self.run
        assert run is not None  # only an available baseline runs
        m, n, k = size
        out = self.wrap(cupy.empty((m, n), cupy.float16))
        views = [
            (self.wrap(from_storage(gemm.a, a, (m, k))), self.wrap(from_storage(gemm.b, b, (k, n))))
            for a, b in sets
        ]
        return [lambda a=a, b=b: run(a, b, out) for a, b in views]


def baseline_gemm(gemm: Gemm) -> Gemm:
    """`gemm` as the baselines compute it: C = A @ B into a row-major f16 C."""
    return replace(gemm, c=replace(gemm.c, dtype="f16", layout="row"), accumulate=False)


def cublas() -> Baseline:
    def run(a, b, out) -> None:
        import cupy

        cupy.matmul(a, b, out=out)

    return Baseline("cuBLAS", "cublas", None, run)


def triton() -> Baseline:
    """Triton's matmul (`tiledsl/triton_matmul.py`) on torch's DLPack views of CuPy arrays."""
    for module in ("triton", "torch"):
        if importlib.util.find_spec(module) is None:
            return Baseline("Triton", "triton", f"{module} not installed")
    try:
        import torch

        from .triton_matmul import matmul
    except Exception as err:  # a broken install is a reason to skip, not to stop the bench
        return Baseline("Triton", "triton", f"triton unusable: {type(err).__name__}: {err}")
    return Baseline("Triton", "triton", None, matmul, torch.from_dlpack)


BASELINES = {"cublas": cublas, "triton": triton}
