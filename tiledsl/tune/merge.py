"""One `.tile` file and one dispatch table from the kernels that won each shape of a
benchmark run, whichever files they came from:

    text, table = merge(winners, Path("llama.tuned.tile"), layouts={"B": "col"},
                        origin="bench/results/shapes-h200-2026-12-05.json",
                        device="NVIDIA H200", compiler="nvrtc 13.0")

`tiledsl tune --sizes` writes a file and a table per space; a program that calls one GEMM
at every shape of a model (1 token to 8192 against the same weights) wants one callable,
so that `tiledsl.load` picks the fastest kernel at each shape as cuBLAS does. The winners
(`Winner`: a shape, the file and kernel that was fastest there, its time) become one
kernel each, under a comment naming where it came from and the shapes it won; the table
maps every shape to its kernel by the usual rule (tiledsl.tune.dispatch).

One callable takes one product as written, so every winner must declare the same
operands and computation. Files tuned in different layouts (the few-token kernels take
torch's Linear weight as `B: f16[K, N] col`, the many-token rungs `B: f16[K, N] row`) are
brought to one by `layouts`: each named operand is declared in that layout. A kernel so
redeclared says in its comment whether the run timed it in that layout (`timed_relaid`:
bench/shapes.py --layout times copies of the files redeclared) or in its own file's, in
which case its times are not the merged file's until that file is timed itself.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import Diagnostic, Loc, TileError, UsageError
from ..frontend.formatter import format_computation, format_operand, format_program
from ..frontend.parser import parse
from ..frontend.syntax import Kernel, Program, Word
from .dispatch import Entry, Size, Table, table_path
from .record import size_text, speed_text, tflops

#: The layouts an operand may be declared in.
LAYOUTS = ("row", "col")


@dataclass(frozen=True)
class Winner:
    """The kernel `kernel` of `file` was the fastest at `size` (in `ms`) in a run."""

    size: Size
    file: Path
    kernel: str
    ms: float | None = None
    # timed in the layouts the merge declares (a copy of its file redeclared so), not in
    # its file's own
    timed_relaid: bool = False


def merge(
    winners: list[Winner],
    output: Path,
    *,
    layouts: dict[str, str] | None = None,
    origin: str,
    device: str = "",
    compiler: str = "",
) -> tuple[str, Table]:
    """The merged file's text and its table. UsageError naming the kernel and file when a
    winner cannot be read; TileError, located in its file, when it declares another
    product than the first winner."""
    if not winners:
        raise UsageError("no shape has a winning kernel to merge")
    layouts = layouts or {}
    _check_layouts(layouts)
    kernels = _winning_kernels(winners, layouts)
    _one_product(kernels)
    names = _names(list(kernels))
    relaid = {(w.file, w.kernel) for w in winners if w.timed_relaid}
    shapes: dict[tuple[Path, str], list[str]] = {key: [] for key in kernels}
    entries = []
    for w in winners:
        key = (w.file, w.kernel)
        shapes[key].append(f"{size_text(w.size)} ({speed_text(w.size, w.ms)})")
        entries.append(
            Entry(w.size, names[key], w.ms, tflops(w.size, w.ms), f"{w.file.name}:{w.kernel}")
        )
    header = (
        f"The fastest kernel at each shape of {origin}, on {device or 'its GPU'}, from the "
        f"files that run timed; both oracles passed for each. {table_path(output).name} "
        "says which kernel each shape takes."
    )
    parts = ["".join(f"# {line}\n" for line in textwrap.wrap(header, 88, break_on_hyphens=False))]
    for key, (kernel, redeclared) in kernels.items():
        body = format_program(Program((replace(kernel, name=names[key]),)))
        said = _provenance(key, names[key], redeclared, key in relaid)
        parts.append(f"\n# {names[key]}: {said}; fastest at {', '.join(shapes[key])}\n" + body)
    return "".join(parts), Table(output.name, tuple(entries), device, compiler)


def _winning_kernels(
    winners: list[Winner], layouts: dict[str, str]
) -> dict[tuple[Path, str], tuple[Kernel, list[str]]]:
    """Each winner's kernel (its file read once), in the layouts asked, with the
    declarations that changed; in the order the winners first name them."""
    programs: dict[Path, Program] = {}
    kernels: dict[tuple[Path, str], tuple[Kernel, list[str]]] = {}
    for w in winners:
        if (w.file, w.kernel) in kernels:
            continue
        if w.file not in programs:
            try:
                programs[w.file] = parse(w.file.read_text(), str(w.file))
            except OSError as err:
                raise UsageError(f"cannot read {w.file}: {err.strerror or err}") from None
        found = [k for k in programs[w.file].kernels if k.name == w.kernel]
        if not found:
            raise UsageError(f"{w.file} has no kernel '{w.kernel}' (was it tuned again?)")
        kernels[(w.file, w.kernel)] = _relayout(found[0], layouts)
    return kernels


def _provenance(key: tuple[Path, str], name: str, redeclared: list[str], relaid: bool) -> str:
    """Where a merged kernel came from, and in which layout its times were taken."""
    file, original = key
    source = f"from {file.name}'s {original}" if original != name else f"from {file.name}"
    if not redeclared:
        return source
    if relaid:
        return f"{source}; {', '.join(redeclared)}, timed so"
    return (
        f"{source}; {', '.join(redeclared)}: its times are of its file's layout until this "
        "file is timed again"
    )


def relayout_text(text: str, file: str, layouts: dict[str, str]) -> str | None:
    """The `.tile` text `text` with every kernel's operands named in `layouts` declared in
    that layout (in the formatter's canonical text: comments are not kept), or None when
    every kernel declares them so already: the file to time in another layout."""
    _check_layouts(layouts)
    program = parse(text, file)
    kernels = [_relayout(k, layouts) for k in program.kernels]
    if not any(changed for _, changed in kernels):
        return None
    return format_program(replace(program, kernels=tuple(k for k, _ in kernels)))


def _check_layouts(layouts: dict[str, str]) -> None:
    for name, layout in layouts.items():
        if layout not in LAYOUTS:
            raise UsageError(f"layout '{layout}' for {name}: write one of {', '.join(LAYOUTS)}")


def _relayout(kernel: Kernel, layouts: dict[str, str]) -> tuple[Kernel, list[str]]:
    """`kernel` with each operand named in `layouts` declared in that layout, and the
    declarations that changed ("B col here, row in its file")."""
    operands, changed = [], []
    for op in kernel.operands:
        wanted = layouts.get(op.name)
        if wanted is not None and op.layout.text != wanted:
            changed.append(f"{op.name} {wanted} here, {op.layout.text} in its file")
            op = replace(op, layout=Word(wanted, op.layout.loc))
        operands.append(op)
    return replace(kernel, operands=tuple(operands)), changed


def _product(kernel: Kernel) -> str:
    """The product as a kernel writes it: its declarations and computations."""
    return "; ".join(
        [format_operand(o) for o in kernel.operands]
        + [format_computation(c) for c in kernel.computations]
    )


def _one_product(kernels: dict[tuple[Path, str], tuple[Kernel, list[str]]]) -> None:
    """TileError, located at the first declaration or computation of a kernel that differs
    from the first kernel's (in that kernel's file): one file holds one product."""
    items = list(kernels.items())
    (first_file, first_name), (first, _) = items[0]
    theirs = {key: text for key, text, _ in _parts(first)}
    for (file, name), (kernel, _) in items[1:]:
        if _product(kernel) == _product(first):
            continue
        key, here, loc = next(
            (part for part in _parts(kernel) if theirs.get(part[0]) != part[1]),
            ("", _product(kernel), kernel.loc),  # the same parts, fewer of them
        )
        there = theirs.get(key, _product(first))
        raise TileError(
            [
                Diagnostic(
                    loc,
                    f"{name} has `{here}`, but {first_file}'s {first_name} `{there}`: "
                    "one file holds one product",
                    (
                        "declare the operands in one layout (bench/shapes.py --layout B=col), "
                        "or merge only files of the same product",
                    ),
                )
            ],
            _text(file),
        )


def _parts(kernel: Kernel) -> list[tuple[str, str, Loc]]:
    """A kernel's declarations (keyed by operand) and computations (by place), as written,
    each with where it is written."""
    return [(o.name, format_operand(o), o.loc) for o in kernel.operands] + [
        (f"computation {i}", format_computation(c), c.loc)
        for i, c in enumerate(kernel.computations)
    ]


def _text(file: Path) -> str | None:
    """The file's text, to quote a line of it (None if it cannot be read again)."""
    try:
        return file.read_text()
    except OSError:
        return None


def _names(keys: list[tuple[Path, str]]) -> dict[tuple[Path, str], str]:
    """Each kernel keeps its name; a name two files share gets _2, _3, ... after the first."""
    names: dict[tuple[Path, str], str] = {}
    taken: set[str] = set()
    for file, kernel in keys:
        name, n = kernel, 1
        while name in taken:
            n += 1
            name = f"{kernel}_{n}"
        taken.add(name)
        names[(file, kernel)] = name
    return names
