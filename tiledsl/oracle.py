"""The two oracles of VERIFICATION.md, shared by the interpreter and the GPU runner.

Exact (primary): A, B (and C for `+=`) are integers in [-2, 2], so every product
and partial sum is exact in f32; the expected result is an int64 matmul, compared
bit for bit (for f16 C, after round-to-nearest-even, like `__float2half`).

Statistical (secondary): A, B ~ N(0, 1) in f16; the reference is float64 from the
rounded inputs; each element must satisfy
    |C - R| <= e + u_out * (|R| + e)  (+ 2**-24 for f16 subnormals)
    with e = K * 2**-24 * (|A| @ |B| + |C_in|)
and the report is max(err / bound), which must be <= 1.

Arrays are logical (rows x cols as the product sees them); `to_storage` and
`from_storage` convert to the 1-D layout the kernel reads and writes. Every
function works on numpy or CuPy arrays alike, so a GPU run checks on the GPU:
the references are float64 matmuls (exact for these integer inputs, whose sums
stay far below 2**53), never numpy's integer matmul, which has no BLAS.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .gemm import Gemm, OperandInfo

NP_OUT = {"f16": np.float16, "f32": np.float32}


def xp_of(array):
    """numpy, or cupy for a CuPy array: the module to compute with."""
    module = type(array).__module__.split(".")[0]
    if module == "cupy":
        import cupy

        return cupy
    return np


def to_storage(op: OperandInfo, logical):
    xp = xp_of(logical)
    return xp.ascontiguousarray(logical if op.layout == "row" else logical.T).ravel()


def from_storage(op: OperandInfo, flat: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    if op.layout == "row":
        return flat.reshape(shape)
    return flat.reshape(shape[::-1]).T


@dataclass
class Inputs:
    a: np.ndarray
    b: np.ndarray
    c_in: np.ndarray  # the initial C (NaN poison for '=', data for '+=')


def make_inputs(gemm: Gemm, m: int, n: int, k: int, kind: str, rng: np.random.Generator) -> Inputs:
    """Fresh inputs: kind 'exact' (integers in [-2, 2]) or 'normal' (N(0, 1)), rounded to f16."""

    def draw(shape):
        if kind == "exact":
            return rng.integers(-2, 3, size=shape).astype(np.float16)
        return rng.standard_normal(shape).astype(np.float16)

    a, b = draw((m, k)), draw((k, n))
    out = NP_OUT[gemm.c.dtype]
    c_in = draw((m, n)).astype(out) if gemm.accumulate else np.full((m, n), np.nan, out)
    return Inputs(a, b, c_in)


@dataclass
class Check:
    oracle: str
    ok: bool
    detail: str
    score: float = 0.0  # statistical: max(err / bound)


def to_device(inputs: Inputs, xp) -> Inputs:
    return Inputs(xp.asarray(inputs.a), xp.asarray(inputs.b), xp.asarray(inputs.c_in))


def check_exact(gemm: Gemm, inputs: Inputs, out, tile: tuple[int, int]) -> Check:
    xp = xp_of(out)
    expected = inputs.a.astype(xp.float64) @ inputs.b.astype(xp.float64)
    if gemm.accumulate:
        expected = expected + inputs.c_in.astype(xp.float64)
    if not bool(expected.any()):
        return Check("exact oracle", False, "the reference is all zeros: the inputs prove nothing")
    want = expected.astype(xp.float32).astype(NP_OUT[gemm.c.dtype])
    same = out == want
    if bool(same.all()):
        return Check("exact oracle", True, "bit-exact")
    i, j = map(int, xp.argwhere(~same)[0])
    bad = int((~same).sum())
    return Check(
        "exact oracle",
        False,
        f"{bad} of {same.size} elements differ; first at C[{i}, {j}] = "
        f"{float(out[i, j])} (expected {float(want[i, j])}), in block tile "
        f"({i // tile[0]}, {j // tile[1]})",
    )


def check_statistical(gemm: Gemm, inputs: Inputs, out) -> Check:
    xp = xp_of(out)
    a, b = inputs.a.astype(xp.float64), inputs.b.astype(xp.float64)
    c0 = inputs.c_in.astype(xp.float64) if gemm.accumulate else 0.0
    ref = a @ b + c0
    k = a.shape[1]
    magnitude = xp.abs(a) @ xp.abs(b) + xp.abs(c0)
    u_out = 2.0**-11 if gemm.c.dtype == "f16" else 0.0
    floor = 2.0**-24 if gemm.c.dtype == "f16" else 0.0
    accumulated = k * 2.0**-24 * magnitude
    bound = accumulated + u_out * (xp.abs(ref) + accumulated) + floor
    got = out.astype(xp.float64)
    finite = xp.isfinite(got)
    if not bool(finite.all()):
        i, j = map(int, xp.argwhere(~finite)[0])
        return Check(
            "statistical oracle",
            False,
            f"C[{i}, {j}] = {float(got[i, j])}: not finite (unwritten?)",
            float("inf"),
        )
    err = xp.abs(got - ref)
    ratio = err / xp.maximum(bound, 2.0**-60)
    score = float(ratio.max())
    return Check("statistical oracle", score <= 1.0, f"max(err / bound) = {score:.3g}", score)
