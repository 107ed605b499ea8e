"""`tiledsl compile` and `tiledsl run`, in-process: output, exit status, and what a bad file gets.

Exit status: 0 on success, 1 for an error in the file or a failed check, 2 for a
command-line mistake (docs/language.md, "What a wrong file gets"). Nothing is written for a
file with an error, and no Python traceback is shown unless --debug.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from helpers import (
    BUILDABLE,
    EXAMPLES,
    ROOT,
    cli,
    cuda_example_params,
    example_params,
    kernel_text,
    line_of,
    replace_directive,
)

from tiledsl.frontend.parser import parse

V1 = ROOT / "examples" / "ladder" / "v1.tile"
V2 = ROOT / "examples" / "ladder" / "v2.tile"


def write(tmp_path: Path, text: str, name: str = "k.tile") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def assert_located(err: str, path: Path, text: str, line: int, col: int | None = None) -> None:
    """`err` opens with `path:line:col: error:`, then the source line and a caret under col."""
    lines = err.splitlines()
    head = re.match(rf"^{re.escape(str(path))}:(\d+):(\d+): error: ", lines[0])
    assert head, lines[0]
    assert int(head[1]) == line, lines[0]
    if col is not None:
        assert int(head[2]) == col, lines[0]
    col = int(head[2])
    assert lines[1] == "    " + text.splitlines()[line - 1]
    assert lines[2].startswith("    " + " " * (col - 1) + "^")
    assert "Traceback" not in err


def assert_nothing_written(out: Path) -> None:
    """Neither OUT nor OUT.launch.json, nor anything else in OUT's own folder (`out/`)."""
    assert out.parent.name == "out"
    assert not out.exists()
    assert not Path(str(out) + ".launch.json").exists()
    assert not out.parent.exists() or not any(out.parent.iterdir())


# ---------------------------------------------------------------- compile: success


@pytest.mark.parametrize("path", cuda_example_params())
def test_compile_prints_cuda_source(path: Path, capsys) -> None:
    r = cli(["compile", path], capsys)
    assert r.code == 0, r.err
    assert r.err == ""
    src = r.out
    assert 'extern "C" __global__' in src
    assert "using namespace nvcuda;" in src
    if re.search(r"^\s*mma\s+m64n\d+k\d+", path.read_text(), re.M):  # the wgmma path
        assert "wgmma.mma_async.sync.aligned.m64n" in src and "wgmma_desc(" in src
        assert "wmma::" not in src.split("// ---- kernel")[1]
        return
    if re.search(r"^\s*mma\s+m\d+n\d+k\d+", path.read_text(), re.M):  # the mma.sync path
        assert "mma.sync.aligned.m16n8k16" in src and "ldmatrix_x4(" in src
        assert "wmma::" not in src.split("// ---- kernel")[1]
        return
    if re.search(r"^\s*mma\s+fma\b", path.read_text(), re.M):  # the fma path
        assert "fma_dot8<" in src and "warp_total(" in src
        assert "wmma::" not in src.split("// ---- kernel")[1]
        return
    assert "wmma::mma_sync(" in src
    assert "wmma::load_matrix_sync(" in src
    assert "wmma::store_matrix_sync(" in src


@pytest.mark.parametrize("path", example_params())
def test_compile_comments_every_written_directive_with_its_line(path: Path, capsys) -> None:
    src = cli(["compile", path], capsys).out
    comments = [line for line in src.splitlines() if line.startswith("// ")]
    for kernel in parse(path.read_text(), str(path)).kernels:
        for d in kernel.directives:
            tag = f"(line {d.loc.line})"
            assert any(c.startswith(f"// {d.name} ") and tag in c for c in comments), (
                f"no comment for '{d.name}' {tag}"
            )


def test_compile_comments_defaults_too(capsys) -> None:
    # v2.tile writes neither load_order, accumulate nor epilogue_via.
    src = cli(["compile", V2], capsys).out
    for word in ("load_order ab", "accumulate f32", "epilogue_via direct"):
        assert any(line.startswith(f"// {word} (default)") for line in src.splitlines()), word


def test_compile_output_writes_source_and_launch_description(tmp_path: Path, capsys) -> None:
    printed = cli(["compile", V2], capsys).out
    out = tmp_path / "build" / "out.cu"
    r = cli(["compile", V2, "-o", out], capsys)
    assert r.code == 0, r.err
    assert out.read_text() == printed
    assert "wrote" in r.out and str(out) in r.out
    assert 'extern "C" __global__' not in r.out  # the source went to the file, not stdout
    launch = json.loads(Path(str(out) + ".launch.json").read_text())
    assert isinstance(launch, list) and len(launch) == 1
    desc = launch[0]
    for key in ("kernel", "grid", "block", "dynamic_shared_memory_bytes", "args"):
        assert key in desc, key
    assert desc["kernel"] == "hgemm_v2"
    assert [name for name, _ in desc["args"]] == ["A", "B", "C", "M", "N", "K"]
    assert [ctype for _, ctype in desc["args"]] == [
        "const half*",
        "const half*",
        "float*",
        "int",
        "int",
        "int",
    ]
    assert desc["block"] == {"x": 512, "y": 1, "z": 1}  # 4 x 4 warps of 32 threads
    assert desc["dynamic_shared_memory_bytes"] == 2 * (64 * 32 + 32 * 64)  # As + Bs, f16
    assert {"x", "y", "z"} <= set(desc["grid"])
    assert "M" in desc["grid"]["x"] and "N" in desc["grid"]["x"]


def test_compile_output_describes_each_kernel_of_a_file(tmp_path: Path, capsys) -> None:
    both = write(tmp_path, V1.read_text() + "\n" + V2.read_text(), "both.tile")
    out = tmp_path / "both.cu"
    assert cli(["compile", both, "-o", out], capsys).code == 0
    launch = json.loads(Path(str(out) + ".launch.json").read_text())
    assert [d["kernel"] for d in launch] == ["hgemm_v1", "hgemm_v2"]
    assert [d["dynamic_shared_memory_bytes"] for d in launch] == [0, 8192]
    # v2 also has its guarded twin for edge tiles; v1 (stages 0) cannot have one
    assert out.read_text().count('extern "C" __global__') == 3
    assert "edge" not in launch[0]
    assert launch[1]["edge"]["kernel"] == "hgemm_v2_edge"
    assert launch[1]["edge"]["when"] == "M, N or K is not a multiple of the block tile"


def test_print_ir_after_all(capsys) -> None:
    r = cli(["compile", V2, "--print-ir-after-all"], capsys)
    assert r.code == 0, r.err
    heads = [line for line in r.out.splitlines() if line.startswith("// ----- IR after ")]
    assert heads[0] == "// ----- IR after lower"
    assert heads[1] == "// ----- IR after smem-tiling"
    assert r.out.index("IR after lower") < r.out.index("IR after smem-tiling")
    lowered = r.out.split("// ----- IR after smem-tiling")[0]
    tiled = r.out.split("// ----- IR after smem-tiling")[1]
    assert "barrier" not in lowered and "barrier" in tiled
    assert "kernel hgemm_v2" in lowered and "kernel hgemm_v2" in tiled


def test_print_ir_after_all_marks_passes_the_schedule_leaves_off(capsys) -> None:
    r = cli(["compile", V1, "--print-ir-after-all"], capsys)  # stages 0: no smem-tiling
    assert r.code == 0, r.err
    assert "// ----- IR after smem-tiling  (not enabled by this schedule" in r.out


def test_stop_after_lower_emits_the_naive_kernel(tmp_path: Path, capsys) -> None:
    full = cli(["compile", V2], capsys)
    assert full.code == 0
    assert "__syncthreads" in full.out
    assert "__shared__" in full.out

    out = tmp_path / "v2-lower.cu"
    r = cli(["compile", V2, "--stop-after", "lower", "-o", out], capsys)
    assert r.code == 0, r.err
    src = out.read_text()
    assert "__syncthreads" not in src
    assert "__shared__" not in src
    assert "wmma::mma_sync(" in src
    launch = json.loads(Path(str(out) + ".launch.json").read_text())
    assert launch[0]["dynamic_shared_memory_bytes"] == 0


def test_print_ir_after_all_stops_where_asked(capsys) -> None:
    r = cli(["compile", V2, "--print-ir-after-all", "--stop-after", "lower"], capsys)
    assert r.code == 0, r.err
    heads = [line for line in r.out.splitlines() if line.startswith("// ----- IR after ")]
    assert heads == ["// ----- IR after lower"]


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_compile_ptxas_prints_the_resource_report(capsys) -> None:
    r = cli(["compile", V2, "--ptxas"], capsys)
    assert r.code == 0, r.err
    assert 'extern "C" __global__' in r.out
    report = [line for line in r.out.splitlines() if line.startswith("ptxas (sm_90): ")]
    assert len(report) == 2  # the kernel and its guarded twin for edge tiles
    assert any(
        re.match(r"ptxas \(sm_90\): hgemm_v2: \d+ registers, .*0/0 bytes spilled", line)
        for line in report
    )
    assert any(line.startswith("ptxas (sm_90): hgemm_v2_edge: ") for line in report)


def test_stop_after_lower_comments_do_not_claim_shared_memory(capsys) -> None:
    src = cli(["compile", V2, "--stop-after", "lower"], capsys).out
    stages = [line for line in src.splitlines() if line.startswith("// stages ")]
    assert len(stages) == 1
    assert "smem-tiling" not in stages[0] and "shared-memory tile" not in stages[0]


def test_stop_after_smem_tiling_equals_the_full_pipeline_for_v2(capsys) -> None:
    full = cli(["compile", V2], capsys).out
    assert cli(["compile", V2, "--stop-after", "smem-tiling"], capsys).out == full


# ---------------------------------------------------------------- command-line mistakes: exit 2


def test_stop_after_an_unknown_pass_is_a_usage_error(capsys) -> None:
    r = cli(["compile", V2, "--stop-after", "bogus"], capsys)
    assert r.code == 2
    assert "--stop-after" in r.err and "bogus" in r.err


def test_missing_file_is_a_usage_error(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out" / "x.cu"
    r = cli(["compile", tmp_path / "nope.tile", "-o", out], capsys)
    assert r.code == 2
    assert "no such file" in r.err and "nope.tile" in r.err
    assert "Traceback" not in r.err
    assert_nothing_written(out)


def test_missing_file_for_run_is_a_usage_error(tmp_path: Path, capsys) -> None:
    r = cli(["run", tmp_path / "nope.tile", "--cpu"], capsys)
    assert r.code == 2
    assert "no such file" in r.err


def test_unknown_target_is_a_usage_error(capsys) -> None:
    r = cli(["compile", V2, "--target", "bogus"], capsys)
    assert r.code == 2
    assert "unknown target 'bogus'" in r.err


def test_no_command_prints_help_and_exits_2(capsys) -> None:
    r = cli([], capsys)
    assert r.code == 2
    assert "compile" in r.out


def test_tune_is_built_and_a_plain_file_is_a_space_of_one_point(capsys) -> None:
    r = cli(["tune", V2, "--dry-run", "--jobs", "1"], capsys)
    assert r.code == 0, r.err
    assert "not built yet" not in r.err
    assert "tune --dry-run: 1 point, 0 pruned, 1 to time at 4096x4096x4096" in r.out


# ---------------------------------------------------------------- errors in the file: exit 1


def test_syntax_error_is_located_and_writes_nothing(tmp_path: Path, capsys) -> None:
    text = kernel_text("block 64 x 64 x", "stages 1")
    bad = write(tmp_path, text, "bad.tile")
    out = tmp_path / "out" / "bad.cu"
    r = cli(["compile", bad, "-o", out], capsys)
    assert r.code == 1
    line = line_of(text, "block 64 x 64 x")
    assert_located(r.err, bad, text, line, len("    block 64 x 64 x") + 1)
    assert "expected a number after 'x'" in r.err
    assert "note: a block tile is written BM x BN x BK" in r.err
    assert r.out == ""
    assert_nothing_written(out)


def test_syntax_error_under_run(tmp_path: Path, capsys) -> None:
    text = kernel_text("block 64 x 64 x", "stages 1")
    bad = write(tmp_path, text, "bad.tile")
    r = cli(["run", bad, "--cpu"], capsys)
    assert r.code == 1
    assert_located(r.err, bad, text, line_of(text, "block 64 x 64 x"))
    assert "PASS" not in r.out


def test_unclosed_kernel_is_a_located_error(tmp_path: Path, capsys) -> None:
    text = kernel_text(*BUILDABLE).rstrip("}\n") + "\n"
    bad = write(tmp_path, text, "open.tile")
    r = cli(["compile", bad], capsys)
    assert r.code == 1
    assert r.err.startswith(f"{bad}:")
    assert "Traceback" not in r.err


def test_all_semantic_errors_in_one_report(tmp_path: Path, capsys) -> None:
    text = kernel_text("mma 16 x 16 x 8", *BUILDABLE, product="C[m, n] = A[m, k] * D[k, n]")
    bad = write(tmp_path, text, "two.tile")
    out = tmp_path / "out" / "two.cu"
    r = cli(["compile", bad, "-o", out], capsys)
    assert r.code == 1
    heads = [line for line in r.err.splitlines() if ": error: " in line]
    assert len(heads) == 2, r.err
    product_line, mma_line = line_of(text, "D[k, n]"), line_of(text, "mma 16 x 16 x 8")
    assert heads[0].startswith(f"{bad}:{product_line}:")
    assert "'D' is not a declared operand" in heads[0]
    assert heads[1].startswith(f"{bad}:{mma_line}:5: error: ")
    assert "16 x 16 x 8" in heads[1]
    assert "Traceback" not in r.err
    assert_nothing_written(out)


def test_semantic_errors_of_every_kernel_in_one_report(tmp_path: Path, capsys) -> None:
    first = kernel_text("mma 16 x 16 x 8", *BUILDABLE, name="one")
    second = kernel_text(*replace_directive(BUILDABLE, "block 64 x 64 x 24"), name="two")
    bad = write(tmp_path, first + second, "kernels.tile")
    r = cli(["compile", bad], capsys)
    assert r.code == 1
    heads = [line for line in r.err.splitlines() if ": error: " in line]
    assert len(heads) == 2, r.err
    assert heads[0].startswith(f"{bad}:{line_of(first, 'mma')}:")
    assert heads[1].startswith(f"{bad}:{first.count(chr(10)) + line_of(second, 'block')}:")


def test_tuning_set_is_refused_with_a_pointer_to_tune(tmp_path: Path, capsys) -> None:
    text = kernel_text(*replace_directive(BUILDABLE, "block {64, 128} x 64 x 32"))
    tuned = write(tmp_path, text, "space.tile")
    out = tmp_path / "out" / "space.cu"
    r = cli(["compile", tuned, "-o", out], capsys)
    assert r.code == 1
    assert_located(r.err, tuned, text, line_of(text, "block {"), len("    block ") + 1)
    assert "tiledsl tune" in r.err
    assert_nothing_written(out)
    assert cli(["run", tuned, "--cpu"], capsys).code == 1


UNBUILT = [
    pytest.param(
        (*BUILDABLE, "coarsen 2 x 2", "target musa mp_22", "accumulate f16"),
        "accumulate f16",
        id="musa-accumulate-f16",
    ),
    pytest.param(
        (*BUILDABLE, "coarsen 2 x 2", "target musa mp_22", "epilogue relu"),
        "epilogue relu",
        id="musa-epilogue",
    ),
]


@pytest.mark.parametrize(("directives", "written"), UNBUILT)
def test_unbuilt_directive_is_refused_where_it_is_written(
    tmp_path: Path, capsys, directives: tuple[str, ...], written: str
) -> None:
    assert "stages 1" in directives or written == "stages 2"
    text = kernel_text(*directives)
    path = write(tmp_path, text, "unbuilt.tile")
    out = tmp_path / "out" / "unbuilt.cu"
    r = cli(["compile", path, "-o", out], capsys)
    assert r.code == 1
    assert_located(r.err, path, text, line_of(text, written), col=5)
    assert "not built yet" in r.err.splitlines()[0]
    assert written in r.err.splitlines()[0]
    assert "note: " in r.err
    assert len([line for line in r.err.splitlines() if ": error: " in line]) == 1, r.err
    assert_nothing_written(out)


def test_the_buildable_schedule_compiles(tmp_path: Path, capsys) -> None:
    # The control for the refusals above: only the named directive changes there.
    r = cli(["compile", write(tmp_path, kernel_text(*BUILDABLE))], capsys)
    assert r.code == 0, r.err


def test_too_many_threads_suggests_a_fix_that_compiles(tmp_path: Path, capsys) -> None:
    text = kernel_text(*replace_directive(BUILDABLE, "block 128 x 128 x 32"))
    r = cli(["compile", write(tmp_path, text, "big.tile")], capsys)
    assert r.code == 1
    assert "threads per block" in r.err.splitlines()[0]
    notes = [line for line in r.err.splitlines() if line.startswith("note: ")]
    suggested = re.findall(r"`([^`]+)`", " ".join(notes))
    for directive in suggested:
        fixed = kernel_text(*replace_directive(BUILDABLE, "block 128 x 128 x 32"), directive)
        again = cli(["compile", write(tmp_path, fixed, "fixed.tile")], capsys)
        assert "not built yet" not in again.err, again.err


# ---------------------------------------------------------------- run --cpu


@pytest.mark.parametrize("path", example_params())
def test_run_cpu_passes_every_check(path: Path, capsys) -> None:
    r = cli(["run", path, "--cpu", "--seed", "7"], capsys)
    assert r.code == 0, r.out + r.err
    kernels = parse(path.read_text(), str(path)).kernels
    for oracle in ("exact oracle", "statistical oracle", "race check"):
        passed = re.findall(rf"^  {oracle}\s+PASS\b", r.out, flags=re.M)
        assert len(passed) == len(kernels), f"{oracle}:\n{r.out}"
    assert "FAIL" not in r.out
    assert r.out.rstrip().endswith("PASS")
    assert "interpreter default size" in r.err


def test_run_cpu_at_a_given_size(capsys) -> None:
    r = cli(["run", V2, "--cpu", "--size", "64x128x96", "--seed", "1"], capsys)
    assert r.code == 0, r.out + r.err
    assert "hgemm_v2: 64 x 128 x 96 on the numpy interpreter" in r.out
    assert "pipeline: lower -> smem-tiling" in r.out
    assert "interpreter default size" not in r.err


def test_run_cpu_size_not_a_multiple_of_the_block_tile(capsys) -> None:
    r = cli(["run", V2, "--cpu", "--size", "100x64x64", "--seed", "2"], capsys)
    assert r.code == 0, r.out + r.err
    assert "hgemm_v2_edge: 100 x 64 x 64 on the numpy interpreter" in r.out


def test_run_cpu_stages_0_refuses_edge_sizes(capsys) -> None:
    r = cli(["run", V1, "--cpu", "--size", "100x64x64"], capsys)
    assert r.code == 2
    assert "M = 100 is not a multiple of the block tile (64 x 16 x 16)" in r.err
    assert "which WMMA cannot guard (use stages 1 or more, or the size 128x64x64)" in r.err
    assert "Traceback" not in r.err


@pytest.mark.parametrize("size", ["4x4", "4x4x0", "axbxc", "4x4x4x4"])
def test_run_malformed_size(size: str, capsys) -> None:
    r = cli(["run", V2, "--cpu", "--size", size], capsys)
    assert r.code == 2
    assert "MxNxK" in r.err


def test_run_picks_one_kernel(tmp_path: Path, capsys) -> None:
    both = write(tmp_path, V1.read_text() + "\n" + V2.read_text(), "both.tile")
    r = cli(["run", both, "--cpu", "--kernel", "hgemm_v1", "--seed", "2"], capsys)
    assert r.code == 0, r.out + r.err
    assert "hgemm_v1:" in r.out and "hgemm_v2:" not in r.out


def test_run_unknown_kernel_is_a_usage_error(capsys) -> None:
    r = cli(["run", V2, "--cpu", "--kernel", "nosuch"], capsys)
    assert r.code == 2
    assert "'nosuch'" in r.err and "hgemm_v2" in r.err  # what it lacks, and what it has
    assert "internal error" not in r.err


def test_two_kernels_of_one_name_are_refused(tmp_path: Path, capsys) -> None:
    text = V1.read_text() + "\n" + V1.read_text()
    path = write(tmp_path, text, "twice.tile")
    out = tmp_path / "out" / "twice.cu"
    r = cli(["compile", path, "-o", out], capsys)
    assert r.code == 1
    second = len(V1.read_text().splitlines()) + 1 + line_of(V1.read_text(), "kernel hgemm_v1")
    assert_located(r.err, path, text, second)
    assert "hgemm_v1" in r.err.splitlines()[0]
    assert_nothing_written(out)


# ---------------------------------------------------------------- internal errors and --debug


def _explode(*args, **kwargs):
    raise RuntimeError("planted failure")


def test_internal_error_without_debug_is_one_line_and_exit_1(monkeypatch, capsys) -> None:
    monkeypatch.setattr("tiledsl.driver.compile_source", _explode)
    r = cli(["compile", V2], capsys)
    assert r.code == 1
    assert "internal error" in r.err
    assert "RuntimeError: planted failure" in r.err
    assert "--debug" in r.err
    assert "Traceback" not in r.err
    assert r.out == ""


def test_internal_error_with_debug_propagates(monkeypatch, capsys) -> None:
    monkeypatch.setattr("tiledsl.driver.compile_source", _explode)
    with pytest.raises(RuntimeError, match="planted failure"):
        cli(["compile", V2, "--debug"], capsys)
    with pytest.raises(RuntimeError, match="planted failure"):
        cli(["run", V2, "--cpu", "--debug"], capsys)


def test_examples_exist() -> None:
    assert len(EXAMPLES) >= 4


def test_a_reader_that_leaves_early_is_not_an_error(tmp_path: Path) -> None:
    """`tiledsl compile … | head -1`: no traceback, no 'internal error', status 0."""
    import subprocess
    import sys

    text = (ROOT / "examples" / "types.tile").read_text()
    big = tmp_path / "big.tile"  # far more IR text than a pipe holds (64 KiB)
    big.write_text("".join(text.replace("kernel gemm_", f"kernel v{i}_") for i in range(6)))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tiledsl.cli", "compile", str(big), "--print-ir-after-all"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout.readline().startswith(b"// ----- IR after lower")
    proc.stdout.close()  # the reader leaves; the writer's next write breaks the pipe
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert "internal error" not in err and "Traceback" not in err
