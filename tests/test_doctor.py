"""`tiledsl doctor`: works here (no GPU), names what is missing with a fix, fails only
when a core requirement is missing, and survives a probe that breaks."""

from __future__ import annotations

import io
import re

import pytest
from helpers import cli

from tiledsl.commands import doctor as D
from tiledsl.errors import ToolchainError

LINE = re.compile(r"^(ok|warn|missing) +(\S.*?) {2,}\S")


def report(checks=D.CHECKS) -> tuple[int, str]:
    out = io.StringIO()
    code = D.doctor(out, checks)
    return code, out.getvalue()


def test_doctor_on_this_machine(capsys) -> None:
    r = cli(["doctor"], capsys)
    assert r.code == 0, r.out
    lines = r.out.splitlines()
    assert lines[0].startswith("tiledsl ")
    whats = [m.group(2).strip() for m in map(LINE.match, lines) if m]
    for what in (
        "python",
        "lark",
        "numpy",
        "graphviz",
        "cupy",
        "gpu",
        "matplotlib",
        "triton",
        "mma.h, crt/mma.h",
        "nvcc",
        "compute-sanitizer",
        "dot",
        "kernel cache",
    ):
        assert what in whats, (what, r.out)


def test_every_problem_has_a_fix() -> None:
    _, text = report()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(("missing", "warn")):
            assert lines[i + 1].strip().startswith("fix: "), line


@pytest.fixture
def bare_machine(monkeypatch, tmp_path):
    """No CuPy, no optional package, no nvcc, dot, nvidia-smi or compute-sanitizer, no headers."""
    core = {"lark", "numpy", "graphviz"}
    monkeypatch.setattr(D, "installed", lambda module: module in core)
    monkeypatch.setattr("shutil.which", lambda name: None)
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("CUDA_PATH", "CUDA_HOME", "CUDA_ROOT"):
        monkeypatch.delenv(var, raising=False)

    def no_headers():
        raise ToolchainError("cannot find the CUDA toolkit headers", log="looked in: nowhere")

    monkeypatch.setattr("tiledsl.gpu.runtime.cuda_include_dir", no_headers)
    monkeypatch.setattr("tiledsl.commands.sanitize.find_compute_sanitizer", lambda: None)


def test_a_bare_machine_is_described_and_still_passes(bare_machine) -> None:
    code, text = report()
    assert code == 0, text
    status = {m.group(2).strip(): m.group(1) for m in map(LINE.match, text.splitlines()) if m}
    for what in ("cupy", "gpu", "nvcc", "dot", "compute-sanitizer", "mma.h, crt/mma.h"):
        assert status[what] == "missing", (what, text)
    for what in ("matplotlib", "triton", "torch"):
        assert status[what] == "missing"
    for what in ("python", "lark", "numpy", "graphviz", "kernel cache"):
        assert status[what] == "ok", (what, text)
    assert "pip install 'tiledsl[gpu]'" in text
    assert "apt-get install graphviz" in text
    assert "set CUDA_PATH" in text
    assert "cannot work here" not in text


def test_a_missing_core_package_fails(monkeypatch) -> None:
    real = D.installed
    monkeypatch.setattr(D, "installed", lambda module: module != "lark" and real(module))
    code, text = report()
    assert code == 1
    assert re.search(r"^missing +lark +not installed", text, re.M)
    assert "tiledsl cannot work here: lark missing" in text


def test_too_old_a_python_fails(monkeypatch) -> None:
    monkeypatch.setattr(D, "MIN_PYTHON", (99, 0))
    code, text = report()
    assert code == 1
    assert "tiledsl needs 99.0+" in text and "fix: install Python 99.0 or newer" in text


def test_a_broken_probe_is_a_warning_not_a_crash() -> None:
    def check_exploding():
        raise RuntimeError("driver said no")

    code, text = report((D.check_python, check_exploding))
    assert code == 0
    assert re.search(
        r"^warn +exploding +could not be checked: RuntimeError: driver said no", text, re.M
    )


def test_an_unwritable_cache_is_a_warning(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("os.access", lambda path, mode: False)
    finding = D.check_cache()
    assert finding.status == D.WARN and "cannot be written" in finding.detail
    assert "TILEDSL_CACHE_DIR" in finding.fix


def test_cupy_that_fails_to_import(monkeypatch) -> None:
    monkeypatch.setattr(D, "installed", lambda module: True)
    monkeypatch.setitem(__import__("sys").modules, "cupy", None)  # import raises ImportError
    findings = D.check_cupy()
    assert findings[0].status == D.MISSING and "does not import" in findings[0].detail
