"""The GEMM a kernel computes: C (=|+=) A @ B, its operands' types, shapes and layouts.

    Gemm(a, b, c, m=M, n=N, k=K, accumulate=True)   for C[m, n] += A[m, k] * B[k, n]

Each operand is seen as the product sees it (A as M x K, B as K x N): `B[n, k]` on a
row-major [N, K] is a column-major K x N. The front end reads it from the operand
declarations and the computation line (tiledsl.frontend.computation).

`swap_operands` has the kernel compute the product's transpose, C^T = B^T A^T, so that the
wide N fills the instruction's M: the kernel's Gemm is then `written.swapped()`, whose A is
the file's B seen transposed (N x K), whose B is the file's A (K x M) and whose C is C^T
(N x M), over the same memory and size names. Everything the kernel is built from reads
that one; what faces the caller (its arguments in order, a size M x N x K, the oracles and
the baselines) reads `as_written`, the product as the file writes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, TypeVar

from ..errors import Loc
from .expr import Expr, Var

T = TypeVar("T")
Layout = Literal["row", "col"]
LAYOUTS: tuple[str, ...] = ("row", "col")


@dataclass(frozen=True)
class OperandInfo:
    """A declared operand: element (r, c) of a row-major [R, C] operand is at r * C + c."""

    name: str
    dtype: str  # a DTypeName once the analysis has accepted it
    dims: tuple[Expr, ...]
    layout: str  # a Layout once the analysis has accepted it
    loc: Loc = field(compare=False, repr=False)
    batch: Expr | None = None  # the batch count of a batched operand (dims are one matrix's)
    # The product reads it transposed (B[n, k] on a declared [N, K]): dims and layout here
    # are the product's view; `declared` gives the operand as the file wrote it.
    transposed: bool = field(default=False, compare=False, repr=False)

    @property
    def matrix_elements(self) -> Expr:
        """Elements of one matrix: how far apart consecutive batches lie."""
        return self.dims[-2] * self.dims[-1]

    def flipped(self) -> OperandInfo:
        """The same memory seen transposed: the dims reversed, the other layout (a
        row-major [K, M] is a column-major M x K)."""
        layout = "col" if self.layout == "row" else "row"
        return replace(
            self, dims=tuple(reversed(self.dims)), layout=layout, transposed=not self.transposed
        )

    @property
    def declared(self) -> OperandInfo:
        """The operand as declared: the product's view, transposed back if it was."""
        return self.flipped() if self.transposed else self

    @property
    def leading_dim(self) -> Expr:
        return self.dims[-1] if self.layout == "row" else self.dims[-2]

    def offset(self, row: Expr, col: Expr) -> Expr:
        if self.layout == "row":
            return row * self.leading_dim + col
        return col * self.leading_dim + row

    @property
    def all_dims(self) -> tuple[Expr, ...]:
        """The dims an array of it has: the batch (if batched), then one matrix's."""
        return ((self.batch,) if self.batch is not None else ()) + tuple(self.dims)

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(map(str, self.all_dims))}] {self.layout}"


@dataclass(frozen=True)
class Gemm:
    """C (=|+=) A @ B with A: M x K, B: K x N, C: M x N."""

    a: OperandInfo
    b: OperandInfo
    c: OperandInfo
    m: Expr
    n: Expr
    k: Expr
    accumulate: bool  # '+=': C is read and added to
    text: str  # the computation line as written
    # Declared operands outside the product (a bias vector of the epilogue), in order.
    extras: tuple[OperandInfo, ...] = ()
    batch: Expr | None = None  # batched GEMM: how many products (C's leading dimension)
    # `swap_operands`: the product as written, of which this is the transpose (see above)
    written: Gemm | None = field(default=None, compare=False, repr=False)

    @property
    def size_args(self) -> tuple[str, ...]:
        """The run-time size parameters, in M, N, K order (literal dims are baked in)."""
        return tuple(e.name for e in (self.m, self.n, self.k) if isinstance(e, Var))

    def size_env(self, m: int, n: int, k: int) -> dict[str, int]:
        """The size parameters at M x N x K, under the names the file gives them (`K` may be
        `k_edge`; a literal dimension has no parameter)."""
        return {
            e.name: value
            for e, value in ((self.m, m), (self.n, n), (self.k, k))
            if isinstance(e, Var)
        }

    def operand(self, name: str) -> OperandInfo:
        return {o.name: o for o in (self.a, self.b, self.c, *self.extras)}[name]

    def swapped(self) -> Gemm:
        """The transpose the kernel computes under `swap_operands`: C^T = B^T A^T, over the
        same memory (each operand flipped: a row-major M x K is a column-major K x M)."""
        return replace(
            self,
            a=self.b.flipped(),
            b=self.a.flipped(),
            c=self.c.flipped(),
            m=self.n,
            n=self.m,
            written=self,
        )

    def oriented(self, size: Sequence[T]) -> tuple[T, T, T]:
        """A caller's M x N x K (sizes, or anything said of each: "M") as this product's,
        or this product's as the caller's (the same swap both ways: `swap_operands`
        exchanges M and N)."""
        m, n, k = size
        return (n, m, k) if self.written is not None else (m, n, k)

    @property
    def as_written(self) -> Gemm:
        """The product as the file writes it: what a caller passes and sizes (this Gemm
        unless the kernel swaps its operands)."""
        return self.written or self
