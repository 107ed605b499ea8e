"""Malformed `.tile` text: one located diagnostic, in words, with a fix; never a traceback."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiledsl.errors import Diagnostic, TileError
from tiledsl.frontend.parser import parse

DIRECTIVE_LIST = (
    "the directives are: block, mma, coarsen, stages, fragment_buffers, warps_k, "
    "blocks_per_sm, copy, warp_specialize, split_k, persistent, cluster, swap_operands, "
    "pad, swizzle, sync, load_order, accumulate, epilogue, epilogue_via, target, attributes"
)
BLOCK_NOTE = "a block tile is written BM x BN x BK, e.g. 128 x 128 x 32"


def kernel(*lines: str) -> str:
    """A kernel whose body is `lines`, one per line from line 2 on."""
    return "kernel k {\n" + "".join(f"    {line}\n" for line in lines) + "}\n"


def diagnose(src: str, line: int, col: int, message: str) -> Diagnostic:
    """Parse `src`, which must fail with one error at (line, col) saying `message`."""
    with pytest.raises(TileError) as info:
        parse(src, "bad.tile")
    err = info.value
    assert len(err.diagnostics) == 1
    d = err.first
    assert (d.loc.line, d.loc.col, d.message) == (line, col, message)
    rendered = str(err).splitlines()
    assert rendered[0] == f"bad.tile:{line}:{col}: error: {message}"
    assert rendered[1] == "    " + src.split("\n")[line - 1]
    assert rendered[2].index("^") == 4 + col - 1
    return d


def test_unknown_directive() -> None:
    d = diagnose(kernel("blok 128 x 128 x 32"), 2, 5, "unknown directive 'blok'")
    assert d.notes == ("did you mean 'block'?", DIRECTIVE_LIST)
    assert (d.loc.end_line, d.loc.end_col) == (2, 9)


def test_unknown_directive_caret_spans_the_word() -> None:
    with pytest.raises(TileError) as info:
        parse(kernel("swizle grouped 8"), "bad.tile")
    assert "\n        ^~~~~~\n" in str(info.value)
    assert info.value.first.notes[0] == "did you mean 'swizzle'?"


@pytest.mark.parametrize(
    ("line", "word"),
    [("sycn minimal", "sycn"), ("blocks 64 x 64 x 32", "blocks"), ("frobnicate", "frobnicate")],
)
def test_unknown_directive_whatever_follows(line: str, word: str) -> None:
    diagnose(kernel(line), 2, 5, f"unknown directive '{word}'")


def test_unknown_directive_without_a_close_match_lists_the_directives() -> None:
    d = diagnose(kernel("frobnicate"), 2, 5, "unknown directive 'frobnicate'")
    assert d.notes == (DIRECTIVE_LIST,)


def test_missing_x_in_a_shape() -> None:
    d = diagnose(kernel("block 128 128 x 32"), 2, 15, "expected 'x' after '128', found '128'")
    assert d.notes == (BLOCK_NOTE,)


def test_missing_x_in_mma_and_coarsen() -> None:
    d = diagnose(kernel("mma 16 x 16 16"), 2, 17, "expected 'x' after '16', found '16'")
    assert d.notes == (
        "a fragment shape is written M x N x K (WMMA), e.g. mma 16 x 16 x 16, "
        "or as a PTX instruction shape, mma m16n8k16",
    )
    d = diagnose(kernel("coarsen 4, 2"), 2, 14, "expected 'x' after '4', found ','")
    assert d.notes == ("warp coarsening is written CM x CN, e.g. coarsen 4 x 2",)


def test_shape_cut_short_at_end_of_line() -> None:
    src = kernel("block   128 x 128 x", "stages 2")
    d = diagnose(src, 2, 24, "expected a number after 'x', found end of line")
    assert d.notes == (BLOCK_NOTE,)


def test_shape_cut_short_before_a_comment_and_blank_lines() -> None:
    src = kernel("block 128x128x  # the K step is missing", "", "# more", "stages 2")
    diagnose(src, 2, 19, "expected a number after 'x', found end of line")


def test_shape_cut_short_at_end_of_file() -> None:
    diagnose(
        "kernel k {\n    block 128 x\n", 2, 16, "expected a number after 'x', found end of file"
    )


def test_bad_number() -> None:
    d = diagnose(kernel("block 12a x 128 x 32"), 2, 11, "bad number '12a'")
    assert (d.loc.end_line, d.loc.end_col) == (2, 14)
    assert d.notes[1] == BLOCK_NOTE


@pytest.mark.parametrize(
    ("line", "col", "text"),
    [
        ("block 128x12a x 32", 15, "12a"),
        ("stages 1.2.3", 12, "1.2.3"),
        ("stages -4b", 12, "-4b"),
        ("copy async 1e", 16, "1e"),
    ],
)
def test_bad_numbers(line: str, col: int, text: str) -> None:
    diagnose(kernel(line), 2, col, f"bad number '{text}'")


def test_unclosed_tuning_set() -> None:
    d = diagnose(
        kernel("block {64, 128 x 128 x 32"),
        2,
        20,
        "unclosed '{' of a tuning set: expected ',' or '}' after '128', found 'x'",
    )
    assert d.notes == (
        "the tuning set opened at line 2, column 11 is written {64, 128}",
        BLOCK_NOTE,
    )


def test_unclosed_tuning_set_at_end_of_line() -> None:
    diagnose(
        kernel("stages {1, 2", "copy async 16"),
        2,
        17,
        "unclosed '{' of a tuning set: expected ',' or '}' after '2', found end of line",
    )


def test_unclosed_kernel() -> None:
    src = "kernel hgemm {\n    block 128 x 128 x 32\n    stages 2  # last line\n"
    d = diagnose(src, 3, 13, "unclosed '{' of kernel 'hgemm': expected '}', found end of file")
    opened = "kernel 'hgemm' is opened by the '{' at line 1, column 14; "
    assert d.notes == (opened + "close it with '}' after its last item",)


def test_unclosed_kernel_before_the_next_kernel() -> None:
    src = "kernel a {\n    stages {1, 2}\nkernel b {\n}\n"
    diagnose(src, 3, 1, "unclosed '{' of kernel 'a': expected '}', found 'kernel'")


def test_unexpected_character() -> None:
    d = diagnose(kernel("block 128 x 128 x 32;"), 2, 25, "unexpected character ';'")
    assert d.notes[0] == "expected a directive, an operand, the computation or '}' here"


def test_unexpected_character_where_a_number_goes() -> None:
    d = diagnose(kernel("stages $2"), 2, 12, "unexpected character '$'")
    assert d.notes == ("expected a number here", "stages takes one number, e.g. stages 2")


@pytest.mark.parametrize(
    ("line", "col", "message"),
    [
        ("sync minimalist", 10, "expected 'all' or 'minimal' after 'sync', found 'minimalist'"),
        ("copy fast 16", 10, "expected 'async', 'sync' or 'tma' after 'copy', found 'fast'"),
        (
            "load_order abc",
            16,
            "expected 'ab', 'alternate' or 'ba' after 'load_order', found 'abc'",
        ),
        ("swizzle grouped", 20, "expected a number after 'grouped', found end of line"),
        (
            "epilogue_via fast",
            18,
            "expected 'direct', 'shared' or 'tma' after 'epilogue_via', found 'fast'",
        ),
        (
            "epilogue gamma 2",
            14,
            "expected 'alpha', 'beta', 'bias' or 'relu' after 'epilogue', found 'gamma'",
        ),
        ("pad A", 10, "expected a number after 'A', found end of line"),
        ("target cuda", 16, "expected a name after 'cuda', found end of line"),
        ("attributes b(1.5)", 18, "expected an integer after '(', found '1.5'"),
        (
            "stages 2 3",
            14,
            "expected a directive, an operand, the computation or '}' after '2', found '3'",
        ),
        ("A: f16[M, K]", 17, "expected a name after ']', found end of line"),
        ("A: f16[M; K] row", 13, "unexpected character ';'"),
        ("A f16[M, K] row", 6, "expected ':' after operand name 'A', found 'f16'"),
        ("C[m, n] += A[m, k] B[k, n]", 24, "expected '*' after ']', found 'B'"),
        ("C[m, n] -= A[m, k] * B[k, n]", 13, "unexpected character '-'"),
    ],
)
def test_other_directive_and_item_errors(line: str, col: int, message: str) -> None:
    diagnose(kernel(line), 2, col, message)


def test_layout_missing_before_a_directive_is_not_taken_as_a_name() -> None:
    src = kernel("A: f16[M, K]", "block 128 x 128 x 32")
    d = diagnose(src, 2, 17, "expected a name after ']', found end of line")
    assert d.notes == (
        "an operand is declared NAME: DTYPE[DIM, ...] LAYOUT, e.g. A: f16[M, K] row",
    )


def test_file_level_errors() -> None:
    diagnose(
        "# no kernel here\n", 1, 1, "the file has no kernel: it holds only comments and whitespace"
    )
    diagnose("", 1, 1, "the file has no kernel: it holds nothing")
    diagnose("block 128 x 128 x 32\n", 1, 1, "expected 'kernel', found 'block'")
    diagnose("kernel k {\n}\n}\n", 3, 1, "expected 'kernel' or end of file after '}', found '}'")
    diagnose("kernel {\n}\n", 1, 8, "expected a name after 'kernel', found '{'")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "kernel",
                "k",
                "{",
                "}",
                "block",
                "128",
                "x",
                "12a",
                "{64,",
                "pad",
                "A",
                ":",
                "f16",
                "[",
                "]",
                ",",
                "stages",
                "-1",
                "1.5",
                "\n",
                " ",
                "#c\n",
                "@",
                "(",
                ")",
                "+=",
                "*",
                "sync",
                "all",
                "relu",
                "epilogue",
                "attributes",
            ]
        ),
        max_size=30,
    ).map("".join)
)
def test_any_text_parses_or_raises_a_located_tile_error(src: str) -> None:
    try:
        parse(src, "fuzz.tile")
    except TileError as err:
        assert len(err.diagnostics) == 1
        assert err.first.loc.line >= 1 and err.first.loc.col >= 1
        assert str(err).startswith("fuzz.tile:")
