"""The compiler's front door: text -> checked kernels -> passes -> source + launch.

    compiled = compile_file("examples/hgemm.tile")
    compiled.source         # CUDA C++
    compiled.launches       # one Launch per kernel
    compiled.snapshots      # (stage, KernelIR, ran) after lowering and every pass

Every stage is a pure function of the previous one's value. All semantic errors
of the file (every kernel) are gathered into one TileError before lowering.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from .emit import emit
from .emit.launch import Launch, launch_of
from .errors import Collector, TileError
from .frontend.analysis import Analysis, analyze
from .frontend.names import check_program_names
from .frontend.parser import parse
from .frontend.refusals import refuse_unbuilt
from .frontend.syntax import Program
from .ir.nodes import KernelIR
from .ir.partial_tiles import runs_every_size
from .ir.targets import parse_target_name
from .ir.verify import limit_problems, verify
from .limits import MAX_KERNELS
from .lowering.edges import edge_twin
from .lowering.lower import lower
from .passes import LOWER, PASSES, run_pipeline

Snapshot = tuple[str, KernelIR, bool]


@dataclass
class Compiled:
    file: str
    kernels: tuple[KernelIR, ...]
    source: str
    launches: tuple[Launch, ...]
    snapshots: list[Snapshot] = field(default_factory=list)

    def kernel(self, name: str | None = None) -> KernelIR:
        if name is None:
            return self.kernels[0]
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)

    def source_for(self, kernels) -> str:
        """The source of some of the kernels only (one architecture's, for its build)."""
        if tuple(kernels) == self.kernels:
            return self.source
        return emit(tuple(kernels), Path(self.file).name)

    def by_architecture(self) -> dict[str, tuple[KernelIR, ...]]:
        """The CUDA kernels grouped by their target's architecture, in file order."""
        groups: dict[str, list[KernelIR]] = {}
        for k in self.kernels:
            if k.target.vendor == "cuda":
                groups.setdefault(k.target.arch, []).append(k)
        return {arch: tuple(ks) for arch, ks in groups.items()}

    def for_device(self, arch: str) -> tuple[KernelIR, ...]:
        """The kernels a file offers a CUDA device of `arch` (e.g. "sm_90"): those of the
        newest architecture it can run, when the file's kernels target several; all of them
        otherwise (the one-target file: every kernel, whatever the device says of it)."""
        groups = self.by_architecture()
        if len(groups) < 2 or len(groups) != len({k.target.arch for k in self.kernels}):
            return self.kernels
        level = int(arch.split("_")[1].rstrip("a"))
        runnable = [a for a in groups if int(a.split("_")[1]) <= level]
        if not runnable:
            return self.kernels
        return groups[max(runnable, key=lambda a: int(a.split("_")[1]))]


def analyze_program(program: Program, target: str | None = None) -> list[Analysis]:
    """Check every kernel of a file and refuse what is not built; one report for all problems."""
    errs = Collector()
    if len(program.kernels) > MAX_KERNELS:
        extra = program.kernels[MAX_KERNELS]
        errs.add(
            extra.loc,
            f"a file holds at most {MAX_KERNELS} kernels; this is kernel "
            f"{MAX_KERNELS + 1} of {len(program.kernels)}",
            "split the kernels over several files",
        )
        errs.raise_if_any(program.source)
    check_program_names(program.kernels, errs)
    analyses = []
    names: dict[str, int] = {}
    for kernel in program.kernels:
        if kernel.name in names:
            errs.add(
                kernel.loc,
                f"a second kernel named '{kernel.name}' (the first is at line "
                f"{names[kernel.name]})",
                "give each kernel of a file its own name",
            )
        names.setdefault(kernel.name, kernel.loc.line)
        analysis = analyze(kernel, target, errs)
        if analysis is not None:
            refuse_unbuilt(analysis, errs)
            analyses.append(analysis)
    for a in analyses[1:]:
        if a.target.vendor != analyses[0].target.vendor:
            errs.add(
                a.schedule.loc("target"),
                f"kernel '{a.name}' is for {a.target.vendor} but "
                f"'{analyses[0].name}' is for {analyses[0].target.vendor}: one file is one "
                "source file",
                "put kernels of different vendors in files of their own",
            )
    errs.raise_if_any(program.source)
    return analyses


def lower_program(
    program: Program,
    target: str | None = None,
    stop_after: str | None = None,
    after_each: Callable[[str, KernelIR, bool], None] | None = None,
) -> tuple[KernelIR, ...]:
    """Analyze, lower and run the pass pipeline on every kernel, verifying after each stage."""
    key = None
    if target is not None:
        key = parse_target_name(target)
        if key is None:
            from .errors import UsageError
            from .ir.targets import TARGETS

            raise UsageError(f"unknown target '{target}'; targets are: {', '.join(TARGETS)}")

    def checked(stage: str, kernel: KernelIR, ran: bool) -> None:
        if ran:
            verify(kernel, after=stage)
        if after_each:
            after_each(stage, kernel, ran)

    def verified(stage: str, kernel: KernelIR, ran: bool) -> None:
        if ran:
            verify(kernel, stage)

    def build_twin(analysis: Analysis) -> KernelIR:
        return run_pipeline(lower(analysis), stop_after, verified)

    kernels = []
    over_limits = Collector()  # every kernel's, reported together after the last one
    try:
        for analysis in analyze_program(program, key):
            kernel = run_pipeline(lower(analysis), stop_after, checked)
            enabled = [p.name for p in PASSES if p.enabled(kernel.schedule)]
            stage = kernel.passes[-1] if kernel.passes else LOWER
            final = enabled[-1] if enabled else LOWER
            over_limits.diagnostics += limit_problems(kernel, stage, final)
            # a kernel whose loads are all TMA's, or all guarded fragment loads, runs every
            # size itself: it has no twin
            twin = None if runs_every_size(kernel) else edge_twin(analysis, build_twin)
            if twin is not None:
                verify(twin, after="edges")
                over_limits.diagnostics += limit_problems(twin, stage, final)
                kernel = replace(kernel, edge=twin)
            kernels.append(kernel)
        over_limits.raise_if_any()
    except TileError as err:
        raise err.with_source(program.source) from None
    return tuple(kernels)


def compile_program(
    program: Program, target: str | None = None, stop_after: str | None = None, after_each=None
) -> Compiled:
    snapshots: list[Snapshot] = []

    def record(stage: str, kernel: KernelIR, ran: bool) -> None:
        snapshots.append((stage, kernel, ran))
        if after_each:
            after_each(stage, kernel, ran)

    kernels = lower_program(program, target, stop_after, record)
    try:
        source = emit(kernels, Path(program.file).name)
    except TileError as err:  # an IR the emitter cannot spell (e.g. --stop-after too early)
        raise err.with_source(program.source) from None
    return Compiled(program.file, kernels, source, tuple(launch_of(k) for k in kernels), snapshots)


def compile_source(
    text: str,
    file: str = "<string>",
    target: str | None = None,
    stop_after: str | None = None,
    after_each=None,
) -> Compiled:
    return compile_program(parse(text, file), target, stop_after, after_each)


def compile_file(
    path: str | Path, target: str | None = None, stop_after: str | None = None, after_each=None
) -> Compiled:
    path = Path(path)
    return compile_source(path.read_text(), str(path), target, stop_after, after_each)


def lower_file(
    path: str | Path, target: str | None = None, stop_after: str | None = None
) -> tuple[KernelIR, ...]:
    path = Path(path)
    return lower_program(parse(path.read_text(), str(path)), target, stop_after)
