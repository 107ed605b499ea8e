"""The TMA tensor maps of a `copy tma` kernel: a launch's `TensorMapSpec` + an array -> the
128-byte CUtensorMap the kernel takes by value (`const __grid_constant__ TensorMap`).

    spec = launch.tensor_map("map_A")                  # tiledsl.emit.launch.TensorMapSpec
    encode_arguments(spec, a.data.ptr, {"M": 4096, "N": 4096, "K": 4096})
    # {"data_type": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16", "rank": 2,
    #  "global_dims": [4096, 4096], "global_strides": [8192], "box_dims": [64, 128], ...}
    encode(spec, a.data.ptr, sizes)                    # a numpy V128 scalar: the map's bytes

`encode_arguments` is pure (no GPU, no driver): it evaluates the spec at the sizes, checks
what TMA demands of the sizes and the pointer (`problems`), and names the driver's enums,
so tests and `tiledsl run` can refuse a size before anything is launched. `encode` hands
the arguments to the driver's `cuTensorMapEncodeTiled`.

The driver is reached through NVIDIA's `cuda-bindings` (`from cuda.bindings import
driver`), not through ctypes on libcuda: it is NVIDIA's typed binding of the driver API,
so the enums are named and checked, every call returns its CUresult to check, and there is
no hand-written C signature or CUtensorMap layout to get wrong (a wrong ctypes argtype or
a short struct fails as corrupt memory, not as an error). ctypes would save a dependency;
cuda-bindings is in the `tiledsl[gpu]` extra, and only `copy tma` kernels need it.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ..emit.launch import TensorMapSpec
from ..errors import ToolchainError, UsageError
from ..ir.expr import Const, evaluate, to_c

#: What cuTensorMapEncodeTiled demands (CUDA driver API, "Tensor Map Object Management").
ADDRESS_ALIGNMENT = 16  # bytes, of the global address (32 with interleaving, not used here)
STRIDE_ALIGNMENT = 16  # bytes, of every global stride
MAX_DIM = 2**32  # elements, of every global dimension
MAX_STRIDE = 2**40  # bytes, of every global stride

DATA_TYPES = {
    "f16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
    "bf16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
    "f32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
}
SWIZZLES = {
    "none": "CU_TENSOR_MAP_SWIZZLE_NONE",
    "32B": "CU_TENSOR_MAP_SWIZZLE_32B",
    "64B": "CU_TENSOR_MAP_SWIZZLE_64B",
    "128B": "CU_TENSOR_MAP_SWIZZLE_128B",
}
OOB_FILLS = {
    "zero": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE",  # "none" is the driver's name for zeros
    "nan": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA",
}
INTERLEAVE = "CU_TENSOR_MAP_INTERLEAVE_NONE"
L2_PROMOTION = "CU_TENSOR_MAP_L2_PROMOTION_L2_256B"

#: Encoded maps by (spec, pointer, sizes): a timing loop launches the same maps again and
#: again. A map depends on nothing else, so an entry is never stale; the oldest go first.
_ENCODED: dict[tuple, np.void] = {}
CACHE_ENTRIES = 1024

_DRIVER: Any = None


def _what(spec: TensorMapSpec) -> str:
    return f"{spec.operand} ({spec.dtype}, {spec.layout}-major; tensor map {spec.param})"


def problems(
    spec: TensorMapSpec, pointer: int, sizes: dict[str, int], pitch: int | None = None
) -> list[str]:
    """Why TMA cannot load `spec`'s operand at `sizes` from `pointer` (empty: it can);
    `pitch`: the bytes between its lines where they are not the operand's own (a padded
    copy's, tiledsl.gpu.staging).

    >>> from tiledsl.ir.expr import Var
    >>> spec = TensorMapSpec("map_A", "A", "f16", "row", (Var("K"), Var("M")), (64, 128))
    >>> problems(spec, 0x7F0000000000, {"M": 256, "K": 4099})[0][:60]
    'TMA cannot load A (f16, row-major; tensor map map_A): its li'
    """
    out = []
    dims = [int(evaluate(d, sizes)) for d in spec.global_dims]
    for name, expr, value in zip(("innermost", "outer"), spec.global_dims, dims):
        if not 1 <= value <= MAX_DIM:
            out.append(
                f"TMA cannot load {_what(spec)}: its {name} dimension {_spelled(expr, value)} "
                f"is outside 1 to 2^32"
            )
    stride_expr = spec.strides_bytes[0]
    stride = int(evaluate(stride_expr, sizes)) if pitch is None else pitch
    if stride % STRIDE_ALIGNMENT:
        step = STRIDE_ALIGNMENT // spec.element_bytes
        lead = spec.global_dims[0]
        out.append(
            f"TMA cannot load {_what(spec)}: its lines are {_spelled(lead, dims[0])} "
            f"{spec.dtype} elements = {stride} bytes apart, not a multiple of "
            f"{STRIDE_ALIGNMENT} bytes; a `copy tma` kernel needs "
            f"{to_c(lead, named=False)} to be a multiple of {step}"
        )
    elif not 0 < stride < MAX_STRIDE:
        out.append(f"TMA cannot load {_what(spec)}: its lines are {stride} bytes apart (>= 2^40)")
    if pointer % ADDRESS_ALIGNMENT:
        out.append(
            f"TMA cannot load {_what(spec)}: its address {pointer:#x} is not "
            f"{ADDRESS_ALIGNMENT}-byte aligned (pass an array that starts where its allocation "
            "does, not a view into one)"
        )
    return out


def _spelled(expr, value: int) -> str:
    """`K = 4099`, or `4099` for a dimension fixed by the declaration."""
    return str(value) if isinstance(expr, Const) else f"{to_c(expr, named=False)} = {value}"


def encode_arguments(
    spec: TensorMapSpec, pointer: int, sizes: dict[str, int], pitch: int | None = None
) -> dict:
    """The arguments of cuTensorMapEncodeTiled for `spec` at `sizes` (lines `pitch` bytes
    apart, if given), enums by name; raises UsageError (the message says what to change)
    when TMA cannot load the operand."""
    found = problems(spec, pointer, sizes, pitch)
    if found:
        raise UsageError("; ".join(found))
    return {
        "data_type": DATA_TYPES[spec.dtype],
        "rank": 2,
        "global_address": int(pointer),
        "global_dims": [int(evaluate(d, sizes)) for d in spec.global_dims],
        "global_strides": [int(evaluate(s, sizes)) for s in spec.strides_bytes]
        if pitch is None
        else [pitch],
        "box_dims": list(spec.box),
        "element_strides": list(spec.element_strides),
        "interleave": INTERLEAVE,
        "swizzle": SWIZZLES[spec.swizzle],
        "l2_promotion": L2_PROMOTION,
        "oob_fill": OOB_FILLS[spec.oob_fill],
    }


def driver():
    """cuda-bindings' driver module, initialised (cuInit) once per process."""
    global _DRIVER
    if _DRIVER is None:
        try:
            from cuda.bindings import driver as cu
        except ImportError as missing:
            raise ToolchainError(
                "`copy tma` kernels need NVIDIA's cuda-bindings to encode their TMA tensor maps",
                log=f"{type(missing).__name__}: {missing}\n"
                "fix: pip install cuda-bindings (or pip install 'tiledsl[gpu]')",
            ) from None
        (status,) = cu.cuInit(0)
        check(cu, status, "cuInit")
        _DRIVER = cu
    return _DRIVER


def check(cu, err, call: str, log: str = "") -> None:
    if err != cu.CUresult.CUDA_SUCCESS:
        try:
            _, name = cu.cuGetErrorName(err)
            said = name.decode() if isinstance(name, bytes) else str(name)
        except Exception:  # the error's name is a courtesy; the error is the news
            said = str(err)
        raise ToolchainError(f"the CUDA driver refused {call}: {said}", log=log)


def encode(
    spec: TensorMapSpec, pointer: int, sizes: dict[str, int], pitch: int | None = None
) -> np.void:
    """The 128 bytes of `spec`'s tensor map over the array at `pointer` (a numpy V128 scalar,
    which CuPy passes by value; lines `pitch` bytes apart, if given), encoded by the driver
    once per (spec, pointer, sizes, pitch)."""
    key = (spec, int(pointer), tuple(sorted(sizes.items())), pitch)
    hit = _ENCODED.get(key)
    if hit is not None:
        return hit
    args = encode_arguments(spec, pointer, sizes, pitch)
    cu = driver()
    err, tmap = cu.cuTensorMapEncodeTiled(
        getattr(cu.CUtensorMapDataType, args["data_type"]),
        args["rank"],
        args["global_address"],
        [cu.cuuint64_t(d) for d in args["global_dims"]],
        [cu.cuuint64_t(s) for s in args["global_strides"]],
        [cu.cuuint32_t(b) for b in args["box_dims"]],
        [cu.cuuint32_t(e) for e in args["element_strides"]],
        getattr(cu.CUtensorMapInterleave, args["interleave"]),
        getattr(cu.CUtensorMapSwizzle, args["swizzle"]),
        getattr(cu.CUtensorMapL2promotion, args["l2_promotion"]),
        getattr(cu.CUtensorMapFloatOOBfill, args["oob_fill"]),
    )
    check(
        cu,
        err,
        f"cuTensorMapEncodeTiled for {_what(spec)}",
        log="arguments: " + ", ".join(f"{k}={v}" for k, v in args.items()),
    )
    raw = ctypes.string_at(tmap.getPtr(), 128)
    value = np.frombuffer(raw, dtype="V128")[0]
    if len(_ENCODED) >= CACHE_ENTRIES:
        del _ENCODED[next(iter(_ENCODED))]
    _ENCODED[key] = value
    return value


def clear_cache() -> None:
    _ENCODED.clear()
