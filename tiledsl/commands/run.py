"""`tiledsl run`: execute a compiled kernel and check it with both oracles.

On a GPU: NVRTC compile (cached on disk, `tiledsl.gpu.cache`), fresh random inputs for
every check, NaN-poisoned output (`=`) or random C (`+=`), the exact oracle then the
statistical one, then timing against cuBLAS on the same inputs (`tiledsl.gpu.timing`).
Without a GPU (or with --cpu): the numpy interpreter with its race detector, at a
small default size.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..emit.launch import Launch
from ..interp.interpreter import InterpreterError, interpret
from ..interp.oracle import (
    NP_OUT,
    Check,
    check_exact,
    check_statistical,
    from_storage,
    make_inputs,
    to_device,
    to_storage,
)
from ..ir.dtypes import encode
from ..ir.epilogue import Epilogue
from ..ir.expr import Const, Var
from ..ir.nodes import KernelIR
from ..ir.partial_tiles import runs_every_size
from ..ir.targets import build_arch
from ..limits import INT_MAX, interpreter_problem, size_problems
from ..lowering.edges import variant


# The kernels compute in IEEE arithmetic, where a product past the largest finite number
# is ±inf: the interpreter and the oracles that replay them do too, without warnings.
def ieee_arithmetic():
    return np.errstate(over="ignore", invalid="ignore", under="ignore")


class SizeError(Exception):
    """A size the schedule cannot run (yet); the message says why and what would work."""


@dataclass
class Report:
    kernel: str
    size: tuple[int, int, int]
    engine: str
    checks: list[Check] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    time_ms: float | None = None
    cublas_ms: float | None = None
    batch: int = 1  # products of a batched GEMM

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def tflops(self) -> float | None:
        m, n, k = self.size
        return 2 * self.batch * m * n * k / (self.time_ms * 1e9) if self.time_ms else None

    def render(self) -> str:
        m, n, k = self.size
        batch = f"{self.batch} products of " if self.batch != 1 else ""
        out = [f"{self.kernel}: {batch}{m} x {n} x {k} on {self.engine}"]
        out += [f"  {line}" for line in self.lines]
        for c in self.checks:
            out.append(f"  {c.oracle:<20} {'PASS' if c.ok else 'FAIL'}  {c.detail}")
        if self.time_ms is not None:
            line = f"  time {self.time_ms:.3f} ms (median)  {self.tflops:.1f} TFLOP/s"
            if self.cublas_ms:
                cublas_tflops = 2 * m * n * k / (self.cublas_ms * 1e9)
                line += (
                    f"   cuBLAS {self.cublas_ms:.3f} ms  {cublas_tflops:.1f} TFLOP/s"
                    f"   ratio {self.cublas_ms / self.time_ms:.2f}"
                )
            out.append(line)
        out.append(f"  {'PASS' if self.ok else 'FAIL'}")
        return "\n".join(out)


_SIZE = re.compile(r"\s*([0-9]{1,18})\s*[xX*]\s*([0-9]{1,18})\s*[xX*]\s*([0-9]{1,18})\s*\Z")


def parse_size(text: str) -> tuple[int, int, int]:
    """`MxNxK` (or `M*N*K`) with whole numbers from 1 to INT_MAX, the kernels' `int`."""
    match = _SIZE.match(text)
    if match is None or not all(1 <= int(p) <= INT_MAX for p in match.groups()):
        raise ValueError(
            f"a size is written MxNxK with whole numbers from 1 to {INT_MAX}, "
            f"e.g. 4096x4096x4096; got '{text}'"
        )
    m, n, k = (int(p) for p in match.groups())
    return m, n, k


def default_cpu_size(kernel: KernelIR) -> tuple[int, int, int]:
    """Small and lopsided (2 x 3 block tiles, 3 K steps) so transposed indexing shows; the
    caller's M x N x K (the kernel's own, swapped back under `swap_operands`)."""
    bm, bn, bk = kernel.schedule.block
    return kernel.gemm.oriented(_literal_or(kernel, (2 * bm, 3 * bn, 3 * bk)))


def _literal_or(kernel: KernelIR, size):
    g = kernel.gemm
    return tuple(d.value if isinstance(d, Const) else s for d, s in zip((g.m, g.n, g.k), size))


def check_size(kernel: KernelIR, size: tuple[int, int, int], batch: int = 1) -> dict[str, int]:
    """The size parameters for `size` (and `batch` products), or SizeError if this schedule
    cannot cover it. `size` is the caller's M x N x K; the checks are of the product the
    kernel computes (its transpose under `swap_operands`), under the caller's size names."""
    g = kernel.gemm
    size = g.oriented(size)
    problems, ragged = [], []
    extra = {}
    if g.batch is None and batch != 1:
        problems.append(f"{kernel.name} is not batched (its operands are matrices): drop --batch")
    elif isinstance(g.batch, Const) and g.batch.value != batch:
        problems.append(f"the batch is fixed to {g.batch.value} by the declaration, not {batch}")
    elif g.batch is not None and not isinstance(g.batch, Const):
        assert isinstance(g.batch, Var)  # a declared dimension: a number or a name
        extra[g.batch.name] = batch
    letters = g.oriented(("M", "N", "K"))
    for dim, value, tile, what in zip((g.m, g.n, g.k), size, kernel.schedule.block, letters):
        if isinstance(dim, Const) and dim.value != value:
            problems.append(f"{what} is fixed to {dim.value} by the declaration, not {value}")
        elif value % tile:
            ragged.append(f"{what} = {value}")
    is_twin = bool(kernel.passes) and kernel.passes[-1] == "edges"  # guarded: any size
    if ragged and kernel.edge is None and not is_twin and not runs_every_size(kernel):
        up = "x".join(
            map(str, g.oriented([-(-v // t) * t for v, t in zip(size, kernel.schedule.block)]))
        )
        problems.append(
            f"{', '.join(ragged)} "
            + ("is not a multiple" if len(ragged) == 1 else "are not multiples")
            + " of the block tile "
            + f"({' x '.join(map(str, kernel.schedule.block))}), and this schedule has no guarded "
            "twin for edge tiles: its fragments load straight from global memory, which WMMA "
            f"cannot guard (use stages 1 or more, or the size {up})"
        )
    if not problems:
        problems = size_problems(g, kernel.schedule, size, batch)
    if problems:
        raise SizeError("; ".join(problems))
    return {**g.size_env(*size), **extra}


def _c_shape(g, size, batch: int) -> tuple[int, ...]:
    m, n, _ = size
    return (batch, m, n) if g.c.batch is not None else (m, n)


def _epilogue(kernel: KernelIR):
    """The kernel's epilogue as tiledsl's own launches run it (a runtime alpha and beta at
    the values the launcher and the interpreter pass when none is given: CHECK_VALUES)."""
    ep = Epilogue.of(kernel.schedule, kernel.gemm)
    return ep.bound({}) if ep is not None else None


def _storage_arrays(kernel: KernelIR, inputs) -> dict[str, np.ndarray]:
    g = kernel.gemm.as_written  # what the caller passes
    return {
        g.a.name: to_storage(g.a, inputs.a),
        g.b.name: to_storage(g.b, inputs.b),
        g.c.name: to_storage(g.c, inputs.c_in).copy(),
        **{op.name: encode(inputs.extras[op.name], op.dtype) for op in g.extras},
    }


def run_cpu(
    kernel: KernelIR,
    size,
    seed: int | None = None,
    save_dir: Path | None = None,
    batch: int = 1,
) -> Report:
    sizes = check_size(kernel, size, batch)
    too_much = interpreter_problem(kernel.schedule.block, kernel.gemm.oriented(size), batch)
    if too_much:
        raise SizeError(too_much)
    kernel, _ = variant(kernel, None, size)
    g = kernel.gemm.as_written  # what the caller passes
    m, n, k = size
    report = Report(kernel.name, size, "the numpy interpreter", batch=batch)
    rng = np.random.default_rng(seed)
    for kind in ("exact", "normal"):
        inputs = make_inputs(
            g, m, n, k, kind, rng, kernel.schedule.accumulate, _epilogue(kernel), batch
        )
        arrays = _storage_arrays(kernel, inputs)
        started = time.perf_counter()
        try:
            with ieee_arithmetic():
                stats = interpret(kernel, arrays, sizes)
        except InterpreterError as err:
            report.checks.append(Check("race check", False, str(err)))
            return report
        out = from_storage(g.c, arrays[g.c.name], _c_shape(g, size, batch))
        _judge(kernel, kind, inputs, out, report, save_dir)
        if kind == "exact":
            report.lines.append(
                f"{stats.blocks} blocks x {kernel.threads} threads, {stats.mma} warp mma ops, "
                f"{stats.block_barriers} block / {stats.warp_barriers} warp barriers, "
                f"interpreted in {time.perf_counter() - started:.2f} s"
            )
    report.checks.append(
        Check(
            "race check",
            True,
            "none: shared-memory accesses checked between every pair of barriers",
        )
    )
    return report


def run_gpu(
    kernel: KernelIR,
    source: str,
    launch: Launch,
    size,
    seed: int | None = None,
    save_dir: Path | None = None,
    repeat: int = 30,
    *,
    use_cache: bool = True,
    source_name: str = "tiledsl.cu",
    timed: bool = True,
    batch: int = 1,
) -> Report:
    """Check `kernel` on the GPU with both oracles, then (if `timed`) time it and cuBLAS.

    Timing is `tiledsl.gpu.timing`'s: CUDA events, warm-up, median, inputs rotated
    past the L2, cuBLAS (`cupy.matmul`) on views of the same inputs.
    """
    from ..gpu import runtime

    sizes = check_size(kernel, size, batch)
    kernel, launch = variant(kernel, launch, size)
    arch = runtime.device_arch()
    engine = f"{runtime.device_name()} ({arch}, CuPy/NVRTC)"
    report = Report(kernel.name, size, engine, batch=batch)
    loaded = runtime.load(
        source,
        build_arch(arch, (kernel,)),
        pipeline=kernel.passes,
        target=kernel.target.name,
        use_cache=use_cache,
        name=source_name,
    )
    run = runtime.launcher(loaded.module, launch)
    report.lines.append(loaded.note)
    gx, gy = launch.grid_dims(sizes, runtime.multiprocessor_count() if launch.persistent else None)
    persistent = f" (persistent, over {launch.blocks(sizes)} tiles)" if launch.persistent else ""
    report.lines.append(
        f"grid {gx}{f' x {gy}' if gy != 1 else ''} blocks{persistent} x {launch.threads} "
        f"threads, {launch.smem_bytes} bytes dynamic shared memory"
    )
    rng = np.random.default_rng(seed)
    gpu_checks(kernel, run, sizes, size, rng, report, save_dir, batch=batch)
    if report.ok and timed:
        from ..gpu.baselines import cublas
        from ..gpu.timing import CudaClock, rotated_sets, time_calls

        m, n, k = size
        # A batch reads `batch` matrices of each batched operand: sets sized to match.
        set_size = (m * batch, n * batch, k) if batch != 1 else size
        clock = CudaClock(arch)
        sets, set_bytes = rotated_sets(set_size, seed)
        calls = kernel_calls(kernel, run, sizes, size, sets, batch)
        mine = time_calls(calls, clock, repeat=repeat, set_bytes=set_bytes)
        report.time_ms = mine.median_ms
        written = kernel.gemm.as_written  # cuBLAS computes the product as the file writes it
        if written.a.dtype != "f16":
            report.lines.append(
                f"cuBLAS: not compared ({written.a.dtype} inputs; the baseline is "
                "cupy.matmul on f16)"
            )
        elif batch == 1:
            theirs = time_calls(
                cublas().calls(written, size, sets), clock, repeat=repeat, set_bytes=set_bytes
            )
            report.cublas_ms = theirs.median_ms
        else:
            report.lines.append("cuBLAS: not compared for a batched GEMM")
        report.lines.append(f"timed: {mine.describe()}")
    return report


def gpu_checks(
    kernel: KernelIR,
    run,
    sizes: dict[str, int],
    size,
    rng: np.random.Generator,
    report: Report,
    save_dir: Path | None = None,
    on_host: bool = False,
    batch: int = 1,
) -> list:
    """Both oracles on fresh inputs, appended to `report`; returns the inputs (logical).

    The inputs are CuPy arrays, or with `on_host` numpy ones: then they are laid out
    and judged with numpy, so that the only kernel the GPU runs is `run` (which is
    what compute-sanitizer should look at).
    """
    import cupy

    g = kernel.gemm.as_written  # what the caller passes
    m, n, k = size
    used = []
    for kind in ("exact", "normal"):
        host = make_inputs(
            g, m, n, k, kind, rng, kernel.schedule.accumulate, _epilogue(kernel), batch
        )
        if on_host:
            dev = {name: cupy.asarray(a) for name, a in _storage_arrays(kernel, host).items()}
        else:
            inputs = to_device(host, cupy)
            dev = _storage_arrays(kernel, inputs)
        run(dev, sizes)
        cupy.cuda.Device().synchronize()
        shape = _c_shape(g, size, batch)
        if on_host:
            inputs, out = host, from_storage(g.c, dev[g.c.name].get(), shape)
        else:
            out = from_storage(g.c, dev[g.c.name], shape)
        _judge(kernel, kind, inputs, out, report, save_dir)
        used.append(inputs)
    return used


def kernel_calls(kernel: KernelIR, run, sizes: dict[str, int], size, sets, batch: int = 1) -> list:
    """One launch per input set (A, B flat device arrays), all writing one C."""
    import cupy

    g = kernel.gemm.as_written  # what the caller passes
    c = cupy.zeros(batch * size[0] * size[1], NP_OUT[g.c.dtype])
    # An epilogue's bias vectors: zeros of their type (their values do not change the time).
    extras = {op.name: cupy.zeros(size[1], NP_OUT[op.dtype]) for op in g.extras}
    return [
        lambda a=a, b=b: run({g.a.name: a, g.b.name: b, g.c.name: c, **extras}, sizes)
        for a, b in sets
    ]


def _judge(kernel: KernelIR, kind: str, inputs, out, report: Report, save_dir: Path | None):
    """Apply the oracle of `kind` to `out`; keep the inputs of a failure for replay."""
    bm, bn, _ = kernel.gemm.oriented(kernel.schedule.block)
    g = kernel.gemm.as_written  # the caller's inputs and C
    with ieee_arithmetic():
        if kind == "exact":
            check = check_exact(g, inputs, out, (bm, bn), _epilogue(kernel))
        else:
            acc = kernel.schedule.accumulate
            check = check_statistical(g, inputs, out, acc, _epilogue(kernel))
    report.checks.append(check)
    if not check.ok and save_dir is not None:
        _save(save_dir, kernel, report.size, inputs, out, report)


def _save(save_dir: Path, kernel: KernelIR, size, inputs, out, report: Report) -> None:
    path = save_dir / f"tiledsl-failure-{kernel.name}-{'x'.join(map(str, size))}.npz"
    host = [x.get() if hasattr(x, "get") else x for x in (inputs.a, inputs.b, inputs.c_in, out)]
    np.savez(path, a=host[0], b=host[1], c_in=host[2], out=host[3])
    report.lines.append(f"inputs and output of the failed check saved to {path}")
