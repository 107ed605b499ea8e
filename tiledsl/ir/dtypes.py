"""Element types on the host: how f16, bf16 and f32 are stored and computed with.

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

import numpy as np

STORAGE = {"f16": np.float16, "bf16": np.uint16, "f32": np.float32}
VALUE = {"f16": np.float16, "bf16": np.float32, "f32": np.float32}


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
