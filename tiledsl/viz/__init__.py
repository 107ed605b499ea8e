"""`tiledsl viz`: graphviz pictures of every pass, the tile decomposition and the banks.

    result = viz_source(text, "examples/hgemm.tile", "out/")   # or write_viz(compiled, ...)
    result.index                                                # out/index.html

For each kernel of the file, into `DIR/<kernel>/`:

- `NN-<stage>.dot` for lowering and every pass that ran, NN its place in the pipeline
  (`ir_graph.py`: the IR, marked against the stage before);
- `tiles.dot`: the grid's visiting order, one block's warps, the K pipeline (`tiles.py`);
- `banks.dot`: one fragment load's banks before and after padding (`bank_map.py`);
- `roles.dot` (warp-specialized kernels): the roles and their stage handoffs, step by step
  (`handoffs.py`);

each rendered to `.svg` or `.png` by Graphviz's `dot` when it is on PATH, and one
`DIR/index.html` (`page.py`) that shows them in pipeline order beside the IR text.
The .dot files depend on the kernel only, so the same file gives the same bytes.
"""

from __future__ import annotations

import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import graphviz

from ..driver import Compiled, compile_source
from ..errors import ToolchainError, UsageError
from ..files import write_outputs
from ..ir.nodes import KernelIR
from ..ir.printer import print_ir
from ..passes import STAGE_NAMES
from .bank_map import banks_graph
from .handoffs import handoffs_graph
from .ir_graph import pass_info, stage_graph
from .page import index_html
from .tiles import tiles_graph

FORMATS = ("svg", "png")
NO_DOT = (
    "rendering needs Graphviz's `dot` (Debian/Ubuntu: apt-get install graphviz); "
    "wrote the .dot sources and index.html only"
)


@dataclass(frozen=True)
class Picture:
    stem: str  # the file name without extension: "03-multi-buffering", "tiles", "banks"
    title: str
    dot: str


@dataclass(frozen=True)
class Stage:
    """One stage of the pipeline for one kernel; `picture` is None when its pass did not run."""

    number: int
    name: str
    ran: bool
    summary: str
    directive: str | None  # what switches its pass on (None: lowering, which always runs)
    picture: Picture | None
    ir_text: str


@dataclass(frozen=True)
class KernelPictures:
    name: str
    stages: tuple[Stage, ...]
    tiles: Picture
    banks: Picture
    roles: Picture | None = None  # a warp-specialized kernel's roles and handoffs

    @property
    def pictures(self) -> tuple[Picture, ...]:
        drawn = tuple(s.picture for s in self.stages if s.picture is not None)
        return (*drawn, self.tiles, self.banks, *((self.roles,) if self.roles else ()))


@dataclass
class VizResult:
    index: Path
    sources: list[Path] = field(default_factory=list)  # the .dot files
    rendered: list[Path] = field(default_factory=list)  # .svg / .png, empty without dot
    note: str | None = None  # why nothing was rendered


def viz_source(
    text: str,
    file: str,
    out_dir: str | Path,
    fmt: str = "svg",
    target: str | None = None,
    kernel: str | None = None,
) -> VizResult:
    """Compile `text` (a located TileError if it is wrong; nothing is written) and draw it."""
    compiled = compile_source(text, file, target)
    return write_viz(compiled, out_dir, fmt, kernel)


def write_viz(
    compiled: Compiled, out_dir: str | Path, fmt: str = "svg", kernel: str | None = None
) -> VizResult:
    """Draw every picture, render it, then write them all (tiledsl.files: all or nothing)."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown format '{fmt}'; formats are: {', '.join(FORMATS)}")
    names = [k.name for k in compiled.kernels]
    if kernel is not None and kernel not in names:
        raise UsageError(f"no kernel '{kernel}' in {compiled.file}; it has: {', '.join(names)}")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UsageError(f"the output {out} is a file, not a directory; give a directory path")
    drawn = [p for p in pictures(compiled) if kernel is None or p.name == kernel]
    result = VizResult(out / "index.html")
    dots: dict[Path, str] = {}
    for k in drawn:
        for p in k.pictures:
            path = out / k.name / f"{p.stem}.dot"
            dots[path] = p.dot
            result.sources.append(path)
    files: dict[Path, str | bytes] = dict(dots)
    dot = shutil.which("dot")
    if dot is None:
        result.note = NO_DOT
    else:
        rendered = render(dict(dots), fmt)
        files.update(rendered)
        result.rendered = list(rendered)
    ext = fmt if dot is not None else "dot"
    files[result.index] = index_html(compiled.file, drawn, ext)
    write_outputs(files, inputs=[Path(compiled.file)])
    return result


def pictures(compiled: Compiled) -> list[KernelPictures]:
    """The pictures of every kernel of `compiled`, from its snapshots after each stage."""
    out = []
    for final in compiled.kernels:
        snapshots = [(s, k, ran) for s, k, ran in compiled.snapshots if k.name == final.name]
        stages, previous = [], None
        for stage, k, ran in snapshots:
            number = STAGE_NAMES.index(stage)
            picture = None
            if ran:
                source = stage_graph(k, stage, number, previous, compiled.file)
                picture = Picture(f"{number:02d}-{stage}", stage, source)
            directive, summary = pass_info(stage)
            stages.append(Stage(number, stage, ran, summary, directive, picture, ir_text(k)))
            previous = k
        out.append(
            KernelPictures(
                final.name,
                tuple(stages),
                Picture("tiles", "tile decomposition", tiles_graph(final, compiled.file)),
                Picture("banks", "shared-memory banks", banks_graph(final, compiled.file)),
                Picture(
                    "roles", "warp roles and stage handoffs", handoffs_graph(final, compiled.file)
                )
                if final.specialization is not None
                else None,
            )
        )
    return out


def ir_text(kernel: KernelIR) -> str:
    """The IR printer's text, or why there is none (a node the printer does not know yet)."""
    try:
        return print_ir(kernel)
    except TypeError as err:
        return f"(the IR printer cannot print this stage: {err})\n"


def render(sources: dict[Path, str], fmt: str) -> dict[Path, bytes]:
    """Each .dot text rendered by `dot` (in parallel: each is a process) in a scratch
    folder: the pictures' bytes, by the path beside their .dot file."""

    def one(item: tuple[int, Path, str], scratch: Path) -> tuple[Path, bytes]:
        number, path, text = item
        source = scratch / f"{number}.dot"
        source.write_text(text)
        target = source.with_suffix(f".{fmt}")
        try:
            graphviz.render("dot", fmt, source, outfile=target, quiet=True)
        except graphviz.CalledProcessError as err:
            log = err.stderr.decode(errors="replace") if isinstance(err.stderr, bytes) else ""
            raise ToolchainError(
                f"dot could not render {path}", log, command=f"dot -T{fmt} -O {path}"
            ) from None
        return path.with_suffix(f".{fmt}"), target.read_bytes()

    items = [(i, path, text) for i, (path, text) in enumerate(sources.items())]
    with tempfile.TemporaryDirectory(prefix="tiledsl-viz-") as scratch:
        with ThreadPoolExecutor(max_workers=8) as pool:
            return dict(pool.map(lambda item: one(item, Path(scratch)), items))
