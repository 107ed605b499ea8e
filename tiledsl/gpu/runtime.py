"""CuPy/NVRTC on a GPU: compile generated source to a cubin, load it, launch it.

NVRTC has no default include path, and on CUDA 13 `mma.h` includes `crt/mma.h`,
which the pip CUDA headers lack: `cuda_include_dir()` finds the toolkit's own
include directory (beside the `bin/` that holds nvcc) and says how to fix it
when there is none.

Compiled kernels are cached twice: in this process (a dict keyed like the disk
cache) and on disk (`tiledsl.gpu.cache`, under `TILEDSL_CACHE_DIR`). CuPy's own disk
cache (`~/.cupy/kernel_cache`) is not involved, so nothing is stored twice: CuPy
caches what *it* compiles (`RawModule(code=...)`), while tiledsl compiles with
NVRTC itself, through CuPy's thin NVRTC binding, and hands CuPy a finished cubin
(`RawModule(path=...)`), which CuPy only loads. Every kernel is compiled with
`-lineinfo`, which changes no instruction and lets compute-sanitizer name lines.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..emit.launch import DIVISOR_CTYPE, TENSOR_MAP_CTYPE, Launch
from ..errors import ToolchainError
from ..ir.divisors import divisor_bytes
from ..ir.epilogue import CHECK_VALUES
from . import cache, staging, tensor_maps
from .toolchain import cuda_roots

_MODULES: dict[str, object] = {}


def gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no cupy, no driver, or no device: all mean "use the interpreter"
        return False


def include_candidates() -> list[Path]:
    """Where the toolkit headers are looked for, in order."""
    return [
        inc
        for root in cuda_roots()
        for inc in (root / "include", root / "targets" / "x86_64-linux" / "include")
    ]


def cuda_include_dir() -> Path:
    """The CUDA toolkit include directory holding crt/mma.h."""
    candidates = include_candidates()
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


def l2_bytes(default: int = 50 * 2**20) -> int:
    """The device's L2 cache in bytes (`default`, the H200's 50 MiB, if CuPy cannot say)."""
    import cupy

    try:
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        return int(props["l2CacheSize"]) or default
    except Exception:
        return default


def device_info() -> dict:
    """What a benchmark record says about the machine (every field best-effort)."""
    import cupy

    def version(number: int) -> str:
        return f"{number // 1000}.{number % 1000 // 10}"

    info = {
        "name": device_name(),
        "arch": device_arch(),
        "l2_bytes": l2_bytes(),
        "cupy": cupy.__version__,
        "cuda_runtime": version(cupy.cuda.runtime.runtimeGetVersion()),
        "cuda_driver_api": version(cupy.cuda.runtime.driverGetVersion()),
        "nvrtc": NVRTC.version(),
        "nvidia_driver": nvidia_driver_version(),
    }
    return info


def nvidia_driver_version() -> str | None:
    """The driver's version from nvidia-smi (CuPy only knows the CUDA API level)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        proc = subprocess.run(
            [smi, "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = proc.stdout.split()
    return lines[0] if proc.returncode == 0 and lines else None


def nvrtc_module():
    """CuPy's binding of the NVRTC C API (createProgram, compileProgram, getCUBIN, ...)."""
    try:
        from cupy_backends.cuda.libs import nvrtc
    except ImportError:  # an older layout
        from cupy.cuda import nvrtc
    return nvrtc


class Nvrtc:
    """NVRTC: CUDA C++ text -> a cubin for one architecture, in this process."""

    name = "nvrtc"

    def version(self) -> str:
        major, minor = nvrtc_module().getVersion()
        return f"{major}.{minor}"

    def options(self, arch: str) -> tuple[str, ...]:
        # -ftz=true as CuPy's own compile adds it, so times match the earlier runs' binaries.
        return (
            f"-I{cuda_include_dir()}",
            "-std=c++17",
            "-lineinfo",
            "-ftz=true",
            f"--gpu-architecture={arch}",
        )

    def compile(self, source: str, arch: str, name: str, options: tuple[str, ...]) -> bytes:
        nvrtc = nvrtc_module()
        program = nvrtc.createProgram(source, name, (), ())
        try:
            try:
                nvrtc.compileProgram(program, list(options))
            except nvrtc.NVRTCError:
                raise _failure(source, arch, nvrtc.getProgramLog(program)) from None
            return nvrtc.getCUBIN(program)
        finally:
            nvrtc.destroyProgram(program)


NVRTC = Nvrtc()


def _failure(source: str, arch: str, log: str) -> ToolchainError:
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    kept = Path(os.environ.get("TMPDIR", "/tmp")) / f"tiledsl-nvrtc-{digest}.cu"
    kept.write_text(source)
    try:
        include = f" -I{cuda_include_dir()}"
    except ToolchainError:
        include = ""
    return ToolchainError(
        "NVRTC failed on the generated source",
        log=log,
        source_path=str(kept),
        command=f"nvcc -cubin -arch={arch} -std=c++17{include} {kept}",
    )


@dataclass(frozen=True)
class Loaded:
    module: object
    note: str  # one line: where the binary came from (the cache's hit or miss)
    hit: bool  # no compiler ran


def load(
    source: str,
    arch: str,
    *,
    pipeline: tuple[str, ...] = (),
    target: str = "",
    use_cache: bool = True,
    name: str = "tiledsl.cu",
    compiler=NVRTC,
    loader: Callable[[Path], object] | None = None,
    directory: Path | None = None,
) -> Loaded:
    """The loaded module for `source`: from this process, the disk cache, or the compiler.

    `name` is the file name NVRTC records for line info (what compute-sanitizer
    prints). `compiler` and `loader` are seams for tests (a fake compiler needs
    `name`, `version()`, `options(arch)` and `compile(source, arch, name, options)`).
    """
    options = compiler.options(arch)
    fields = cache.key_fields(
        source,
        pipeline=pipeline,
        target=target,
        arch=arch,
        compiler=compiler.name,
        compiler_version=compiler.version(),
        options=options,
        name=name,
    )
    key = cache.digest(fields)
    if use_cache and key in _MODULES:
        return Loaded(_MODULES[key], "kernel cache: hit (loaded earlier in this process)", True)
    started = time.perf_counter()
    entry = cache.fetch(
        fields,
        lambda: compiler.compile(source, arch, name, options),
        directory=directory,
        use_cache=use_cache,
    )
    module = (loader or _raw_module)(entry.path)
    note = entry.note
    if not entry.hit:
        note += (
            f" (compiled by {compiler.name} {compiler.version()} in "
            f"{time.perf_counter() - started:.2f} s)"
        )
    if use_cache:
        _MODULES[key] = module
    return Loaded(module, note, entry.hit)


def load_module(source: str, arch: str, **options):
    """The loaded module for `source` (see `load`)."""
    return load(source, arch, **options).module


def _raw_module(path: Path):
    import cupy

    return cupy.RawModule(path=str(path))


def multiprocessor_count() -> int:
    """The current device's SMs: the blocks of a persistent launch (Launch.grid_dims)."""
    import cupy

    return int(cupy.cuda.Device().attributes["MultiProcessorCount"])


def resident_clusters(fn, launch: Launch) -> int:
    """How many of `launch`'s clusters the device holds at once (cuOccupancyMaxActiveClusters:
    a cluster's blocks must share a GPC, so it can be fewer than SMs / cluster size — on the
    H200 132 SMs hold 66 clusters of 2, and fewer of 4)."""
    cu = tensor_maps.driver()
    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = launch.cluster_size, 1, 1
    config.blockDimX, config.blockDimY, config.blockDimZ = launch.threads, 1, 1
    config.sharedMemBytes = launch.smem_bytes
    config.numAttrs = 0  # the cluster's shape is the kernel's own (__cluster_dims__)
    # cupy's RawKernel holds the driver's CUfunction in `kernel`; a CuPy that does not show
    # it gets the clusters the SM count allows
    function = getattr(getattr(fn, "kernel", None), "ptr", None)
    if function is None:
        return multiprocessor_count() // launch.cluster_size
    status, count = cu.cuOccupancyMaxActiveClusters(cu.CUfunction(function), config)
    tensor_maps.check(cu, status, "cuOccupancyMaxActiveClusters")
    return int(count)


def launcher(module, launch: Launch) -> Launcher:
    """A callable (arrays, sizes) -> None that launches the kernel once, asynchronously, on
    CuPy's current stream; `.at(pointers, sizes, stream)` launches it on raw addresses (what
    tiledsl.load does with torch tensors, without making CuPy views of them)."""
    return Launcher(module, launch)


#: Argument tuples a Launcher keeps (by addresses and sizes) before it forgets them all.
MAX_BUILT = 1024

#: The kinds of a kernel parameter, as the launcher fills it at each call.
_POINTER, _SIZE, _MAP, _SCRATCH, _SCALAR = "pointer", "size", "map", "scratch", "scalar"
#: A launch scalar (tiledsl.passes.launch_scalars): an int, or a Divisor's 12 bytes.
_LAUNCH_INT, _DIVISOR = "launch int", "divisor"


class Launcher:
    """One kernel of a loaded module, ready to launch. Everything that does not depend on
    the call is found once, here: the function and its dynamic shared memory, the
    multiprocessor count of a persistent launch, stream-K's scratch, each parameter's kind.

    A `copy tma` kernel's tensor maps are encoded from the arrays' addresses
    (`tensor_maps.encode`, cached, so a timing loop encodes each once); an operand whose
    rows no map can address is staged into a padded copy first (`staging`: the copies run
    on the launch's stream, before the kernel and, for C, after it).
    """

    def __init__(self, module, launch: Launch):
        import cupy

        self.launch = launch
        self.raw = module.get_function(launch.kernel)  # CuPy's RawKernel
        if launch.smem_bytes > 48 * 1024:
            self.raw.max_dynamic_shared_size_bytes = launch.smem_bytes
        # the RawKernel's CUDA function, which takes a stream (the RawKernel launches on
        # CuPy's current one only)
        self.fn = getattr(self.raw, "kernel", None)
        sms = multiprocessor_count() if launch.persistent else None
        if sms is not None and launch.cluster_size > 1:  # the blocks of the resident clusters
            sms = min(sms, resident_clusters(self.raw, launch) * launch.cluster_size)
        self.sms = sms
        self.maps = {spec.param: spec for spec in launch.tensor_maps}
        if self.maps:
            tensor_maps.driver()  # a missing cuda-bindings is reported before the first launch
        # the padded copies of operands whose lines TMA cannot address (tiledsl.gpu.staging)
        self.stager = staging.Stager(
            lambda source, name: load_module(source, device_arch(), name=name)
        )
        # stream-K's partial sums and flags, for every block the grid can hold, made once:
        # the flags start at zero and every launch leaves them so (launches that may overlap
        # -- on two streams at once -- need a launcher each)
        self.scratch = {}
        if launch.grid_split:  # split_k: sized by the first launch's grid, grown as needed
            self.scratch = {"workspace": cupy.empty(0, cupy.float32), "tickets": None}
        if launch.stream_k:
            blocks = sms or 0
            self.scratch = {
                "workspace": cupy.empty(blocks * launch.partial_floats, cupy.float32),
                "flags": cupy.zeros(blocks, cupy.uint32),
            }
        self._launch_scalars = {v.var for v in launch.scalars}
        self.params = [(self._kind(name, ctype), name) for name, ctype in launch.args]
        self._block, self._shared = (launch.threads,), launch.smem_bytes
        # the grid and the arguments (tensor maps encoded) by the addresses and sizes they
        # were built for: a launch on operands seen before only looks them up
        self._built: dict[tuple, tuple] = {}

    def _kind(self, name: str, ctype: str) -> str:
        """How a launch fills the parameter: a tensor map, stream-K's scratch, an
        operand's address, or a size."""
        if ctype == TENSOR_MAP_CTYPE:
            return _MAP
        if ctype == DIVISOR_CTYPE:
            return _DIVISOR
        if name in self._launch_scalars:
            return _LAUNCH_INT
        if name in self.scratch:
            return _SCRATCH
        if ctype == "float":  # an epilogue's runtime alpha or beta
            return _SCALAR
        return _POINTER if ctype.endswith("*") else _SIZE

    def _hold_split(self, blocks: int) -> None:
        """`split_k`: a workspace slot for each of the grid's blocks and a ticket counter for
        each tile, zero (every launch leaves them so). A larger grid gets new ones; the
        launches built before keep theirs (their argument tuples hold them)."""
        import cupy

        if self.scratch["workspace"].size >= blocks * self.launch.partial_floats:
            return
        self.scratch = {
            "workspace": cupy.empty(blocks * self.launch.partial_floats, cupy.float32),
            "tickets": cupy.zeros(-(-blocks // self.launch.grid_split), cupy.uint32),
        }

    def __call__(self, arrays: dict, sizes: dict[str, int]) -> None:
        """Launch on CuPy arrays, on CuPy's current stream."""
        self.at({name: int(a.data.ptr) for name, a in arrays.items()}, sizes)

    def at(self, pointers: dict[str, int], sizes: Mapping[str, float], stream=None) -> None:
        """Launch on the operands at these device addresses, on `stream` (an object whose
        `ptr` is the stream's address, as CuPy's streams; None: CuPy's current one).
        `sizes` holds the size parameters and any runtime alpha and beta."""
        key = (*pointers.items(), *sizes.values())  # names too: a key of one meaning
        built = self._built.get(key)
        if built is None:  # the grid and the arguments of these addresses and sizes, once
            if len(self._built) >= MAX_BUILT:
                self._built.clear()
            built = self._built[key] = self.arguments(pointers, sizes)
        grid, args, staged = built
        for s, operand, copy in staged:  # operands TMA cannot address, into padded copies
            if not s.back:
                self.stager.copy(s, operand, copy, stream)
        if self.fn is not None:
            self.fn(grid, self._block, args, self._shared, stream)
        elif stream is None:
            self.raw(grid, self._block, args, shared_mem=self._shared)
        else:
            with stream:
                self.raw(grid, self._block, args, shared_mem=self._shared)
        for s, operand, copy in staged:  # C, stored by TMA into its copy, back into C
            if s.back:
                self.stager.copy(s, operand, copy, stream)

    def arguments(self, pointers: dict[str, int], sizes: Mapping[str, float]) -> tuple:
        """The grid, the argument tuple of a launch (tensor maps encoded here) and the
        staged operands as (Staged, the operand's address, its copy's address)."""
        import numpy as np

        dims = {name: int(v) for name, v in sizes.items() if name not in CHECK_VALUES}
        staged = {
            s.param: (s, pointers[s.operand], self.stager.buffer(s))
            for s in staging.plan(self.launch, dims)
        }
        grid = self.launch.grid_dims(dims, self.sms)
        if self.launch.grid_split:
            self._hold_split(grid[0])
        # what the host computes once per launch for the kernel (tiledsl.passes.launch_scalars)
        scalars = self.launch.scalar_values(dims, grid[0]) if self.launch.scalars else {}
        args: list = []
        for kind, name in self.params:
            if kind is _POINTER:
                args.append(np.uint64(pointers[name]))
            elif kind is _SIZE:
                args.append(np.int32(sizes[name]))
            elif kind is _LAUNCH_INT:
                args.append(np.int32(scalars[name]))
            elif kind is _DIVISOR:  # passed by value, as the tensor maps' bytes are
                args.append(np.frombuffer(divisor_bytes(scalars[name]), dtype="V12")[0])
            elif kind is _MAP and name in staged:  # the map reads (or writes) the copy
                s, _, copy = staged[name]
                args.append(tensor_maps.encode(self.maps[name], copy, dims, s.pitch))
            elif kind is _MAP:
                spec = self.maps[name]
                args.append(tensor_maps.encode(spec, pointers[spec.operand], dims))
            elif kind is _SCALAR:  # tiledsl's own runs pass none: the checks' values
                args.append(np.float32(sizes.get(name, CHECK_VALUES[name])))
            else:
                args.append(self.scratch[name])
        return grid, tuple(args), tuple(staged.values())
