"""`tiledsl doctor`: what this machine offers tiledsl, what is missing, and the fix for each.

    ok       python              3.11.7 (/usr/bin/python3)
    ok       lark                1.3.1
    missing  cupy                not installed: `tiledsl run` uses the numpy interpreter
             fix: pip install 'tiledsl[gpu]'   (CuPy for CUDA 13: cupy-cuda13x)
    ok       cuda-bindings       13.3.1: TMA tensor maps (copy tma)
    ...

A line is `ok`, `warn` (there, but something about it limits tiledsl) or
`missing`, and every `warn` and `missing` line carries its fix. Nothing here
needs a GPU, CuPy, nvcc or dot: each probe catches its own failure and reports
it. The exit status is 1 only when something every command needs (Python >=
3.10, lark, numpy, graphviz: the package's own dependencies) is missing; a
machine without a GPU or a toolkit is a fine machine for compile, check and the
interpreter, so the rest only informs.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

OK, WARN, MISSING = "ok", "warn", "missing"
MIN_PYTHON = (3, 10)


@dataclass(frozen=True)
class Finding:
    status: str
    what: str
    detail: str
    fix: str = ""
    core: bool = False  # every tiledsl command needs it

    def render(self) -> str:
        line = f"{self.status:<8} {self.what:<19} {self.detail}"
        if self.fix and self.status != OK:
            line += f"\n{'':<8} {'':<19} fix: {self.fix}"
        return line


def run_tool(argv: list[str], timeout: float = 20) -> str | None:
    """stdout + stderr of a short command, or None if it cannot run."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return (proc.stdout or "") + (proc.stderr or "")


def installed(module: str) -> bool:
    """Whether `module` can be imported (found, not imported: cheap, and no side effects;
    a dotted name imports its parent packages, and a missing parent means no)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_python() -> Finding:
    version = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info[:2] < MIN_PYTHON:
        need = ".".join(map(str, MIN_PYTHON))
        fix = f"install Python {need} or newer"
        return Finding(MISSING, "python", f"{version}: tiledsl needs {need}+", fix, True)
    return Finding(OK, "python", f"{version} ({sys.executable})", core=True)


def check_package(module: str, package: str, fix: str, core: bool, why: str = "") -> Finding:
    if not installed(module):
        detail = "not installed" + (f": {why}" if why else "")
        return Finding(MISSING, module, detail, fix, core)
    return Finding(OK, module, _version(package) or "installed (version unknown)", core=core)


def check_cupy() -> list[Finding]:
    """CuPy, the GPU and driver it sees, and NVRTC."""
    fix = "pip install 'tiledsl[gpu]' (CuPy for CUDA 13: cupy-cuda13x)"
    if not installed("cupy"):
        smi = nvidia_smi()
        gpu = Finding(
            WARN if smi else MISSING,
            "gpu",
            smi or "unknown: no CuPy to ask, and no nvidia-smi",
            fix
            if smi
            else "tiledsl runs kernels on an NVIDIA GPU; without one, "
            "`tiledsl run` uses the numpy interpreter",
        )
        why = "`tiledsl run` falls back to the numpy interpreter; bench and --sanitize need it"
        return [Finding(MISSING, "cupy", f"not installed: {why}", fix), gpu]
    try:
        import cupy
    except Exception as err:
        return [Finding(MISSING, "cupy", f"does not import: {type(err).__name__}: {err}", fix)]
    out = [Finding(OK, "cupy", cupy.__version__)]
    out.append(_gpu(cupy))
    try:
        from ..gpu.runtime import nvrtc_module

        major, minor = nvrtc_module().getVersion()
        out.append(Finding(OK, "nvrtc", f"{major}.{minor}"))
    except Exception as err:
        out.append(
            Finding(
                MISSING,
                "nvrtc",
                f"not loadable: {type(err).__name__}: {err}",
                "install the CUDA toolkit or the NVRTC wheel CuPy names "
                "(pip install 'cupy-cuda13x[ctk]')",
            )
        )
    return out


def check_cuda_bindings() -> Finding:
    """NVIDIA's cuda-bindings: how `copy tma` kernels get their TMA tensor maps encoded."""
    what = "cuda-bindings"
    fix = "pip install cuda-bindings (or pip install 'tiledsl[gpu]')"
    if not installed("cuda.bindings"):
        return Finding(
            MISSING,
            what,
            "not installed: `copy tma` kernels cannot run (it encodes their TMA tensor maps)",
            fix,
        )
    try:
        from cuda.bindings import driver  # noqa: F401 (that it imports is the check)
    except Exception as err:
        return Finding(MISSING, what, f"does not import: {type(err).__name__}: {err}", fix)
    version = _version("cuda-bindings") or "version unknown"
    return Finding(OK, what, f"{version}: TMA tensor maps (copy tma)")


def _gpu(cupy) -> Finding:
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:
        return Finding(
            MISSING,
            "gpu",
            f"none visible: {type(err).__name__}: {err}".strip(),
            "needs an NVIDIA GPU and driver; `tiledsl run` uses the numpy interpreter without one",
        )
    if count == 0:
        return Finding(MISSING, "gpu", "none visible", "needs an NVIDIA GPU and driver")
    from ..gpu.runtime import device_arch, device_name, nvidia_driver_version

    driver = cupy.cuda.runtime.driverGetVersion()
    runtime_version = cupy.cuda.runtime.runtimeGetVersion()
    detail = (
        f"{device_name()} ({device_arch()}), {count} device(s); driver "
        f"{nvidia_driver_version() or '?'} (CUDA {driver // 1000}.{driver % 1000 // 10}), "
        f"CUDA runtime {runtime_version // 1000}.{runtime_version % 1000 // 10}"
    )
    return Finding(OK, "gpu", detail)


def nvidia_smi() -> str | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    out = run_tool([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"])
    first = out.strip().splitlines()[0] if out and out.strip() else ""
    return f"nvidia-smi: {first}" if first and "failed" not in first.lower() else None


def check_headers() -> Finding:
    from ..errors import ToolchainError
    from ..gpu.runtime import cuda_include_dir

    try:
        inc = cuda_include_dir()
    except ToolchainError as err:
        return Finding(
            MISSING,
            "mma.h, crt/mma.h",
            "not found: NVRTC cannot compile WMMA kernels (" + err.log.splitlines()[0] + ")",
            "install the CUDA toolkit, or set CUDA_PATH to the folder that holds include/",
        )
    return Finding(OK, "mma.h, crt/mma.h", str(inc))


def check_nvcc() -> Finding:
    from ..gpu.toolchain import nvcc_path

    nvcc = nvcc_path()
    fix = "install the CUDA toolkit and put its bin/ on PATH (`--ptxas` and the nvcc tests)"
    if nvcc is None:
        return Finding(MISSING, "nvcc", "not on PATH", fix)
    out = run_tool([nvcc, "--version"]) or ""
    release = next((line for line in out.splitlines() if "release" in line), "version unknown")
    return Finding(OK, "nvcc", f"{release.strip()} ({nvcc})")


def check_dot() -> Finding:
    dot = shutil.which("dot")
    if dot is None:
        return Finding(
            MISSING,
            "dot",
            "not on PATH: graphviz pictures cannot be rendered",
            "apt-get install graphviz (or your system's graphviz package)",
        )
    out = (run_tool([dot, "-V"]) or "").strip()
    return Finding(OK, "dot", f"{out or 'version unknown'} ({dot})")


def check_sanitizer() -> Finding:
    from .sanitize import find_compute_sanitizer

    exe = find_compute_sanitizer()
    if exe is None:
        return Finding(
            MISSING,
            "compute-sanitizer",
            "not found on PATH or beside nvcc: `tiledsl run --sanitize` cannot run",
            "it ships with the CUDA toolkit: put <cuda>/bin on PATH",
        )
    out = run_tool([exe, "--version"]) or ""
    version = next((line for line in out.splitlines() if "Version" in line), "")
    return Finding(OK, "compute-sanitizer", f"{version.strip() or 'version unknown'} ({exe})")


def check_cache() -> Finding:
    import os

    from ..gpu.cache import cache_dir, entries

    folder = cache_dir()
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not os.access(probe, os.W_OK):
        return Finding(
            WARN,
            "kernel cache",
            f"{folder} cannot be written: every run compiles again",
            "set TILEDSL_CACHE_DIR to a writable folder",
        )
    found = entries(folder)
    size = sum(p.stat().st_size for p in found) / 2**20
    return Finding(OK, "kernel cache", f"{folder} ({len(found)} kernel(s), {size:.1f} MiB)")


OPTIONAL = (
    ("matplotlib", "matplotlib", "pip install 'tiledsl[bench]'", "`tiledsl bench --plot`"),
    ("triton", "triton", "pip install triton", "bench's Triton baseline"),
    ("torch", "torch", "pip install torch", "bench's Triton baseline (its launcher)"),
)

CHECKS: tuple[Callable[[], Finding | list[Finding]], ...] = (
    check_python,
    lambda: check_package("lark", "lark", "pip install tiledsl", True),
    lambda: check_package("numpy", "numpy", "pip install tiledsl", True),
    lambda: check_package("graphviz", "graphviz", "pip install tiledsl", True),
    check_cupy,
    check_cuda_bindings,
    *(
        lambda m=m, p=p, f=f, w=w: check_package(m, p, f, False, f"only {w} needs it")
        for m, p, f, w in OPTIONAL
    ),
    check_headers,
    check_nvcc,
    check_sanitizer,
    check_dot,
    check_cache,
)


def diagnose(checks=CHECKS) -> list[Finding]:
    """Every finding, each probe guarded: a probe that breaks is a `warn` line, not a crash."""
    out: list[Finding] = []
    for check in checks:
        try:
            found = check()
        except Exception as err:  # a broken probe must not hide the others
            name = getattr(check, "__name__", "check").replace("check_", "")
            found = Finding(WARN, name, f"could not be checked: {type(err).__name__}: {err}")
        out += found if isinstance(found, list) else [found]
    return out


def doctor(stream=None, checks=CHECKS) -> int:
    """Print the report; 1 if a core requirement is missing, else 0."""
    stream = sys.stdout if stream is None else stream
    found = diagnose(checks)
    from .. import __version__

    print(f"tiledsl {__version__} ({Path(__file__).resolve().parent})", file=stream)
    for f in found:
        print(f.render(), file=stream)
    missing_core = [f.what for f in found if f.core and f.status != OK]
    if missing_core:
        print(f"tiledsl cannot work here: {', '.join(missing_core)} missing", file=stream)
        return 1
    return 0
