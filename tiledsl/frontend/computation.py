"""The computation of a kernel, read from its operand declarations and computation line.

    A: f16[M, K] row
    B: f16[K, N] row           ->  Gemm(a, b, c, m=M, n=N, k=K, accumulate=True)
    C: f32[M, N] row
    C[m, n] += A[m, k] * B[k, n]

The index letters bind to the dims they index; they must agree, form one matrix
product, and the index order gives each operand's orientation (`B[n, k]` on a
row-major [N, K] is a column-major K x N, an "NT" GEMM).
"""

from __future__ import annotations

from ..errors import Collector
from ..ir.dtypes import DTYPE_NAMES
from ..ir.expr import Const, Expr, Var
from ..ir.gemm import LAYOUTS, Gemm, OperandInfo
from ..limits import INT_MAX
from . import syntax as S

# ---------------------------------------------------------------- the GEMM


def resolve_gemm(kernel: S.Kernel, errs: Collector) -> Gemm | None:
    """The kernel's product, or None (with its errors in `errs`): the declarations read,
    the one computation line checked against them, batches peeled off, the index letters
    bound to sizes."""
    operands = _declared_operands(kernel, errs)
    comp = _the_computation(kernel, errs)
    if comp is None:
        return None
    accesses = (comp.out, comp.lhs, comp.rhs)
    if not _accesses_match_declarations(accesses, operands, errs):
        return None
    peeled = _peel_batch(comp, operands, errs)
    if peeled is None:
        return None
    operands, letters = peeled
    indices = _product_indices(comp, letters, errs)
    if indices is None:
        return None
    out_i, out_j, k_idx = indices
    c, a, b = (operands[acc.name] for acc in accesses)
    bound = _bound_sizes(accesses, (c, a, b), letters, errs)
    if bound is None:
        return None
    sizes = {"M": bound[out_i], "N": bound[out_j], "K": bound[k_idx]}
    if not _distinct_sizes(sizes, comp, errs):
        return None
    # Transposed access (A[k, m]) is legal and means a transposed operand; the
    # storage layout as seen by the product is derived by support.py.
    text = f"{_access(comp.out)} {comp.op} {_access(comp.lhs)} * {_access(comp.rhs)}"
    return Gemm(
        a=_oriented(a, letters[comp.lhs.name], (out_i, k_idx)),
        b=_oriented(b, letters[comp.rhs.name], (k_idx, out_j)),
        c=_oriented(c, (out_i, out_j), (out_i, out_j)),
        m=sizes["M"],
        n=sizes["N"],
        k=sizes["K"],
        accumulate=comp.op == "+=",
        text=text,
        extras=tuple(op for name, op in operands.items() if name not in (c.name, a.name, b.name)),
        batch=c.batch,
    )


def _declared_operands(kernel: S.Kernel, errs: Collector) -> dict[str, OperandInfo]:
    """Each operand declaration as an OperandInfo, its type, layout and dims checked (a
    second declaration of a name is refused and skipped)."""
    operands: dict[str, OperandInfo] = {}
    for op in kernel.operands:
        if op.name in operands:
            errs.add(
                op.loc, f"operand '{op.name}' declared twice", "give each operand one declaration"
            )
            continue
        if op.dtype.text not in DTYPE_NAMES:
            errs.add(
                op.dtype.loc,
                f"unknown element type '{op.dtype}'",
                "element types are " + ", ".join(DTYPE_NAMES),
            )
        if op.layout.text not in LAYOUTS:
            errs.add(
                op.layout.loc,
                f"unknown layout '{op.layout}'",
                "a layout is `row` (row-major) or `col` (column-major)",
            )
        dims = tuple(_dimension(written, errs) for written in op.dims)
        operands[op.name] = OperandInfo(op.name, op.dtype.text, dims, op.layout.text, op.loc)
    return operands


def _dimension(written, errs: Collector) -> Expr:
    """A declared dimension: a size name, or a literal 32-bit size (1 after an error)."""
    if not isinstance(written, S.Num):
        return Var(written.text)
    if isinstance(written.value, float) or not 1 <= written.value <= INT_MAX:
        errs.add(
            written.loc,
            f"a dimension is a name or an integer from 1 to {INT_MAX}, found {written.text}",
            "e.g. `A: f16[M, K] row` or `A: f16[4096, 4096] row` (the kernel's "
            "sizes are 32-bit ints)",
        )
        return Const(1)
    return Const(int(written.value))


def _the_computation(kernel: S.Kernel, errs: Collector):
    """The kernel's one computation line (None when it has none; a second is refused)."""
    if not kernel.computations:
        errs.add(
            kernel.loc,
            f"kernel '{kernel.name}' has no computation line",
            "write the product it computes, e.g. `C[m, n] += A[m, k] * B[k, n]`",
        )
        return None
    if len(kernel.computations) > 1:
        extra = kernel.computations[1]
        errs.add(
            extra.loc,
            "a kernel computes one product; this is a second computation line",
            "put each product in a kernel of its own",
        )
    return kernel.computations[0]


def _accesses_match_declarations(accesses, operands, errs: Collector) -> bool:
    """Every operand the line names is declared, and indexed with one index per dim."""
    missing = [acc for acc in accesses if acc.name not in operands]
    for acc in missing:
        errs.add(
            acc.loc,
            f"'{acc.name}' is not a declared operand",
            f"declare it before use, e.g. `{acc.name}: f16[M, K] row`",
        )
    if missing:
        return False
    for acc in accesses:
        decl = operands[acc.name]
        if len(acc.indices) != len(decl.dims):
            errs.add(
                acc.loc,
                f"'{acc.name}' has {len(decl.dims)} dimensions but is indexed "
                f"with {len(acc.indices)}",
                f"index it as {acc.name}[{', '.join('ij'[: len(decl.dims)])}…]",
            )
            return False
    return True


def _peel_batch(
    comp, declared: dict[str, OperandInfo], errs: Collector
) -> tuple[dict[str, OperandInfo], dict[str, tuple[str, ...]]] | None:
    """The operands and each access's index letters with the batch taken off, or None. A
    batched GEMM: C's leading index (3 indices) is the batch; A and B either share it as
    their leading index or are 2-D, the same matrix for every batch; a batched operand
    loses its leading index and dim (its OperandInfo keeps the dim as its batch)."""
    accesses = (comp.out, comp.lhs, comp.rhs)
    operands = dict(declared)
    letters = {acc.name: tuple(w.text for w in acc.indices) for acc in accesses}
    batch_letter = letters[comp.out.name][0] if len(comp.out.indices) == 3 else None
    for acc in accesses:
        n_idx = len(acc.indices)
        if n_idx == 2 or (n_idx == 3 and batch_letter and letters[acc.name][0] == batch_letter):
            continue
        errs.add(
            acc.loc,
            f"'{acc.name}' is indexed with {n_idx} indices; operands are matrices [r, c], or "
            "batches of them [b, r, c] whose first index is C's first (the batch)",
            "write C[b, m, n] = A[b, m, k] * B[b, k, n] (or B[k, n]: one B for every batch)",
        )
        return None
    batch_dims = {}
    for acc in accesses:
        decl = operands[acc.name]
        if len(acc.indices) == 3:
            batch_dims[acc.name] = decl.dims[0]
            letters[acc.name] = letters[acc.name][1:]
            operands[acc.name] = OperandInfo(
                decl.name, decl.dtype, decl.dims[1:], decl.layout, decl.loc, decl.dims[0]
            )
    if len(set(batch_dims.values())) > 1:
        errs.add(
            comp.loc,
            "the batch index runs over "
            + " and ".join(f"{d} in {name}" for name, d in batch_dims.items())
            + ": the shapes do not agree",
            "declare every batched operand with the same leading dimension",
        )
        return None
    return operands, letters


def _product_indices(comp, letters, errs: Collector) -> tuple[str, str, str] | None:
    """C's row and column letters and the summed one, if the line is a matrix product."""
    out_i, out_j = letters[comp.out.name]
    lhs, rhs = letters[comp.lhs.name], letters[comp.rhs.name]
    reduction = set(lhs) & set(rhs)
    if len(reduction) != 1 or out_i not in lhs or out_j not in rhs or out_i == out_j:
        errs.add(
            comp.loc,
            "the computation is not a matrix product",
            "write C[m, n] = A[m, k] * B[k, n]: the first factor shares C's first index, "
            "the second shares C's second, and one index (k) is summed over",
        )
        return None
    (k_idx,) = reduction
    if k_idx in (out_i, out_j) or lhs.count(k_idx) != 1 or rhs.count(k_idx) != 1:
        errs.add(
            comp.loc,
            "the computation is not a matrix product",
            f"the index shared by both factors ('{k_idx}') is summed over, so it must not "
            "index C: write C[m, n] = A[m, k] * B[k, n]",
        )
        return None
    return out_i, out_j, k_idx


def _bound_sizes(accesses, decls, letters, errs: Collector) -> dict[str, Expr] | None:
    """Each index letter bound to the dim it indexes; every operand it indexes agrees."""
    bound: dict[str, tuple[Expr, S.Access]] = {}
    for acc, decl in zip(accesses, decls):
        for letter, dim in zip(letters[acc.name], decl.dims):
            if letter in bound and bound[letter][0] != dim:
                other = bound[letter][1]
                errs.add(
                    acc.loc,
                    f"index '{letter}' runs over {dim} in {acc.name} but over "
                    f"{bound[letter][0]} in {other.name}: the shapes do not agree",
                    "declare both operands with the same size along that index",
                )
                return None
            bound.setdefault(letter, (dim, acc))
    return {letter: dim for letter, (dim, _) in bound.items()}


def _distinct_sizes(sizes: dict[str, Expr], comp, errs: Collector) -> bool:
    """Each of M, N and K is a size parameter of its own (a kernel argument, and a size
    `run` and `tune` choose): one name for two of them would make two arguments of one
    name, and sizes that disagree with the declarations."""
    named = [(what, d.name) for what, d in sizes.items() if isinstance(d, Var)]
    for i, (what, name) in enumerate(named):
        twin = next((w for w, n in named[:i] if n == name), None)
        if twin is not None:
            example = {"N": "C: f32[M, N] with B: f16[K, N]", "K": "A: f16[M, K] with B: f16[K, N]"}
            errs.add(
                comp.loc,
                f"the product's {twin} and {what} are both the size '{name}': each of M, N "
                "and K needs a name of its own (or a literal size)",
                f"name the {what} dimension apart, e.g. {example[what]}",
            )
            return False
    return True


def _oriented(op: OperandInfo, written: tuple[str, ...], wanted: tuple[str, str]) -> OperandInfo:
    """The operand as the product sees it: A[k, m] on a row-major [K, M] is a col-major M x K."""
    return op if written == wanted else op.flipped()


def _access(acc: S.Access) -> str:
    return f"{acc.name}[{', '.join(w.text for w in acc.indices)}]"
