"""CuPy/NVRTC on a GPU: compile generated source, launch it, time it, time cuBLAS.

NVRTC has no default include path, and on CUDA 13 `mma.h` includes `crt/mma.h`,
which the pip CUDA headers lack: `cuda_include_dir()` finds the toolkit's own
include directory (beside the `bin/` that holds nvcc) and says how to fix it
when there is none. Modules are cached in-process by the hash of source and
options; CuPy keeps its own on-disk cache of the compiled binaries.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from .errors import ToolchainError
from .launch import Launch

_MODULES: dict[str, object] = {}


def gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no cupy, no driver, or no device: all mean "use the interpreter"
        return False


def cuda_include_dir() -> Path:
    """The CUDA toolkit include directory holding crt/mma.h."""
    candidates = []
    for var in ("CUDA_PATH", "CUDA_HOME", "CUDA_ROOT"):
        if os.environ.get(var):
            candidates.append(Path(os.environ[var]) / "include")
    nvcc = shutil.which("nvcc")
    if nvcc:
        root = Path(nvcc).resolve().parent.parent
        candidates += [root / "include", root / "targets" / "x86_64-linux" / "include"]
    try:
        import cupy

        path = cupy.cuda.get_cuda_path()
        if path:
            candidates.append(Path(path) / "include")
    except Exception:
        pass
    candidates.append(Path("/usr/local/cuda/include"))
    for inc in candidates:
        if (inc / "crt" / "mma.h").is_file():
            return inc
    raise ToolchainError(
        "cannot find the CUDA toolkit headers (crt/mma.h) that WMMA kernels need",
        log="looked in: "
        + ", ".join(str(c) for c in candidates)
        + "\nfix: install the CUDA toolkit, or set CUDA_PATH to its root "
        "(the folder that holds include/)",
    )


def device_name() -> str:
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def device_arch() -> str:
    import cupy

    return "sm_" + cupy.cuda.Device().compute_capability


def load_module(source: str, arch: str):
    """An NVRTC-compiled cupy.RawModule for `source`, cached by hash."""
    import cupy

    # CuPy picks the architecture from the device; NVRTC 13 defaults to C++17.
    options = (f"-I{cuda_include_dir()}", "-lineinfo")
    key = hashlib.sha256((source + "\0" + "\0".join(options)).encode()).hexdigest()
    if key not in _MODULES:
        module = cupy.RawModule(code=source, options=options, backend="nvrtc")
        try:
            module.compile()
        except cupy.cuda.compiler.CompileException as exc:
            kept = Path(os.environ.get("TMPDIR", "/tmp")) / f"tiledsl-nvrtc-{key[:12]}.cu"
            kept.write_text(source)
            raise ToolchainError(
                "NVRTC failed on the generated source",
                log=str(exc),
                source_path=str(kept),
                command=f"nvcc -cubin -arch={arch} -std=c++17 -I{cuda_include_dir()} {kept}",
            ) from None
        _MODULES[key] = module
    return _MODULES[key]


def launcher(module, launch: Launch):
    """A function (arrays, sizes) -> None that launches the kernel once, asynchronously."""
    import cupy

    fn = module.get_function(launch.kernel)
    if launch.smem_bytes > 48 * 1024:
        fn.max_dynamic_shared_size_bytes = launch.smem_bytes

    def run(arrays: dict, sizes: dict[str, int]) -> None:
        args = []
        for name, ctype in launch.args:
            args.append(arrays[name] if ctype.endswith("*") else cupy.int32(sizes[name]))
        fn((launch.blocks(sizes),), (launch.threads,), tuple(args), shared_mem=launch.smem_bytes)

    return run


def time_ms(fn, warmup: int = 5, repeat: int = 30) -> float:
    """Median milliseconds of `fn()` with CUDA events, after warm-up."""
    import cupy

    for _ in range(warmup):
        fn()
    cupy.cuda.Device().synchronize()
    times = []
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    for _ in range(repeat):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop))
    times.sort()
    return times[len(times) // 2]
