"""A `.tile` file with tuning sets, expanded into its points: each one a plain `.tile` file.

    program = parse("kernel k { ... block {64, 128} x 128 x 32  stages {2, 3} }")
    points = expand(program)          # 4 points, the last set varying fastest
    points[0].text                    # canonical text with `block 64 x 128 x 32`, `stages 2`
    points[0].label                   # "block 64 x 128 x 32, stages 2"

Every `TuningSet` in the chosen kernel's directives is one choice; the points are
the cartesian product of the choices, in the order the sets stand in the kernel
(directives in `syntax.DIRECTIVES` order, as the parser keeps them). A space of several
kernels of one product (the same operands and computation line: e.g. a swapped few-token
family beside a plain one) is the union of their spaces, each point labelled with its
kernel (`kernel small_m, stages 8`), so that one search picks among the families per
shape. A point is the kernel with each set replaced by the chosen number (or instruction
shape, `mma {m64n64k16, m64n128k16}`), so it is a plain file: its canonical text
(`formatter.format_program`) compiles as it stands and is the key `tiledsl tune` records
results under. The chosen value keeps its location in the space file, so an
error about a point is located in the space.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

from ..errors import Collector
from ..frontend.formatter import (
    format_computation,
    format_directive,
    format_operand,
    format_program,
)
from ..frontend.syntax import Arg, Kernel, Num, Phrase, Program, TuningSet, Word

#: Points a space may have: beyond this, expanding and compiling each is not a search.
MAX_POINTS = 20_000


@dataclass(frozen=True)
class Point:
    program: Program  # one kernel, no sets; locations (and source) of the space file
    text: str  # the canonical text: a plain .tile file, and the tune record's key
    choices: tuple[str, ...]  # each directive that held a set, as chosen: "stages 3"

    @property
    def label(self) -> str:
        """What was chosen, e.g. `block 128 x 128 x 64, stages 3`."""
        return ", ".join(self.choices) or "the kernel as written (no tuning sets)"


def pick_kernels(program: Program, name: str | None) -> tuple[Kernel, ...]:
    """The kernels to search: the one named, else every kernel of the file, which must then
    compute one product (a tuned file of their winners is called as one). ValueError
    otherwise."""
    names = [k.name for k in program.kernels]
    if name is not None:
        if name not in names:
            raise ValueError(f"no kernel '{name}' in {program.file}; it has: {', '.join(names)}")
        return (program.kernel(name),)
    products = {_product(k) for k in program.kernels}
    if len(products) > 1:
        raise ValueError(
            f"{program.file} has {len(names)} kernels ({', '.join(names)}) of different "
            "products (operands or computation line); tune searches one product: choose a "
            "kernel with --kernel NAME, or declare them alike"
        )
    return program.kernels


def _product(kernel: Kernel) -> tuple[str, ...]:
    """The product a kernel computes, as written: its declarations and computation line."""
    return (
        *(format_operand(o) for o in kernel.operands),
        *(format_computation(c) for c in kernel.computations),
    )


def tuning_sets(kernel: Kernel) -> list[TuningSet]:
    """The kernel's sets in expansion order."""
    return [a for d in kernel.directives for a in d.args if isinstance(a, TuningSet)]


def point_count(kernel: Kernel) -> int:
    return math.prod(len(s.options) for s in tuning_sets(kernel))


def expand(program: Program, name: str | None = None) -> list[Point]:
    """Every point of the space of the kernels `pick_kernels` gives, duplicates dropped.

    Raises TileError, located at the kernel that passes it, for a space of more than
    MAX_POINTS.
    """
    kernels = pick_kernels(program, name)
    total = 0
    for kernel in kernels:
        total += point_count(kernel)
        if total > MAX_POINTS:
            errs = Collector()
            errs.add(
                kernel.loc,
                f"kernel '{kernel.name}' spans {point_count(kernel)} points"
                + (f" ({total} with the kernels before it)" if kernel is not kernels[0] else "")
                + f", more than tune searches ({MAX_POINTS})",
                "narrow some sets, or split the space into files that fix one of them",
            )
            errs.raise_if_any(program.source)
    points: dict[str, Point] = {}
    named = len(kernels) > 1  # which family a point is of, in its label
    for kernel in kernels:
        for combination in itertools.product(*(s.options for s in tuning_sets(kernel))):
            point = _point(program, kernel, combination, named)
            points.setdefault(point.text, point)  # `{64, 64}` gives one point, not two
    return list(points.values())


def _chosen(group: tuple[Arg, ...], chosen: Iterator) -> tuple[Arg, ...]:
    """`group` with each set replaced by its chosen option (a Phrase's arguments spliced in)."""
    out: list[Arg] = []
    for a in group:
        if not isinstance(a, TuningSet):
            out.append(a)
            continue
        option = next(chosen)
        out.extend(option.args if isinstance(option, Phrase) else (option,))
    return tuple(out)


def _point(
    program: Program, kernel: Kernel, combination: tuple[Num | Word | Phrase, ...], named: bool
) -> Point:
    chosen = iter(combination)
    directives, choices = [], [f"kernel {kernel.name}"] if named else []
    for d in kernel.directives:
        if not any(isinstance(a, TuningSet) for a in d.args):
            directives.append(d)
            continue
        groups = tuple(_chosen(group, chosen) for group in d.groups)
        directives.append(replace(d, groups=groups).canonical())
        choices.append(format_directive(directives[-1]))
    one = replace(program, kernels=(replace(kernel, directives=tuple(directives)),))
    return Point(one, format_program(one), tuple(choices))
