"""launch-scalars (`persistent`): a persistent kernel's grid-wide values computed by the
host, once per launch, and its divisions by them without a divide.

A persistent block finds its tiles by arithmetic on the grid (tiledsl.ir.grid): the tiles
of a last round (`tiles - tiles / blocks * blocks`), stream-K's shares (`sk_steps /
sk_blocks`), a group's width in tiles. Every block computed all of it before its first
TMA copy, each `/` and `%` by a run-time value a chain of some twenty dependent
instructions: on the H200 that put the first copy of small_m_2 at 1.5 us after the
block's start where compile-time sizes put it at 0.86 us (docs/performance.md, "Where a
few-token kernel's time goes").

The pass moves every `Let` whose value depends only on the sizes, the tile counts and the
launch's `blocks` (and on such Lets) out of the body into `KernelIR.launch_scalars`, in
an order where each comes after what it reads. The launcher evaluates them with the same
expressions (tiledsl.gpu.runtime) and passes those the body still reads as kernel
parameters: an `int`, or, where the body divides by the value (`blocks`, `width`,
`sk_blocks`, ...), a `Divisor`: the value with the constants that make `n / d` a
multiply-high, an add and a shift (tiledsl.ir.divisors). The interpreter evaluates them
once per launch too, before any block runs, so what it proves is what the kernel does.

A Let bound in several places (a tile loop's `width` in each role) moves when every
binding has the same value.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir.expr import BinOp, Expr, Var, variables
from ..ir.grid import grid_vars
from ..ir.nodes import For, KernelIR, LaunchScalar, Let, Passed, expressions, map_body, walk

#: `blocks`: the launch's grid (its clusters, in clusters), which the launcher picks.
BLOCKS = Var("blocks")


def launch_scalars(kernel: KernelIR) -> KernelIR:
    tiles = grid_vars(kernel)  # tiles_m, tiles_n (and the cluster tiles): computed in-kernel
    known = set(kernel.gemm.size_args) | set(tiles) | {BLOCKS.name}
    hoisted = _grid_wide(kernel, known)
    if not hoisted:
        return kernel
    body = map_body(kernel.body, lambda s: () if isinstance(s, Let) and s.var in hoisted else s)
    read = set().union(*(variables(e) for e in expressions(body)))
    divisors = {
        e.rhs.name
        for e in expressions(body)
        if isinstance(e, BinOp) and e.op in ("/", "%") and isinstance(e.rhs, Var)
    }
    # the grid's own values the body divides by come from the host too
    grid = {BLOCKS.name: BLOCKS, **tiles}
    scalars = [LaunchScalar(n, grid[n], "divisor") for n in grid if n in divisors]
    for name, value in hoisted.items():
        passed: Passed = "divisor" if name in divisors else "int" if name in read else "host"
        scalars.append(LaunchScalar(name, value, passed))
    return replace(kernel, body=body, launch_scalars=tuple(scalars))


def _grid_wide(kernel: KernelIR, known: set[str]) -> dict[str, Expr]:
    """The Lets to move, in an order where each follows the names it reads."""
    bindings: dict[str, list[Expr]] = {}
    loop_vars = set()
    for stmt in walk(kernel.body):
        if isinstance(stmt, Let):
            bindings.setdefault(stmt.var, []).append(stmt.value)
        elif isinstance(stmt, For):
            loop_vars.add(stmt.var)
    candidates = {
        name: values[0]
        for name, values in bindings.items()
        if name not in loop_vars and name not in known and all(v == values[0] for v in values)
    }
    hoisted: dict[str, Expr] = {}
    grew = True
    while grew:  # a fixed point: a Let over grid-wide names is grid-wide
        grew = False
        for name, value in candidates.items():
            if name not in hoisted and variables(value) <= known | hoisted.keys():
                hoisted[name] = value
                grew = True
    return hoisted
