"""A `.tile` file with tuning sets, expanded into its points: each one a plain `.tile` file.

    program = parse("kernel k { ... block {64, 128} x 128 x 32  stages {2, 3} }")
    points = expand(program)          # 4 points, the last set varying fastest
    points[0].text                    # canonical text with `block 64 x 128 x 32`, `stages 2`
    points[0].label                   # "block 64 x 128 x 32, stages 2"

Every `TuningSet` in the chosen kernel's directives is one choice; the points are
the cartesian product of the choices, in the order the sets stand in the kernel
(directives in `syntax.DIRECTIVES` order, as the parser keeps them). A point is
the kernel with each set replaced by the chosen number (or instruction shape, `mma
{m64n64k16, m64n128k16}`), so it is a plain file: its canonical text
(`formatter.format_program`) compiles as it stands and is the key `tiledsl tune`
records results under. The chosen value keeps its location in the space file, so an
error about a point is located in the space.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

from ..errors import Collector
from ..frontend.formatter import format_directive, format_program
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


def pick_kernel(program: Program, name: str | None) -> Kernel:
    """The kernel to search: the file's only one, or the one named. ValueError otherwise."""
    names = [k.name for k in program.kernels]
    if name is None:
        if len(names) > 1:
            raise ValueError(
                f"{program.file} has {len(names)} kernels ({', '.join(names)}); "
                "tune searches one: choose it with --kernel NAME"
            )
        return program.kernels[0]
    if name not in names:
        raise ValueError(f"no kernel '{name}' in {program.file}; it has: {', '.join(names)}")
    return program.kernel(name)


def tuning_sets(kernel: Kernel) -> list[TuningSet]:
    """The kernel's sets in expansion order."""
    return [a for d in kernel.directives for a in d.args if isinstance(a, TuningSet)]


def point_count(kernel: Kernel) -> int:
    return math.prod(len(s.options) for s in tuning_sets(kernel))


def expand(program: Program, name: str | None = None) -> list[Point]:
    """Every point of the space of one kernel (see `pick_kernel`), duplicates dropped.

    Raises TileError, located at the kernel, for a space of more than MAX_POINTS.
    """
    kernel = pick_kernel(program, name)
    count = point_count(kernel)
    if count > MAX_POINTS:
        errs = Collector()
        errs.add(
            kernel.loc,
            f"kernel '{kernel.name}' spans {count} points, more than tune searches ({MAX_POINTS})",
            "narrow some sets, or split the space into files that fix one of them",
        )
        errs.raise_if_any(program.source)
    sets = tuning_sets(kernel)
    points: dict[str, Point] = {}
    for combination in itertools.product(*(s.options for s in sets)):
        point = _point(program, kernel, combination)
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


def _point(program: Program, kernel: Kernel, combination: tuple[Num | Word | Phrase, ...]) -> Point:
    chosen = iter(combination)
    directives, choices = [], []
    for d in kernel.directives:
        if not any(isinstance(a, TuningSet) for a in d.args):
            directives.append(d)
            continue
        groups = tuple(_chosen(group, chosen) for group in d.groups)
        directives.append(replace(d, groups=groups).canonical())
        choices.append(format_directive(directives[-1]))
    one = replace(program, kernels=(replace(kernel, directives=tuple(directives)),))
    return Point(one, format_program(one), tuple(choices))
