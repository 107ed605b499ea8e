"""The arrays a caller hands a kernel: what they are, and whether they are what the `.tile`
file declared — checked before anything runs, with a message that names the operand.

    view = describe(array)                      # numpy, CuPy or torch: shape, dtype, layout
    dims = bind(gemm, {"A": a, "B": b}, out)    # {"M": 128, "N": 256, "K": 64}, or ArgumentError

An operand declared `A: f16[M, K] row` takes an array of shape (M, K) whose rows are
contiguous (C order, what numpy, CuPy and torch make by default); `col` takes the same
shape with contiguous columns (Fortran order, `a.T` of a C-order (K, M) array). A batched
operand `[L, R, C]` takes (L, R, C), each matrix laid out as declared and the matrices one
after the other. Nothing is copied: an array laid out otherwise is refused, and the message
says what would fit (`.contiguous()`, `np.ascontiguousarray`, or the other layout).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..ir.dtypes import STORAGE
from ..ir.expr import Const, Var
from ..ir.gemm import Gemm, OperandInfo

#: Bytes of an element of each declared type, and the array dtypes that hold it.
ELEMENT_BYTES = {"f16": 2, "bf16": 2, "f32": 4}
_DTYPE_NAMES = {
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "torch.float16": "f16",
    "torch.bfloat16": "bf16",
    "torch.float32": "f32",
}


#: The kernels' vector copies and TMA boxes read and write 16-byte aligned addresses.
ALIGNMENT = 16


class ArgumentError(ValueError):
    """An array that is not what the kernel's declaration asks for (the message says which
    operand, what was expected and what would fit)."""


@dataclass(frozen=True)
class ArrayView:
    """What tiledsl needs to know of a caller's array."""

    library: str  # "numpy", "cupy" or "torch"
    shape: tuple[int, ...]
    dtype: str  # the library's name of its dtype ("float16", "torch.float16", ...)
    strides: tuple[int, ...]  # in elements
    on_gpu: bool
    pointer: int  # the first element's address (0 for numpy: the interpreter copies)
    device: int = -1  # the GPU's ordinal (-1: the CPU)

    @property
    def signature(self) -> tuple:
        """All of the view but the address: two arrays of one signature pass or fail the
        declaration's checks alike (the address's alignment is checked at every call)."""
        return (self.library, self.shape, self.dtype, self.strides, self.device)

    @property
    def element(self) -> str | None:
        """The declared type this dtype holds (f16, bf16, f32), or None."""
        return _DTYPE_NAMES.get(self.dtype)

    def contiguous(self, order: str) -> bool:
        """Whether the array's elements lie densely, rows (`row`) or columns (`col`) of
        each matrix contiguous; a batch's matrices one after the other."""
        shape, strides = self.shape, self.strides
        if 0 in shape:  # no element: any strides lay it out (numpy gives an empty one 0s)
            return True
        if len(shape) < 2:
            return _dense(shape, strides)
        *outer, rows, cols = shape
        inner = (cols, rows) if order == "row" else (rows, cols)
        inner_strides = (strides[-1], strides[-2]) if order == "row" else strides[-2:]
        expected = 1
        for size, stride in zip(inner, inner_strides, strict=True):
            if size > 1 and stride != expected:
                return False
            expected *= size
        return _dense(tuple(outer), strides[: len(outer)], expected)


def _dense(shape: tuple[int, ...], strides: tuple[int, ...], unit: int = 1) -> bool:
    expected = unit
    for size, stride in zip(reversed(shape), reversed(strides), strict=True):
        if size > 1 and stride != expected:
            return False
        expected *= size
    return True


#: Each array type's library, by its module's first name (looked up once per type).
_LIBRARIES: dict[type, str] = {}


def _library(kind: type) -> str:
    library = _LIBRARIES.get(kind)
    if library is None:
        library = _LIBRARIES[kind] = kind.__module__.split(".")[0]
    return library


def signature(array) -> tuple[tuple, int]:
    """What a call's plan is keyed by (the library, shape, dtype, strides and device: all
    that the declaration's checks look at), and the data's address, read as cheaply as the
    library allows: the per-call part of a call."""
    library = _library(type(array))
    if library == "torch":
        return (
            (library, array.shape, array.dtype, array.stride(), array.device),
            array.data_ptr(),
        )
    if library == "cupy":
        memory = array.data
        return (library, array.shape, array.dtype, array.strides, memory.device_id), memory.ptr
    if library == "numpy":
        return (library, array.shape, array.dtype, array.strides), 0
    describe(array)  # raises: not an array tiledsl takes
    raise AssertionError("unreachable")


def address(array, library: str) -> int:
    """The data's address of an array of `library` (0 for numpy: the interpreter copies)."""
    if library == "torch":
        return array.data_ptr()
    return array.data.ptr if library == "cupy" else 0


def describe(array) -> ArrayView:
    """The view of a numpy, CuPy or torch array; ArgumentError for anything else."""
    module = type(array).__module__.split(".")[0]
    if module == "numpy":
        size = array.itemsize
        return ArrayView(
            "numpy",
            tuple(array.shape),
            str(array.dtype),
            tuple(s // size for s in array.strides),
            False,
            0,
        )
    if module == "cupy":
        size = array.itemsize
        return ArrayView(
            "cupy",
            tuple(array.shape),
            str(array.dtype),
            tuple(s // size for s in array.strides),
            True,
            int(array.data.ptr),
            int(array.device.id),
        )
    if module == "torch":
        return ArrayView(
            "torch",
            tuple(array.shape),
            str(array.dtype),
            tuple(array.stride()),
            array.device.type == "cuda",
            int(array.data_ptr()),
            array.device.index if array.device.type == "cuda" else -1,
        )
    raise ArgumentError(
        f"a {type(array).__name__} is not an array tiledsl takes: pass a numpy array (the "
        "interpreter), a CuPy array or a torch tensor (the GPU)"
    )


def misaligned_message(name: str, pointer: int) -> str:
    """Why an operand at `pointer` (not 16-byte aligned) cannot be handed to a kernel."""
    return (
        f"{name}'s data starts at {pointer:#x}, not on a {ALIGNMENT}-byte boundary: "
        f"the kernel's copies move {ALIGNMENT} bytes at a time (a slice of a larger "
        "array does this; pass a copy of it, or call with copy=True)"
    )


def declared_shape(op: OperandInfo, dims: dict[str, int]) -> tuple[int, ...] | None:
    """The shape an array of `op` must have under `dims` (None while a name is unknown)."""
    out = []
    for e in op.declared.all_dims:
        if isinstance(e, Const):
            out.append(e.value)
        elif isinstance(e, Var) and e.name in dims:
            out.append(dims[e.name])
        else:
            return None
    return tuple(out)


def check_operand(op: OperandInfo, view: ArrayView, dims: dict[str, int], role: str) -> None:
    """`view` against `op`'s declaration (as the file wrote it, not the product's view of
    a transposed operand): type, rank, the sizes bound so far (binding the names it is
    the first to give), and layout. ArgumentError otherwise."""
    op = op.declared
    declared = str(op)
    if view.element != op.dtype:
        raise ArgumentError(
            f"{role} {op.name} is declared {declared}: its elements must be {op.dtype}, "
            f"found {view.dtype}"
        )
    exprs = op.all_dims
    if len(view.shape) != len(exprs):
        raise ArgumentError(
            f"{role} {op.name} is declared {declared}: it takes {len(exprs)} dimension(s), "
            f"found an array of shape {view.shape}"
        )
    for axis, (e, size) in enumerate(zip(exprs, view.shape, strict=True)):
        # an empty dimension is a size like any other here: the kernel's call decides what
        # an empty product is (an empty C; K = 0 makes empty sums there)
        if isinstance(e, Const):
            expected = e.value
        elif isinstance(e, Var):
            expected = dims.setdefault(e.name, size)
        else:
            continue
        if size != expected:
            raise ArgumentError(
                f"{role} {op.name} is declared {declared}: dimension {axis} ({e}) must be "
                f"{expected}{_from(e, dims)}, found {size} (shape {view.shape})"
            )
    if not view.contiguous(op.layout):
        other = "col" if op.layout == "row" else "row"
        fix = {
            "torch": ".contiguous()" if op.layout == "row" else ".t().contiguous().t()",
            "cupy": "cupy.ascontiguousarray" if op.layout == "row" else "cupy.asfortranarray",
            "numpy": "np.ascontiguousarray" if op.layout == "row" else "np.asfortranarray",
        }[view.library]
        raise ArgumentError(
            f"{role} {op.name} is declared {op.layout}-major ({declared}), but its strides "
            f"{view.strides} (in elements, shape {view.shape}) are not: tiledsl does not "
            f"copy unless asked; pass {fix}(...) of it, call with copy=True, or declare "
            f"{op.name} `{other}` if that is how it lies"
        )


def _from(e, dims: dict[str, int]) -> str:
    return f" (the {e} of an earlier operand)" if isinstance(e, Var) and e.name in dims else ""


def bind(gemm: Gemm, arrays: dict[str, ArrayView], out: ArrayView | None) -> dict[str, int]:
    """The declared dimension names' values from the arrays (A first, then B, the extras
    and C), every operand checked against its declaration."""
    dims: dict[str, int] = {}
    check_operand(gemm.a, arrays[gemm.a.name], dims, "operand")
    check_operand(gemm.b, arrays[gemm.b.name], dims, "operand")
    for op in gemm.extras:
        check_operand(op, arrays[op.name], dims, "operand")
    if out is not None:
        check_operand(gemm.c, out, dims, "out")
    return dims


def numpy_dtype(dtype: str):
    """numpy's dtype of a declared type (bf16: ml_dtypes', which numpy lacks)."""
    if dtype != "bf16":
        return np.dtype(STORAGE[dtype])
    try:
        import ml_dtypes
    except ImportError:
        raise ArgumentError(
            "numpy has no bfloat16: install ml_dtypes (its bfloat16 arrays are taken), or "
            "call the kernel on torch tensors"
        ) from None
    return np.dtype(ml_dtypes.bfloat16)


def empty(library: str, shape: tuple[int, ...], op, device: int = 0) -> Any:
    """A new array of `op` (C, or a copy of an operand), in `library` (on GPU `device` for
    torch), laid out as declared (column-major: each matrix's columns contiguous)."""
    op = op.declared
    order: Literal["C", "F"] = "C" if op.layout == "row" else "F"
    if library == "numpy":
        if op.layout == "col" and len(shape) == 3:
            return np.empty((shape[0], shape[2], shape[1]), numpy_dtype(op.dtype)).swapaxes(1, 2)
        return np.empty(shape, numpy_dtype(op.dtype), order=order)
    if library == "cupy":
        import cupy

        if op.layout == "col" and len(shape) == 3:
            return cupy.empty((shape[0], shape[2], shape[1]), STORAGE[op.dtype]).swapaxes(1, 2)
        return cupy.empty(shape, STORAGE[op.dtype], order=order)
    dtype, where = _torch_types(op.dtype, device)
    return torch_empty(shape, dtype, op.layout, where)


def torch_empty(shape: tuple, dtype, layout: str, device) -> Any:
    """A new torch tensor of `shape` laid out `layout` (col: each matrix's columns
    contiguous) on `device`: C, a copy of an operand, or the torch operator's fake C."""
    import torch

    if layout == "row":
        return torch.empty(shape, dtype=dtype, device=device)
    flipped = (*shape[:-2], shape[-1], shape[-2])
    return torch.empty(flipped, dtype=dtype, device=device).transpose(-1, -2)


#: torch's dtype and device objects by (declared type, GPU), made once: torch.empty parses
#: a device given as a string at every call
_TORCH_TYPES: dict[tuple[str, int], tuple] = {}


def _torch_types(dtype: str, device: int) -> tuple:
    found = _TORCH_TYPES.get((dtype, device))
    if found is None:
        import torch

        found = _TORCH_TYPES[dtype, device] = (torch_dtype(dtype), torch.device("cuda", device))
    return found


def torch_dtype(dtype: str):
    """torch's dtype of a declared type."""
    import torch

    return {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dtype]


def conformed(array, op: OperandInfo):
    """`array`, or a copy of it laid out as `op` declares (and, on the GPU, 16-byte aligned,
    as every fresh allocation is): what `copy=True` passes. An array whose type or rank is
    not the declaration's is returned as it is, for the checks to name what is wrong."""
    view = describe(array)
    declared = op.declared
    if view.element != declared.dtype or len(view.shape) != len(declared.all_dims):
        return array
    if view.contiguous(declared.layout) and not (view.on_gpu and view.pointer % ALIGNMENT):
        return array
    if view.library == "torch" and not view.on_gpu:
        return array  # refused with its message: the kernels run on the GPU
    copy = empty(view.library, view.shape, op, max(view.device, 0))
    if view.library == "torch":
        copy.copy_(array)
    else:
        copy[...] = array
    return copy
