"""Element types: the one table of what each is, in memory, in C, in PTX and on the host.

    DTYPES["bf16"].bytes     # 2
    DTYPES["bf16"].c_type    # "__nv_bfloat16"
    STORAGE["bf16"]          # numpy dtype of the bytes in memory (uint16 bit patterns)
    VALUE["bf16"]            # numpy dtype values are computed in (float32)
    encode(x, "bf16")        # values -> storage, rounding to nearest even like __float2bfloat16
    decode(bits, "bf16")     # storage -> values, exact
    convert(x, "f32", "f16") # storage of one type -> storage of another, as the GPU converts

numpy (and CuPy) have no bfloat16, so a bf16 array is its uint16 bit patterns in
memory and float32 values in arithmetic; f16 and f32 are themselves. Every
function works on numpy and CuPy arrays alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

DTypeName = Literal["f16", "bf16", "f32"]


@dataclass(frozen=True)
class DType:
    name: DTypeName
    bytes: int
    c_type: str  # its CUDA spelling (cuda_fp16.h, cuda_bf16.h)
    ptx: str  # its spelling in PTX instruction types (mma.sync, wgmma)
    storage: type  # numpy type of its bits in memory
    value: type  # numpy type its values are computed in on the host
    finite_max: float  # the largest finite value: past it a rounding step gives ±inf


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("f16", 2, "half", "f16", np.float16, np.float16, 65504.0),
        DType("bf16", 2, "__nv_bfloat16", "bf16", np.uint16, np.float32, 3.3895313892515355e38),
        DType("f32", 4, "float", "f32", np.float32, np.float32, 3.4028234663852886e38),
    )
}
DTYPE_NAMES: tuple[str, ...] = tuple(DTYPES)
# The table's columns by name, for the many places that want one of them.
DTYPE_BYTES = {n: d.bytes for n, d in DTYPES.items()}
C_TYPES = {n: d.c_type for n, d in DTYPES.items()}
STORAGE = {n: d.storage for n, d in DTYPES.items()}
VALUE = {n: d.value for n, d in DTYPES.items()}


def _xp(array):
    module = type(array).__module__.split(".")[0]
    if module == "cupy":
        import cupy

        return cupy
    return np


def round_bf16(values):
    """float32 values rounded to the nearest bf16 (ties to even), still as float32."""
    return decode(encode(values, "bf16"), "bf16")


def encode(values, dtype: str):
    """Values (any float array) as the storage of `dtype`; bf16 rounds to nearest even."""
    xp = _xp(values)
    if dtype != "bf16":
        return values.astype(STORAGE[dtype])
    bits = xp.ascontiguousarray(values.astype(xp.float32)).view(xp.uint32)
    rounded = bits + xp.uint32(0x7FFF) + ((bits >> 16) & xp.uint32(1))
    out = (rounded >> 16).astype(xp.uint16)
    nan = xp.isnan(values)
    if bool(nan.any()):
        out = xp.where(nan, xp.uint16(0x7FC0), out)  # a quiet NaN stays NaN
    return out


def decode(stored, dtype: str):
    """Storage of `dtype` as values (float32 for bf16)."""
    xp = _xp(stored)
    if dtype != "bf16":
        return stored
    return (stored.astype(xp.uint32) << 16).view(xp.float32)


def convert(stored, src: str, dst: str):
    """What a GPU conversion does: storage of `src` -> storage of `dst` (via float32)."""
    if src == dst:
        return stored
    values = decode(stored, src)
    if dst == "f16" and src == "f32":
        return values.astype(np.float16)
    return encode(values.astype(np.float32), dst)
