"""The two oracles, exact and statistical, shared by the interpreter and the GPU runner.

Exact (primary): A, B (and C for `+=`) are integers in [-2, 2], exact in f16 and
bf16, so every product and partial sum is exact in f32 (and, with at most
F16_ACTIVE_K non-zero columns of K, in an f16 accumulator); the expected result is
an exact matmul, compared bit for bit after rounding to C's type to nearest even,
like `__float2half` / `__float2bfloat16`.

Statistical (secondary): A, B ~ N(0, 1) rounded to their types; the reference is
float64 from the rounded inputs; each element must satisfy
    |C - R| <= e + u_out * (|R| + e)  (+ 2**-24 for f16 subnormals)
    with e = K * u_acc * (|A| @ |B| + |C_in|)
(u_acc = 2**-24 for an f32 accumulator, 2**-11 for f16; u_out = 2**-11 for f16 C,
2**-8 for bf16, 0 for f32) and the report is max(err / bound), which must be <= 1.

Arrays are logical (rows x cols as the product sees them); `to_storage` and
`from_storage` convert to the 1-D layout the kernel reads and writes. Every
function works on numpy or CuPy arrays alike, so a GPU run checks on the GPU:
the references are float64 matmuls (exact for these integer inputs, whose sums
stay far below 2**53), never numpy's integer matmul, which has no BLAS.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..ir.dtypes import DTYPES, STORAGE, VALUE, decode, encode, round_bf16
from ..ir.gemm import Gemm, OperandInfo

NP_OUT = STORAGE  # the output array's dtype in memory (bf16: its bits)

#: Exact inputs under f16 accumulation: at most this many K columns of A are non-zero,
#: so every partial sum stays an integer of magnitude <= 4 * 500 + 2 < 2048, exact in f16.
F16_ACTIVE_K = 500
#: The largest finite value of each type: past it a rounding step gives ±inf.
FINITE_MAX = {name: d.finite_max for name, d in DTYPES.items()}


def xp_of(array):
    """numpy, or cupy for a CuPy array: the module to compute with."""
    module = type(array).__module__.split(".")[0]
    if module == "cupy":
        import cupy

        return cupy
    return np


def to_storage(op: OperandInfo, logical):
    """A logical (rows x cols) array of values as the 1-D memory the kernel reads."""
    xp = xp_of(logical)
    matrices = logical if op.layout == "row" else xp.swapaxes(logical, -1, -2)
    return encode(xp.ascontiguousarray(matrices).ravel(), op.dtype)


def from_storage(op: OperandInfo, flat: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The kernel's 1-D memory as a logical array of values (bf16 as float32)."""
    values = decode(flat, op.dtype)
    if op.layout == "row":
        return values.reshape(shape)
    flipped = (*shape[:-2], shape[-1], shape[-2])  # each matrix stored transposed
    xp = xp_of(values)
    return xp.swapaxes(values.reshape(flipped), -1, -2)


def round_to(values, dtype: str):
    """float values rounded to `dtype`, as that type's value dtype (bf16: float32)."""
    if dtype == "bf16":
        return round_bf16(values.astype(np.float32))
    return values.astype(VALUE[dtype])


@dataclass
class Inputs:
    a: np.ndarray
    b: np.ndarray
    c_in: np.ndarray  # the initial C (NaN poison for '=', data for '+=' or an epilogue's beta)
    extras: dict = field(default_factory=dict)  # the epilogue's bias vectors, by name


def make_inputs(
    gemm: Gemm,
    m: int,
    n: int,
    k: int,
    kind: str,
    rng: np.random.Generator,
    acc: str = "f32",
    epilogue=None,
    batch: int = 1,
) -> Inputs:
    """Fresh inputs: kind 'exact' (integers in [-2, 2]) or 'normal' (N(0, 1)), rounded to
    each operand's type. Under `acc` f16 the exact inputs use at most F16_ACTIVE_K columns
    of K, so that f16 partial sums stay exact."""

    def draw(shape, dtype):
        if kind == "exact":
            return rng.integers(-2, 3, size=shape).astype(VALUE[dtype])
        return round_to(rng.standard_normal(shape).astype(np.float32), dtype)

    out = VALUE[gemm.c.dtype]

    def lead(op):  # a batched operand gets the batch axis first
        return (batch,) if op.batch is not None else ()

    for _ in range(20):
        a = draw((*lead(gemm.a), m, k), gemm.a.dtype)
        b = draw((*lead(gemm.b), k, n), gemm.b.dtype)
        if kind == "exact" and acc == "f16" and k > F16_ACTIVE_K:
            quiet = rng.permutation(k)[F16_ACTIVE_K:]
            a[..., quiet] = 0
        reads_c = gemm.accumulate if epilogue is None else epilogue.reads_c
        c_shape = (*lead(gemm.c), m, n)
        c_in = draw(c_shape, gemm.c.dtype) if reads_c else np.full(c_shape, np.nan, out)
        # A tiny product (one row, K = 1) can come out all zeros, which proves nothing:
        # draw again. Large ones are checked too cheaply to matter, or not at all.
        if kind != "exact" or m * n * k > 1 << 20:
            break
        expected = a.astype(np.float64) @ b.astype(np.float64)
        # check_exact asks the same: with an epilogue, the product itself (C may hide a
        # product of zeros); without one, what C becomes
        if reads_c and epilogue is None:
            expected += c_in
        if expected.any():
            break
    extras = {op.name: draw((n,), op.dtype) for op in gemm.extras}
    return Inputs(a, b, c_in, extras)


@dataclass
class Check:
    oracle: str
    ok: bool
    detail: str
    score: float = 0.0  # statistical: max(err / bound)


def to_device(inputs: Inputs, xp) -> Inputs:
    extras = {name: xp.asarray(v) for name, v in inputs.extras.items()}
    return Inputs(xp.asarray(inputs.a), xp.asarray(inputs.b), xp.asarray(inputs.c_in), extras)


def check_exact(gemm: Gemm, inputs: Inputs, out, tile: tuple[int, int], epilogue=None) -> Check:
    xp = xp_of(out)
    expected = inputs.a.astype(xp.float64) @ inputs.b.astype(xp.float64)
    if epilogue is not None:
        # The product is exact in f32; the epilogue's steps round as the kernel's do.
        if not bool(expected.any()):
            return Check("exact oracle", False, "the product is all zeros: it proves nothing")
        expected = epilogue.apply(expected.astype(xp.float32), inputs.c_in, inputs.extras, xp)
    elif gemm.accumulate:
        expected = expected + inputs.c_in.astype(xp.float64)
    if epilogue is None and not bool(expected.any()):
        return Check("exact oracle", False, "the reference is all zeros: the inputs prove nothing")
    want = round_to(expected.astype(xp.float32), gemm.c.dtype)
    same = out == want
    if bool(same.all()):
        return Check("exact oracle", True, "bit-exact")
    where = tuple(int(x) for x in xp.argwhere(~same)[0])
    *batch, i, j = where
    bad = int((~same).sum())
    return Check(
        "exact oracle",
        False,
        f"{bad} of {same.size} elements differ; first at C[{', '.join(map(str, where))}] = "
        f"{float(out[where])} (expected {float(want[where])}), in block tile "
        f"({i // tile[0]}, {j // tile[1]})",
    )


def check_statistical(gemm: Gemm, inputs: Inputs, out, acc: str = "f32", epilogue=None) -> Check:
    xp = xp_of(out)
    a, b = inputs.a.astype(xp.float64), inputs.b.astype(xp.float64)
    reads_c = gemm.accumulate if epilogue is None else epilogue.reads_c
    c0 = inputs.c_in.astype(xp.float64) if reads_c else 0.0
    k = a.shape[-1]
    u_out = {"f16": 2.0**-11, "bf16": 2.0**-8}.get(gemm.c.dtype, 0.0)
    floor = 2.0**-24 if gemm.c.dtype == "f16" else 0.0  # f16's subnormal spacing
    u_acc = 2.0**-11 if acc == "f16" else 2.0**-24
    if epilogue is None:
        ref = a @ b + c0
        magnitude = xp.abs(a) @ xp.abs(b) + xp.abs(c0)
        accumulated = k * u_acc * magnitude
    else:
        # The product's error scaled by |alpha|, plus one f32 rounding per epilogue step
        # (relu does not grow an error); the bound is taken on the sum of the magnitudes.
        product = a @ b
        extras = {n: v.astype(xp.float64) for n, v in inputs.extras.items()}
        ref = epilogue.apply(product, c0, extras, xp, xp.float64)
        terms = abs(epilogue.alpha) * xp.abs(product) + abs(epilogue.beta) * xp.abs(c0)
        for name in epilogue.bias_operands:
            terms = terms + xp.abs(extras[name])
        steps = 1 + len(epilogue.steps) + (epilogue.alpha != 1.0) + 2 * epilogue.reads_c
        magnitude = xp.abs(a) @ xp.abs(b)
        accumulated = abs(epilogue.alpha) * k * u_acc * magnitude + steps * 2.0**-24 * terms
    bound = accumulated + u_out * (xp.abs(ref) + accumulated) + floor
    got = out.astype(xp.float64)
    # An element whose exact value (or an f32 step on its way: the scaled product) may
    # pass the largest finite number of C's type overflows to ±inf, as IEEE arithmetic
    # says: the bound cannot judge it. The exact oracle replays those steps and does.
    scaled = terms if epilogue is not None else xp.abs(ref)
    judged = (xp.abs(ref) + bound <= FINITE_MAX[gemm.c.dtype]) & (scaled <= FINITE_MAX["f32"])
    finite = xp.isfinite(got) | ~judged
    if not bool(finite.all()):
        where = tuple(int(x) for x in xp.argwhere(~finite)[0])
        return Check(
            "statistical oracle",
            False,
            f"C[{', '.join(map(str, where))}] = {float(got[where])}: not finite (unwritten?)",
            float("inf"),
        )
    if not bool(judged.any()):
        return Check(
            "statistical oracle", True, f"not applied: every element may overflow {gemm.c.dtype}"
        )
    err = xp.where(judged, xp.abs(got - ref), 0.0)
    ratio = err / xp.maximum(bound, 2.0**-60)
    score = float(ratio.max())
    skipped = int((~judged).sum())
    note = f" ({skipped} elements that may overflow {gemm.c.dtype} not judged)" if skipped else ""
    return Check("statistical oracle", score <= 1.0, f"max(err / bound) = {score:.3g}{note}", score)
