"""`syntax.Program` -> canonical `.tile` text.

    >>> from tiledsl.frontend.parser import parse
    >>> print(format_program(parse("kernel k { stages 2 block 128x128x32 }")), end="")
    kernel k {
        block 128 x 128 x 32
        stages 2
    }

Canonical means: operands, then the computation, then the directives in
`syntax.DIRECTIVES` order, four-space indent, one item per line, shapes written
`128 x 128 x 32` and tuning sets `{64, 128}`. Numbers keep their text as written
(`1.50` stays `1.50`), so `parse(format_program(p)) == p` for every program `p`
that `parse` returns; comments and blank lines are not kept.
"""

from __future__ import annotations

from .syntax import (
    DIRECTIVES,
    SHAPE_DIRECTIVES,
    Access,
    Computation,
    Directive,
    Kernel,
    Operand,
    Program,
)

INDENT = "    "


def format_program(program: Program) -> str:
    """The canonical text of every kernel of `program`, separated by a blank line."""
    return "\n\n".join(format_kernel(k) for k in program.kernels) + "\n"


def format_kernel(kernel: Kernel) -> str:
    """One `kernel NAME { ... }` block, without a trailing newline."""
    lines = [format_operand(o) for o in kernel.operands]
    lines += [format_computation(c) for c in kernel.computations]
    # A stable sort: a directive given twice keeps its order, as the parser does.
    directives = sorted(kernel.directives, key=lambda d: DIRECTIVES.index(d.name))
    lines += [format_directive(d) for d in directives]
    body = "".join(f"{INDENT}{line}\n" for line in lines)
    return f"kernel {kernel.name} {{\n{body}}}"


def format_operand(operand: Operand) -> str:
    """`A: f16[M, K] row`."""
    dims = ", ".join(str(d) for d in operand.dims)
    return f"{operand.name}: {operand.dtype}[{dims}] {operand.layout}"


def format_access(access: Access) -> str:
    """`C[m, n]`."""
    return f"{access.name}[{', '.join(str(i) for i in access.indices)}]"


def format_computation(comp: Computation) -> str:
    """`C[m, n] += A[m, k] * B[k, n]`."""
    out, lhs, rhs = (format_access(a) for a in (comp.out, comp.lhs, comp.rhs))
    return f"{out} {comp.op} {lhs} * {rhs}"


def format_directive(directive: Directive) -> str:
    """`block 128 x 128 x 32`, `pad A 8, B 8`, `attributes a, b(256)`."""
    if directive.name in SHAPE_DIRECTIVES:
        args = " x ".join(str(a) for g in directive.groups for a in g)
    else:
        args = ", ".join(" ".join(str(a) for a in g) for g in directive.groups)
    return f"{directive.name} {args}" if args else directive.name
