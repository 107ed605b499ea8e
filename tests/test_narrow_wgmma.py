"""Narrow wgmma N (m64n8k16 ... m64n56k16) for a K-contiguous B: the tile a few tokens
need when the operands' roles are swapped (examples/hopper/few_tokens_swapped.tile,
`swap_operands`: the tokens are the wgmma's N), and the located refusal of an N-contiguous
B, whose tile wgmma reads in 64-column panels."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import ROOT, cli, interpret_exact, line_of

from tiledsl.driver import compile_file, compile_source

SWAPPED = ROOT / "examples" / "hopper" / "few_tokens_swapped.tile"
TEXT = SWAPPED.read_text()
# the same product in the kernel's own terms (what swap_operands computes): the weights as A
OWN_TERMS = """kernel narrow {
    A: f16[M, K] row
    B: f16[K, N] col
    C: f16[M, N] col
    C[m, n] = A[m, k] * B[k, n]
    block   64 x 16 x 64
    mma     m64n16k16
    stages  20
    copy    tma
    warp_specialize
    persistent split_k 2
    target  cuda sm_90
}
"""


@pytest.mark.parametrize("size", [(16, 64, 128), (32, 192, 512), (16, 128, 1024)])
def test_the_swapped_example_is_exact_under_several_interleavings(size) -> None:
    (kernel,) = compile_file(SWAPPED).kernels
    check, stats = interpret_exact(kernel, *size, seed=sum(size), schedules=2, blocks=4)
    assert check.ok, check.detail
    assert stats.partial_sums > 0  # split_k 2: the tiles' second slices handed over


@pytest.mark.parametrize(
    "size, runs",
    [
        ("1x128x4096", "few_tokens_swapped"),  # one token: TMA's zeros, guarded C stores
        ("13x200x336", "few_tokens_swapped"),
        ("13x200x333", "few_tokens_swapped"),  # A's rows 666 bytes: staged on the GPU
        ("17x65x64", "few_tokens_swapped"),  # C's rows 130 bytes, stored one by one
    ],
)
def test_the_swapped_example_runs_every_size_itself(size, runs, capsys) -> None:
    r = cli(["run", str(SWAPPED), "--size", size], capsys)
    assert r.code == 0 and r.out.rstrip().endswith("PASS"), r.out + r.err
    assert r.out.startswith(f"{runs}: "), r.out


@pytest.mark.parametrize("n", [8, 16, 32, 48])
def test_a_k_contiguous_b_takes_any_n_the_instruction_has(n) -> None:
    text = TEXT.replace("64 x 16 x 64", f"64 x {n} x 64").replace("m64n16k16", f"m64n{n}k16")
    text = text.replace("stages  20", "stages  8")
    compiled = compile_source(text, "narrow.tile")
    source = compiled.source
    assert f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16" in source
    assert f"wgmma_m64n{n}k16_f16_f32<0, 0>(" in source  # both K-major: no transpose
    (kernel,) = compiled.kernels
    check, _ = interpret_exact(kernel, n, 64, 256, seed=n, schedules=1, blocks=2)
    assert check.ok, check.detail


def test_an_n_contiguous_b_needs_whole_panels(tmp_path: Path, capsys) -> None:
    path = tmp_path / "row.tile"
    text = OWN_TERMS.replace("B: f16[K, N] col", "B: f16[K, N] row")
    path.write_text(text)
    r = cli(["check", str(path)], capsys)
    assert r.code == 1
    line = line_of(text, "mma     m64n16k16")
    assert r.err.splitlines()[:4] == [
        f"{path}:{line}:5: error: `mma m64n16k16` with an N-contiguous B (its n index "
        "innermost): wgmma reads it in 128-byte panels of 64 columns, and N = 16 is not "
        "whole panels",
        "        mma     m64n16k16",
        "        ^~~~~~~~~~~~~~~~~",
        "note: use N a multiple of 64, or store B K-contiguous (declare it `col`), where any "
        "N the instruction has fits",
    ], r.err


def test_a_shape_the_instruction_lacks_lists_the_range(tmp_path: Path, capsys) -> None:
    path = tmp_path / "n20.tile"
    text = TEXT.replace("64 x 16 x 64", "64 x 20 x 64").replace("m64n16k16", "m64n20k16")
    path.write_text(text)
    r = cli(["check", str(path)], capsys)
    assert r.code == 1
    assert "error: cuda sm_90 has no m64n20k16 wgmma for f16 here" in r.err
    assert "note: wgmma shapes here: m64nNk16 for N = 8, 16, ..., 256" in r.err
