"""`tiledsl run`: execute a compiled kernel and check it with both oracles.

On a GPU: NVRTC compile (cached), fresh random inputs for every check, NaN-poisoned
output (`=`) or random C (`+=`), the exact oracle then the statistical one, then
timing against cuBLAS on the same inputs. Without a GPU (or with --cpu): the
numpy interpreter with its race detector, at a small default size.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .expr import Const
from .interp import InterpreterError, interpret
from .ir import KernelIR
from .launch import Launch
from .oracle import (
    Check,
    check_exact,
    check_statistical,
    from_storage,
    make_inputs,
    to_device,
    to_storage,
)


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

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def tflops(self) -> float | None:
        m, n, k = self.size
        return 2 * m * n * k / (self.time_ms * 1e9) if self.time_ms else None

    def render(self) -> str:
        m, n, k = self.size
        out = [f"{self.kernel}: {m} x {n} x {k} on {self.engine}"]
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


def parse_size(text: str) -> tuple[int, int, int]:
    parts = text.lower().replace("*", "x").split("x")
    if len(parts) != 3 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise ValueError(
            f"a size is written MxNxK with positive integers, e.g. 4096x4096x4096; got '{text}'"
        )
    m, n, k = (int(p) for p in parts)
    return m, n, k


def default_cpu_size(kernel: KernelIR) -> tuple[int, int, int]:
    """Small and lopsided (2 x 3 block tiles, 3 K steps) so transposed indexing shows."""
    bm, bn, bk = kernel.schedule.block
    return _literal_or(kernel, (2 * bm, 3 * bn, 3 * bk))


def _literal_or(kernel: KernelIR, size):
    g = kernel.gemm
    return tuple(d.value if isinstance(d, Const) else s for d, s in zip((g.m, g.n, g.k), size))


def check_size(kernel: KernelIR, size: tuple[int, int, int]) -> dict[str, int]:
    """The size parameters for `size`, or SizeError if this schedule cannot cover it yet."""
    g = kernel.gemm
    problems = []
    for dim, value, tile, what in zip((g.m, g.n, g.k), size, kernel.schedule.block, "MNK"):
        if isinstance(dim, Const) and dim.value != value:
            problems.append(f"{what} is fixed to {dim.value} by the declaration, not {value}")
        elif value % tile:
            up = -(-value // tile) * tile
            problems.append(
                f"{what} = {value} is not a multiple of the block tile's {tile} "
                f"(edge tiles are not built yet): try {up}"
            )
    if problems:
        raise SizeError("; ".join(problems))
    return {name: value for name, value in zip("MNK", size) if name in g.size_args}


def _storage_arrays(kernel: KernelIR, inputs) -> dict[str, np.ndarray]:
    g = kernel.gemm
    return {
        g.a.name: to_storage(g.a, inputs.a),
        g.b.name: to_storage(g.b, inputs.b),
        g.c.name: to_storage(g.c, inputs.c_in).copy(),
    }


def run_cpu(
    kernel: KernelIR, size, seed: int | None = None, save_dir: Path | None = None
) -> Report:
    sizes = check_size(kernel, size)
    g = kernel.gemm
    m, n, k = size
    report = Report(kernel.name, size, "the numpy interpreter")
    rng = np.random.default_rng(seed)
    for kind in ("exact", "normal"):
        inputs = make_inputs(g, m, n, k, kind, rng)
        arrays = _storage_arrays(kernel, inputs)
        started = time.perf_counter()
        try:
            stats = interpret(kernel, arrays, sizes)
        except InterpreterError as err:
            report.checks.append(Check("race check", False, str(err)))
            return report
        _judge(kernel, kind, inputs, from_storage(g.c, arrays[g.c.name], (m, n)), report, save_dir)
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
) -> Report:
    import cupy

    from . import runtime

    sizes = check_size(kernel, size)
    g = kernel.gemm
    m, n, k = size
    arch = runtime.device_arch()
    report = Report(kernel.name, size, f"{runtime.device_name()} ({arch}, CuPy/NVRTC)")
    run = runtime.launcher(runtime.load_module(source, arch), launch)
    report.lines.append(
        f"grid {launch.blocks(sizes)} blocks x {launch.threads} threads, "
        f"{launch.smem_bytes} bytes dynamic shared memory"
    )
    rng = np.random.default_rng(seed)
    for kind in ("exact", "normal"):
        inputs = to_device(make_inputs(g, m, n, k, kind, rng), cupy)
        dev = _storage_arrays(kernel, inputs)
        run(dev, sizes)
        cupy.cuda.Device().synchronize()
        _judge(kernel, kind, inputs, from_storage(g.c, dev[g.c.name], (m, n)), report, save_dir)
    if report.ok:
        report.time_ms = runtime.time_ms(lambda: run(dev, sizes), repeat=repeat)
        report.cublas_ms = runtime.time_ms(lambda: cupy.matmul(inputs.a, inputs.b), repeat=repeat)
    return report


def _judge(kernel: KernelIR, kind: str, inputs, out, report: Report, save_dir: Path | None):
    """Apply the oracle of `kind` to `out`; keep the inputs of a failure for replay."""
    bm, bn, _ = kernel.schedule.block
    g = kernel.gemm
    if kind == "exact":
        check = check_exact(g, inputs, out, (bm, bn))
    else:
        check = check_statistical(g, inputs, out)
    report.checks.append(check)
    if not check.ok and save_dir is not None:
        _save(save_dir, kernel, report.size, inputs, out, report)


def _save(save_dir: Path, kernel: KernelIR, size, inputs, out, report: Report) -> None:
    path = save_dir / f"tiledsl-failure-{kernel.name}-{'x'.join(map(str, size))}.npz"
    host = [x.get() if hasattr(x, "get") else x for x in (inputs.a, inputs.b, inputs.c_in, out)]
    np.savez(path, a=host[0], b=host[1], c_in=host[2], out=host[3])
    report.lines.append(f"inputs and output of the failed check saved to {path}")
