"""MUSA output: the S4000 write-up's schedule, checked by the interpreter (128-thread warps)
and type-checked by a real C++ front end against a declaration-only MUSA header
(tests/musa_api/). It is not run: there is no MUSA hardware here."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import EXAMPLES

from tiledsl.commands.run import default_cpu_size, run_cpu
from tiledsl.driver import compile_file, compile_source
from tiledsl.errors import TileError

ROOT = Path(__file__).resolve().parent.parent
S4000 = ROOT / "examples" / "s4000.tile"
CLANG = shutil.which("clang++")


def test_s4000_is_exact_with_128_thread_warps():
    kernel = compile_file(S4000).kernels[0]
    assert kernel.target.warp_width == 128 and kernel.threads == 1024
    assert kernel.warps == (2, 4)
    report = run_cpu(kernel, default_cpu_size(kernel), seed=4)
    assert report.ok, report.render()


def test_s4000_source_has_the_seeds_form(golden):
    source = compile_file(S4000).source
    golden("s4000.mu", source)
    for piece in (
        "#include <musa_runtime.h>",
        "#include <musa_fp16.h>",
        "#define __MUSA_INCLUDE_COMPILER_INTERNAL_HEADERS__",
        "#include <crt/mma.h>",
        "namespace wmma = mtmusa::wmma;",
        "__attribute__((mtgpu_tiny_offset))",
        "__launch_bounds__(s4000_schedule::THREADS, 1)",
        "__restrict__",
        'extern "C" void s4000_launch(',
        "musaDeviceSynchronize();",
        "wmma::col_major",
        "wmma::mem_col_major",
    ):
        assert piece in source, piece
    assert "__syncwarp" not in source.replace("no __syncwarp", "")


MUSA_EXAMPLES = [p for p in EXAMPLES if "musa" in p.read_text()]


def test_musa_examples_are_found():
    assert S4000 in MUSA_EXAMPLES and len(MUSA_EXAMPLES) >= 2


@pytest.mark.skipif(CLANG is None, reason="clang++ is not installed (Debian package clang)")
@pytest.mark.parametrize("example", MUSA_EXAMPLES, ids=lambda p: p.name)
def test_musa_examples_type_check_against_the_musa_api(tmp_path, example):
    path = tmp_path / (example.stem + ".mu")
    path.write_text(compile_file(example).source)
    cmd = [
        CLANG,
        "-x",
        "cuda",
        "--cuda-host-only",
        "-nocudainc",
        "-nocudalib",
        "-fsyntax-only",
        "-std=c++17",
        "-Wno-unknown-attributes",
        "-Wno-unknown-cuda-version",
        "-I",
        str(ROOT / "tests" / "musa_api"),
        str(path),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    broken = path.read_text().replace("wmma::mma_sync(", "wmma::mma_sink(")
    path.write_text(broken)
    assert subprocess.run(cmd, capture_output=True, text=True).returncode != 0


def test_musa_refuses_what_it_lacks():
    text = (
        S4000.read_text()
        .replace("stages     1", "stages     2")
        .replace("copy       sync 8", "copy       async 16")
    )
    with pytest.raises(TileError) as info:
        compile_source(text, "s.tile")
    assert [d.message for d in info.value.diagnostics] == [
        # both stages of the S4000's tile: over MP_22's shared memory, reported beside the copy
        "this schedule needs 141312 bytes of shared memory per block; musa mp_22 allows 73728",
        "musa mp_22 has no asynchronous global -> shared copy (cp.async)",
    ]
    cuda = (
        (ROOT / "examples" / "hgemm.tile")
        .read_text()
        .replace(
            "    target  cuda sm_90\n", "    target  cuda sm_90\n    attributes mtgpu_tiny_offset\n"
        )
    )
    with pytest.raises(TileError, match="cuda sm_90 takes no kernel attributes"):
        compile_source(cuda, "h.tile")


def test_mp22_register_limit_is_a_located_error():
    """MP_22 gives a thread 256 registers only up to 512 threads per block, 128 at 1024."""
    text = (
        S4000.read_text()
        .replace("256 x 256 x 64", "512 x 256 x 64")
        .replace("coarsen    4 x 2", "coarsen    4 x 4")
    )
    with pytest.raises(TileError) as info:
        compile_source(text, "s.tile")
    d = info.value.first
    assert (d.loc.line, d.loc.col) == (15, 5)  # the coarsen directive
    # 16 f32 accumulators of 32 x 32 (16384 words), one A of 32 x 16 and 4 B of 16 x 32 in
    # f16 (256 + 1024 words), over 128 lanes: 138 (the seed's per-element count says 148)
    assert (16384 + 256 + 1024) // 128 == 138
    assert d.message == (
        "4 x 4 fragments per warp need at least 138 registers per thread for "
        "fragments alone; musa mp_22 allows 128 at 1024 threads per block"
    )


def test_mp31_is_refused_as_unmodelled():
    text = S4000.read_text().replace("target     musa mp_22", "target     musa mp_31")
    with pytest.raises(TileError) as info:
        compile_source(text, "s.tile")
    messages = [d.message for d in info.value.diagnostics]
    assert any(m.startswith("target musa mp_31 is not modelled") for m in messages), messages
