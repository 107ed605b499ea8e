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

    @property
    def element(self) -> str | None:
        """The declared type this dtype holds (f16, bf16, f32), or None."""
        return _DTYPE_NAMES.get(self.dtype)

    def contiguous(self, order: str) -> bool:
        """Whether the array's elements lie densely, rows (`row`) or columns (`col`) of
        each matrix contiguous; a batch's matrices one after the other."""
        shape, strides = self.shape, self.strides
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
        )
    if module == "torch":
        return ArrayView(
            "torch",
            tuple(array.shape),
            str(array.dtype),
            tuple(array.stride()),
            array.device.type == "cuda",
            int(array.data_ptr()),
        )
    raise ArgumentError(
        f"a {type(array).__name__} is not an array tiledsl takes: pass a numpy array (the "
        "interpreter), a CuPy array or a torch tensor (the GPU)"
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
        if size < 1:
            raise ArgumentError(
                f"{role} {op.name} has shape {view.shape}: dimension {axis} is empty"
            )
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
            f"copy; pass {fix}(...) of it, or declare {op.name} `{other}` if that is how "
            "it lies"
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
