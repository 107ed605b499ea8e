"""`tiledsl run FILE --sanitize TOOL`: the GPU check under compute-sanitizer.

TOOL is racecheck, memcheck or synccheck. A kernel with a missing barrier can be
bit-exact on the GPU: only racecheck sees the race. So the
check runs in a child process,

    compute-sanitizer --tool racecheck --error-exitcode 86 \\
        python3 -m tiledsl.commands.sanitize FILE --kernel K --size MxNxK

which compiles with NVRTC and `-lineinfo` (every tiledsl kernel is), writes the
generated source where the sanitizer's `file:line` can point, launches the kernel
on exact and on normal inputs and judges both on the host, so that the kernel is
the only one the tool instruments. The parent fails the check on any reported
hazard or error, on the hazard exit status, on a failed oracle, and when the tool
did not really run: no `ERROR SUMMARY` (memcheck, synccheck) or `RACECHECK
SUMMARY` (racecheck) line in its output means nothing was checked.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import TileError, ToolchainError
from ..gpu.toolchain import cuda_roots
from ..ir.targets import build_arch

TOOLS = ("racecheck", "memcheck", "synccheck")
HAZARD_EXIT = 86  # --error-exitcode: the status compute-sanitizer returns on a finding
TIMEOUT_S = 600
SHOWN_FINDINGS = 12

_ERROR_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+) errors?")
_RACE_SUMMARY = re.compile(
    r"RACECHECK SUMMARY:\s*(\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)"
)
_QUIET = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY")


def find_compute_sanitizer() -> str | None:
    """compute-sanitizer on PATH, beside nvcc, or in a CUDA toolkit's usual places."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for root in cuda_roots():
        for candidate in (
            root / "bin" / "compute-sanitizer",
            root / "compute-sanitizer" / "compute-sanitizer",
        ):
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return None


def child_command(
    file: str,
    kernel: str,
    size: tuple[int, int, int],
    target: str | None = None,
    seed: int | None = None,
) -> list[str]:
    """The process the sanitizer runs: one kernel's GPU check at one size."""
    cmd = [sys.executable, "-m", "tiledsl.commands.sanitize", file, "--kernel", kernel]
    cmd += ["--size", "x".join(map(str, size))]
    if target:
        cmd += ["--target", target]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    return cmd


def sanitizer_command(exe: str, tool: str, child: list[str]) -> list[str]:
    if tool not in TOOLS:
        raise ValueError(f"unknown compute-sanitizer tool '{tool}'; tools: {', '.join(TOOLS)}")
    return [
        exe,
        "--tool",
        tool,
        # the kernel's errors only: CuPy and cuda-bindings probe driver entry points that
        # this driver lacks (cuGetProcAddress_v2 returns CUDA_ERROR_INVALID_VALUE), which
        # memcheck counts as errors by default (34 of them on the H200, 2026-12-01)
        *(["--report-api-errors", "no"] if tool == "memcheck" else []),
        "--error-exitcode",
        str(HAZARD_EXIT),
        *child,
    ]


@dataclass(frozen=True)
class Summary:
    line: str  # the summary line as printed, without the ========= prefix
    errors: int
    hazards: int = 0  # racecheck: hazards displayed
    warnings: int = 0  # racecheck

    @property
    def clean(self) -> bool:
        return not (self.errors or self.hazards or self.warnings)


def parse_summary(tool: str, output: str) -> Summary | None:
    """The tool's closing summary, or None if it never printed one (it did not run)."""
    if tool == "racecheck":
        found = list(_RACE_SUMMARY.finditer(output))
        if not found:
            return None
        m = found[-1]
        errors = int(m[2])
        extra = list(_ERROR_SUMMARY.finditer(output))
        if extra:
            errors = max(errors, int(extra[-1][1]))
        return Summary(_line_of(output, m), errors, int(m[1]), int(m[3]))
    found = list(_ERROR_SUMMARY.finditer(output))
    if not found:
        return None
    return Summary(_line_of(output, found[-1]), int(found[-1][1]))


def findings(output: str) -> list[str]:
    """The tool's report lines (hazards, errors and where), banner and summaries left out."""
    lines = []
    for line in output.splitlines():
        if not line.startswith("========="):
            continue
        text = line[len("=========") :].rstrip()
        if text.strip() and not any(q in text for q in _QUIET):
            lines.append(text)
    return lines


def _line_of(output: str, match: re.Match) -> str:
    start = output.rfind("\n", 0, match.start()) + 1
    end = output.find("\n", match.end())
    return output[start : end if end >= 0 else len(output)].lstrip("= ").rstrip()


@dataclass
class Result:
    tool: str
    kernel: str
    size: tuple[int, int, int]
    ok: bool
    verdict: str
    summary: Summary | None = None
    findings: list[str] = field(default_factory=list)
    child_lines: list[str] = field(default_factory=list)  # what the check itself printed
    command: list[str] = field(default_factory=list)

    def render(self) -> str:
        m, n, k = self.size
        out = [f"{self.kernel}: {m} x {n} x {k} under compute-sanitizer {self.tool}"]
        out += [f"  {line}" for line in self.child_lines]
        if self.summary:
            out.append(f"  {self.summary.line}")
        shown = self.findings[:SHOWN_FINDINGS]
        out += [f"  |{line}" for line in shown]
        if len(self.findings) > len(shown):
            out.append(f"  | ... {len(self.findings) - len(shown)} more line(s)")
        out.append(f"  {'PASS' if self.ok else 'FAIL'}  {self.verdict}")
        if not self.ok:
            out.append("  reproduce with: " + " ".join(self.command))
        return "\n".join(out)


def judge(tool: str, returncode: int, output: str) -> tuple[bool, str, Summary | None]:
    """(passed, one-line verdict, summary) from the tool's exit status and output."""
    summary = parse_summary(tool, output)
    if summary is None:
        head = "RACECHECK SUMMARY" if tool == "racecheck" else "ERROR SUMMARY"
        return (
            False,
            f"compute-sanitizer did not run: no '{head}' line in its output "
            f"(exit status {returncode})",
            None,
        )
    if not summary.clean:
        return False, f"{tool} found problems: {summary.line}", summary
    if returncode == HAZARD_EXIT:
        return False, f"{tool} exited with the hazard status {HAZARD_EXIT}", summary
    if returncode != 0:
        return False, f"the check failed under {tool} (exit status {returncode})", summary
    return True, f"{tool}: no hazards or errors, and the check passed", summary


def sanitize(
    file: str,
    kernel: str,
    size: tuple[int, int, int],
    tool: str,
    *,
    target: str | None = None,
    seed: int | None = None,
    exe: str | None = None,
    timeout: float = TIMEOUT_S,
    runner=subprocess.run,
) -> Result:
    """Run one kernel's GPU check at `size` under `compute-sanitizer --tool TOOL`."""
    exe = exe or find_compute_sanitizer()
    if exe is None:
        raise ToolchainError(
            "compute-sanitizer was not found",
            log="looked on PATH, beside nvcc and under CUDA_PATH, CUDA_HOME, /usr/local/cuda\n"
            "fix: it ships with the CUDA toolkit; put <cuda>/bin on PATH",
        )
    cmd = sanitizer_command(exe, tool, child_command(file, kernel, size, target, seed))
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    try:
        proc = runner(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        verdict = f"compute-sanitizer {tool} did not finish in {timeout:.0f} s"
        return Result(tool, kernel, size, False, verdict, command=cmd)
    output = (proc.stdout or "") + (proc.stderr or "")
    ok, verdict, summary = judge(tool, proc.returncode, output)
    child = [line for line in output.splitlines() if line and not line.startswith("=========")]
    return Result(tool, kernel, size, ok, verdict, summary, findings(output), child, cmd)


# ---------------------------------------------------------------- the child


def child_main(argv: list[str] | None = None) -> int:
    """What runs under the sanitizer: compile, check once on exact and normal inputs."""
    p = argparse.ArgumentParser(prog="python -m tiledsl.commands.sanitize")
    p.add_argument("file")
    p.add_argument("--kernel", required=True)
    p.add_argument("--size", required=True)
    p.add_argument("--target")
    p.add_argument("--seed", type=int)
    args = p.parse_args(argv)
    try:
        return _child(args)
    except (TileError, ToolchainError) as err:
        print(f"tiledsl sanitize: {err}", flush=True)
        return 1


def _child(args) -> int:
    import numpy as np

    from ..driver import compile_file
    from ..gpu import runtime
    from ..lowering.edges import variant
    from .run import Report, check_size, gpu_checks, parse_size

    compiled = compile_file(args.file, args.target)
    kernel = compiled.kernel(args.kernel)
    launch = compiled.launches[compiled.kernels.index(kernel)]
    size = parse_size(args.size)
    sizes = check_size(kernel, size)
    kernel, launch = variant(kernel, launch, size)  # the guarded twin off the tile grid
    # The sanitizer's file:line points here; the name is stable, so the cache serves all tools.
    digest = hashlib.sha256(compiled.source.encode()).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / "tiledsl-sanitize"
    folder.mkdir(parents=True, exist_ok=True)
    source_path = folder / f"{Path(args.file).stem}-{digest}.cu"
    source_path.write_text(compiled.source)
    arch = runtime.device_arch()
    loaded = runtime.load(
        compiled.source,
        build_arch(arch, compiled.kernels),
        pipeline=kernel.passes,
        target=kernel.target.name,
        name=str(source_path),
    )
    report = Report(kernel.name, size, f"{runtime.device_name()} ({arch})")
    report.lines += [f"generated source: {source_path}", loaded.note]
    run = runtime.launcher(loaded.module, launch)
    rng = np.random.default_rng(args.seed)
    gpu_checks(kernel, run, sizes, size, rng, report, None, on_host=True)
    print(report.render(), flush=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(child_main())
