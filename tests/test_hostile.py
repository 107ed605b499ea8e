"""Hostile and careless input (issue 15): each defect found, with its exact message.

Every case here was once a data loss, a hang, an exit 0 with wrong output, or an internal
error. The rules they pin down: nothing is clobbered and nothing half-written; a file's cost
is bounded before it is built; every mistake in a file is located (file:line:col, the
source line, a caret, a fix); stored state that is not what tiledsl wrote is skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import EXAMPLES, ROOT, cli, kernel_text

from tiledsl.errors import TileError
from tiledsl.frontend.parser import parse

HGEMM = (ROOT / "examples" / "hgemm.tile").read_text()
EPILOGUE = (ROOT / "examples" / "epilogue.tile").read_text()


def write(tmp_path: Path, text: str | bytes, name: str = "k.tile") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def listing(folder: Path) -> dict[str, int]:
    """Every file under `folder` (hidden ones too) and its size."""
    return {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*") if p.is_file()}


def errors(text: str, name: str = "k.tile") -> list[tuple[int, int, str]]:
    """(line, col, message) of every diagnostic `check` gives the text."""
    from tiledsl.driver import compile_source

    with pytest.raises(TileError) as info:
        compile_source(text, name)
    return [(d.loc.line, d.loc.col, d.message) for d in info.value.diagnostics]


def line_col(text: str, needle: str) -> tuple[int, int]:
    index = text.index(needle)
    return text.count("\n", 0, index) + 1, index - text.rfind("\n", 0, index)


# ---------------------------------------------------------------- 1. the input is not an output


@pytest.mark.parametrize("spelling", ["k.tile", "./k.tile", "sub/../k.tile", "link.cu"])
def test_compile_refuses_to_write_over_its_input(tmp_path, capsys, monkeypatch, spelling):
    source = write(tmp_path, HGEMM)
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.cu").symlink_to(source)
    monkeypatch.chdir(tmp_path)
    before = listing(tmp_path)
    r = cli(["compile", "k.tile", "-o", spelling], capsys)
    assert r.code == 2
    assert r.err == (
        f"tiledsl compile: error: the output {Path(spelling)} is the input k.tile: refusing to "
        "overwrite it; choose another output path\n"
    )
    assert source.read_text() == HGEMM and listing(tmp_path) == before


def test_compile_refuses_a_launch_description_over_its_input(tmp_path, capsys, monkeypatch):
    write(tmp_path, HGEMM, "k.cu.launch.json")
    monkeypatch.chdir(tmp_path)
    r = cli(["compile", "k.cu.launch.json", "-o", "k.cu"], capsys)
    assert r.code == 2
    assert "the output k.cu.launch.json is the input k.cu.launch.json" in r.err
    assert listing(tmp_path) == {"k.cu.launch.json": len(HGEMM.encode())}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tune", "-o", "k.tile"], "the output k.tile is the input k.tile"),
        (["tune", "--record", "k.tile"], "the output k.tile is the input k.tile"),
        (["viz", "-o", "k.tile"], "the output k.tile is a file, not a directory"),
    ],
)
def test_no_command_writes_over_its_input(tmp_path, capsys, monkeypatch, argv, message):
    write(tmp_path, HGEMM)
    monkeypatch.chdir(tmp_path)
    command, *options = argv
    extra = ["--dry-run"] if command == "tune" else []
    r = cli([command, "k.tile", *options, *extra], capsys)
    assert r.code == 2 and message in r.err
    assert (tmp_path / "k.tile").read_text() == HGEMM


# ---------------------------------------------------------------- 2. costs bounded up front


@pytest.mark.parametrize("stages", ["64", "256", "1000000000"])
def test_large_stages_are_refused_from_arithmetic(stages):
    text = HGEMM.replace("stages  3", f"stages  {stages}")
    line, col = line_col(text, f"stages  {stages}")
    col += len("stages  ")
    assert errors(text) == [(line, col, f"'stages' takes integers ≤ 32, found {stages}")]


def test_a_tuning_set_of_large_stages_is_pruned_at_once(tmp_path, capsys):
    path = write(tmp_path, HGEMM.replace("stages  3", "stages  {2, 3, 128}"))
    r = cli(["tune", path, "--dry-run", "--jobs", "1"], capsys)
    assert r.code == 0
    assert "pruned  stages 128: " in r.out and "'stages' takes integers ≤ 32, found 128" in r.out
    assert "3 points, 1 pruned, 2 to time" in r.out


def test_shared_memory_is_refused_before_anything_is_built():
    text = kernel_text("block 64 x 64 x 512", "stages 32", "pad none", "swizzle none")
    assert errors(text) == [
        (
            7,
            5,
            "this schedule needs 4194304 bytes of shared memory per block; cuda sm_90 "
            "allows 232448",
        )
    ]


def test_every_limit_of_a_file_is_reported_in_one_run():
    """A register error no longer hides the shared-memory one (issue 15, item 13)."""
    text = HGEMM.replace("128 x 128 x 64", "256 x 256 x 64").replace("stages  3", "stages  6")
    assert [m for _, _, m in errors(text)] == [
        "4 x 4 fragments per warp need at least 148 registers per thread for fragments "
        "alone; cuda sm_90 allows 128 at 512 threads per block",
        "this schedule needs at least 393216 bytes of shared memory per block; cuda sm_90 "
        "allows 232448",
    ]


def test_a_first_kernel_over_a_limit_does_not_hide_a_second():
    big = HGEMM.replace("stages  3", "stages  6").replace("128 x 128 x 64", "128 x 256 x 64")
    found = errors(big + big.replace("kernel hgemm", "kernel other"))
    assert [m.split(";")[0] for _, _, m in found] == [
        "this schedule needs at least 294912 bytes of shared memory per block",
        "this schedule needs at least 294912 bytes of shared memory per block",
    ]


def test_repeated_directives_are_counted_past_fifty(tmp_path, capsys):
    text = HGEMM.replace("    swizzle grouped 8", "    swizzle grouped 8\n" * 10_000, 1)
    r = cli(["check", write(tmp_path, text)], capsys)
    assert r.code == 1
    assert r.err.count(": error: directive 'swizzle' given twice") == 50
    assert r.err.rstrip().endswith("note: 9949 more error(s) not shown; fix the ones above first")


def test_a_file_of_too_many_kernels_is_refused(tmp_path, capsys):
    text = "".join(HGEMM.replace("kernel hgemm", f"kernel k{i}") for i in range(65))
    r = cli(["check", write(tmp_path, text)], capsys)
    assert r.code == 1
    assert "error: a file holds at most 64 kernels; this is kernel 65 of 65" in r.err


def test_a_file_past_the_size_limit_is_refused(tmp_path, capsys):
    r = cli(["check", write(tmp_path, "#" * (1 << 20) + "\n")], capsys)
    assert r.code == 2
    assert "is longer than 1048576 bytes, the most tiledsl reads" in r.err


# ---------------------------------------------------------------- 3. all outputs or none


def test_a_file_size_limit_leaves_nothing_behind(tmp_path):
    source = write(tmp_path, HGEMM)
    script = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)); "
        "from tiledsl.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    before = listing(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", script, "compile", str(source), "-o", str(tmp_path / "k.cu")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert done.stderr == (
        f"tiledsl compile: error: cannot write {tmp_path / 'k.cu'}: File too large; "
        "nothing was written\n"
    )
    assert listing(tmp_path) == before


def test_a_launch_description_path_that_is_a_folder_writes_nothing(tmp_path, capsys):
    source = write(tmp_path, HGEMM)
    (tmp_path / "k.cu.launch.json").mkdir()
    r = cli(["compile", source, "-o", tmp_path / "k.cu"], capsys)
    assert r.code == 2
    assert "the output " in r.err and "k.cu.launch.json is a directory" in r.err
    assert not (tmp_path / "k.cu").exists()


def test_outputs_replace_old_ones_whole(tmp_path, capsys):
    source = write(tmp_path, HGEMM)
    out = tmp_path / "k.cu"
    out.write_text("old")
    os.chmod(out, 0o640)
    assert cli(["compile", source, "-o", out], capsys).code == 0
    assert out.read_text().startswith("// Generated by tiledsl")
    assert oct(out.stat().st_mode & 0o777) == "0o640"
    assert sorted(listing(tmp_path)) == ["k.cu", "k.cu.launch.json", "k.tile"]


# ---------------------------------------------------------------- 4. numbers the kernel cannot hold


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1e40", "alpha 1e40 is not a finite f32 number (at most 3.402823e+38)"),
        ("-3.5e38", "alpha -3.5e38 is not a finite f32 number (at most 3.402823e+38)"),
        (
            "1e-40",
            "alpha 1e-40 is below f32's smallest normal number (1.175494e-38), which "
            "the GPU flushes to zero",
        ),
    ],
)
def test_epilogue_values_must_be_f32(value, message):
    text = EPILOGUE.replace("alpha 0.5", f"alpha {value}")
    line, col = line_col(text, value + ",")
    assert errors(text) == [(line, col, message)]


def test_an_epilogue_that_overflows_f16_runs_as_ieee_says(tmp_path, capsys):
    """A large alpha overflows C to ±inf: the exact oracle replays it, no numpy warning."""
    path = write(tmp_path, EPILOGUE.replace("alpha 0.5", "alpha 3e4"))
    r = cli(["run", path, "--cpu", "--seed", "1"], capsys)
    assert r.code == 0, r.out
    assert "exact oracle         PASS  bit-exact" in r.out
    assert "elements that may overflow f16 not judged" in r.out
    assert "Warning" not in r.err


# ---------------------------------------------------------------- 5. names in the generated C++


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("kernel hgemm", "kernel int", "kernel 'int' is a C++ keyword"),
        ("kernel hgemm", "kernel main", "kernel 'main' is the program's entry point in C++"),
        # found by the fuzz test (seed 7): an `extern __shared__` local has linkage
        (
            "kernel hgemm",
            "kernel smem",
            "kernel 'smem' is the name of the generated kernel's shared-memory array",
        ),
        (
            "kernel hgemm",
            "kernel smem_base",
            "kernel 'smem_base' is the name of the generated kernel's shared-memory array",
        ),
        (
            "kernel hgemm",
            "kernel kΩ",
            "kernel 'kΩ' is not a C++ identifier: use ASCII letters, digits and '_', starting "
            "with a letter",
        ),
        (
            "kernel hgemm",
            "kernel sqrt",
            "kernel 'sqrt' is declared by the CUDA headers the generated code includes",
        ),
        (
            "kernel hgemm",
            "kernel k__x",
            "kernel 'k__x' contains '__', which C++ reserves for the compiler and its libraries",
        ),
        ("A: f16", "half: f16", "operand 'half' is a name the generated code uses itself"),
        (
            "B: f16[K, N]",
            "threadIdx: f16[K, N]",
            "operand 'threadIdx' is a name the generated code uses itself",
        ),
        (
            "f16[M, K]",
            "f16[M, warp]",
            "size 'warp' is the name of a variable in the generated kernel",
        ),
        (
            "B: f16",
            "As: f16",
            "the shared-memory tile of A (or its constant) 'As' is also "
            "the name of an operand in the generated code",
        ),
    ],
)
def test_names_that_cannot_be_cpp_are_located(old, new, message):
    text = HGEMM.replace(old, new, 1)
    if old.startswith(("A:", "B:")):  # the computation line names the operand too
        text = text.replace(f"{old.split(':')[0]}[", f"{new.split(':')[0]}[")
    if "warp" in new:
        text = text.replace("C: f32[M, N]", "C: f32[M, N]").replace(
            "B: f16[K, N]", "B: f16[warp, N]"
        )
    found = [m for _, _, m in errors(text)]
    assert message in found, found


@pytest.mark.parametrize("suffix", ["_edge", "_schedule", "_edge_schedule", "_launch"])
def test_kernel_names_may_not_collide_with_generated_ones(suffix):
    text = HGEMM + HGEMM.replace("kernel hgemm", f"kernel hgemm{suffix}")
    line = HGEMM.count("\n") + 6
    assert errors(text) == [
        (
            line,
            8,
            f"kernel 'hgemm{suffix}' has the name tiledsl gives to a part of kernel 'hgemm' "
            "(line 6)",
        )
    ]


def test_musa_names_are_checked_too():
    text = (ROOT / "examples" / "s4000.tile").read_text()
    name = text.split("kernel ", 1)[1].split()[0]
    assert "kernel 'printf' is declared by the CUDA headers the generated code includes" in [
        m for _, _, m in errors(text.replace(f"kernel {name}", "kernel printf"))
    ]


# ---------------------------------------------------------------- 6. 32-bit integers


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "grouped 8",
            "grouped 2147483648",
            "'swizzle' takes integers ≤ 65536, found 2147483648",
        ),
        (
            "f16[M, K]",
            "f16[2147483648, K]",
            "a dimension is a name or an integer from 1 to 2147483647, found 2147483648",
        ),
    ],
)
def test_integers_past_32_bits_are_refused(old, new, message):
    text = HGEMM.replace(old, new)
    assert message in [m for _, _, m in errors(text)]


def test_a_literal_size_rounded_past_int_max_is_refused():
    text = HGEMM.replace("f16[M, K]", "f16[2147483600, K]").replace(
        "f32[M, N]", "f32[2147483600, N]"
    )
    assert (
        "M = 2147483600 is too large for the kernel's 32-bit indices: rounded up to its block "
        "tile (128) and one tile past it, it must stay at most 2147483647, so M ≤ 2147483392"
    ) in [m for _, _, m in errors(text)]


@pytest.mark.parametrize(
    ("size", "message"),
    [
        (
            "3000000000x4096x4096",
            "argument --size: a size is written MxNxK with whole numbers from 1 to 2147483647",
        ),
        (
            "2147483600x4096x4096",
            "hgemm: M = 2147483600 is too large for the kernel's 32-bit indices",
        ),
        (
            "131072x2147483000x64",
            "hgemm: 1024 x 16777211 block tiles = 17179864064 blocks, more than a grid's x "
            "axis holds (2147483647)",
        ),
    ],
)
def test_check_size_refuses_what_the_kernel_cannot_carry(tmp_path, capsys, size, message):
    r = cli(["check", write(tmp_path, HGEMM), "--size", size], capsys)
    assert r.code == 2 and message in r.err, r.err


def test_the_grouped_raster_product_must_fit_an_int(tmp_path, capsys):
    text = HGEMM.replace("grouped 8", "grouped 65536")
    r = cli(["check", write(tmp_path, text), "--size", "128x268435456x64"], capsys)
    assert r.code == 2
    assert "swizzle grouped 65536: GROUP_M * tiles_n = 137438953472 overflows" in r.err


def test_the_interpreter_models_32_bit_ints():
    """Past the size checks, the interpreter itself refuses what would overflow."""
    import numpy as np

    from tiledsl.driver import compile_source
    from tiledsl.interp.interpreter import InterpreterError, interpret

    kernel = compile_source(HGEMM.replace("grouped 8", "grouped 65536"), "k.tile").kernel()
    sizes = {"M": 128, "N": 2**28, "K": 64}
    with pytest.raises(
        InterpreterError, match="width: GROUP_M \\* tiles_n = 137438953472 overflows a 32-bit int"
    ):
        interpret(kernel, {"A": np.zeros(1), "B": np.zeros(1), "C": np.zeros(1)}, sizes)


def test_batched_offsets_are_64_bit():
    from tiledsl.driver import compile_source

    source = compile_source((ROOT / "examples" / "batched.tile").read_text(), "b.tile").source
    assert "(long long)bz * M * K + " in source


# ---------------------------------------------------------------- 7-9. located, not crashed


@pytest.mark.parametrize("dtype", ["f64", "f16f16"])
def test_an_unknown_element_type_is_one_located_error(dtype):
    text = HGEMM.replace("B: f16", f"B: {dtype}")
    line, col = line_col(text, dtype)
    assert errors(text) == [(line, col, f"unknown element type '{dtype}'")]


def test_a_byte_that_is_not_utf8_is_located(tmp_path, capsys):
    data = HGEMM.encode().replace(b"    block", b"    bl\xffock", 1)
    path = write(tmp_path, data)
    r = cli(["check", path], capsys)
    assert r.code == 1
    line = HGEMM[: HGEMM.index("    block")].count("\n") + 1
    assert r.err.splitlines()[:3] == [
        f"{path}:{line}:7: error: byte 0xff is not UTF-8 text",
        "        bl\ufffdock   128 x 128 x 64    # BM x BN x BK: the thread block's tile",
        "          ^",
    ]


@pytest.mark.parametrize(
    ("pads", "message"),
    [
        (
            "A 3, B 8",
            "pad A 3 makes the lines of A's shared-memory tile 64 + 3 elements = 134 "
            "bytes, not a multiple of 16 (copies and fragment loads move 16-byte chunks on "
            "16-byte boundaries)",
        ),
        (
            "A 8, B 4",
            "pad B 4 makes the lines of B's shared-memory tile 128 + 4 elements = 264 "
            "bytes, not a multiple of 16 (copies and fragment loads move 16-byte chunks on "
            "16-byte boundaries)",
        ),
        ("A 8, A 8", "'A' is padded twice in one pad directive"),
    ],
)
def test_pads_are_checked_where_they_are_written(pads, message):
    text = HGEMM.replace("pad     auto", f"pad     {pads}")
    line, col = line_col(text, f"pad     {pads}")
    col += len("pad     ")
    first, second = pads.split(", ")
    if "twice" in message:  # at the second name
        col += len(first) + 2
    elif first.endswith(" 8"):  # B's value
        col += len(first) + 2 + len(second.split()[0]) + 1
    else:  # A's value
        col += len(first.split()[0]) + 1
    assert errors(text) == [(line, col, message)]


# ---------------------------------------------------------------- 10-12. the command line


@pytest.mark.parametrize(
    ("output", "code", "message"),
    [
        (
            "/dev/full",
            2,
            "the output /dev/full is not a regular file (a device, a pipe or a socket)",
        ),
        ("", 2, "argument -o/--output: the path is empty"),
    ],
)
def test_unwritable_outputs(tmp_path, capsys, output, code, message):
    r = cli(["compile", write(tmp_path, HGEMM), "-o", output], capsys)
    assert r.code == code and message in r.err and "internal error" not in r.err


def test_an_output_folder_that_cannot_be_made(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    r = cli(["compile", write(tmp_path, HGEMM), "-o", tmp_path / "file" / "k.cu"], capsys)
    assert r.code == 1
    assert r.err.endswith(": Not a directory; nothing was written\n")


def test_a_folder_made_before_a_name_too_long_is_removed(tmp_path, capsys):
    """`viz -o DIR` writes DIR/KERNEL/...: with a kernel name longer than the file system
    takes, DIR is made and DIR/KERNEL is not; DIR must not be left behind (fuzz seed
    20261208, case 76)."""
    name = "k" + "x" * 300
    text = HGEMM.replace("kernel hgemm", f"kernel {name}", 1)
    out = tmp_path / "vizdir"
    r = cli(["viz", write(tmp_path, text), "-o", out], capsys)
    assert r.code == 1, r.err
    assert r.err.endswith("File name too long; nothing was written\n")
    assert not out.exists()


def test_standard_output_on_a_full_device(tmp_path):
    source = write(tmp_path, HGEMM)
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "tiledsl", "compile", str(source)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
        )
    assert done.returncode == 1
    assert done.stderr == (
        "tiledsl compile: error: cannot write to standard output: No space left on device\n"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--cpu", "--size", "99999999999x1x1"], "argument --size: a size is written"),
        (["run", "--cpu", "--size", "²x1x1"], "argument --size: a size is written"),
        (["run", "--cpu", "--size", "1" + "0" * 30 + "x1x1"], "argument --size: a size"),
        (["run", "--cpu", "--batch", "99999999999"], "argument --batch: expected 1 to 65535"),
        (["run", "--cpu", "--seed=-1"], "argument --seed: expected 0 to 18446744073709551615"),
        (
            ["run", "--cpu", "--size", "999999x1x1"],
            "hgemm: the numpy interpreter would run 7813 block steps",
        ),
        (["check", "--reserve", "-1"], "argument --reserve: expected 0 to 255, found -1"),
    ],
)
def test_command_line_values_are_checked_where_read(tmp_path, capsys, argv, message):
    command, *options = argv
    r = cli([command, write(tmp_path, HGEMM), *options], capsys)
    assert r.code == 2 and message in r.err, r.err


def test_a_literal_of_thousands_of_digits_is_located():
    text = HGEMM.replace("swizzle grouped 8", "swizzle grouped " + "9" * 5000)
    line, col = line_col(text, "9" * 5000)
    with pytest.raises(TileError) as info:
        parse(text, "k.tile")
    d = info.value.first
    assert (d.loc.line, d.loc.col, d.message) == (
        line,
        col,
        "number 999999999999… has 5000 digits, more than any value here takes",
    )


def test_a_block_of_thirty_digits_is_located_in_viz_too(tmp_path, capsys):
    path = write(tmp_path, HGEMM.replace("128 x 128 x 64", "128 x 128 x " + "1" + "0" * 30))
    r = cli(["viz", path, "-o", tmp_path / "pictures"], capsys)
    assert r.code == 1
    assert "number 100000000000… has 31 digits" in r.err
    assert not (tmp_path / "pictures").exists()


# ---------------------------------------------------------------- 14-16. reports


@pytest.mark.parametrize("separator", ["\u2028", "\x0c", "\x1c", "\x0b", "\x85"])
def test_a_comment_with_a_line_separator_quotes_the_right_line(tmp_path, capsys, separator):
    text = HGEMM.replace("# operand declarations", f"# operand{separator} declarations")
    text = text.replace("B: f16", "B: f64")
    r = cli(["check", write(tmp_path, text)], capsys)
    assert r.err.splitlines()[1] == "        B: f64[K, N] row"


def test_an_emitter_error_after_stop_after_quotes_its_line(capsys):
    r = cli(
        ["compile", ROOT / "examples/tuned/wgmma_f32acc.tile", "--stop-after", "smem-tiling"],
        capsys,
    )
    assert r.code == 1
    lines = r.err.splitlines()
    assert lines[0].endswith(
        "error: wgmma reads A and B from 128-byte-swizzled shared memory only; this IR stops "
        "before smem-tiling, multi-buffering or padding have made it"
    )
    assert lines[1].strip().startswith("mma") and lines[2].strip().startswith("^")


def test_inputs_that_are_not_regular_files(tmp_path, capsys):
    r = cli(["check", tmp_path], capsys)
    assert (
        r.code == 2
        and r.err == f"tiledsl check: error: {tmp_path} is a directory, not a .tile file\n"
    )
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"cat > {fifo}"], stdin=subprocess.PIPE)
    writer.stdin.write(HGEMM.encode())
    writer.stdin.close()
    r = cli(["check", fifo], capsys)
    writer.wait()
    assert r.code == 0 and "kernel hgemm" in r.out


def test_a_file_of_only_comments_has_no_kernel(tmp_path, capsys):
    r = cli(["check", write(tmp_path, "# a schedule, one day\n")], capsys)
    assert r.code == 1
    assert r.err.splitlines()[0].endswith(
        ":1:1: error: the file has no kernel: it holds only comments and whitespace"
    )


# ---------------------------------------------------------------- 17. stored state


@pytest.mark.parametrize("sidecar", ["[]", "null", "5", '"x"', "\xff"])
def test_a_cache_sidecar_that_is_not_an_object_is_a_miss(tmp_path, sidecar):
    from tiledsl.gpu import cache

    fields = {"format": 1, "source_sha256": "x"}
    key = cache.digest(fields)
    (tmp_path / f"{key}.cubin").write_bytes(b"old")
    (tmp_path / f"{key}.json").write_text(sidecar, encoding="latin-1")
    entry = cache.fetch(fields, lambda: b"new", directory=tmp_path)
    assert not entry.hit and entry.path.read_bytes() == b"new"


GOOD = {
    "schedule": "kernel k {}",
    "size": [64, 64, 64],
    "device": "gpu",
    "compiler": "nvrtc",
    "status": "ok",
    "time_ms": 0.5,
    "cublas_ms": 0.4,
    "detail": "",
}


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b"\xff\xfe{}", "it is not UTF-8 text"),
        (b'{"schedule": ', "it is not JSON (Expecting value)"),
        (json.dumps({**GOOD, "size": 4096}).encode(), "'size' is not a list of three positive"),
        (json.dumps({**GOOD, "schedule": ["k"]}).encode(), "'schedule' is not a string"),
        (json.dumps({**GOOD, "time_ms": "0.5"}).encode(), "'time_ms' is '0.5', not a positive"),
        (json.dumps({**GOOD, "cublas_ms": "x"}).encode(), "'cublas_ms' is 'x', not a positive"),
        (json.dumps({**GOOD, "time_ms": -1.0}).encode(), "'time_ms' is -1.0, not a positive"),
        (json.dumps({**GOOD, "status": "fast"}).encode(), "'status' is 'fast', not one of"),
        (b"[1, 2]", "it is not a JSON object"),
    ],
)
def test_a_bad_record_line_is_skipped_with_its_line_named(tmp_path, line, why):
    from tiledsl.tune.record import read_record, reusable

    path = tmp_path / "tune.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + line + b"\n")
    warnings: list[str] = []
    entries = read_record(path, warn=warnings.append)
    assert entries == [GOOD]
    assert len(warnings) == 1 and warnings[0].startswith(f"{path}:2: skipped a record line: {why}")
    assert reusable(entries, (64, 64, 64), "gpu", "nvrtc")["kernel k {}"].time_ms == 0.5


# ---------------------------------------------------------------- the arithmetic matches the IR


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_analysis_counts_shared_memory_as_the_passes_build_it(path):
    """Exact where the pad is known, a floor under `pad auto` (whose pad comes later)."""
    from tiledsl.driver import compile_source
    from tiledsl.frontend.analysis import shared_memory_bytes

    for kernel in compile_source(path.read_text(), str(path)).kernels:
        s, g = kernel.schedule, kernel.gemm
        for built, staged in ((kernel, s.epilogue_via == "shared"), (kernel.edge, True)):
            if built is None:
                continue
            counted = shared_memory_bytes(built.schedule, g, staged)
            if s.pad == "auto" and s.stages >= 1:
                assert counted <= built.smem_bytes, built.name
            else:
                assert counted == built.smem_bytes, built.name
            if s.pad == "auto" and s.stages >= 1:
                padded = replace(s, pad="explicit", pad_a=_pad(built, g.a), pad_b=_pad(built, g.b))
                assert shared_memory_bytes(padded, g, staged) == built.smem_bytes, built.name


def _pad(kernel, op) -> int:
    buf = kernel.buffer(op.name + "s")
    return buf.pitch - buf.line_length


def test_musa_refuses_bf16_outputs():
    """Found by the fuzz test: a bf16 C on MUSA included cuda_bf16.h and did not build."""
    text = (ROOT / "examples" / "s4000_table1.tile").read_text()
    text = text.replace("C: f16[M, N] col", "C: bf16[M, N] col")
    assert (
        "C: bf16 on musa mp_22 is not built yet: it needs MUSA's bfloat16 type and "
        "conversions, which the S4000 write-up does not document"
    ) in [m for _, _, m in errors(text)]


@pytest.mark.parametrize("name", ["wgmma", "wgmma_n256", "mma_kernel", "ldmatrix_free"])
def test_kernels_may_be_named_like_an_instruction(name):
    """Only the helpers' own names are taken: a kernel `wgmma` (and its `wgmma_edge`) is fine."""
    from tiledsl.driver import compile_source

    compile_source(HGEMM.replace("kernel hgemm", f"kernel {name}"), "k.tile")


@pytest.mark.parametrize(
    "example", ["tuned/wgmma_f32acc.tile", "hopper/epilogue.tile", "hopper/pingpong.tile"]
)
def test_size_parameters_may_have_any_name(example, tmp_path, capsys):
    """`K` renamed `k_edge` (found by the fuzz test, seed 23: `check --sweep` traced the K
    loop with a `K` the kernel does not have): every command that evaluates sizes uses the
    names the file gives them — the hazard analysis and the handoff proof, the pictures,
    `check --size` and `run` at whole and at partial tiles."""
    import re

    text = re.sub(r"\bK\b", "k_edge", (ROOT / "examples" / example).read_text())
    path = tmp_path / "renamed.tile"
    path.write_text(text)
    assert cli(["check", path, "--sweep"], capsys).code == 0
    assert cli(["check", path, "--size", "200x328x104"], capsys).code == 0
    r = cli(["run", path, "--cpu", "--size", "200x328x104"], capsys)  # a partial tile
    assert r.code == 0 and "PASS" in r.out, r.out + r.err
    if "pingpong" in example:  # the pictures trace the roles too
        assert cli(["viz", path, "-o", tmp_path / "pictures"], capsys).code == 0


def test_two_dimensions_of_one_size_name_are_refused():
    """N named M (found by the fuzz test, seed 47: the kernel got two arguments `int M`,
    which nvcc refused, and unequal sizes indexed past the arrays)."""
    text = (
        HGEMM.replace("B: f16[K, N]", "B: f16[K, M]")
        .replace("C: f32[M, N]", "C: f32[M, M]")
        .replace("C: f16[M, N]", "C: f16[M, M]")
    )
    assert "[K, M]" in text
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "] = A[" in t or "] += A[" in t)
    found = errors(text)
    assert (
        line,
        5,
        "the product's M and N are both the size 'M': each of M, N and K needs a name of its "
        "own (or a literal size)",
    ) in found, found
