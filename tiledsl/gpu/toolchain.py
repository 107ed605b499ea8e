"""nvcc on the host: compile generated CUDA to a cubin and read ptxas's resource report.

The report (registers, shared memory, stack, spills) is what the rest of the
compiler (tests, `tiledsl compile --ptxas`, later the feasibility table) reads.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import ToolchainError


@dataclass(frozen=True)
class PtxasReport:
    kernel: str
    registers: int
    smem_bytes: int  # static shared memory (tiledsl uses dynamic: usually 0)
    stack_frame: int
    spill_stores: int
    spill_loads: int
    barriers: int

    @property
    def spills(self) -> bool:
        return bool(self.spill_stores or self.spill_loads)

    def __str__(self) -> str:
        return (
            f"{self.kernel}: {self.registers} registers, {self.smem_bytes} bytes static shared, "
            f"{self.stack_frame} bytes stack, {self.spill_stores}/{self.spill_loads} bytes "
            f"spilled (stores/loads), {self.barriers} barrier(s)"
        )


def nvcc_path() -> str | None:
    return shutil.which("nvcc")


def cuda_roots() -> list[Path]:
    """Where a CUDA toolkit may be, in the order tiledsl looks: $CUDA_PATH, $CUDA_HOME,
    $CUDA_ROOT, the folder above the nvcc on PATH, CuPy's CUDA path, /usr/local/cuda.
    The one discovery the headers (NVRTC's -I) and compute-sanitizer both use."""
    roots = [
        Path(os.environ[v]) for v in ("CUDA_PATH", "CUDA_HOME", "CUDA_ROOT") if os.environ.get(v)
    ]
    nvcc = nvcc_path()
    if nvcc:
        roots.append(Path(nvcc).resolve().parent.parent)
    try:
        import cupy

        path = cupy.cuda.get_cuda_path()
        if path:
            roots.append(Path(path))
    except Exception:  # no CuPy, or one that cannot say: the other places remain
        pass
    roots.append(Path("/usr/local/cuda"))
    return list(dict.fromkeys(roots))


def parse_ptxas(log: str) -> dict[str, PtxasReport]:
    """Per-kernel reports from `nvcc -Xptxas -v` output."""
    reports: dict[str, PtxasReport] = {}
    current: str | None = None
    fields: dict[str, int] = {}
    for line in log.splitlines():
        m = re.search(r"Function properties for (\S+)", line) or re.search(
            r"Compiling entry function '([^']+)'", line
        )
        if m:
            if current and "registers" in fields and current not in reports:
                reports[current] = PtxasReport(current, **fields)
            if m.group(1) != current:
                current, fields = m.group(1), {}
            continue
        m = re.search(
            r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line
        )
        if m:
            fields.update(stack_frame=int(m[1]), spill_stores=int(m[2]), spill_loads=int(m[3]))
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and current:
            smem = re.search(r"(\d+) bytes smem", line)
            bars = re.search(r"used (\d+) barriers", line)
            fields.setdefault("stack_frame", 0)
            fields.setdefault("spill_stores", 0)
            fields.setdefault("spill_loads", 0)
            fields.update(
                registers=int(m[1]),
                smem_bytes=int(smem[1]) if smem else 0,
                barriers=int(bars[1]) if bars else 0,
            )
            reports[current] = PtxasReport(current, **fields)
    return reports


def arch_flags(arch: str) -> list[str]:
    """nvcc's flags for one architecture; a chip-specific one (sm_90a) in the -gencode form,
    which nvcc 13 assembles on its own (the -arch shorthand adds a plain sm_90 pass that
    rejects wgmma)."""
    if arch.endswith("a"):
        cc = arch.split("_", 1)[1]
        return [f"-gencode=arch=compute_{cc},code=sm_{cc}"]
    return [f"-arch={arch}"]


def compile_cubin(
    source: str, arch: str = "sm_90", name: str = "kernel", extra: tuple[str, ...] = ()
) -> dict[str, PtxasReport]:
    """Compile with nvcc to a cubin (discarded) and return ptxas's report per kernel."""
    nvcc = nvcc_path()
    if nvcc is None:
        raise ToolchainError(
            "nvcc was not found on PATH", log="install the CUDA toolkit, or put its bin/ on PATH"
        )
    with tempfile.TemporaryDirectory(prefix="tiledsl-") as tmp:
        src = Path(tmp) / f"{name}.cu"
        src.write_text(source)
        cmd = [
            nvcc,
            "-cubin",
            *arch_flags(arch),
            "-std=c++17",
            "-Xptxas",
            "-v",
            *extra,
            "-o",
            str(Path(tmp) / f"{name}.cubin"),
            str(src),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            digest = hashlib.sha256(source.encode()).hexdigest()[:10]
            kept = Path(tempfile.gettempdir()) / f"tiledsl-failed-{name}-{digest}.cu"
            kept.write_text(source)
            cmd[-1] = str(kept)
            cmd[cmd.index("-o") + 1] = str(kept.with_suffix(".cubin"))
            log = proc.stderr.replace(str(src), str(kept))  # point at the file that stays
            raise ToolchainError(
                f"nvcc failed on the generated source of {name}",
                log=log,
                source_path=str(kept),
                command=" ".join(cmd),
            )
        return parse_ptxas(proc.stderr + proc.stdout)
