"""`.tile` text -> `syntax.Program`, and Lark's errors -> located `TileError`s.

    >>> parse("kernel k { block 128x128x32 }").kernel().directive("block").groups
    ((Num(value=128, text='128'), Num(value=128, text='128'), Num(value=32, text='32')),)

The grammar is `grammar/tile.lark` (LALR, contextual lexer). A syntax error
becomes exactly one diagnostic that says, in words, what was expected and what
was found, with a note on how the construct is written; see `_syntax_error`.
"""

from __future__ import annotations

import difflib
import re
from functools import cache
from pathlib import Path
from typing import cast

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError

from ..errors import Diagnostic, Loc, TileError
from ..limits import INT_MAX, MAX_DIGITS
from . import syntax
from .syntax import (
    Access,
    Call,
    Computation,
    Directive,
    Kernel,
    Num,
    Operand,
    Phrase,
    TuningSet,
    Word,
)

_GRAMMAR = Path(__file__).parent / "grammar" / "tile.lark"


@cache
def _lark() -> Lark:
    """The parser, built once: building the LALR tables is the slow part."""
    return Lark(
        _GRAMMAR.read_text(encoding="utf-8"),
        parser="lalr",
        lexer="contextual",
        propagate_positions=True,
    )


def parse(source: str, file: str = "<string>") -> syntax.Program:
    """Parse a whole `.tile` file; raise `TileError` (one diagnostic) if it is malformed.

    Directives are kept in `syntax.DIRECTIVES` order (a stable sort, so repeats
    keep their order), which is the order `format_program` writes them in: the
    parse of the formatted text then equals the parse of the original.
    """
    try:
        tree = _lark().parse(source)
    except UnexpectedInput as e:
        raise _syntax_error(e, source, file) from None
    try:
        kernels = _Builder(file).transform(tree)
    except VisitError as e:
        if isinstance(e.orig_exc, TileError):
            raise e.orig_exc.with_source(source) from None
        raise e.orig_exc from e
    return syntax.Program(kernels=kernels, file=file, source=source)


# --- tree -> AST -------------------------------------------------------------


def _token_loc(file: str, tok: Token) -> Loc:
    # Lexed tokens carry all four positions (lark types them optional for hand-made tokens).
    assert tok.line is not None and tok.column is not None
    assert tok.end_line is not None and tok.end_column is not None
    return Loc(file, tok.line, tok.column, tok.end_line, tok.end_column)


def _number(file: str, tok: Token) -> Num:
    text = str(tok)
    is_float = any(ch in text for ch in ".eE")
    digits = len(text.lstrip("+-"))
    if not is_float and digits > MAX_DIGITS:  # before int(), which stops at 4300 digits
        raise TileError(
            [
                Diagnostic(
                    _token_loc(file, tok),
                    f"number {text[:12]}… has {digits} digits, more than any value here takes",
                    (f"integers in a .tile file are at most {INT_MAX}",),
                )
            ]
        )
    value: int | float = float(text) if is_float else int(text)
    return Num(value, text, _token_loc(file, tok))


@v_args(meta=True)
class _Builder(Transformer):
    """Builds the frozen AST bottom-up; every node gets the Loc of its text."""

    def __init__(self, file: str) -> None:
        super().__init__()
        self.file = file

    def _loc(self, meta) -> Loc:
        return Loc(self.file, meta.line, meta.column, meta.end_line, meta.end_column)

    def _arg(self, child) -> syntax.Arg:
        if isinstance(child, Token):
            if child.type in ("NUMBER", "INT"):
                return _number(self.file, child)
            return Word(str(child), _token_loc(self.file, child))
        return child

    def _word(self, child) -> Word:
        """An argument the grammar makes a NAME."""
        arg = self._arg(child)
        assert isinstance(arg, Word)
        return arg

    def _dim(self, child) -> Word | Num:
        """An operand's dimension: a NAME or an INT."""
        arg = self._arg(child)
        assert isinstance(arg, (Word, Num))
        return arg

    def start(self, meta, children) -> tuple[Kernel, ...]:
        return tuple(children)

    def kernel(self, meta, children) -> Kernel:
        _keyword, name, *items = children
        operands = tuple(i for i in items if isinstance(i, Operand))
        computations = tuple(i for i in items if isinstance(i, Computation))
        directives = sorted(
            (i for i in items if isinstance(i, Directive)),
            key=lambda d: syntax.DIRECTIVES.index(d.name),
        )
        # A kernel is located at its name: errors about the kernel as a whole point there.
        return Kernel(
            str(name), operands, computations, tuple(directives), _token_loc(self.file, name)
        )

    def operand(self, meta, children) -> Operand:
        name, dtype, *dims, layout = children
        return Operand(
            str(name),
            self._word(dtype),
            tuple(self._dim(d) for d in dims),
            self._word(layout),
            self._loc(meta),
        )

    def computation(self, meta, children) -> Computation:
        out, op, lhs, rhs = children
        return Computation(out, str(op), lhs, rhs, self._loc(meta))

    def access(self, meta, children) -> Access:
        name, *indices = children
        return Access(str(name), tuple(self._word(i) for i in indices), self._loc(meta))

    def group(self, meta, children) -> tuple[syntax.Arg, ...]:
        return tuple(self._arg(c) for c in children)

    def call(self, meta, children) -> Call:
        name, arg = children
        num = self._arg(arg)
        assert isinstance(num, Num)  # the grammar's INT
        return Call(self._word(name), num, self._loc(meta))

    def num(self, meta, children) -> Num:
        return _number(self.file, children[0])

    def tuning_set(self, meta, children) -> TuningSet:
        return TuningSet(tuple(_number(self.file, c) for c in children), self._loc(meta))

    def mma_set(self, meta, children) -> Directive:
        # `mma {m64n64k16, m64n128k16}`: a tuning set of instruction shapes, so that a
        # space can pair each block tile with the wgmma that fills it
        keyword, *shapes = children
        return self._word_set("mma", keyword, shapes, meta)

    def persistent_set(self, meta, children) -> Directive:
        # `persistent {tiles, stream_k, stream_k_aligned}`: whole tiles or a split of the
        # last round's tiles, tuned per shape
        keyword, *kinds = children
        return self._word_set("persistent", keyword, kinds, meta)

    def split_phrase(self, meta, children) -> Phrase:
        word, number = children
        return Phrase((self._word(word), _number(self.file, number)), self._loc(meta))

    def _word_set(self, name: str, keyword, words, meta) -> Directive:
        options = TuningSet(
            tuple(w if isinstance(w, Phrase) else self._word(w) for w in words),
            words[0].loc if isinstance(words[0], Phrase) else _token_loc(self.file, words[0]),
        )
        return self.__default__(name, [keyword, options], meta)

    def __default__(self, data, children, meta) -> Directive:
        # Every other rule is a directive: its keyword, then either its arguments
        # (one group) or the `group` tuples of a comma-separated list.
        if data not in syntax.DIRECTIVES:
            raise AssertionError(f"grammar rule {data!r} has no builder")
        args = children[1:]
        if args and all(isinstance(a, tuple) for a in args):
            groups = tuple(args)
        else:
            groups = (tuple(self._arg(a) for a in args),)
        return Directive(str(data), groups, self._loc(meta)).canonical()


# --- errors ------------------------------------------------------------------

#: How each directive is written: the note of a syntax error inside it.
USAGE = {
    "block": "a block tile is written BM x BN x BK, e.g. 128 x 128 x 32",
    "mma": "a fragment shape is written M x N x K (WMMA), e.g. mma 16 x 16 x 16, "
    "or as a PTX instruction shape, mma m16n8k16",
    "coarsen": "warp coarsening is written CM x CN, e.g. coarsen 4 x 2",
    "stages": "stages takes one number, e.g. stages 2",
    "fragment_buffers": "fragment_buffers takes 1 or 2, e.g. fragment_buffers 2",
    "copy": "copy takes 'async' or 'sync' and a width in bytes, e.g. copy async 16, "
    "or 'tma' alone (Hopper's tensor memory accelerator)",
    "warp_specialize": "warp_specialize takes nothing, `cooperative` (the default: the consumer "
    "warpgroups share each tile) or `pingpong` (two consumer teams on alternate tiles)",
    "persistent": "persistent takes nothing or `tiles` (one block per SM, each looping over "
    "whole tiles), `stream_k` (a last round of tiles that would leave SMs idle cut along K "
    "into equal shares), `stream_k_aligned` (every last round so, each block taking its "
    "tiles last first: all of them start at K step 0) or `split_k S` (its tiles in S slices "
    "of K, e.g. `split_k 2`); a space may write `persistent {tiles, stream_k, "
    "stream_k_aligned, split_k 2}`",
    "split_k": "split_k takes one number, the slices of each tile's K steps, e.g. split_k 2 "
    "(a block per slice; the last slice to finish adds them), or a set, split_k {1, 2, 4}; "
    "then optionally `via cluster` (a tile's slices one cluster) or `via workspace`",
    "warps_k": "warps_k takes one number, the K teams of the block's warps, e.g. warps_k 8, "
    "or a set, warps_k {1, 4, 8}; then optionally `runs R`, the teams in R groups on runs "
    "of K's steps, e.g. warps_k 8 runs 2",
    "blocks_per_sm": "blocks_per_sm takes one number, the blocks each multiprocessor should "
    "hold at once (registers are capped so that they fit), e.g. blocks_per_sm 2, or a set, "
    "blocks_per_sm {1, 2, 4}",
    "cluster": "a thread-block cluster is written CM x CN (blocks along M and N), "
    "e.g. cluster 2 x 1",
    "swap_operands": "swap_operands takes nothing: the kernel computes C^T = B^T A^T (block, "
    "mma, coarsen and cluster then count N's columns first)",
    "pad": "pad is written pad auto, pad none, pad xor, or pad A 8, B 8",
    "swizzle": "swizzle is written swizzle none, swizzle grouped G, swizzle snake G or "
    "swizzle zigzag W",
    "sync": "sync is written sync all or sync minimal",
    "load_order": "load_order is written load_order ab, load_order ba or load_order alternate",
    "accumulate": "accumulate takes a dtype, e.g. accumulate f32",
    "epilogue": "epilogue takes a comma list of alpha V, beta V (a number, or runtime: a "
    "value each call passes), relu, bias NAME, e.g. epilogue alpha 1.5, relu",
    "epilogue_via": "epilogue_via is written epilogue_via direct, epilogue_via shared or "
    "epilogue_via tma",
    "target": "target is written target LANGUAGE DEVICE, e.g. target cuda sm_90",
    "attributes": "attributes takes a comma list of NAME or NAME(INT), "
    "e.g. attributes mtgpu_tiny_offset",
    "operand": "an operand is declared NAME: DTYPE[DIM, ...] LAYOUT, e.g. A: f16[M, K] row",
    "computation": "the computation is written C[m, n] += A[m, k] * B[k, n]",
    "kernel": "a kernel is written kernel NAME { ... }, holding operands, "
    "the computation and directives",
}

_DIRECTIVE_TERMINALS = {d.upper(): d for d in syntax.DIRECTIVES}
_WORDS = {
    "NAME": "a name",
    "NUMBER": "a number",
    "INT": "an integer",
    "ASSIGN": "'=' or '+='",
    "_X": "'x'",
    "$END": "end of file",
}
_KEYWORD_RE = re.compile(r"(\w+)\(\?!\\w\)")
# The previous token's text, for "after 'x'": numbers, a shape's x, names, punctuation.
_PREV_TOKEN_RE = re.compile(r"[+-]?\d+(?:\.\d+)?|x(?![A-Za-z_])|\w+|\+=|\S")
_BAD_NUMBER_RE = re.compile(r"[+-]?\d[\w.]*")


def _describe_terminal(name: str) -> str:
    if name in _WORDS:
        return _WORDS[name]
    pattern = _lark().get_terminal(name).pattern
    keyword = _KEYWORD_RE.fullmatch(pattern.value)
    return f"'{keyword.group(1) if keyword else pattern.value}'"


def _describe_expected(expected: set[str]) -> str:
    """The expected terminals in words: "'x'", "a number", "',' or '}'"."""
    expected = set(expected)
    parts = []
    if _between_items(expected):
        # Any directive, or an operand or the computation (both start with a NAME).
        expected -= _DIRECTIVE_TERMINALS.keys() | {"NAME"}
        parts += ["a directive", "an operand", "the computation"]
    if {"NUMBER", "LBRACE"} <= expected:
        expected.discard("LBRACE")  # a tuning set is also a number, as far as words go
    parts.extend(sorted(_describe_terminal(t) for t in expected))
    if not parts:
        return "nothing more"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def _between_items(expected: set[str]) -> bool:
    """Whether the parser stands where a whole directive or operand may begin."""
    return _DIRECTIVE_TERMINALS.keys() <= expected


def _line_col(source: str, index: int) -> tuple[int, int]:
    line_start = source.rfind("\n", 0, index) + 1
    return source.count("\n", 0, index) + 1, index - line_start + 1


def _loc_span(file: str, source: str, start: int, end: int) -> Loc:
    line, col = _line_col(source, start)
    end_line, end_col = _line_col(source, max(end, start + 1))
    return Loc(file, line, col, end_line, end_col)


def _previous_token(source: str, pos: int) -> tuple[int, str] | None:
    """The end index and text of the last token before `pos`, past whitespace and comments.

    Newlines are not tokens, so "found end of line" must be located by looking
    back in the text; `#` only ever starts a comment, so a line's code ends there.
    """
    end = pos
    while True:
        line_start = source.rfind("\n", 0, end) + 1
        code = source[line_start:end].split("#", 1)[0].rstrip()
        if code:
            last = list(_PREV_TOKEN_RE.finditer(code))[-1]
            return line_start + last.end(), last.group()
        if line_start == 0:
            return None
        end = line_start - 1


def _context(stack: list) -> str | None:
    """The construct being parsed: the innermost keyword still on the parser's stack."""
    for value in reversed(stack):
        if not isinstance(value, Token):
            continue
        if value.type in _DIRECTIVE_TERMINALS:
            return _DIRECTIVE_TERMINALS[value.type]
        if value.type == "COLON":
            return "operand"
        if value.type in ("ASSIGN", "STAR"):
            return "computation"
        if value.type == "KERNEL":
            return "kernel"
    return None


def _opening_brace(stack: list) -> Token | None:
    """The innermost '{' still open: a tuning set's, else the kernel's."""
    return next((v for v in reversed(stack) if isinstance(v, Token) and v.type == "LBRACE"), None)


def _open_kernel(stack: list) -> tuple[Token, Token] | None:
    """The name and '{' of the kernel still open: the stack holds `kernel NAME {`."""
    for i in range(len(stack) - 3, -1, -1):
        if isinstance(stack[i], Token) and stack[i].type == "KERNEL":
            return stack[i + 1], stack[i + 2]
    return None


def _fail(source: str, loc: Loc, message: str, *notes: str) -> TileError:
    return TileError([Diagnostic(loc, message, tuple(n for n in notes if n))], source)


def _syntax_error(e: UnexpectedInput, source: str, file: str) -> TileError:
    """One located diagnostic for a Lark error, in the user's words (see module doc)."""
    parser = getattr(e, "interactive_parser", None)
    stack = list(parser.parser_state.value_stack) if parser else []
    # What the parser really accepts here: the contextual lexer's set for a state
    # shared by several rules (LALR) is wider, e.g. a name after `block 128`.
    expected = set(parser.accepts()) if parser else set(getattr(e, "expected", None) or ())
    usage = USAGE.get(_context(stack) or "", "")
    if isinstance(e, UnexpectedCharacters):
        return _bad_characters(e, source, file, expected, usage)
    assert isinstance(e, UnexpectedToken)

    tok = e.token
    pos = len(source) if tok.type == "$END" else tok.start_pos
    prev = _previous_token(source, pos)
    if expected == {"COLON", "LSQB"} and isinstance(stack[-1], Token):
        return _unknown_directive(source, file, stack[-1], tok)

    # A token on a later line than the previous one means the line was cut short,
    # unless the previous line was complete (a new item or kernel may start there).
    line_break = prev is not None and "\n" in source[prev[0] : pos]
    complete = _between_items(expected) or expected & {"KERNEL", "$END"}
    at_end = tok.type == "$END" or (line_break and not complete)
    if tok.type == "$END" and prev is None:  # nothing but whitespace and comments
        what = "only comments and whitespace" if source.strip() else "nothing"
        return _fail(
            source,
            Loc(file, 1, 1, 1, 2),
            f"the file has no kernel: it holds {what}",
            USAGE["kernel"],
        )
    if at_end and prev is not None:
        loc = _loc_span(file, source, prev[0], prev[0] + 1)  # just after the previous token
    else:
        loc = _token_loc(file, tok)
    found = "end of file" if tok.type == "$END" else "end of line" if at_end else f"'{tok}'"
    after = f" after '{prev[1]}'" if prev is not None else ""

    brace = _opening_brace(stack)
    if expected == {"COMMA", "RBRACE"} and brace is not None:
        return _fail(
            source,
            loc,
            f"unclosed '{{' of a tuning set: expected ',' or '}}'{after}, found {found}",
            f"the tuning set opened at line {brace.line}, column {brace.column} "
            "is written {64, 128}",
            usage,
        )
    kernel = _open_kernel(stack)
    if tok.type in ("$END", "KERNEL") and "RBRACE" in expected and kernel is not None:
        name, brace = kernel
        return _fail(
            source,
            loc,
            f"unclosed '{{' of kernel '{name}': expected '}}', found {found}",
            f"kernel '{name}' is opened by the '{{' at line {brace.line}, column {brace.column}; "
            "close it with '}' after its last item",
        )
    if "KERNEL" in expected:
        usage = USAGE["kernel"]
    return _fail(
        source, loc, f"expected {_describe_expected(expected)}{after}, found {found}", usage
    )


def _bad_characters(
    e: UnexpectedCharacters, source: str, file: str, expected: set[str], usage: str
) -> TileError:
    """Text that no terminal matches: a malformed number, or a stray character."""
    # lark declares pos_in_stream None on the base class; UnexpectedCharacters sets the
    # lexer's position
    pos = cast(int, e.pos_in_stream)
    bad = _BAD_NUMBER_RE.match(source, pos)
    if bad:
        return _fail(
            source,
            _loc_span(file, source, pos, bad.end()),
            f"bad number '{bad.group()}'",
            "a number is digits with an optional sign, decimal part and exponent, e.g. 128, -1, "
            "1.5 or 2e-3",
            usage,
        )
    return _fail(
        source,
        _loc_span(file, source, pos, pos + 1),
        f"unexpected character {e.char!r}",
        f"expected {_describe_expected(expected)} here" if expected else "",
        usage,
    )


def _unknown_directive(source: str, file: str, name: Token, found: Token) -> TileError:
    """A name where an item begins, followed by neither ':' (operand) nor '[' (computation)."""
    if found.type == "NAME" and source.startswith("[", found.end_pos):
        # `A f16[M, K] row`: an operand declaration without its colon.
        end = name.end_pos
        assert end is not None  # a lexed token
        return _fail(
            source,
            _loc_span(file, source, end, end + 1),
            f"expected ':' after operand name '{name}', found '{found}'",
            USAGE["operand"],
        )
    close = difflib.get_close_matches(str(name), syntax.DIRECTIVES, n=1)
    return _fail(
        source,
        _token_loc(file, name),
        f"unknown directive '{name}'",
        f"did you mean '{close[0]}'?" if close else "",
        "the directives are: " + ", ".join(syntax.DIRECTIVES),
    )
