"""The parser builds the AST the spec describes, and the formatter round-trips it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiledsl.errors import NOWHERE
from tiledsl.frontend.formatter import format_directive, format_program
from tiledsl.frontend.parser import parse
from tiledsl.frontend.syntax import (
    DIRECTIVES,
    Access,
    Call,
    Computation,
    Directive,
    Num,
    Operand,
    TuningSet,
    Word,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# The whole file of the language reference (tile-language.md, "A whole file").
SPEC_EXAMPLE = """\
# hgemm.tile — one kernel: C = A @ B, fp16 inputs, fp32 accumulation
kernel hgemm {
    A: f16[M, K] row          # operand declarations: dtype[dims] layout
    B: f16[K, N] row
    C: f32[M, N] row
    C[m, n] += A[m, k] * B[k, n]

    block   128 x 128 x 32    # BM x BN x BK: the thread block's tile
    mma     16 x 16 x 16      # the fragment shape of one tensor-core op
    coarsen 4 x 2             # fragments per warp along M and N (warp coarsening)
    stages  2                 # shared-memory buffers along K (see below)
    pad     A 8, B 8          # elements added to each shared-memory row
    swizzle grouped 8         # block rasterization
    sync    minimal           # barrier elimination
    target  cuda sm_90
}
"""


def n(text: str) -> Num:
    return Num(float(text) if "." in text else int(text), text, NOWHERE)


def w(text: str) -> Word:
    return Word(text, NOWHERE)


def s(*texts: str) -> TuningSet:
    return TuningSet(tuple(n(t) for t in texts), NOWHERE)


def directive(line: str) -> Directive:
    """The one directive of a kernel holding only `line`."""
    (d,) = parse(f"kernel k {{\n    {line}\n}}\n").kernel().directives
    return d


@pytest.mark.parametrize(
    ("line", "groups"),
    [
        ("block 128 x 64 x 32", ((n("128"), n("64"), n("32")),)),
        ("block 128x128x32", ((n("128"), n("128"), n("32")),)),
        ("block 128x 64 x32", ((n("128"), n("64"), n("32")),)),
        ("mma 16 x 16 x 16", ((n("16"), n("16"), n("16")),)),
        ("coarsen 4 x 2", ((n("4"), n("2")),)),
        ("coarsen 4x2", ((n("4"), n("2")),)),
        ("stages 2", ((n("2"),),)),
        ("stages -1", ((n("-1"),),)),
        ("copy async 16", ((w("async"), n("16")),)),
        ("copy sync 8", ((w("sync"), n("8")),)),
        ("pad auto", ((w("auto"),),)),
        ("pad none", ((w("none"),),)),
        ("pad A 8, B 8", ((w("A"), n("8")), (w("B"), n("8")))),
        ("pad A 4", ((w("A"), n("4")),)),
        ("swizzle none", ((w("none"),),)),
        ("swizzle grouped 8", ((w("grouped"), n("8")),)),
        ("swizzle zigzag 4", ((w("zigzag"), n("4")),)),
        ("sync all", ((w("all"),),)),
        ("sync minimal", ((w("minimal"),),)),
        ("load_order ab", ((w("ab"),),)),
        ("load_order ba", ((w("ba"),),)),
        ("load_order alternate", ((w("alternate"),),)),
        ("accumulate f16", ((w("f16"),),)),
        ("epilogue alpha 1.5, relu", ((w("alpha"), n("1.5")), (w("relu"),))),
        ("epilogue beta 0.5, bias D", ((w("beta"), n("0.5")), (w("bias"), w("D")))),
        ("epilogue_via direct", ((w("direct"),),)),
        ("epilogue_via shared", ((w("shared"),),)),
        ("target cuda sm_90", ((w("cuda"), w("sm_90")),)),
        ("target musa mp_22", ((w("musa"), w("mp_22")),)),
        ("attributes mtgpu_tiny_offset", ((w("mtgpu_tiny_offset"),),)),
        (
            "attributes a, b(256)",
            ((w("a"),), (Call(w("b"), n("256"), NOWHERE),)),
        ),
    ],
)
def test_directive_forms(line: str, groups: tuple) -> None:
    d = directive(line)
    assert d.name == line.split()[0]
    assert d.groups == groups


def test_tuning_sets_anywhere_a_number_goes() -> None:
    d = directive("block {64, 128} x 128 x {32,64}")
    assert d.groups == ((s("64", "128"), n("128"), s("32", "64")),)
    assert directive("block {64,128}x128x{32}").groups == ((s("64", "128"), n("128"), s("32")),)
    assert directive("stages {1, 2, 3}").groups == ((s("1", "2", "3"),),)
    assert directive("epilogue alpha {1.0, -2}").groups == ((w("alpha"), s("1.0", "-2")),)


def test_mma_takes_a_tuning_set_of_instruction_shapes() -> None:
    d = directive("mma {m64n64k16, m64n128k16}")
    (options,) = d.groups[0]
    assert options == TuningSet((w("m64n64k16"), w("m64n128k16")), NOWHERE)
    assert str(options) == "{m64n64k16, m64n128k16}"
    assert options.loc.col == 10  # at the first shape, where `tune` points a pruned choice


def test_persistent_takes_tiles_or_stream_k_or_a_set_of_both() -> None:
    # `tiles` is the default spelled out: the same directive as `persistent`, one text
    assert directive("persistent tiles") == directive("persistent")
    assert directive("persistent").groups == ((),)
    (options,) = directive("persistent {tiles, stream_k}").groups[0]
    assert options == TuningSet((w("tiles"), w("stream_k")), NOWHERE)
    assert format_directive(directive("persistent tiles")) == "persistent"
    assert format_directive(directive("persistent stream_k")) == "persistent stream_k"
    # and `tiles` stays a name everywhere else
    assert parse("kernel tiles {\n    tiles: f16[M, K] row\n}\n").kernel().name == "tiles"


def test_numbers_keep_their_text_and_kind() -> None:
    (a, b, c) = directive("block +8 x 1.50 x -0").groups[0]
    assert (a.value, a.text) == (8, "+8") and isinstance(a.value, int)
    assert (b.value, b.text) == (1.5, "1.50") and isinstance(b.value, float)
    assert (c.value, c.text) == (0, "-0")


def test_spec_example() -> None:
    program = parse(SPEC_EXAMPLE, "hgemm.tile")
    k = program.kernel("hgemm")
    assert program.file == "hgemm.tile" and program.source == SPEC_EXAMPLE
    assert k.operands[0] == Operand("A", w("f16"), (w("M"), w("K")), w("row"), NOWHERE)
    assert k.computations == (
        Computation(
            Access("C", (w("m"), w("n")), NOWHERE),
            "+=",
            Access("A", (w("m"), w("k")), NOWHERE),
            Access("B", (w("k"), w("n")), NOWHERE),
            NOWHERE,
        ),
    )
    names = [d.name for d in k.directives]
    assert names == ["block", "mma", "coarsen", "stages", "pad", "swizzle", "sync", "target"]
    assert k.directive("pad").args == (w("A"), n("8"), w("B"), n("8"))


def test_locations() -> None:
    k = parse(SPEC_EXAMPLE, "hgemm.tile").kernel()
    # A kernel is located at its name (errors about the kernel as a whole point there).
    assert (k.loc.file, k.loc.line, k.loc.col, k.loc.end_col) == ("hgemm.tile", 2, 8, 13)
    block = k.directive("block")
    assert (block.loc.line, block.loc.col, block.loc.end_col) == (8, 5, 27)
    bk = block.groups[0][2]
    assert (bk.loc.line, bk.loc.col, bk.loc.end_col) == (8, 25, 27)
    a = k.operands[0]
    assert (a.loc.line, a.loc.col, a.dims[1].loc.col, a.layout.loc.col) == (3, 5, 15, 18)
    assert k.computations[0].rhs.loc.col == 26


def test_equal_operator_and_integer_dims() -> None:
    k = parse("kernel k { A: f16[128, K] col  C[m, n] = A[m, k] * B[n, k] }").kernel()
    assert k.operands[0].dims == (n("128"), w("K"))
    assert k.operands[0].layout == w("col")
    assert k.computations[0].op == "="
    assert k.computations[0].rhs.indices == (w("n"), w("k"))


def test_names_that_look_like_keywords_or_x() -> None:
    src = """kernel k {
        x: f16[M, K] row  xa: f16[K, N] row  x1: f32[M, N] row
        blocks: f16[M] row  nonex: f32[N] row
        stages 1 x9: f16[M] row
        x1[m, n] = x[m, k] * xa[k, n]
    }"""
    k = parse(src).kernel()
    assert [o.name for o in k.operands] == ["x", "xa", "x1", "blocks", "nonex", "x9"]
    assert k.computations[0].out.name == "x1"


def test_several_kernels_and_comments() -> None:
    src = """# two kernels
    kernel first {  # the first
        block 64 x 64 x 32  # a comment right after a number
        # a whole-line comment
    }
    kernel second{stages 3}#no space
    """
    program = parse(src)
    assert [k.name for k in program.kernels] == ["first", "second"]
    assert program.kernel("second").directive("stages").groups == ((n("3"),),)
    assert program.kernel().name == "first"


def test_directives_are_kept_in_canonical_order() -> None:
    k = parse("kernel k { target cuda sm_80 stages 1 block 64x64x32 stages 2 }").kernel()
    assert [d.name for d in k.directives] == ["block", "stages", "stages", "target"]
    assert [d.args for d in k.directives if d.name == "stages"] == [(n("1"),), (n("2"),)]


def test_format_is_canonical() -> None:
    src = "kernel k{stages 2 C[m,n]+=A[m,k]*B[k,n] block 128x128x{32,64} A:f16[M,K]row}"
    assert format_program(parse(src)) == (
        "kernel k {\n"
        "    A: f16[M, K] row\n"
        "    C[m, n] += A[m, k] * B[k, n]\n"
        "    block 128 x 128 x {32, 64}\n"
        "    stages 2\n"
        "}\n"
    )


ROUND_TRIP_SOURCES = [
    SPEC_EXAMPLE,
    "kernel a { block 64x64x32 } kernel b { block 128 x 128 x 32 stages 3 }",
    """kernel all_of_it {
        D: f32[N] row
        C[m, n] = A[m, k] * B[n, k]
        copy sync 8  pad none  swizzle zigzag {2, 4}  sync all  load_order alternate
        accumulate f16  epilogue alpha 1.5, beta -0.5, relu, bias D  epilogue_via shared
        target musa mp_31  attributes mtgpu_tiny_offset, mtgpu_num_usreg(256)
        mma {16, 32} x 8 x 16  coarsen 1x{1, 2}
    }""",
]


@pytest.mark.parametrize("src", ROUND_TRIP_SOURCES)
def test_round_trip(src: str) -> None:
    program = parse(src)
    text = format_program(program)
    assert parse(text) == program
    assert format_program(parse(text)) == text


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.tile")), ids=lambda p: p.name)
def test_examples_round_trip(path: Path) -> None:
    program = parse(path.read_text(encoding="utf-8"), str(path))
    assert parse(format_program(program)) == program


# --- property: any valid combination of directives round-trips ----------------

NAMES = st.sampled_from(["A", "B", "C", "D", "M", "N", "K", "f16", "row", "x2", "xa", "_t"])
NUMBERS = st.one_of(
    st.integers(-8, 4096).map(str),
    st.tuples(st.integers(0, 99), st.integers(0, 99)).map(lambda t: f"{t[0]}.{t[1]}"),
)
VALUES = st.one_of(
    NUMBERS,
    st.lists(NUMBERS, min_size=1, max_size=3).map(lambda xs: "{" + ", ".join(xs) + "}"),
)
X = st.sampled_from([" x ", "x", " x", "x ", "  x\t"])


def shape(count: int) -> st.SearchStrategy[str]:
    parts = [VALUES] + [st.tuples(X, VALUES).map("".join) for _ in range(count - 1)]
    return st.tuples(*parts).map("".join)


def commas(item: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.lists(item, min_size=1, max_size=3).map(", ".join)


def words(*options: str) -> st.SearchStrategy[str]:
    return st.sampled_from(options)


def spaced(*parts: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.tuples(*parts).map(" ".join)


DIRECTIVE_ARGS = {
    "block": shape(3),
    "mma": st.one_of(shape(3), words("m16n8k16", "m16n8k8")),
    "coarsen": shape(2),
    "stages": VALUES,
    "fragment_buffers": VALUES,
    "warps_k": st.one_of(VALUES, spaced(VALUES, words("runs"), VALUES)),
    "blocks_per_sm": VALUES,
    "copy": st.one_of(spaced(words("async", "sync"), VALUES), words("tma")),
    "warp_specialize": st.just(""),
    "persistent": st.just(""),
    "split_k": VALUES,
    "cluster": shape(2),
    "swap_operands": st.just(""),
    "pad": st.one_of(words("auto", "none", "xor"), commas(spaced(NAMES, VALUES))),
    "swizzle": st.one_of(words("none"), spaced(words("grouped", "zigzag"), VALUES)),
    "sync": words("all", "minimal"),
    "load_order": words("ab", "ba", "alternate"),
    "accumulate": NAMES,
    "epilogue": commas(
        st.one_of(
            spaced(words("alpha", "beta"), VALUES), words("relu"), spaced(words("bias"), NAMES)
        )
    ),
    "epilogue_via": words("direct", "shared"),
    "target": spaced(NAMES, NAMES),
    "attributes": commas(
        st.one_of(NAMES, st.tuples(NAMES, st.integers(0, 999)).map(lambda t: f"{t[0]}({t[1]})"))
    ),
}
OPERAND = st.tuples(
    NAMES,
    NAMES,
    st.lists(st.one_of(NAMES, st.integers(1, 512).map(str)), min_size=1, max_size=3),
    NAMES,
).map(lambda t: f"{t[0]}: {t[1]}[{', '.join(t[2])}] {t[3]}")
ACCESS = st.tuples(NAMES, st.lists(NAMES, min_size=1, max_size=2)).map(
    lambda t: f"{t[0]}[{', '.join(t[1])}]"
)
COMPUTATION = st.tuples(ACCESS, words("=", "+="), ACCESS, ACCESS).map(
    lambda t: f"{t[0]} {t[1]} {t[2]} * {t[3]}"
)
SEPARATORS = st.sampled_from([" ", "\n", "\n    ", "  # a comment\n", "\t"])


@st.composite
def kernels(draw: st.DrawFn) -> str:
    names = draw(st.lists(st.sampled_from(DIRECTIVES), unique=True))
    items = [f"{name} {draw(DIRECTIVE_ARGS[name])}" for name in names]
    items += draw(st.lists(OPERAND, max_size=3)) + draw(st.lists(COMPUTATION, max_size=1))
    items = draw(st.permutations(items)) if items else []
    body = "".join(draw(SEPARATORS) + item for item in items)
    return f"kernel {draw(NAMES)} {{{body}\n}}"


@settings(max_examples=100, deadline=None)
@given(st.lists(kernels(), min_size=1, max_size=2).map("\n".join))
def test_round_trip_property(src: str) -> None:
    program = parse(src)
    text = format_program(program)
    assert parse(text) == program
    assert format_program(parse(text)) == text
