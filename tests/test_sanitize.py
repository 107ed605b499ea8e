"""`tiledsl run --sanitize` without a GPU: reading compute-sanitizer's output (samples in
the form CUDA 13's tools print), the verdicts, the commands, finding the tool, and the
command line with the GPU faked; on a GPU (marked `gpu`), racecheck on an example."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import cli

from tiledsl.commands import sanitize as S
from tiledsl.errors import ToolchainError
from tiledsl.gpu.runtime import gpu_available

BANNER = "========= COMPUTE-SANITIZER\n"
CHILD = (
    "hgemm: 256 x 384 x 192 on NVIDIA H200 (sm_90)\n"
    "  generated source: /tmp/tiledsl-sanitize/hgemm-0123456789ab.cu\n"
    "  exact oracle         PASS  bit-exact\n"
    "  statistical oracle   PASS  max(err / bound) = 0.00412\n"
    "  PASS\n"
)

MEMCHECK_CLEAN = BANNER + CHILD + "========= ERROR SUMMARY: 0 errors\n"

MEMCHECK_OOB = (
    BANNER + "========= Invalid __global__ write of size 4 bytes\n"
    "=========     at hgemm+0x1a30 in /tmp/tiledsl-sanitize/hgemm-0123456789ab.cu:212\n"
    "=========     by thread (31,0,0) in block (1,0,0)\n"
    "=========     Address 0x7f3c2e000400 is out of bounds\n"
    "=========     and is 1,024 bytes after the nearest allocation at 0x7f3c2e000000 of size "
    "1,024 bytes\n"
    "=========     Saved host backtrace up to driver entry point at kernel launch time\n"
    "=========         Host Frame: [0x2d5a1f] in libcuda.so.1\n"
    "=========\n" + CHILD + "========= ERROR SUMMARY: 1 error\n"
)

RACECHECK_CLEAN = (
    BANNER + CHILD + "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"
)

RACECHECK_RACE = (
    BANNER + "========= Error: Race reported between Write access at hgemm+0x4b0 in "
    "/tmp/tiledsl-sanitize/hgemm-0123456789ab.cu:140\n"
    "=========     and Read access at hgemm+0x6f0 in "
    "/tmp/tiledsl-sanitize/hgemm-0123456789ab.cu:155 [1024 hazards]\n"
    "=========\n"
    + CHILD
    + "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n"
)

RACECHECK_WARNING = (
    BANNER + CHILD + "========= RACECHECK SUMMARY: 2 hazards displayed (0 errors, 2 warnings)\n"
)

SYNCCHECK_DIVERGENT = (
    BANNER + "========= Barrier error detected. Divergent thread(s) in warp\n"
    "=========     at hgemm+0x3c0 in /tmp/tiledsl-sanitize/hgemm-0123456789ab.cu:98\n"
    "=========     by thread (0,0,0) in block (0,0,0)\n"
    "=========\n" + CHILD + "========= ERROR SUMMARY: 1 error\n"
)

NOT_RUN = (
    BANNER + "========= Error: Target application terminated before first instrumented API call\n"
)


@pytest.mark.parametrize(
    ("tool", "output", "want"),
    [
        ("memcheck", MEMCHECK_CLEAN, ("ERROR SUMMARY: 0 errors", 0, 0, 0)),
        ("memcheck", MEMCHECK_OOB, ("ERROR SUMMARY: 1 error", 1, 0, 0)),
        ("synccheck", SYNCCHECK_DIVERGENT, ("ERROR SUMMARY: 1 error", 1, 0, 0)),
        (
            "racecheck",
            RACECHECK_CLEAN,
            ("RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)", 0, 0, 0),
        ),
        (
            "racecheck",
            RACECHECK_RACE,
            ("RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)", 1, 1, 0),
        ),
        (
            "racecheck",
            RACECHECK_WARNING,
            ("RACECHECK SUMMARY: 2 hazards displayed (0 errors, 2 warnings)", 0, 2, 2),
        ),
    ],
)
def test_parse_summary(tool: str, output: str, want) -> None:
    summary = S.parse_summary(tool, output)
    assert summary is not None
    assert (summary.line, summary.errors, summary.hazards, summary.warnings) == want
    assert summary.clean == (want[1:] == (0, 0, 0))


@pytest.mark.parametrize("tool", S.TOOLS)
@pytest.mark.parametrize("output", ["", NOT_RUN, CHILD, "ERROR SUMMARY: errors\n"])
def test_no_summary_means_the_tool_did_not_run(tool: str, output: str) -> None:
    assert S.parse_summary(tool, output) is None
    ok, verdict, summary = S.judge(tool, 0, output)
    assert not ok and summary is None
    assert verdict.startswith("compute-sanitizer did not run")


def test_racecheck_needs_its_own_summary() -> None:
    # An ERROR SUMMARY alone does not prove racecheck ran.
    assert S.parse_summary("racecheck", MEMCHECK_CLEAN) is None


@pytest.mark.parametrize(
    ("tool", "code", "output", "ok", "says"),
    [
        ("memcheck", 0, MEMCHECK_CLEAN, True, "no hazards or errors"),
        ("racecheck", 0, RACECHECK_CLEAN, True, "no hazards or errors"),
        ("memcheck", S.HAZARD_EXIT, MEMCHECK_OOB, False, "memcheck found problems"),
        ("racecheck", S.HAZARD_EXIT, RACECHECK_RACE, False, "1 hazard displayed"),
        ("racecheck", 0, RACECHECK_WARNING, False, "0 errors, 2 warnings"),
        ("synccheck", S.HAZARD_EXIT, SYNCCHECK_DIVERGENT, False, "synccheck found problems"),
        ("memcheck", S.HAZARD_EXIT, MEMCHECK_CLEAN, False, "hazard status"),
        ("memcheck", 1, MEMCHECK_CLEAN, False, "the check failed under memcheck (exit status 1)"),
    ],
)
def test_judge(tool, code, output, ok, says) -> None:
    passed, verdict, _ = S.judge(tool, code, output)
    assert passed is ok
    assert says in verdict


def test_findings_keep_the_report_and_drop_banner_and_summary() -> None:
    lines = S.findings(RACECHECK_RACE)
    assert lines[0].startswith(" Error: Race reported between Write access")
    assert "[1024 hazards]" in lines[1]
    assert not any("COMPUTE-SANITIZER" in x or "SUMMARY" in x for x in lines)
    assert S.findings(MEMCHECK_CLEAN) == []


def test_commands() -> None:
    child = S.child_command("examples/hgemm.tile", "hgemm", (256, 384, 192), "cuda sm_90", 7)
    assert child == [
        sys.executable,
        "-m",
        "tiledsl.commands.sanitize",
        "examples/hgemm.tile",
        "--kernel",
        "hgemm",
        "--size",
        "256x384x192",
        "--target",
        "cuda sm_90",
        "--seed",
        "7",
    ]
    cmd = S.sanitizer_command("/cuda/bin/compute-sanitizer", "racecheck", child)
    assert cmd[:5] == [
        "/cuda/bin/compute-sanitizer",
        "--tool",
        "racecheck",
        "--error-exitcode",
        "86",
    ]
    assert cmd[-len(child) :] == child
    with pytest.raises(ValueError, match="unknown compute-sanitizer tool"):
        S.sanitizer_command("cs", "initcheck", child)


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("place", ["bin", "compute-sanitizer"])
def test_find_compute_sanitizer_beside_nvcc(tmp_path, monkeypatch, place) -> None:
    nvcc = _executable(tmp_path / "cuda" / "bin" / "nvcc")
    want = _executable(tmp_path / "cuda" / place / "compute-sanitizer")
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setattr("shutil.which", lambda name: str(nvcc) if name == "nvcc" else None)
    assert S.find_compute_sanitizer() == str(want)


def test_find_compute_sanitizer_on_path_first(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("shutil.which", lambda name: f"/opt/{name}")
    assert S.find_compute_sanitizer() == "/opt/compute-sanitizer"


def test_missing_compute_sanitizer_is_a_toolchain_error(monkeypatch) -> None:
    monkeypatch.setattr(S, "find_compute_sanitizer", lambda: None)
    with pytest.raises(ToolchainError, match="compute-sanitizer was not found") as info:
        S.sanitize("f.tile", "k", (64, 64, 32), "racecheck")
    assert "<cuda>/bin on PATH" in str(info.value)


class FakeRunner:
    def __init__(self, returncode: int = 0, stdout: str = "", stderr: str = "", timeout=False):
        self.returncode, self.stdout, self.stderr, self.timeout = (
            returncode,
            stdout,
            stderr,
            timeout,
        )
        self.calls = []

    def __call__(self, cmd, **kw):
        self.calls.append((cmd, kw))
        if self.timeout:
            raise subprocess.TimeoutExpired(cmd, kw["timeout"])
        return subprocess.CompletedProcess(cmd, self.returncode, self.stdout, self.stderr)


def test_sanitize_clean_run() -> None:
    runner = FakeRunner(
        0, CHILD, "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
    )
    result = S.sanitize("f.tile", "hgemm", (256, 384, 192), "memcheck", exe="cs", runner=runner)
    assert result.ok, result.render()
    cmd, kw = runner.calls[0]
    assert cmd[:3] == ["cs", "--tool", "memcheck"]
    package_root = str(Path(S.__file__).resolve().parent.parent)
    assert kw["env"]["PYTHONPATH"].split(os.pathsep)[0] == package_root
    text = result.render()
    assert text.splitlines()[0] == "hgemm: 256 x 384 x 192 under compute-sanitizer memcheck"
    assert "  exact oracle         PASS  bit-exact" in text
    assert "ERROR SUMMARY: 0 errors" in text
    assert text.splitlines()[-1].startswith("  PASS  memcheck: no hazards or errors")


def test_sanitize_race_shows_where_and_how_to_reproduce() -> None:
    runner = FakeRunner(S.HAZARD_EXIT, RACECHECK_RACE)
    result = S.sanitize("f.tile", "hgemm", (256, 384, 192), "racecheck", exe="cs", runner=runner)
    assert not result.ok
    text = result.render()
    assert "Race reported between Write access" in text
    assert "hgemm-0123456789ab.cu:155" in text
    assert "FAIL  racecheck found problems" in text
    assert "reproduce with: cs --tool racecheck" in text


def test_sanitize_timeout_fails() -> None:
    result = S.sanitize(
        "f.tile",
        "k",
        (64, 64, 32),
        "synccheck",
        exe="cs",
        runner=FakeRunner(timeout=True),
        timeout=5,
    )
    assert not result.ok and "did not finish in 5 s" in result.verdict


def test_many_findings_are_cut_short() -> None:
    many = BANNER + "".join(f"========= Error: thing {i}\n" for i in range(30))
    result = S.sanitize(
        "f.tile",
        "k",
        (64, 64, 32),
        "memcheck",
        exe="cs",
        runner=FakeRunner(S.HAZARD_EXIT, many + "========= ERROR SUMMARY: 30 errors\n"),
    )
    assert f"... {30 - S.SHOWN_FINDINGS} more line(s)" in result.render()


# ---------------------------------------------------------------- the command line


def test_sanitize_with_cpu_is_a_usage_error(capsys, examples_dir) -> None:
    r = cli(["run", examples_dir / "hgemm.tile", "--sanitize", "racecheck", "--cpu"], capsys)
    assert r.code == 2 and "cannot be combined with --cpu" in r.err


def test_sanitize_without_a_gpu(capsys, examples_dir, monkeypatch) -> None:
    monkeypatch.setattr("tiledsl.gpu.runtime.gpu_available", lambda: False)
    r = cli(["run", examples_dir / "hgemm.tile", "--sanitize", "memcheck"], capsys)
    assert r.code == 1 and "--sanitize needs a CUDA GPU" in r.err


def test_sanitize_unknown_tool(capsys, examples_dir) -> None:
    r = cli(["run", examples_dir / "hgemm.tile", "--sanitize", "initcheck"], capsys)
    assert r.code == 2 and "invalid choice" in r.err


@pytest.fixture
def fake_sanitize(monkeypatch):
    calls = []

    def fake(file, kernel, size, tool, *, target=None, seed=None):
        calls.append((Path(file).name, kernel, size, tool))
        ok = tool != "synccheck"
        return S.Result(tool, kernel, size, ok, "canned", command=["cs"])

    monkeypatch.setattr("tiledsl.gpu.runtime.gpu_available", lambda: True)
    monkeypatch.setattr(S, "sanitize", fake)
    return calls


def test_run_sanitize_each_tool_once_at_a_small_default_size(
    capsys, examples_dir, fake_sanitize
) -> None:
    argv = ["run", examples_dir / "hgemm.tile", "--sanitize", "racecheck"]
    r = cli([*argv, "--sanitize", "memcheck", "--sanitize", "racecheck"], capsys)
    assert r.code == 0, r.err
    # 2 x 3 block tiles and 3 K steps of the 128 x 128 x 64 block
    assert fake_sanitize == [
        ("hgemm.tile", "hgemm", (256, 384, 192), "racecheck"),
        ("hgemm.tile", "hgemm", (256, 384, 192), "memcheck"),
    ]
    assert r.out.count("under compute-sanitizer") == 2


def test_run_sanitize_fails_when_a_tool_fails(capsys, examples_dir, fake_sanitize) -> None:
    argv = ["run", examples_dir / "hgemm.tile", "--sanitize", "synccheck", "--size", "128x128x64"]
    r = cli(argv, capsys)
    assert r.code == 1
    assert fake_sanitize == [("hgemm.tile", "hgemm", (128, 128, 64), "synccheck")]
    assert "FAIL  canned" in r.out


def test_run_sanitize_size_that_does_not_fit(capsys, examples_dir, fake_sanitize) -> None:
    r = cli(
        [
            "run",
            examples_dir / "ladder" / "v1.tile",
            "--sanitize",
            "memcheck",
            "--size",
            "100x16x16",
        ],
        capsys,
    )
    assert r.code == 2 and "not a multiple" in r.err and not fake_sanitize


# ---------------------------------------------------------------- on a GPU


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
@pytest.mark.skipif(S.find_compute_sanitizer() is None, reason="needs compute-sanitizer")
def test_racecheck_on_the_gpu(examples_dir: Path) -> None:
    path = examples_dir / "ladder" / "v4.tile"
    result = S.sanitize(str(path), "hgemm_v4", (128, 192, 96), "racecheck", seed=1)
    assert result.ok, result.render()
    assert result.summary is not None and result.summary.clean
    assert any("exact oracle" in line and "PASS" in line for line in result.child_lines)
