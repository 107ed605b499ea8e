"""A dispatch table: which kernel of a `.tile` file runs each shape, as `tiledsl tune --sizes`
found it. The table lives beside the file, `NAME.dispatch.json` for `NAME.tile`:

    {"tile": "space.tuned.tile", "device": "NVIDIA H200", "compiler": "nvrtc 13.0",
     "rule": "...", "entries": [{"size": [2048, 4096, 4096], "kernel": "space_1",
                                 "ms": 0.083, "tflops": 828.3, "point": "block=128x256x64"}]}

    table = read_table(table_path(tile))         # None when there is none
    pick = table.pick((m, n, k), covering)  # covering: the kernels that can run it
    pick.kernel, pick.why, pick.far

The rule (`pick`): the shape itself if it was tuned; otherwise the nearest tuned shape
whose kernel covers this one, the distance being the sum over M, N and K of |log2| of
their ratios (2048 is as near 4096 as 8192 is, and a factor in M counts as one in N); a
tie goes to the entry written first. None when no entry's kernel covers the shape (the
file's own rule then applies: the first kernel that covers it without its guarded twin).

A shape more than FAR from every tuned shape still gets the nearest one's kernel, but the
pick says it is `far`: nothing was timed near it, and a file tuned for few tokens can run
thousands of them several times slower than one tuned there (a few-token table's kernel
ran 4095 x 4097 x 4099 at 0.18x cuBLAS). `tiledsl check --size`, `run` and `bench` print
the why; `tiledsl.load`'s callable warns once per shape (TileWarning).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..ir.nodes import KernelIR

Size = tuple[int, int, int]

#: The words every table carries, so that a reader knows how a shape is matched.
RULE = (
    "the shape itself if it was tuned, else the nearest tuned shape whose kernel covers it "
    "(distance: the sum of |log2| of the M, N and K ratios; a tie: the first entry)"
)

#: The log2 distance past which a nearest tuned shape is called far: a factor of four in
#: one of M, N and K (or of two in two of them) from every shape the table was timed at.
FAR = 2.0


@dataclass(frozen=True)
class Entry:
    size: Size
    kernel: str
    ms: float | None = None
    tflops: float | None = None
    point: str = ""  # the tuning point's label

    def to_json(self) -> dict:
        return {
            "size": list(self.size),
            "kernel": self.kernel,
            "ms": self.ms,
            "tflops": self.tflops,
            "point": self.point,
        }


@dataclass(frozen=True)
class Pick:
    """The table's kernel for a shape, why, and whether every tuned shape is far from it."""

    kernel: str
    why: str
    far: bool = False


@dataclass(frozen=True)
class Table:
    tile: str  # the .tile file whose kernels the entries name
    entries: tuple[Entry, ...]
    device: str = ""
    compiler: str = ""

    def pick(self, size: Size, covering: set[str] | None = None) -> Pick | None:
        """The kernel for `size` among the entries whose kernel is in `covering` (None:
        every entry), or None when there is none."""
        usable = [e for e in self.entries if covering is None or e.kernel in covering]
        for e in usable:
            if e.size == size:
                return Pick(e.kernel, f"tuned at {_text(size)}")
        if not usable:
            return None
        nearest = min(usable, key=lambda e: distance(e.size, size))  # min keeps the first
        gap = distance(nearest.size, size)
        why = f"the nearest tuned shape, {_text(nearest.size)} (log2 distance {gap:.2f})"
        if gap <= FAR:
            return Pick(nearest.kernel, why)
        return Pick(
            nearest.kernel,
            f"{why}; far from every shape the table was tuned at ({self.span()}): its speed "
            f"at {_text(size)} is unmeasured; add the shape to the suite (`tiledsl tune "
            "SPACE --sizes SUITE`) or load a file tuned near it",
            far=True,
        )

    def span(self) -> str:
        """The range of the tuned shapes, dimension by dimension: "M 1-16, N 4096-22016"."""
        parts = []
        for axis, name in enumerate("MNK"):
            low = min(e.size[axis] for e in self.entries)
            high = max(e.size[axis] for e in self.entries)
            parts.append(f"{name} {low}" + (f"-{high}" if high != low else ""))
        return ", ".join(parts)

    def to_text(self) -> str:
        """The table as its file holds it."""
        return json.dumps(self.to_json(), indent=2) + "\n"

    def to_json(self) -> dict:
        return {
            "tile": self.tile,
            "device": self.device,
            "compiler": self.compiler,
            "rule": RULE,
            "entries": [e.to_json() for e in self.entries],
        }


def distance(a: Size, b: Size) -> float:
    return sum(abs(math.log2(x / y)) for x, y in zip(a, b, strict=True))


def table_path(tile: Path) -> Path:
    """Where the dispatch table of `tile` lives: beside it, NAME.dispatch.json."""
    return tile.with_suffix(".dispatch.json")


def table_beside(file: str | Path, kernels) -> Table | None:
    """The table beside the `.tile` file `file` (None for a file's text, or none there),
    checked against the file's `kernels` (KernelIRs)."""
    path = Path(file)
    if not path.is_file():
        return None
    return read_table(table_path(path), {k.name for k in kernels})


def assign_sizes(
    kernels: tuple[KernelIR, ...], sizes, table: Table, batch: int = 1
) -> list[tuple[Size, KernelIR, str]]:
    """(size, the kernel that runs it, why) for every size, by `choose_kernel`; its
    SizeError names the size no kernel runs."""
    from ..commands.run import SizeError

    out = []
    for size in sizes:
        try:
            chosen = choose_kernel(kernels, size, batch, table)
        except SizeError as err:
            raise SizeError(f"{_text(size)}: {err}") from None
        out.append((size, chosen.kernel, chosen.why))
    return out


def read_table(path: Path, kernels: set[str] | None = None) -> Table | None:
    """The table at `path` (None if there is none); UsageError, naming the file and what
    is wrong, for one that cannot be read or names a kernel not in `kernels`."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        entries = tuple(
            Entry(
                _size(e["size"]),
                str(e["kernel"]),
                e.get("ms"),
                e.get("tflops"),
                str(e.get("point", "")),
            )
            for e in data["entries"]
        )
        table = Table(
            str(data.get("tile", "")), entries, data.get("device", ""), data.get("compiler", "")
        )
    except (OSError, ValueError, KeyError, TypeError, OverflowError) as err:
        raise UsageError(
            f"{path}: not a dispatch table ({type(err).__name__}: {err}); rewrite it with "
            "`tiledsl tune FILE --sizes SUITE`, or remove it"
        ) from None
    unknown = sorted({e.kernel for e in entries} - kernels) if kernels is not None else []
    if unknown:
        raise UsageError(
            f"{path} names kernel '{unknown[0]}', which its .tile file does not have: "
            "rewrite the table with `tiledsl tune FILE --sizes SUITE`, or remove it"
        )
    return table


def _size(value) -> Size:
    m, n, k = (int(v) for v in value)
    if min(m, n, k) < 1:
        raise ValueError(f"size {value} is not positive")
    return m, n, k


def _text(size: Size) -> str:
    return "x".join(map(str, size))


def read_suite(path: Path) -> list[Size]:
    """The shapes of a suite file: one MxNxK a line, `#` comments and blank lines skipped;
    UsageError with the line of one that is not a size."""
    from ..commands.run import parse_size

    sizes = []
    try:
        lines = path.read_text().splitlines()
    except OSError as err:
        raise UsageError(f"cannot read the suite {path}: {err.strerror or err}") from None
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            size = parse_size(text)
        except Exception as err:  # argparse's type error, or a ValueError
            raise UsageError(f"{path}:{number}: '{text}' is not a size MxNxK ({err})") from None
        if size not in sizes:
            sizes.append(size)
    if not sizes:
        raise UsageError(f"{path} holds no size: write one MxNxK a line")
    return sizes


@dataclass(frozen=True)
class Chosen:
    """The kernel of a file that runs a size, why, its size parameters, and whether the
    dispatch table chose it from a tuned shape far from this one (Pick.far)."""

    kernel: KernelIR
    why: str
    params: dict[str, int]
    far: bool = False


def choose_kernel(
    kernels: tuple[KernelIR, ...], size: Size, batch: int = 1, table: Table | None = None
) -> Chosen:
    """The kernel of a file that runs `size` (before the guarded twin is chosen for it), why,
    and its size parameters: the table's pick among the kernels that can run the size,
    else the first of those that covers it without its guarded twin, else the first.
    SizeError (commands.run) with every kernel's reason when none can run it."""
    from ..commands.run import SizeError, check_size
    from ..lowering.edges import needs_twin

    covering, why_not, params = [], [], {}
    for kern in kernels:
        try:
            params[kern.name] = check_size(kern, size, batch)
        except SizeError as err:
            why_not.append(f"{kern.name}: {err}")
            continue
        covering.append(kern)
    if not covering:
        raise SizeError("; ".join(why_not))
    if table is not None:
        picked = table.pick(size, {k.name for k in covering})
        if picked is not None:
            chosen = next(k for k in covering if k.name == picked.kernel)
            return Chosen(
                chosen,
                f"{chosen.name}: the dispatch table's pick, {picked.why}",
                params[chosen.name],
                picked.far,
            )
    sizes = covering[0].gemm.as_written.size_env(*size)  # the caller's M x N x K
    fast = [kern for kern in covering if not needs_twin(kern, sizes)]
    chosen = (fast or covering)[0]
    if len(kernels) == 1:
        why = f"{chosen.name} itself"
    elif fast:
        why = (
            f"{chosen.name}: the first kernel of the file that covers {_text(size)} without "
            "its guarded twin"
        )
    else:
        why = f"{chosen.name}: the first kernel of the file that covers {_text(size)}"
    return Chosen(chosen, why, params[chosen.name])
