"""`tiledsl bench`: a schedule's kernels against cuBLAS and Triton, checked, timed, recorded.

    rows = measure([("hgemm", "examples/hgemm.tile")], [(4096, 4096, 4096)])
    print(table(rows))
    save_json(record(rows, settings), Path("bench.json"))
    plot(rows, Path("bench.png"))            # matplotlib, if installed

For every kernel and size: the kernel's result is checked with the exact and the
statistical oracle before its time counts (a failed check leaves the row
untimed); cuBLAS (`cupy.matmul`) and, where installed, Triton run on the same
inputs and are checked the same way (`tiledsl.gpu.baselines`); each is timed with
`tiledsl.gpu.timing` (CUDA events, warm-up, median, inputs rotated past the L2).
`bench/ladder.py` and `bench/variants.py` are thin scripts over `measure`.
"""

from __future__ import annotations

import datetime
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .. import __version__
from ..files import write_outputs
from ..interp.oracle import Check, check_exact, check_statistical
from ..ir.targets import build_arch

if TYPE_CHECKING:
    from ..gpu.timing import Timing

FLOP_PER_MAC = 2


@dataclass(frozen=True)
class Settings:
    warmup: int = 10
    repeat: int = 50
    seed: int | None = None
    use_cache: bool = True
    baselines: tuple[str, ...] = ("cublas", "triton")
    data: str = "ints"  # what the timed operands hold (tiledsl.gpu.timing.DATA_KINDS)
    rounds: int = 1  # each row and its baselines timed this often, interleaved (time_rounds)


@dataclass
class Row:
    label: str  # the table's name for the row: the kernel's label, "cuBLAS", "Triton"
    kind: str  # "tiledsl", "cublas" or "triton"
    kernel: str  # the tiledsl kernel the row belongs to
    file: str
    size: tuple[int, int, int]
    output: str  # C's dtype
    checks: list[Check] = field(default_factory=list)
    timing: Timing | None = None
    skipped: str = ""  # why the row has no measurement
    cublas_ms: float | None = None  # the same kernel's cuBLAS row, for the ratio
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def status(self) -> str:
        if self.skipped:
            return "SKIP"
        return "PASS" if self.ok else "FAIL"

    @property
    def ms(self) -> float | None:
        return self.timing.median_ms if self.timing else None

    @property
    def tflops(self) -> float | None:
        m, n, k = self.size
        return FLOP_PER_MAC * m * n * k / (self.ms * 1e9) if self.ms else None

    @property
    def ratio(self) -> float | None:
        """cuBLAS's time over this row's: above 1 is faster than cuBLAS."""
        return self.cublas_ms / self.ms if self.ms and self.cublas_ms else None

    def to_json(self) -> dict:
        return {
            "label": self.label,
            "kind": self.kind,
            "kernel": self.kernel,
            "file": self.file,
            "size": list(self.size),
            "output": self.output,
            "status": self.status,
            "ok": self.ok,
            "skipped": self.skipped or None,
            "checks": [{"oracle": c.oracle, "ok": c.ok, "detail": c.detail} for c in self.checks],
            "time_ms": self.ms,
            "tflops": self.tflops,
            "ratio_to_cublas": self.ratio,
            "timing": self.timing.to_json() if self.timing else None,
            "notes": self.notes,
        }


def size_label(size: tuple[int, int, int]) -> str:
    m, n, k = size
    return f"{m}\u00b3" if m == n == k else f"{m}x{n}x{k}"


# ---------------------------------------------------------------- measuring (GPU)


def measure(
    entries: list[tuple[str, str]],
    sizes: list[tuple[int, int, int]],
    settings: Settings = Settings(),
    target: str | None = None,
    progress: bool = True,
    kernel: str | None = None,
) -> list[Row]:
    """Rows for every kernel (or the one named `kernel`) of every (label, .tile path) at
    every size, each followed by its baselines' rows.

    Raises `tiledsl.commands.run.SizeError` (a size that does not fit a kernel) or ValueError
    (no kernel of that name) before measuring anything.
    """
    from ..driver import compile_file
    from ..gpu import runtime
    from ..gpu.baselines import BASELINES
    from ..progress import Progress
    from ..tune.dispatch import assign_sizes, table_beside
    from .run import check_size

    compiled = [(label, file, compile_file(file, target)) for label, file in entries]
    chosen = []
    for label, file, c in compiled:
        pairs = [(k, x) for k, x in zip(c.kernels, c.launches) if kernel in (None, k.name)]
        if not pairs:
            names = ", ".join(k.name for k in c.kernels)
            raise ValueError(f"no kernel '{kernel}' in {file}; it has: {names}")
        # a dispatch table beside the file (`tiledsl tune --sizes`): each size times the
        # kernel the table picks for it, not every kernel
        table = table_beside(file, c.kernels)
        if table is not None and kernel is None and len(pairs) > 1:
            picks = assign_sizes(c.kernels, sizes, table)
            plan = [(k, x, [s for s, by, _ in picks if by is k]) for k, x in pairs]
        else:
            plan = [(k, x, list(sizes)) for k, x in pairs]
        for k, _, its in plan:
            for size in its:
                check_size(k, size)
        chosen.append((label, file, c, [p for p in plan if p[2]]))
    baselines = [BASELINES[name]() for name in settings.baselines]
    arch = runtime.device_arch()
    total = sum(len(its) for *_, plan in chosen for *_, its in plan) * (1 + len(baselines))
    rows: list[Row] = []
    with Progress(total, "bench", enabled=progress) as bar:
        for label, file, c, plan in chosen:
            for k, launch, its in plan:
                name = label if len(c.kernels) == 1 else f"{label}:{k.name}"
                loaded = runtime.load(
                    c.source,
                    build_arch(arch, c.kernels),
                    pipeline=k.passes,
                    target=k.target.name,
                    use_cache=settings.use_cache,
                    name=Path(file).with_suffix(".cu").name,
                )
                for size in its:
                    mine = Row(name, "tiledsl", k.name, file, size, k.gemm.c.dtype)
                    mine.notes.append(loaded.note)
                    rows += measure_row(mine, k, launch, loaded.module, baselines, settings, bar)
    return rows


def measure_row(mine: Row, kernel, launch, module, baselines, settings, bar) -> list[Row]:
    from ..gpu import runtime
    from ..gpu.timing import CudaClock, rotated_sets, time_rounds
    from ..lowering.edges import variant
    from .run import Report, check_size, gpu_checks, kernel_calls

    label, file, size = mine.label, mine.file, mine.size
    sizes = check_size(kernel, size)
    kernel, launch = variant(kernel, launch, size)  # the guarded twin off the tile grid
    run = runtime.launcher(module, launch)
    clock = CudaClock(runtime.device_arch())
    bar.step(f"{label} {size_label(size)}")
    report = Report(kernel.name, size, "bench")
    rng = np.random.default_rng(settings.seed)
    used = gpu_checks(kernel, run, sizes, size, rng, report, Path.cwd())
    mine.checks = report.checks
    mine.notes += report.lines
    sets, set_bytes = rotated_sets(size, settings.seed, settings.data)
    # every row that passed its checks, timed after all the checks: with rounds, the kernel
    # and its baselines take turns (time_rounds), so they share the GPU's passing state
    timed = [(mine, kernel_calls(kernel, run, sizes, size, sets))] if mine.ok else []
    rows = [mine]
    for baseline in baselines:
        bar.step(f"{baseline.name} {size_label(size)}")
        row = Row(baseline.name, baseline.kind, mine.kernel, file, size, "f16")
        rows.append(row)
        if baseline.unavailable:
            row.skipped = baseline.unavailable
            continue
        written = kernel.gemm.as_written  # a baseline computes the product as written
        if written.a.dtype != "f16":  # the baselines take f16 inputs only
            row.skipped = f"{baseline.name} is timed on f16 inputs only ({written.a.dtype} here)"
            continue
        row.checks = baseline_checks(written, baseline, used)
        if row.ok:
            timed.append((row, baseline.calls(written, size, sets)))
    timings = time_rounds(
        [calls for _, calls in timed],
        clock,
        settings.rounds,
        warmup=settings.warmup,
        repeat=settings.repeat,
        set_bytes=set_bytes,
    )
    for (row, _), timing in zip(timed, timings):
        row.timing = timing
    cublas_ms = next((r.ms for r in rows if r.kind == "cublas"), None)
    for row in rows:
        row.cublas_ms = cublas_ms
    return rows


def baseline_checks(gemm, baseline, used) -> list[Check]:
    """Both oracles on a baseline's f16 result, for the inputs the kernel was checked on."""
    import cupy

    from ..gpu.baselines import baseline_gemm

    target = baseline_gemm(gemm)
    outs = []
    for inputs in used:  # the exact inputs, then the normal ones
        out = cupy.full((inputs.a.shape[0], inputs.b.shape[1]), cupy.nan, cupy.float16)
        baseline.matmul(inputs.a, inputs.b, out)
        outs.append(out)
    cupy.cuda.Device().synchronize()
    exact, normal = used
    return [
        check_exact(target, exact, outs[0], outs[0].shape),
        check_statistical(target, normal, outs[1]),
    ]


# ---------------------------------------------------------------- reporting (anywhere)


def table(rows: list[Row]) -> str:
    """size, kernel, C, ms, TFLOP/s, x cuBLAS, check: one line per row."""
    head = f"{'size':<16} {'kernel':<28} {'C':<4} {'ms':>9} {'TFLOP/s':>8} {'x cuBLAS':>8}  check"
    out = [head, "-" * len(head)]
    for r in rows:
        size = "x".join(map(str, r.size))
        ms = f"{r.ms:9.3f}" if r.ms else f"{'-':>9}"
        tflops = f"{r.tflops:8.1f}" if r.tflops else f"{'-':>8}"
        ratio = f"{r.ratio:8.2f}" if r.ratio else f"{'-':>8}"
        out.append(
            f"{size:<16} {r.label:<28} {r.output:<4} {ms} {tflops} {ratio}  {_check_text(r)}"
        )
    return "\n".join(out)


def _check_text(r: Row) -> str:
    if r.skipped:
        return r.skipped
    if not r.checks:
        return "not checked"
    if r.ok:
        return "PASS " + ", ".join(c.detail for c in r.checks)
    failed = [c for c in r.checks if not c.ok]
    return f"FAIL {failed[0].oracle}: {failed[0].detail} (not timed)"


NOTES = (
    "cuBLAS: cupy.matmul on the kernel's own f16 inputs (same device memory), f32 "
    "accumulation, f16 C; Triton: a standard tl.dot matmul, f16 C; ratio = cuBLAS ms / ms.",
    "Times: CUDA events around each run after warm-up, median; inputs rotated past 2 x L2; "
    "a row is timed only after both oracles pass.",
)


def record(rows: list[Row], settings: Settings, device: dict | None = None) -> dict:
    """The JSON document: machine, settings, date, rows."""
    return {
        "tool": "tiledsl bench",
        "tiledsl": __version__,
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "device": device or {},
        "settings": {
            "warmup": settings.warmup,
            "repeat": settings.repeat,
            "seed": settings.seed,
            "kernel_cache": settings.use_cache,
            "baselines": list(settings.baselines),
            "timing": "CUDA events around each run, after warm-up, behind a hold kernel; median",
            "rotation": "inputs rotated among sets whose A and B exceed 2 x L2",
            "data": settings.data,
            "rounds": settings.rounds,
        },
        "notes": list(NOTES),
        "rows": [r.to_json() for r in rows],
    }


def save_json(document: dict, path: Path) -> None:
    write_outputs({path: json.dumps(document, indent=2) + "\n"})


def matplotlib_missing() -> str | None:
    """None if matplotlib imports, else what to install."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "the plot needs matplotlib: pip install 'tiledsl[bench]' (or matplotlib)"
    return None


def plot(rows: list[dict] | list[Row], path: Path, title: str = "") -> None:
    """TFLOP/s against size, one line per kernel (rows or their JSON), as PNG/SVG/PDF.

    Uses matplotlib's object API with the Agg canvas: no display, no pyplot state.
    """
    from matplotlib.figure import Figure

    data = [r.to_json() if isinstance(r, Row) else r for r in rows]
    sizes: list[tuple] = []
    for r in data:
        if tuple(r["size"]) not in sizes:
            sizes.append(tuple(r["size"]))
    sizes.sort(key=lambda s: (s[0] * s[1] * s[2], s))
    lines: dict[str, dict[int, float]] = {}
    for r in data:
        if r.get("tflops"):
            lines.setdefault(r["label"], {})[sizes.index(tuple(r["size"]))] = r["tflops"]
    fig = Figure(figsize=(max(5.0, 1.2 * len(sizes) + 3), 4.0), layout="constrained")
    ax = fig.subplots()
    for label, points in lines.items():
        xs = sorted(points)
        ax.plot(xs, [points[x] for x in xs], marker="o", label=label)
    ax.set_xticks(range(len(sizes)), [size_label(s) for s in sizes])
    ax.set_xlabel("problem size (M x N x K)")
    ax.set_ylabel("TFLOP/s")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    if title:
        ax.set_title(title)
    if lines:
        ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    picture = io.BytesIO()  # drawn whole first, then written like every output
    fig.savefig(picture, dpi=120, format=path.suffix.lstrip(".").lower() or "png")
    write_outputs({path: picture.getvalue()})


def plot_file(json_path: str | Path, out: str | Path) -> None:
    """Draw the plot of a saved `tiledsl bench --json` record (e.g. on another machine)."""
    document = json.loads(Path(json_path).read_text())
    device = document.get("device", {}).get("name", "")
    plot(document["rows"], Path(out), title=device)
