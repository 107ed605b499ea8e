"""The GPU side of `tiledsl tune`: NVRTC on every CPU core, then each candidate checked and
timed on every GPU of the host.

    timer = gpu_timer()                       # None without a CUDA GPU visible to CuPy
    for point, result in timer.measure(points, (4096, 4096, 4096), jobs=16):
        ...

Compiling. NVRTC is a library that needs no device, so the candidates' cubins are
built in worker processes on every CPU core (`tune.parallel_map`: spawned, never
forked from a process that holds a CUDA context; at least one worker, never in the
timing process itself), each straight into the kernel cache
(`tiledsl.gpu.cache`, through `runtime.load` with a loader that loads nothing). The timing
process then finds every cubin there (`runtime.load`: a cache hit). The key is the
emitted source, which the worker and the timing process both get from
`compile_program` of the same point, so they agree. A compile error is that
candidate's result. Were the cache not writable, the timing process compiles again.

Timing. With one GPU, in this process; with several, one spawned worker per GPU
(`tiledsl.tune.pool.share`, `cupy.cuda.Device(i)`), each taking the next candidate when
it is free, so the GPUs (taken to be alike: one host) share the list; a worker that dies
costs the candidate it held ("worker died", timed again by a rerun) and the others go on.
Each result says which GPU timed it (`gpu` in the record). A candidate is measured by
`tiledsl.commands.bench.measure_row`: both oracles on fresh inputs, then CUDA events
around runs on inputs rotated past the L2, the time counting only if both passed.
cuBLAS is measured the same way once per process and size, beside the first
candidate, for the ratio.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from ..commands.bench import Row, Settings
from ..driver import Compiled, compile_program
from ..errors import ToolchainError
from ..frontend.syntax import Program
from ..gpu import runtime
from ..ir.targets import build_arch
from ..progress import Progress
from .pool import share
from .record import Result, Size
from .search import parallel_map
from .space import Point

#: cuBLAS's median ms by size and operand layouts (its calls read the kernel's own inputs),
#: in this process: a GPU worker keeps its own, for its device.
_CUBLAS_MS: dict[tuple, float | None] = {}


def gpu_timer(settings: Settings | None = None) -> GpuTimer | None:
    """The timer of this host's GPUs (bench's settings by default), or None when CuPy sees none."""
    return GpuTimer(settings or Settings()) if runtime.gpu_available() else None


class GpuTimer:
    def __init__(self, settings: Settings):
        import cupy

        self.settings = settings
        self.count = cupy.cuda.runtime.getDeviceCount()
        self.device = runtime.device_name()
        self.arch = runtime.device_arch()
        self.compiler = f"{runtime.NVRTC.name} {runtime.NVRTC.version()}"

    def measure(self, points: list[Point], size: Size, jobs: int) -> Iterator[tuple[Point, Result]]:
        # Always in worker processes, even for one point: `build` leaves the cubin's path in
        # runtime's in-process module cache, where the timing process needs modules.
        items = [(p.program, self.arch) for p in points]
        errors = parallel_map(build, items, jobs, always_spawn=True)
        ready = []
        for point, error in zip(points, errors):
            if error is None:
                ready.append(point)
            else:
                yield point, Result("compile error", detail=error, device=self.device)
        if self.count == 1 or len(ready) <= 1:
            for point in ready:
                yield point, replace(time_point(point.program, size, self.settings), gpu=0)
            return
        # a worker per GPU (tiledsl.tune.pool): one that dies costs the point it held, and
        # the others time the rest; the record says which GPU timed each point
        work = [(p.program, size, self.settings) for p in ready]
        for index, gpu, result, lost in share(time_on_gpu, work, list(range(self.count))):
            if lost is not None:
                yield ready[index], Result("worker died", detail=lost, device=self.device, gpu=gpu)
            else:
                yield ready[index], replace(result, gpu=gpu)

    def retime(self, points: list[Point], size: Size) -> Iterator[tuple[Point, Result]]:
        """The points timed again one after another in this process, on its current GPU (0:
        the workers took the others): the finalists of a search that several GPUs timed,
        compared on one."""
        for point in points:
            result = time_point(point.program, size, self.settings)
            detail = f"{result.detail}; re-timed on GPU 0 beside the other finalists"
            yield point, replace(result, gpu=0, detail=detail)


#: The GPU this worker process has made current (time_on_gpu), once.
_CURRENT_GPU: int | None = None


def time_on_gpu(gpu: int, item: tuple) -> Result:
    """`time_point` on GPU `gpu`, in the pool's worker of that GPU."""
    global _CURRENT_GPU
    if _CURRENT_GPU != gpu:
        import cupy

        cupy.cuda.Device(gpu).use()
        _CURRENT_GPU = gpu
    return time_point(*item)


def _load(compiled: Compiled, arch: str, loader=None) -> runtime.Loaded:
    """`runtime.load` of a point's source, with the arguments both sides must agree on."""
    kernel = compiled.kernels[0]
    return runtime.load(
        compiled.source,
        build_arch(arch, compiled.kernels),
        pipeline=kernel.passes,
        target=kernel.target.name,
        name=Path(compiled.file).with_suffix(".cu").name,
        loader=loader,
    )


def build(program: Program, arch: str) -> str | None:
    """Compile a point with NVRTC into the kernel cache; the compiler's complaint, or None."""
    try:
        _load(compile_program(program), arch, loader=Path)  # the path: nothing is loaded
    except ToolchainError as err:
        return complaint(err)
    return None


def time_point(program: Program, size: Size, settings: Settings) -> Result:
    """Check one point with both oracles on the current GPU and, if it passes, time it."""
    from ..commands.bench import measure_row
    from ..gpu.baselines import cublas

    device = runtime.device_name()
    compiled = compile_program(program)
    kernel, launch = compiled.kernels[0], compiled.launches[0]
    try:
        loaded = _load(compiled, runtime.device_arch())
    except ToolchainError as err:
        return Result("compile error", detail=complaint(err), device=device)
    written = kernel.gemm.as_written  # cuBLAS's product: the one the file writes
    key = (size, written.a.layout, written.b.layout)
    first = key not in _CUBLAS_MS
    row = Row(kernel.name, "tiledsl", kernel.name, program.file, size, kernel.gemm.c.dtype)
    quiet = Progress(0, enabled=False)
    try:
        rows = measure_row(
            row, kernel, launch, loaded.module, [cublas()] if first else [], settings, quiet
        )
    except Exception as err:  # a launch that fails (a CUDA error) is this candidate's result
        return Result("run error", detail=f"{type(err).__name__}: {err}", device=device)
    if first:
        _CUBLAS_MS[key] = rows[1].ms if rows[1].ok else None
    cublas_ms = _CUBLAS_MS[key]
    if not row.ok:
        failed = next(c for c in row.checks if not c.ok)
        detail = f"{failed.oracle}: {failed.detail}"
        return Result("failed check", None, cublas_ms, detail, device)
    detail = ", ".join(c.detail for c in row.checks)
    return Result("ok", row.ms, cublas_ms, detail, device)


def complaint(err: ToolchainError) -> str:
    """A compile failure on one line: what failed, the compiler's first error, the source."""
    first_error = next((line for line in err.log.splitlines() if "error" in line), "")
    parts = [str(err).splitlines()[0], first_error.strip()]
    if err.source_path:
        parts.append(f"source kept at {err.source_path}")
    return "; ".join(p for p in parts if p)
