"""A seeded fuzzer of the whole `tiledsl` command line (run by tests/test_fuzz.py).

    report = fuzz(seed=DEFAULT_SEED, cases=DEFAULT_CASES, work=Path("/tmp/fz"))
    print(report.render())          # every distinct failure kind, one reproduction each

Case `i` of seed `s` is drawn from `random.Random(f"tiledsl-fuzz:{s}:{i}")` alone, so any
case can be rebuilt by itself: `python tests/fuzz.py --seed S --case I` runs it, with
`--show` prints it. A case is a seed file (every examples/**/*.tile, the tuning spaces of
examples/spaces/ included, and the generated ones below), mutated 0-3 times, and one command
line over it. Each case runs `tiledsl.cli.main(argv)` in-process in a fresh directory
holding only the input file, under a time limit (SIGALRM) and a memory limit (RLIMIT_AS,
lowered for the case and raised again). For every case:

1. the exit status is 0, 1 or 2;
2. neither stdout nor stderr holds a Python traceback or "internal error";
3. exit 1 for a problem in the file (stderr not opening with `tiledsl COMMAND:`) opens
   stderr with `PATH:LINE:COL: error: ` (PATH as passed, LINE, COL >= 1), then the quoted
   source line (4 spaces + that line of the file) and a caret under COL;
4. the input file is never changed; after a non-zero exit the directory is as it was
   (names, sizes and contents), so an explicit output does not exist; a command that
   writes nothing by design (`check`, `run --cpu`, `compile` to stdout, `tune --dry-run`)
   leaves it as it was on exit 0 too, and `compile -o OUT` / `viz -o DIR` on exit 0 wrote
   what they promise;
5. every distinct exit-0 `compile` output builds: CUDA with `nvcc -cubin` for the kernels'
   architecture (`targets.build_arch`: sm_90a for wgmma), MUSA type-checked by clang++
   against tests/musa_api (as tests/test_musa.py does); on 2 worker threads, each distinct
   source (sha256) once, skipped without the tool;
6. every distinct file (and --target) that some command accepted (exit 0) passes the
   interpreter, `run FILE --cpu --size MxNxK --seed 1`, at a small ragged size (1-2 block
   tiles per dimension, not multiples), the declared size for literal dims, multiples for
   `stages 0`: exit 0 and PASS;
7. no case runs over its time limit (FRONT_LIMIT_S; RUN_LIMIT_S for the interpreter,
   TUNE_LIMIT_S for `tune --dry-run`, which compiles every point of a space).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import hashlib
import io
import os
import random
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUSA_API = ROOT / "tests" / "musa_api"

DEFAULT_SEED = 20261201
DEFAULT_CASES = 80
FRONT_LIMIT_S = 20.0  # parse, check, compile, viz, tune --dry-run
RUN_LIMIT_S = 60.0  # the interpreter
# tune --dry-run compiles (and proves) every point of the space: its time grows with the
# points. The slowest case met so far, small_m_cluster_space.tile mutated to `persistent
# stream_k` (108 points, 36 through the mbarrier proof of a clustered stream-K kernel at
# about 3 s each), took 124 s alone on a 2-core machine; a hang still stops here.
TUNE_LIMIT_S = 240.0
BUILD_LIMIT_S = 300.0  # one nvcc or clang++ run
MEMORY_HEADROOM = 4 << 30  # bytes of address space a case may add to the process's
INTERP_MAX_MACS = 1 << 25  # literal dims larger than this are not interpreted (too slow)
BUILD_WORKERS = 2

TRACEBACK = "Traceback (most recent call last)"
INTERNAL = "internal error"

# --------------------------------------------------------------------------- seeds

# Generated seeds over the instruction paths (WMMA, mma.sync, wgmma, MUSA) and the
# corners the examples leave out (literal dims, an epilogue with a bias, sm_80).
GENERATED: dict[str, str] = {
    "gen/wmma.tile": """\
# fuzz seed: WMMA 16 x 16 x 16, column-major B, accumulating, on sm_80
kernel fz_wmma {
    A: f16[M, K] row
    B: f16[K, N] col
    C: f16[M, N] row
    C[m, n] += A[m, k] * B[k, n]

    block      64 x 128 x 32
    mma        16 x 16 x 16
    coarsen    2 x 2
    stages     2
    copy       async 16
    pad        auto
    swizzle    zigzag 2
    sync       minimal
    load_order alternate
    target     cuda sm_80
}
""",
    "gen/mma.tile": """\
# fuzz seed: mma.sync m16n8k16, bf16 inputs, XOR-swizzled tiles, fragment double-buffering
kernel fz_mma {
    A: bf16[M, K] row
    B: bf16[K, N] row
    C: f32[M, N] row
    C[m, n] = A[m, k] * B[k, n]

    block   128 x 128 x 64
    mma     m16n8k16
    coarsen 4 x 4
    stages  3
    copy    async 16
    pad     xor
    fragment_buffers 2
    swizzle grouped 4
    sync    minimal
    target  cuda sm_90
}
""",
    "gen/wgmma.tile": """\
# fuzz seed: wgmma m64n128k16 (sm_90a), 3 stages, the 128-byte swizzle
kernel fz_wgmma {
    A: f16[M, K] row
    B: f16[K, N] row
    C: f32[M, N] row
    C[m, n] = A[m, k] * B[k, n]

    block   128 x 128 x 64
    mma     m64n128k16
    coarsen 1 x 1
    stages  3
    copy    async 16
    pad     xor
    swizzle grouped 8
    sync    minimal
    target  cuda sm_90
}
""",
    "gen/fma.tile": """\
# fuzz seed: the fma path (mma fma, stages 0): a warp a weight row, the CUDA cores' fmas
kernel fz_fma {
    A: f16[M, K] row
    B: f16[K, N] col
    C: f16[M, N] row
    C[m, n] = A[m, k] * B[k, n]

    swap_operands
    block   8 x 1 x 512
    mma     fma
    stages  0
    split_k 2
    swizzle none
    target  cuda sm_90
}
""",
    "gen/musa.tile": """\
# fuzz seed: MUSA mp_22 (128-thread warps), synchronous copies, an f16 C through shared memory
kernel fz_musa {
    A: f16[M, K] row
    B: f16[K, N] col
    C: f16[M, N] row
    C[m, n] = A[m, k] * B[k, n]

    block      128 x 128 x 32
    mma        16 x 16 x 16
    coarsen    4 x 4
    stages     1
    copy       sync 16
    pad        A 8, B 8
    swizzle    none
    sync       all
    epilogue_via shared
    target     musa mp_22
}
""",
    "gen/literal.tile": """\
# fuzz seed: literal sizes (the kernel is specialised to 96 x 160 x 80), with an epilogue
kernel fz_literal {
    A: f16[96, 80] row
    B: f16[80, 160] row
    C: f32[96, 160] row
    D: f32[160] row
    C[m, n] = A[m, k] * B[k, n]

    block    32 x 32 x 16
    mma      16 x 16 x 16
    coarsen  1 x 2
    stages   2
    copy     async 8
    pad      none
    swizzle  grouped 2
    sync     minimal
    epilogue alpha 1.5, bias D, relu
}
""",
}


@dataclass(frozen=True)
class Seed:
    name: str  # examples/hgemm.tile, examples/spaces/hgemm_space.tile, gen/wmma.tile
    text: str

    @property
    def space(self) -> bool:
        """A tuning space (`{64, 128}` sets): `tune`'s input; compile and run refuse it."""
        return re.search(r"\{\s*[-+\d]", self.text) is not None

    @property
    def block(self) -> tuple[int, int, int]:
        m = re.search(r"^\s*block\s+(\d+)\s*x\s*(\d+)\s*x\s*(\d+)", self.text, re.M)
        return (int(m[1]), int(m[2]), int(m[3])) if m else (128, 128, 64)

    @property
    def stages0(self) -> bool:
        return re.search(r"^\s*stages\s+0\b", self.text, re.M) is not None


def seeds() -> list[Seed]:
    spaces = sorted(ROOT.glob("examples/spaces/*.tile"))
    files = sorted(p for p in ROOT.glob("examples/**/*.tile") if p not in spaces) + spaces
    found = [Seed(p.relative_to(ROOT).as_posix(), p.read_text(encoding="utf-8")) for p in files]
    return found + [Seed(name, text) for name, text in GENERATED.items()]


# --------------------------------------------------------------------------- mutation

NUMBERS = "0 1 -1 3 7 8 16 24 48 63 64 96 128 256 1.5 1e40 2147483647 2147483648".split() + [
    "1" + "0" * 30,
    "1" + "0" * 40,
    "9" * 5000,
]
#: What a word is replaced with, by what it is: a kernel's name, an element type, a layout.
NAMES = ("int", "main", "half", "threadIdx", "kΩ", "k_edge", "float", "wmma", "_", "__global__")
# ... and the generated code's own names: its locals, constants and namespaces
NAMES += ("signed", "acc", "smem", "lane", "BM", "THREADS", "kt", "i", "bz", "Cs", "As", "std")
NAMES += ("nvcuda", "hgemm_edge", "x" * 300, "A", "B", "M", "N")
DTYPES = ("f16", "bf16", "f32", "f64", "f8", "int8", "half", "tf32")
LAYOUTS = ("row", "col", "auto", "none", "rowcol")
DIRECTIVE_NAMES = (
    "kernel block mma coarsen stages copy pad swizzle sync load_order accumulate epilogue "
    "epilogue_via target attributes fragment_buffers warp_specialize persistent cluster "
    "swap_operands split_k"
).split()
WORDS = (
    DIRECTIVE_NAMES
    + (
        "f16 bf16 f32 f64 row col auto none xor async sync grouped zigzag all minimal ab ba "
        "alternate alpha beta relu bias direct shared cuda musa sm_80 sm_90 sm_120 mp_22 mp_31 "
        "m16n8k16 m64n128k16 m64n256k16 m64n8k16 fma int main half threadIdx kΩ k_edge M N K m n k "
        "tma pingpong cooperative"
    ).split()
)
PUNCTUATION = ", { } [ ] : x = += * ( ) ; -".split()
SPECIAL_CHARS = ("\u2028", "\x0c", "\x1c", "\x00", "\t", "\r", "\u00a0", "\ufeff", "\x85")
NON_UTF8 = (b"\xff", b"\x80", b"\xc3", b"\xed\xa0\x80", b"\xfe\xff", b"\xe2\x80")

# Whole directive lines a rewrite picks from: mostly values that are built, so that many
# mutants compile (exit 0) and reach nvcc and the interpreter on every instruction path.
DIRECTIVES: dict[str, tuple[str, ...]] = {
    "block": (
        "block 64 x 64 x 32",
        "block 128 x 128 x 64",
        "block 128x256x32",
        "block 256 x 128 x 64",
        "block 32 x 32 x 16",
        "block 64 x 128 x 64",
        "block 128 x 64 x 128",
    ),
    "mma": (
        "mma 16 x 16 x 16",
        "mma 32 x 8 x 16",
        "mma 8 x 32 x 16",
        "mma m16n8k16",
        "mma m64n128k16",
        "mma m64n64k16",
        "mma m64n256k16",
        "mma fma",
        "mma 32 x 32 x 16",
        "mma 16 x 8 x 8",
    ),
    "coarsen": (
        "coarsen 1 x 1",
        "coarsen 2 x 2",
        "coarsen 4 x 2",
        "coarsen 2 x 4",
        "coarsen 1 x 2",
    ),
    "stages": ("stages 0", "stages 1", "stages 2", "stages 3", "stages 4"),
    "warps_k": (
        "warps_k 1",
        "warps_k 2",
        "warps_k 4",
        "warps_k 8",
        "warps_k 8 runs 2",
        "warps_k 4 runs 3",
    ),
    "blocks_per_sm": ("blocks_per_sm 1", "blocks_per_sm 2", "blocks_per_sm 4", "blocks_per_sm 40"),
    "copy": (
        "copy async 16",
        "copy async 8",
        "copy async 4",
        "copy sync 16",
        "copy sync 8",
        "copy tma",
    ),
    "warp_specialize": (
        "warp_specialize",
        "warp_specialize pingpong",
        "warp_specialize cooperative",
    ),
    "persistent": ("persistent", "persistent stream_k"),
    "split_k": ("split_k 2", "split_k 3", "split_k 1"),
    "cluster": ("cluster 2 x 1", "cluster 1 x 2", "cluster 2 x 2", "cluster 1 x 1"),
    "swap_operands": ("swap_operands",),
    "pad": ("pad auto", "pad none", "pad xor", "pad A 8, B 8", "pad A 16, B 0", "pad A 24, B 8"),
    "swizzle": (
        "swizzle none",
        "swizzle grouped 8",
        "swizzle grouped 1",
        "swizzle snake 4",
        "swizzle zigzag 2",
        "swizzle zigzag 3",
    ),
    "sync": ("sync all", "sync minimal"),
    "load_order": ("load_order ab", "load_order ba", "load_order alternate"),
    "accumulate": ("accumulate f32", "accumulate f16"),
    "fragment_buffers": ("fragment_buffers 1", "fragment_buffers 2"),
    "epilogue_via": ("epilogue_via direct", "epilogue_via shared", "epilogue_via tma"),
    "epilogue": (
        "epilogue relu",
        "epilogue alpha 0.5",
        "epilogue alpha 1.5, beta 0.5",
        "epilogue alpha -2, relu",
        "epilogue beta 1",
        "epilogue alpha runtime, beta runtime",
    ),
    "target": ("target cuda sm_80", "target cuda sm_90", "target cuda sm_120", "target musa mp_22"),
}

# Values out of range or beyond what is built, for a rewrite now and then.
ODD_DIRECTIVES: tuple[str, ...] = (
    "stages 256",
    "stages 64",
    "stages -1",
    "swizzle grouped 0",
    "swizzle zigzag 2147483648",
    "coarsen 0 x 1",
    "coarsen 64 x 64",
    "block 2147483648 x 128 x 64",
    "block 8 x 8 x 8",
    "block 16 x 16 x 16",
    "block 4096 x 4096 x 64",
    "pad A 2147483647, B 8",
    "pad A 8, B 8, C 8",
    "pad A 8, A 8",
    "copy async 3",
    "copy sync 32",
    "fragment_buffers 3",
    "fragment_buffers 0",
    "epilogue alpha 1" + "0" * 40,
    "epilogue alpha 0.1, beta -0.0",
    "epilogue alpha 3.4028235677973366e38",
    "epilogue bias C",
    "epilogue bias Z",
    "epilogue relu, relu",
    "epilogue alpha 1, alpha 2",
    "accumulate f64",
    "accumulate bf16",
    "target cuda sm_100",
    "target musa mp_31",
    "attributes mtgpu_tiny_offset",
    "attributes launch_bounds(2147483648)",
    "mma m16n8k8",
    "warp_specialize pingpong persistent",
    "warp_specialize ping",
    "persistent 2",
    "persistent stream_k stream_k",
    "persistent streamk",
    "split_k 0",
    "split_k 65",
    "split_k {2, 3}",
    "split_k two",
    "split_k 2 2",
    "warp_specialize pingpong persistent stream_k",
    "cluster 4 x 4",
    "cluster 3 x 1",
    "cluster 0 x 2",
    "cluster 2",
    "cluster 2147483648 x 1",
    "mma m64n0k16",
    "mma 0 x 0 x 0",
    "load_order ba, ab",
    "swap_operands 2",
    "swap_operands swap_operands",
    "swap_operands A, B",
)

_TOKEN = re.compile(
    r"#[^\n]*|\s+|[^\W\d]\w*|[+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|\+=|.", re.S | re.U
)
_DIRECTIVE_LINE = re.compile(r"^([ \t]*)(" + "|".join(DIRECTIVES) + r")\b[^\n#]*", re.M)
_OPERAND = re.compile(r"^([ \t]*\w+\s*:\s*)(\w+)(\s*\[[^\]\n]*\]\s*)(\w+)", re.M)


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _solid(tokens: list[str]) -> list[int]:
    """Indexes of the tokens that are not whitespace or comments."""
    return [i for i, t in enumerate(tokens) if not t.isspace() and not t.startswith("#")]


def _pool_token(rng: random.Random, like: str, before: str) -> str:
    """A replacement for the token `like` (after the token `before`): mostly one of its
    kind (a number for a number, a name for a kernel's name, ...), else anything."""
    if rng.random() < 0.7:
        if re.fullmatch(r"[+-]?\d.*", like):
            return rng.choice(NUMBERS)
        if before == "kernel":
            return rng.choice(NAMES)
        if like in DTYPES:
            return rng.choice(DTYPES)
        if like in ("row", "col"):
            return rng.choice(LAYOUTS)
    return rng.choice(rng.choice((NUMBERS, WORDS, WORDS, NAMES, PUNCTUATION)))


def _replace_token(rng, data):
    tokens = _tokens(_decode(data))
    solid = _solid(tokens)
    if not solid:
        return data, "replace-token (none)"
    numbers = [n for n, i in enumerate(solid) if tokens[i][-1].isdigit()]
    words = [n for n, i in enumerate(solid) if tokens[i][0].isalpha() or tokens[i][0] == "_"]
    r = rng.random()  # mostly a number or a word, the tokens that carry meaning
    among = numbers if r < 0.5 and numbers else words if r < 0.85 and words else range(len(solid))
    n = rng.choice(among)
    i = solid[n]
    new = _pool_token(rng, tokens[i], tokens[solid[n - 1]] if n else "")
    old, tokens[i] = tokens[i], new
    return _encode("".join(tokens)), f"replace token {old[:20]!r} -> {new[:20]!r}"


def _delete_token(rng, data):
    tokens = _tokens(_decode(data))
    solid = _solid(tokens)
    if not solid:
        return data, "delete-token (none)"
    i = rng.choice(solid)
    old = tokens.pop(i)
    return _encode("".join(tokens)), f"delete token {old[:20]!r}"


def _duplicate_token(rng, data):
    tokens = _tokens(_decode(data))
    solid = _solid(tokens)
    if not solid:
        return data, "duplicate-token (none)"
    i = rng.choice(solid)
    tokens.insert(i, tokens[i] + rng.choice(("", " ")))
    return _encode("".join(tokens)), f"duplicate token {tokens[i + 1][:20]!r}"


def _lines_op(rng, data):
    lines = data.split(b"\n")
    op = rng.choice(("duplicate", "delete", "swap"))
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    if op == "duplicate":
        lines.insert(i, lines[i])
    elif op == "delete":
        lines.pop(i)
    else:
        lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines), f"{op} line {i + 1}" + (f" with {j + 1}" if op == "swap" else "")


def _insert(rng, data, piece: bytes, what: str):
    at = rng.randrange(len(data) + 1)
    return data[:at] + piece + data[at:], f"insert {what} at byte {at}"


def _insert_byte(rng, data):
    piece = bytes([rng.randrange(256)])
    return _insert(rng, data, piece, repr(piece))


def _insert_non_utf8(rng, data):
    piece = rng.choice(NON_UTF8)
    return _insert(rng, data, piece, f"non-UTF-8 {piece!r}")


def _insert_special(rng, data):
    char = rng.choice(SPECIAL_CHARS)
    if rng.random() < 0.5:  # often at a line start or between words, where it lexes
        spots = [m.start() for m in re.finditer(rb"\n|  ", data)] or [0]
        at = rng.choice(spots) + 1
        return data[:at] + _encode(char) + data[at:], f"insert {char!r} at byte {at}"
    return _insert(rng, data, _encode(char), repr(char))


def _crlf(rng, data):
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"), "CRLF line ends"


def _truncate(rng, data):
    at = rng.randrange(len(data) + 1)
    return data[:at], f"truncate at byte {at}"


def _rewrite_directive(rng, data):
    text = _decode(data)
    found = list(_DIRECTIVE_LINE.finditer(text))
    if found and rng.random() < 0.8:
        m = rng.choice(found)
        r = rng.random()
        new = rng.choice(
            DIRECTIVES[m[2]]
            if r < 0.65
            else ODD_DIRECTIVES
            if r < 0.85
            else DIRECTIVES[rng.choice(list(DIRECTIVES))]
        )
        out = text[: m.start()] + m[1] + new + text[m.end() :]
        return _encode(out), f"directive {m[0].strip()!r} -> {new!r}"
    # a directive the kernel does not have: before the first kernel's closing brace
    new = rng.choice(DIRECTIVES[rng.choice(list(DIRECTIVES))])
    close = text.find("\n}")
    if close < 0:
        return data, "add-directive (no kernel)"
    return _encode(text[:close] + "\n    " + new + text[close:]), f"add directive {new!r}"


def _odd_directive(rng, data):
    """A directive with a value out of range or beyond what is built: one of its numbers
    replaced by an odd one, or a whole line from ODD_DIRECTIVES."""
    text = _decode(data)
    found = list(_DIRECTIVE_LINE.finditer(text))
    if rng.random() < 0.4 or not found:
        line = rng.choice(ODD_DIRECTIVES)
    else:
        line = rng.choice(found)[0].strip()
        numbers = list(re.finditer(r"[+-]?\d+(?:\.\d+)?", line))
        if not numbers:
            line = rng.choice(ODD_DIRECTIVES)
        else:
            m = rng.choice(numbers)
            line = line[: m.start()] + rng.choice(NUMBERS) + line[m.end() :]
    word = line.split()[0]
    for m in found:
        if m[2] == word:
            out = text[: m.start()] + m[1] + line + text[m.end() :]
            return _encode(out), f"directive {m[0].strip()[:40]!r} -> {line[:60]!r}"
    close = text.find("\n}")
    if close < 0:
        return data, "odd-directive (no kernel)"
    return _encode(text[:close] + "\n    " + line + text[close:]), f"add directive {line[:60]!r}"


def _rename(rng, data):
    """A kernel, operand or size renamed everywhere: to a C++ keyword, a name of the
    generated code's own, a name of the file's, a non-ASCII one, ..."""
    text = _decode(data)
    kernels = re.findall(r"\bkernel\s+(\w+)", text)
    operands = re.findall(r"^[ \t]*(\w+)\s*:", text, re.M)
    dims = [d for d in re.findall(r"[\[,]\s*([A-Za-z_]\w*)", text) if d in ("M", "N", "K", "L")]
    r = rng.random()
    names = kernels if r < 0.45 else operands if r < 0.85 else dims
    names = names or kernels or operands
    if not names:
        return data, "rename (nothing)"
    old, new = rng.choice(names), rng.choice(NAMES)
    out = re.sub(rf"(?<!\w){re.escape(old)}(?!\w)", lambda m: new, text)
    return _encode(out), f"rename {old!r} -> {new[:20]!r}"


def _rewrite_operand(rng, data):
    text = _decode(data)
    found = list(_OPERAND.finditer(text))
    if not found:
        return data, "operand (none)"
    m = rng.choice(found)
    dtype = rng.choice(("f16", "bf16", "f32", m[2]))
    layout = rng.choice(("row", "col", m[4]))
    out = text[: m.start()] + m[1] + dtype + m[3] + layout + text[m.end() :]
    return _encode(out), f"operand {m[0].strip()!r} -> {dtype}, {layout}"


def _whole_file(rng, data):
    text = _decode(data)
    kind = rng.choice(("empty", "comments", "twice", "two kernels"))
    if kind == "empty":
        return b"", "empty file"
    if kind == "comments":
        return b"# only a comment\n\n   # and another, indented\n", "only comments"
    if kind == "twice":
        return _encode(text + "\n" + text), "the same kernels twice"
    renamed = re.sub(r"\bkernel(\s+)(\w+)", r"kernel\1\2_two", text)
    return _encode(text + "\n" + renamed), "two kernels with different names"


MUTATIONS: tuple[tuple[Callable, int], ...] = (
    (_replace_token, 16),
    (_rewrite_directive, 14),
    (_odd_directive, 10),
    (_rename, 6),
    (_rewrite_operand, 5),
    (_delete_token, 7),
    (_duplicate_token, 4),
    (_lines_op, 8),
    (_insert_byte, 3),
    (_insert_non_utf8, 4),
    (_insert_special, 5),
    (_crlf, 2),
    (_truncate, 4),
    (_whole_file, 4),
)


def mutate(rng: random.Random, data: bytes) -> tuple[bytes, list[str]]:
    """`data` with 1-3 mutations, and what each did."""
    count = rng.choices((1, 2, 3), weights=(65, 25, 10))[0]
    done = []
    for _ in range(count):
        fn = rng.choices([f for f, _ in MUTATIONS], weights=[w for _, w in MUTATIONS])[0]
        data, what = fn(rng, data)
        done.append(what)
    return data, done


# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    label: str  # "#17" or "#17/interp": where it came from
    what: str  # the seed and what was done to it
    argv: tuple[str, ...]
    data: bytes  # the input file's bytes
    path: str = "in.tile"  # the input file as passed on the command line
    create: str = "in.tile"  # the input file as created in the case's directory
    dirs: tuple[str, ...] = ()  # directories made beforehand (an existing -o DIR)
    outputs: tuple[str, ...] = ()  # explicit outputs the command names
    limit_s: float = FRONT_LIMIT_S
    interp: bool = False  # the interpreter check (6): must exit 0 and PASS
    origin: str = ""  # the seed's name (Seed.name)

    @property
    def command(self) -> str:
        return self.argv[0] if self.argv else ""

    def shell(self) -> str:
        return "tiledsl " + " ".join(shlex.quote(a) for a in self.argv)

    def reproduction(self, limit: int = 600) -> str:
        """What was run, on what: the file's bytes, or (a long file) its diff from the seed."""
        lines = [
            f"case {self.label}: {self.what}",
            f"  in a directory holding only {self.create!r}"
            + (f" and the directories {list(self.dirs)}" if self.dirs else "")
            + ":",
            f"  $ {self.shell()}",
        ]
        seed = next((s for s in seeds() if s.name == self.origin), None)
        if seed is not None and self.data == _encode(seed.text):
            return "\n".join([*lines, f"  {self.create} = {self.origin}, as it is"])
        if len(self.data) <= limit or seed is None:
            shown = self.data[:limit]
            more = "" if len(self.data) <= limit else f" ... ({len(self.data)} bytes in all)"
            return "\n".join([*lines, f"  {self.create} = {shown!r}{more}"])
        diff = difflib.unified_diff(
            seed.text.split("\n"),
            _decode(self.data).split("\n"),
            self.origin,
            self.create,
            n=1,
            lineterm="",
        )
        shown = [f"    {ln!r}"[:200] for ln in diff][:40]
        lines.append(f"  {self.create} = {self.origin} changed so ({len(self.data)} bytes):")
        return "\n".join(lines + shown)


def _odd_size(rng: random.Random, block: tuple[int, int, int]) -> str:
    """About one or two block tiles per dimension, never a multiple of the tile."""
    dims = []
    for t in block:
        choices = [t + 3, 2 * t - 1] + ([t - 5] if t > 8 else [t + 5])
        dims.append(max(1, rng.choice(choices)))
    return "x".join(map(str, dims))


def _good_size(rng: random.Random, seed: Seed) -> str:
    if seed.stages0:
        return "x".join(str(t * rng.choice((1, 2))) for t in seed.block)
    return _odd_size(rng, seed.block)


BAD_SIZES = ("0x1x1", "-1x2x3", "99999999999x1x1", "1x1x99999999999", "²x1x1", "x", "", "1x1")


def _cli_mutation(rng: random.Random, seed: Seed, path: str) -> tuple[tuple[str, ...], dict]:
    """A command line with one bad or odd value, on an unmutated seed."""
    good = _good_size(rng, seed)
    bad = rng.choice(BAD_SIZES)
    options = [
        (("run", path, "--cpu", "--size", bad, "--seed", "1"), {}),
        (("check", path, "--size", bad), {}),
        (("tune", path, "--dry-run", "--jobs", "1", "--size", bad), {}),
        (("run", path, "--cpu", "--size", good, "--seed", "-1"), {}),
        (("run", path, "--cpu", "--size", good, "--seed", "1", "--batch", "99999999999"), {}),
        (("run", path, "--cpu", "--size", good, "--seed", "1", "--batch", "0"), {}),
        (("run", path, "--cpu", "--size", "1x1x1", "--seed", "1"), {}),
        (("run", path, "--cpu", "--size", good, "--kernel", "nosuch"), {}),
        (("compile", path, "-o", ""), {}),
        (("compile", path, "-o", path), {}),
        (("compile", path, "-o", "outdir"), {"dirs": ("outdir",), "outputs": ("outdir",)}),
        (("compile", path, "-o", path + "/out.cu"), {"outputs": (path + "/out.cu",)}),
        (("compile", path, "--target", rng.choice(("bogus", "musa", "cuda sm_80", "sm_120"))), {}),
        (("compile", path, "--stop-after", "nonsense"), {}),
        (("check", path, "--reserve", rng.choice(("-1", "5", "99999999999"))), {}),
        (("check", path, "--sweep", "--reserve", "99999999999"), {}),
        (("viz", path, "-o", ""), {}),
        (("viz", path, "-o", path), {}),
        (("tune", path, "--dry-run", "--budget", "0"), {}),
        (("tune", path, "--dry-run", "--jobs", "0"), {}),
        ((rng.choice(("check", "compile", "run", "viz")), "missing.tile"), {}),
        (("compile", "."), {}),
    ]
    argv, extra = rng.choice(options)
    if argv[0] == "viz" and "-o" not in argv:
        argv = (*argv, "-o", "vizdir")
    return argv, extra


def _command(rng: random.Random, seed: Seed, path: str) -> tuple[str, tuple[str, ...], dict]:
    """(kind, argv, Case fields) of one command line over `path`."""
    if seed.space and rng.random() < 0.6:
        kind = "tune"
    else:
        kind = rng.choices(
            ("compile", "compile-o", "stop-after", "compile-flags", "check", "check-size", "run")
            + ("viz", "cli"),
            weights=(24, 8, 10, 3, 12, 4, 8, 4, 9),
        )[0]
    if kind == "compile":
        return kind, ("compile", path), {}
    if kind == "compile-o":
        out = rng.choice(("out.cu", "build/out.cu", "out.mu"))
        return kind, ("compile", path, "-o", out), {"outputs": (out, out + ".launch.json")}
    if kind == "stop-after":
        from tiledsl.passes import STAGE_NAMES

        return kind, ("compile", path, "--stop-after", rng.choice(STAGE_NAMES)), {}
    if kind == "compile-flags":
        flag = rng.choice(("--print-ir-after-all", "--explain-sync", "--ptxas"))
        return kind, ("compile", path, flag), {}
    if kind == "check":
        sweep = ("--sweep",) + (("--reserve", "5") if rng.random() < 0.5 else ())
        return kind, ("check", path, *(sweep if rng.random() < 0.15 else ())), {}
    if kind == "check-size":
        return kind, ("check", path, "--size", _good_size(rng, seed)), {}
    if kind == "run":
        argv = ("run", path, "--cpu", "--size", _good_size(rng, seed), "--seed", "1")
        return kind, argv, {"limit_s": RUN_LIMIT_S}
    if kind == "viz":
        fmt = ("--format", "png") if rng.random() < 0.3 else ()
        return kind, ("viz", path, "-o", "vizdir", *fmt), {"outputs": ("vizdir",)}
    if kind == "tune":
        jobs = () if rng.random() < 0.2 else ("--jobs", "1")
        return kind, ("tune", path, "--dry-run", *jobs), {"limit_s": TUNE_LIMIT_S}
    argv, extra = _cli_mutation(rng, seed, path)
    limit = {"run": RUN_LIMIT_S, "tune": TUNE_LIMIT_S}.get(argv[0])
    return kind, argv, {**extra, "limit_s": limit} if limit else extra


#: What `--target` may say (it overrides the file's target).
TARGET_OVERRIDES = ("cuda sm_80", "cuda sm_120", "musa", "cuda:sm_90", "sm_90", "musa mp_31")

#: How often the file is mutated, by the kind of command line (a bad command-line value is
#: tried on the seed itself, mostly; an unmutated tune space is a search that runs).
MUTATE_RATE = {"cli": 0.15, "tune": 0.7}


def make_case(seed: int, index: int, pool: list[Seed] | None = None) -> Case:
    """Case `index` of `seed`: deterministic, and independent of every other case."""
    pool = pool if pool is not None else seeds()
    rng = random.Random(f"tiledsl-fuzz:{seed}:{index}")
    origin = rng.choice(pool)
    create = rng.choices(("in.tile", "kΩ-gemm.tile", "my gemm.tile"), weights=(90, 5, 5))[0]
    path = "./" + create if rng.random() < 0.04 else create
    kind, argv, extra = _command(rng, origin, path)
    if kind != "cli" and argv[0] != "tune" and rng.random() < 0.06:
        argv = (*argv, "--target", rng.choice(TARGET_OVERRIDES))
    data = _encode(origin.text)
    done: list[str] = []
    if rng.random() < MUTATE_RATE.get(kind, 0.88):
        data, done = mutate(rng, data)
    if argv[0] == "tune" and done and "--jobs" not in argv:
        argv = (*argv, "--jobs", "1")  # a mutated space may be huge: keep it interruptible
    what = origin.name + (": " + "; ".join(done) if done else " (unmutated)")
    return Case(
        f"#{index}", what, argv, data, path=path, create=create, origin=origin.name, **extra
    )


# --------------------------------------------------------------------------- running


class CaseTimeout(BaseException):
    """Raised by SIGALRM in the main thread. Not an Exception, so that the command line's
    own `except Exception` (its "internal error" report) does not swallow it."""


@dataclass
class Outcome:
    code: int | None  # None: stopped by the time limit
    out: str
    err: str
    seconds: float
    timed_out: bool = False
    escaped: str | None = None  # the traceback of an exception main() let out
    before: dict = field(default_factory=dict)
    after: dict = field(default_factory=dict)
    input_after: bytes | None = None
    written: dict[str, bytes] = field(default_factory=dict)  # outputs kept for nvcc


def listing(root: Path) -> dict[str, tuple]:
    """Every entry under `root`, recursively: (kind, size, sha256) of files."""
    found: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            if full.is_symlink():
                found[rel] = ("link", os.readlink(full))
            elif full.is_dir():
                found[rel] = ("dir",)
            else:
                data = full.read_bytes()
                found[rel] = ("file", len(data), hashlib.sha256(data).hexdigest()[:16])
    return found


def _on_alarm(signum, frame):
    raise CaseTimeout()


def _vm_bytes() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


@contextlib.contextmanager
def _memory_guard():
    """Lower the soft address-space limit for one case (a huge size must fail, not take the
    machine); raised again after. Only where the current size is known (Linux)."""
    vm = _vm_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = None if vm is None else vm + MEMORY_HEADROOM
    if limit is not None and hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if limit is not None and (soft == resource.RLIM_INFINITY or limit < soft):
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
        try:
            yield
        finally:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    else:
        yield


def call_cli(argv: list[str], limit_s: float) -> tuple[int | None, str, str, bool, str | None]:
    """`tiledsl.cli.main(argv)` in-process: (status, stdout, stderr, timed out, escaped)."""
    from tiledsl.cli import main

    out, err = io.StringIO(), io.StringIO()
    code: int | None = None
    escaped = None
    timed_out = False
    alarm = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGALRM, _on_alarm) if alarm else None
    try:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, limit_s)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(list(argv))
                except SystemExit as exc:  # argparse's usage errors
                    c = exc.code
                    code = c if isinstance(c, int) else (0 if c is None else 1)
        finally:
            if alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
    except CaseTimeout:
        timed_out, code = True, None
    except KeyboardInterrupt:
        raise
    except BaseException:  # anything main() itself let through
        escaped = traceback.format_exc()
        code = None
    finally:
        if alarm:
            signal.signal(signal.SIGALRM, previous)
    return code, out.getvalue(), err.getvalue(), timed_out, escaped


def run_case(case: Case, work: Path) -> Outcome:
    """Run `case` in a fresh directory under `work` (removed after)."""
    home = Path(tempfile.mkdtemp(prefix="case-", dir=work))
    try:
        target = home / case.create
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(case.data)
        for d in case.dirs:
            (home / d).mkdir(parents=True, exist_ok=True)
        before = listing(home)
        cwd = os.getcwd()
        os.chdir(home)
        started = time.perf_counter()
        try:
            with _memory_guard():
                code, out, err, timed_out, escaped = call_cli(list(case.argv), case.limit_s)
        finally:
            seconds = time.perf_counter() - started
            os.chdir(cwd)
        after = listing(home)
        input_after = target.read_bytes() if target.is_file() else None
        written = {}
        if code == 0 and case.command == "compile" and "-o" in case.argv:
            out_path = home / case.argv[case.argv.index("-o") + 1]
            if case.argv[case.argv.index("-o") + 1] and out_path.is_file():
                written["source"] = out_path.read_bytes()
        return Outcome(
            code, out, err, seconds, timed_out, escaped, before, after, input_after, written
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)


# --------------------------------------------------------------------------- checks


@dataclass(frozen=True)
class Problem:
    kind: str  # the deduplication key: what went wrong, without the case's particulars
    detail: str  # what this case printed


def shape(text: str, case: Case | None = None) -> str:
    """`text` without particulars (numbers, quoted words, the file name), for grouping."""
    if case is not None:
        text = text.replace(case.path, "FILE").replace(case.create, "FILE")
    text = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "'…'", text)
    text = re.sub(r"\b0x[0-9a-fA-F]+", "HEX", text)
    text = re.sub(r"\d+", "N", text)
    return text.strip()[:90]


def _tail(text: str, limit: int = 1500) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def _head(text: str, limit: int = 1500) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _printed(o: Outcome) -> str:
    return f"exit {o.code}\n--- stderr\n{_head(o.err)}\n--- stdout\n{_tail(o.out, 800)}"


def check_status(case: Case, o: Outcome) -> list[Problem]:
    if o.timed_out:
        return [
            Problem(
                f"time limit: `{case.command}` ran over {case.limit_s:g} s",
                f"stopped after {o.seconds:.1f} s\n{_printed(o)}",
            )
        ]
    if o.escaped is not None:
        last = o.escaped.strip().splitlines()[-1]
        return [Problem(f"an exception escaped main(): {shape(last, case)}", o.escaped)]
    if o.code not in (0, 1, 2):
        return [Problem(f"exit status {o.code!r} (not 0, 1 or 2)", _printed(o))]
    return []


def check_no_traceback(case: Case, o: Outcome) -> list[Problem]:
    problems = []
    for name, stream in (("stdout", o.out), ("stderr", o.err)):
        if TRACEBACK in stream:
            last = stream.strip().splitlines()[-1]
            problems.append(
                Problem(f"Python traceback in {name}: {shape(last, case)}", _printed(o))
            )
        m = re.search(r"internal error: ?([^\n]*)", stream)
        if m:  # the exception's type and the start of its message: one kind per bug
            problems.append(Problem(f"internal error: {shape(m[1], case)[:48]}", _printed(o)))
        elif INTERNAL in stream:
            problems.append(Problem(f"'{INTERNAL}' in {name}", _printed(o)))
        w = re.search(r"^\S+\.py:\d+: (\w*Warning): ([^\n]*)", stream, re.M)
        if w:  # Python's own warning format: an internal leaking out, like a traceback
            problems.append(Problem(f"Python {w[1]} in {name}: {shape(w[2], case)}", _printed(o)))
    return problems


def _renderings(line: str) -> set[str]:
    """How a source line may be quoted: as it is, with each tab or other unprintable
    character as one space (so that the caret lines up), or without them."""
    spaced = "".join(c if c.isprintable() else " " for c in line)
    dropped = "".join(c for c in line if c.isprintable())
    return {line, line.expandtabs(1), spaced, dropped}


def check_located(case: Case, o: Outcome) -> list[Problem]:
    """Exit 1 for a problem in the file: GCC style, the line quoted, a caret under it."""
    if o.code != 1 or o.err.startswith(f"tiledsl {case.command}:"):
        return []
    if case.command == "run" and re.search(r"^\s*FAIL$", o.out, re.M):
        return []  # a failed check, not an error in the file (check_run_passes says so)
    lines = o.err.split("\n")
    head = re.match(rf"{re.escape(case.path)}:(\d+):(\d+): error: ", lines[0])

    def problem(what: str) -> list[Problem]:
        return [Problem(f"exit 1, {what}", _printed(o))]

    if head is None:
        other = re.match(r"(.+?):(\d+):(\d+): error: ", lines[0])
        if other:
            return [
                Problem(
                    "exit 1, the location names the file otherwise than it was passed",
                    f"passed {case.path!r}, named {other[1]!r}\n{_printed(o)}",
                )
            ]
        return problem(
            f"stderr does not open with 'FILE:LINE:COL: error: ': {shape(lines[0], case)!r}"
        )
    line, col = int(head[1]), int(head[2])
    if line < 1 or col < 1:
        return problem("the location's line or column is below 1")
    if len(lines) < 3:
        return problem("no quoted source line and caret after the first line")
    quoted, caret = lines[1], lines[2]
    if not quoted.startswith("    "):
        return problem("the second line is not the quoted source line (4 spaces + text)")
    m = re.fullmatch(r"    ( *)\^~*", caret)
    if m is None:
        return problem("the third line is not a caret line (4 spaces, spaces, '^')")
    if len(m[1]) != col - 1:
        return problem("the caret is not under the column the first line names")
    try:
        text = case.data.decode("utf-8")
    except UnicodeDecodeError:
        return []  # how such a line is shown is not pinned; its place is
    # Line N as the parser counts (at '\n', a trailing '\r' dropped) or as universal
    # newlines do ('\r\n', '\r' or '\n', as C compilers count); never at form feeds,
    # U+2028 and the other separators that str.splitlines also splits at.
    split = ([ln.removesuffix("\r") for ln in text.split("\n")], re.split(r"\r\n|\r|\n", text))
    wanted = [cut[line - 1] for cut in split if line <= len(cut)]
    if not wanted:
        return problem("the line number is past the end of the file")
    if not any(quoted[4:] in _renderings(want) for want in wanted):
        return problem("the quoted line is not that line of the file (lines split at newlines)")
    if all(col - 1 > len(want) for want in wanted):
        return problem("the column is past the end of the quoted line")
    return []


READ_ONLY = ("check", "run", "tune")
_FAILURE_NPZ = re.compile(r"tiledsl-failure-[^/]*\.npz")


def check_nothing_written(case: Case, o: Outcome) -> list[Problem]:
    problems = []
    if o.input_after != case.data:
        state = "deleted" if o.input_after is None else "rewritten"
        problems.append(Problem(f"`{case.command}` {state} the input file", _printed(o)))
    new = {k: v for k, v in o.after.items() if o.before.get(k) != v}
    gone = [k for k in o.before if k not in o.after]
    if o.code == 1 and case.command == "run":  # a failed check keeps its inputs, by design
        new = {k: v for k, v in new.items() if not _FAILURE_NPZ.fullmatch(k)}
    changed = sorted(new) + sorted(gone)
    output = case.argv[case.argv.index("-o") + 1] if "-o" in case.argv else ""
    output = os.path.normpath(output) if output else ""  # as listing() names it
    read_only = case.command in READ_ONLY or (case.command == "compile" and not output)
    if changed and (o.code != 0 or read_only):
        names = ", ".join(changed[:6]) + (" …" if len(changed) > 6 else "")
        why = f"after exit {o.code}" if o.code != 0 else "(it writes nothing by design)"
        problems.append(
            Problem(
                f"`{case.command}` left files {why}: {shape(names, case)}",
                f"changed: {names}\n{_printed(o)}",
            )
        )
    if o.code != 0:
        outputs = [os.path.normpath(p) for p in case.outputs]
        left = [p for p in outputs if p in o.after and p not in o.before]
        if left:
            problems.append(
                Problem(f"`{case.command}` exit {o.code} leaves its output", ", ".join(left))
            )
    if o.code == 0 and output:
        promised = (
            [output, output + ".launch.json"]
            if case.command == "compile"
            else [output.rstrip("/") + "/index.html"]
        )
        missing = [p for p in promised if p not in o.after or o.after[p][0] != "file"]
        if missing:
            problems.append(
                Problem(
                    f"`{case.command} -o` exit 0 without writing {shape(', '.join(missing), case)}",
                    _printed(o),
                )
            )
    return problems


def check_run_passes(case: Case, o: Outcome) -> list[Problem]:
    """`run` that exits 0 says PASS; the interpreter check (6) must exit 0 and PASS."""
    if case.command != "run" or o.code is None:
        return []
    fails = re.findall(r"^\s*(\S[^\n]*?)\s+FAIL\b", o.out, re.M)
    if o.code == 0 and not re.search(r"^\s*PASS$", o.out, re.M):
        return [Problem("`run` exit 0 without PASS", _printed(o))]
    if o.code == 1 and fails:
        return [
            Problem(
                f"the interpreter FAILs a compiled kernel: {shape(fails[0], case)}", _printed(o)
            )
        ]
    if case.interp and o.code != 0:
        first = (o.err.strip().splitlines() or ["(nothing on stderr)"])[0]
        return [
            Problem(
                f"an accepted file does not run in the interpreter: exit {o.code}: "
                f"{shape(first, case)}",
                _printed(o),
            )
        ]
    return []


def check_toolchain(case: Case, o: Outcome) -> list[Problem]:
    """A command that runs nvcc itself (check, compile --ptxas) on generated source."""
    if "toolchain error" in o.err and "nvcc failed on the generated source" in o.err:
        first = next((ln for ln in o.err.splitlines() if "error" in ln and "(" in ln), "")
        return [
            Problem(
                f"nvcc rejects generated source (in `{case.command}`): {_nvcc_shape(first)}",
                _printed(o),
            )
        ]
    return []


CHECKS = (
    check_status,
    check_no_traceback,
    check_located,
    check_nothing_written,
    check_run_passes,
    check_toolchain,
)


def check_outcome(case: Case, o: Outcome) -> list[Problem]:
    problems = []
    for check in CHECKS:
        problems.extend(check(case, o))
    return problems


# --------------------------------------------------------------------------- builds (5)


def _nvcc_shape(line: str) -> str:
    line = re.sub(r"^.*?\(\d+\): ", "", line.strip())
    return shape(line)


def build(source: str, vendor: str, arch: str) -> tuple[bool, str, str]:
    """(ok, the command, its output): nvcc -cubin for CUDA, clang++ -fsyntax-only for MUSA."""
    with tempfile.TemporaryDirectory(prefix="tiledsl-fuzz-build-") as tmp:
        if vendor == "musa":
            src = Path(tmp) / "kernel.mu"
            cmd = [
                shutil.which("clang++") or "clang++",
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
                str(MUSA_API),
                str(src),
            ]
        else:
            from tiledsl.gpu.toolchain import arch_flags

            src = Path(tmp) / "kernel.cu"
            cubin = Path(tmp) / "kernel.cubin"
            cmd = [shutil.which("nvcc") or "nvcc", "-cubin", *arch_flags(arch), "-std=c++17"]
            cmd += ["-o", str(cubin), str(src)]
        src.write_text(source, encoding="utf-8", errors="surrogateescape")
        try:
            # cwd: the process's own is some case's directory, changed by the main thread
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=BUILD_LIMIT_S, cwd=tmp
            )
        except subprocess.TimeoutExpired:
            return False, " ".join(cmd), f"timed out after {BUILD_LIMIT_S:g} s"
        return proc.returncode == 0, " ".join(cmd), proc.stdout + proc.stderr


def _compiled(case: Case, stop_after: str | None = None):
    """The file of an exit-0 case compiled by the library (its kernels' targets and sizes)."""
    from tiledsl.driver import compile_source

    text = case.data.decode("utf-8", "replace")
    target = case.argv[case.argv.index("--target") + 1] if "--target" in case.argv else None
    return compile_source(text, case.path, target, stop_after)


def _build_target(case: Case, source: str) -> tuple[str, str]:
    """(vendor, arch) to build an exit-0 compile output of `case` for."""
    stop = case.argv[case.argv.index("--stop-after") + 1] if "--stop-after" in case.argv else None
    try:
        from tiledsl.ir.targets import build_arch

        kernels = _compiled(case, stop).kernels
        target = kernels[0].target
        return target.vendor, build_arch(target.arch, kernels)
    except Exception:  # the library disagrees with the command line: judge by the source
        if "musa_runtime.h" in source:
            return "musa", "mp_22"
        return "cuda", "sm_90a" if "wgmma" in source else "sm_90"


def compile_output(case: Case, o: Outcome) -> str | None:
    """The CUDA/MUSA source an exit-0 `compile` case produced, if it produced only that."""
    if case.command != "compile" or o.code != 0:
        return None
    if any(f in case.argv for f in ("--print-ir-after-all", "--explain-sync", "--ptxas")):
        return None
    if "-o" in case.argv and case.argv[case.argv.index("-o") + 1]:
        data = o.written.get("source")
        return None if data is None else data.decode("utf-8", "surrogateescape")
    return o.out


# --------------------------------------------------------------------------- interpreter (6)


def interp_cases(case: Case, seed: int) -> list[Case]:
    """`run --cpu` at a small ragged size, one per kernel of an accepted file."""
    compiled = _compiled(case)
    rng = random.Random(f"tiledsl-fuzz:{seed}:interp:{hashlib.sha256(case.data).hexdigest()}")
    from tiledsl.ir.expr import Const

    found = []
    target = (
        ("--target", case.argv[case.argv.index("--target") + 1]) if "--target" in case.argv else ()
    )
    for kernel in compiled.kernels:
        g, block = kernel.gemm, kernel.schedule.block
        dims = []
        for dim, t in zip((g.m, g.n, g.k), block):
            if isinstance(dim, Const):
                dims.append(dim.value)
            elif kernel.schedule.stages == 0:
                dims.append(t * rng.choice((1, 2)))
            else:
                dims.append(
                    max(1, rng.choice([t + 3, 2 * t - 1] + ([t - 5] if t > 8 else [t + 5])))
                )
        if dims[0] * dims[1] * dims[2] > INTERP_MAX_MACS:
            continue  # declared too large to interpret in a test
        size = "x".join(map(str, dims))
        argv = ("run", case.path, "--cpu", "--size", size, "--seed", "1")
        if len(compiled.kernels) > 1:
            argv += ("--kernel", kernel.name)
        found.append(
            Case(
                case.label + "/interp",
                case.what + f" (the interpreter at {size})",
                argv + target,
                case.data,
                path=case.path,
                create=case.create,
                limit_s=RUN_LIMIT_S,
                interp=True,
                origin=case.origin,
            )
        )
    return found


# --------------------------------------------------------------------------- the run


@dataclass
class Failure:
    problem: Problem
    case: Case


@dataclass
class Report:
    seed: int
    cases: int
    failures: list[Failure] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    slowest: list[tuple[float, str]] = field(default_factory=list)
    saved: Path | None = None

    def kinds(self) -> dict[str, list[Failure]]:
        grouped: dict[str, list[Failure]] = {}
        for f in self.failures:
            grouped.setdefault(f.problem.kind, []).append(f)
        return grouped

    def summary(self) -> str:
        t, c = self.timings, self.counts
        parts = [
            f"tiledsl fuzz: seed {self.seed}, {self.cases} cases in {t.get('cases', 0):.1f} s",
            f"{c.get('interp', 0)} interpreter runs in {t.get('interp', 0):.1f} s",
            f"{c.get('builds', 0)} builds ({c.get('nvcc', 0)} nvcc, {c.get('clang', 0)} clang++, "
            f"{c.get('build_skipped', 0)} skipped) in {t.get('build_cpu', 0):.1f} s of worker "
            f"time, {t.get('build_wait', 0):.1f} s waited for at the end",
            f"{t.get('total', 0):.1f} s in all",
        ]
        exits = ", ".join(
            f"exit {k[5:]}: {v}" for k, v in sorted(c.items()) if k.startswith("exit ")
        )
        line = "; ".join(parts) + f" ({exits})"
        slow = ", ".join(
            f"{label} {s:.1f} s" for s, label in sorted(self.slowest, reverse=True)[:5]
        )
        return line + (f"\nslowest: {slow}" if slow else "")

    def render(self) -> str:
        kinds = self.kinds()
        out = [self.summary()]
        if not kinds:
            return out[0]
        out.append(
            f"{len(self.failures)} failures of {len(kinds)} distinct kinds; rerun with "
            f"TILEDSL_FUZZ_SEED={self.seed} TILEDSL_FUZZ_CASES={self.cases} "
            f"python -m pytest tests/test_fuzz.py, one case with "
            f"python tests/fuzz.py --seed {self.seed} --case N"
            + (f"; reproductions saved under {self.saved}" if self.saved else "")
        )
        for n, (kind, fails) in enumerate(sorted(kinds.items()), start=1):
            best = min(
                fails, key=lambda f: (len(f.case.data) + len(" ".join(f.case.argv)), f.case.label)
            )
            labels = ", ".join(sorted({f.case.label for f in fails})[:8])
            out.append(f"\n[{n}] {kind}\n    ({len(fails)} cases: {labels})")
            out.append(_indent(best.case.reproduction(), 4))
            out.append(_indent(_head(best.problem.detail, 1500), 6))
        return "\n".join(out)


def _indent(text: str, n: int) -> str:
    return "\n".join(" " * n + line for line in text.splitlines())


def _save(report: Report, save_dir: Path) -> None:
    save_dir.mkdir(parents=True, exist_ok=True)
    for n, (kind, fails) in enumerate(sorted(report.kinds().items()), start=1):
        case = min(fails, key=lambda f: len(f.case.data)).case
        d = save_dir / f"kind-{n:02d}"
        d.mkdir(exist_ok=True)
        (d / case.create).write_bytes(case.data)
        (d / "README").write_text(f"{kind}\n\n{case.reproduction()}\n\n{fails[0].problem.detail}\n")
    report.saved = save_dir


class _Run:
    """One fuzzing run's state: what was built and interpreted already, what is pending."""

    def __init__(self, report: Report, work: Path, executor: ThreadPoolExecutor, log):
        self.report, self.work, self.executor, self.log = report, work, executor, log
        self.counts, self.timings = report.counts, report.timings
        self.built: set[str] = set()  # sha256 of each source sent to a build
        self.interpreted: set[tuple] = set()  # (sha256 of the file, --target)
        self.pending: list[tuple[Future, Case]] = []
        self.follow: list[Case] = []  # the interpreter checks (6), run after the cases
        self.tools = {"cuda": shutil.which("nvcc"), "musa": shutil.which("clang++")}

    def count(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def fail(self, problem: Problem, case: Case) -> None:
        self.report.failures.append(Failure(problem, case))
        if self.log:
            self.log(f"FAIL {case.label} {case.shell()}: {problem.kind}")

    def run(self, case: Case) -> Outcome:
        o = run_case(case, self.work)
        self.count(f"exit {o.code}")
        self.report.slowest = sorted(
            [*self.report.slowest, (o.seconds, f"{case.label} {case.command}")], reverse=True
        )[:5]
        for problem in check_outcome(case, o):
            self.fail(problem, case)
        return o

    def harvest(self, case: Case, o: Outcome) -> None:
        """An exit-0 case: build what `compile` emitted (5), interpret what was accepted (6)."""
        source = compile_output(case, o)
        if source is not None:
            key = hashlib.sha256(source.encode("utf-8", "surrogateescape")).hexdigest()
            if key not in self.built:
                self.built.add(key)
                vendor, arch = _build_target(case, source)
                if self.tools.get(vendor):
                    self.count("builds")
                    self.count("clang" if vendor == "musa" else "nvcc")
                    future = self.executor.submit(self.timed_build, source, vendor, arch)
                    self.pending.append((future, case))
                else:
                    self.count("build_skipped")
        whole = "--stop-after" not in case.argv  # an intermediate stage may emit alone
        if case.command not in ("compile", "check", "viz", "run") or not whole or case.interp:
            return
        target = case.argv[case.argv.index("--target") + 1] if "--target" in case.argv else None
        key = (hashlib.sha256(case.data).hexdigest(), target)
        if key in self.interpreted:
            return
        self.interpreted.add(key)
        try:
            self.follow.extend(interp_cases(case, self.report.seed))
        except Exception as exc:  # the library refuses what the command line accepted
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            kind = f"`{case.command}` exits 0 but driver.compile_source refuses the file"
            self.fail(Problem(kind, shape(first, case) + "\n" + traceback.format_exc()), case)

    def timed_build(self, source: str, vendor: str, arch: str) -> tuple[bool, str, str]:
        started = time.perf_counter()
        try:
            return build(source, vendor, arch)
        finally:
            self.timings["build_cpu"] = (
                self.timings.get("build_cpu", 0) + time.perf_counter() - started
            )

    def collect_builds(self) -> None:
        for future, case in self.pending:
            ok, cmd, log_text = future.result()
            if ok:
                continue
            lines = log_text.strip().splitlines() or [""]
            first = next((ln for ln in lines if re.search(r"\berror\b", ln)), lines[0])
            tool = "clang++" if "clang" in Path(cmd.split()[0]).name else "nvcc"
            kind = f"{tool} rejects an exit-0 `compile` output: {_nvcc_shape(first)}"
            self.fail(Problem(kind, f"{cmd}\n{_head(log_text, 2000)}"), case)


def fuzz(
    seed: int = DEFAULT_SEED,
    cases: int = DEFAULT_CASES,
    work: Path | None = None,
    only: list[int] | None = None,
    log: Callable[[str], None] | None = None,
    save_dir: Path | None = None,
) -> Report:
    """Run cases 0..cases-1 of `seed` (or just `only`), then the interpreter checks and the
    builds they call for; every failure is in the report, none stops the run."""
    started = time.perf_counter()
    own = work is None
    work = Path(tempfile.mkdtemp(prefix="tiledsl-fuzz-")) if work is None else Path(work)
    work.mkdir(parents=True, exist_ok=True)
    report = Report(seed, cases)
    pool = seeds()
    old_cwd = os.getcwd()
    executor = ThreadPoolExecutor(BUILD_WORKERS, thread_name_prefix="tiledsl-fuzz-build")
    state = _Run(report, work, executor, log)
    try:
        t0 = time.perf_counter()
        for i in only if only is not None else range(cases):
            case = make_case(seed, i, pool)
            o = state.run(case)
            if o.code == 0:
                state.harvest(case, o)
        report.timings["cases"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        for case in state.follow:
            state.count("interp")
            state.run(case)
        report.timings["interp"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        state.collect_builds()
        report.timings["build_wait"] = time.perf_counter() - t0
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
        os.chdir(old_cwd)
        if own:
            shutil.rmtree(work, ignore_errors=True)
    report.timings["total"] = time.perf_counter() - started
    if report.failures and save_dir is not None:
        _save(report, save_dir)
    return report


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be an integer, not {value!r}") from None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Fuzz the tiledsl command line (tests/fuzz.py).")
    p.add_argument("--seed", type=int, default=env_int("TILEDSL_FUZZ_SEED", DEFAULT_SEED))
    p.add_argument("--cases", type=int, default=env_int("TILEDSL_FUZZ_CASES", DEFAULT_CASES))
    p.add_argument("--case", type=int, action="append", help="only this case (repeatable)")
    p.add_argument("--show", action="store_true", help="print the case(s) and stop")
    p.add_argument("--write", metavar="DIR", help="with --show: write each case's file to DIR")
    p.add_argument("--save", metavar="DIR", help="write a reproduction of each failure kind")
    args = p.parse_args(argv)
    if args.show:
        for i in args.case or range(args.cases):
            case = make_case(args.seed, i)
            print(case.reproduction(limit=100000))
            if args.write:
                d = Path(args.write) / f"case-{i}"
                d.mkdir(parents=True, exist_ok=True)
                (d / case.create).write_bytes(case.data)
                print(f"  written to {d / case.create}")
        return 0
    report = fuzz(
        args.seed,
        args.cases,
        only=args.case,
        log=lambda s: print(s, file=sys.stderr),
        save_dir=Path(args.save) if args.save else None,
    )
    print(report.render())
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
