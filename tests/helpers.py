"""Shared helpers for the command-line, example, toolchain and GPU tests (not fixtures).

    from helpers import EXAMPLES, cli, kernel_text

`EXAMPLES` is every `examples/**/*.tile` but the tuning spaces, globbed, so a new
example is tested as soon as it is added; `SPACES` is every `examples/spaces/*.tile`
(`tiledsl tune`'s input: sets like `{64, 128}`, which compile and run refuse). `cli`
runs `tiledsl.cli.main` in-process and returns the exit status with what it printed,
whether the command returned a status or argparse raised SystemExit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPACES = sorted(ROOT.glob("examples/spaces/*.tile"))
EXAMPLES = sorted(
    p for p in ROOT.glob("examples/**/*.tile") if not p.is_relative_to(ROOT / "examples" / "spaces")
)


def example_id(path: Path) -> str:
    return path.relative_to(ROOT / "examples").as_posix()


def example_params():
    """`EXAMPLES` as pytest params with readable ids (`ladder/v2.tile`)."""
    return [pytest.param(p, id=example_id(p)) for p in EXAMPLES]


def cuda_example_params():
    """The examples that compile to CUDA (MUSA ones are checked by tests/test_musa.py)."""
    return [
        pytest.param(p, id=example_id(p))
        for p in EXAMPLES
        if not re.search(r"^\s*target\s+musa", p.read_text(), re.M)
    ]


@dataclass
class CliResult:
    code: int
    out: str
    err: str


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> CliResult:
    """Run `tiledsl ARGV` in-process; the exit status as the shell would see it."""
    from tiledsl.cli import main

    capsys.readouterr()  # drop anything printed before
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    captured = capsys.readouterr()
    return CliResult(code, captured.out, captured.err)


#: The computation and operands of a plain f16 x f16 -> f32 GEMM, lines 2-5 of `kernel_text`.
OPERANDS = ("A: f16[M, K] row", "B: f16[K, N] row", "C: f32[M, N] row")
PRODUCT = "C[m, n] = A[m, k] * B[k, n]"
#: Directives of a schedule that tiledsl builds today (lines 6-10 of `kernel_text`).
BUILDABLE = ("block 64 x 64 x 32", "stages 1", "pad none", "swizzle none", "sync all")


def kernel_text(
    *directives: str, name: str = "k", product: str = PRODUCT, operands: tuple[str, ...] = OPERANDS
) -> str:
    """`kernel NAME { ... }`: line 1 opens it, then operands, the product, the directives."""
    body = [*operands, product, *directives]
    return f"kernel {name} {{\n" + "".join(f"    {line}\n" for line in body) + "}\n"


def replace_directive(directives: tuple[str, ...], new: str) -> tuple[str, ...]:
    """`directives` with the one of `new`'s name replaced by `new` (appended if absent)."""
    word = new.split()[0]
    out = tuple(new if d.split()[0] == word else d for d in directives)
    return out if new in out else (*out, new)


def check_error(text: str, tmp_path: Path, capsys) -> tuple[int, int, str]:
    """(line, column, message) of the first error `tiledsl check` prints for `text`, as
    the user sees it: `FILE:LINE:COL: error: MESSAGE`, with exit status 1."""
    path = tmp_path / "d.tile"
    path.write_text(text)
    r = cli(["check", str(path)], capsys)
    assert r.code == 1, r.out
    first = r.err.splitlines()[0]
    match = re.match(rf"{re.escape(str(path))}:(\d+):(\d+): error: (.*)", first)
    assert match, r.err
    return int(match[1]), int(match[2]), match[3]


def line_of(text: str, fragment: str) -> int:
    """1-based number of the first line of `text` that contains `fragment`."""
    for number, line in enumerate(text.splitlines(), start=1):
        if fragment in line:
            return number
    raise AssertionError(f"{fragment!r} not in the text")


def interpret_exact(kernel, m: int, n: int, k: int, data_seed: int = 0, **options):
    """Interpret `kernel` at M x N x K on the exact oracle's inputs (its epilogue's bias
    vectors included); (the exact check, the interpreter's stats). `options` go to
    `interpret` (schedules, seed, blocks)."""
    import numpy as np

    from tiledsl.interp.interpreter import interpret
    from tiledsl.interp.oracle import check_exact, from_storage, make_inputs, to_storage
    from tiledsl.ir.epilogue import Epilogue

    g = kernel.gemm.as_written  # the caller's operands and M x N x K
    ep = Epilogue.of(kernel.schedule, g)
    inputs = make_inputs(g, m, n, k, "exact", np.random.default_rng(data_seed), epilogue=ep)
    arrays = {
        g.a.name: to_storage(g.a, inputs.a),
        g.b.name: to_storage(g.b, inputs.b),
        g.c.name: to_storage(g.c, inputs.c_in).copy(),
        **{op.name: to_storage(op, inputs.extras[op.name]) for op in g.extras},
    }
    stats = interpret(kernel, arrays, g.size_env(m, n, k), **options)
    out = from_storage(g.c, arrays[g.c.name], (m, n))
    tile = kernel.gemm.oriented(kernel.schedule.block)[:2]
    return check_exact(g, inputs, out, tile, ep), stats


def tune_file_in(tmp_path, text: str, path, size, timer_factory, **options) -> int:
    """`tiledsl.tune.search.tune_file` on `text` (written at `path`) at `size`: no budget,
    one job, its record (record.jsonl) and best point (best.tile) in `tmp_path`; `options`
    override any of those."""
    from tiledsl.tune import search

    settings = dict(
        size=size,
        budget=None,
        kernel=None,
        record=tmp_path / "record.jsonl",
        output=tmp_path / "best.tile",
        jobs=1,
        dry_run=False,
        timer_factory=timer_factory,
    )
    return search.tune_file(text, str(path), **{**settings, **options})


def without(k, target, replacement=()):
    """`k` (a KernelIR) with the statement `target` (by identity) replaced (by default,
    removed): what the tests that take one handoff out of a kernel at a time build."""
    import dataclasses

    from tiledsl.ir.nodes import map_body

    body = map_body(k.body, lambda s: replacement if s is target else s)
    assert body != k.body
    return dataclasses.replace(k, body=body)


def small_hopper(name: str, persistent: str, extra: str = "") -> str:
    """The text of a warp-specialized kernel quick to interpret: one consumer warpgroup on
    64 x 128 tiles, 2 stages, C stored from its registers. `persistent` is its persistent
    line (`persistent stream_k`, ...), `extra` more directive lines before the target's
    (`    cluster 2 x 2\n`)."""
    return f"""\
kernel {name} {{
    A: f16[M, K] row
    B: f16[K, N] row
    C: f16[M, N] row
    C[m, n] = A[m, k] * B[k, n]

    block   64 x 128 x 64
    mma     m64n128k16
    stages  2
    copy    tma
    warp_specialize
    {persistent}
{extra}    target  cuda sm_90
}}
"""


def hand_over_statements(k) -> list:
    """A stream-K kernel's hand-over of partial sums, each statement once: the partial store
    and add, the flag's signal and wait, and the consumers' barriers between them."""
    from tiledsl.ir.nodes import Barrier, FlagSignal, FlagWait, PartialAdd, PartialStore, walk

    kinds = (PartialStore, PartialAdd, FlagSignal, FlagWait)
    return [
        s
        for s in {id(s): s for s in walk(k.body)}.values()
        if isinstance(s, kinds) or (isinstance(s, Barrier) and s.scope == "consumers")
    ]


def check_hand_over_removed(
    k, index: int, flag: int | dict[int, int], tiles: tuple[int, int] = (1, 1)
) -> None:
    """The interpreter catches stream-K kernel `k` run at `tiles` tiles of 8 K steps without
    its hand-over's `index`-th statement: without the partial store the owner reads an
    empty slot; without a barrier, a race between the first thread and the others; without
    a signal, a deadlock on flags[flag] (`flag`: by the signal's index, where there are
    several); without the wait, a race; without the add, a partial sum left behind and a
    flag left set."""
    from tiledsl.interp.errors import DeadlockError, InterpreterError, RaceError
    from tiledsl.ir.nodes import Barrier, FlagSignal, FlagWait, PartialAdd, PartialStore

    statements = hand_over_statements(k)
    s = statements[index]
    flag = flag.get(index, -1) if isinstance(flag, dict) else flag
    expected = {
        PartialStore: (InterpreterError, "holds no sum"),
        FlagSignal: (DeadlockError, rf"waits on flags\[{flag}\], which no block sets"),
        FlagWait: (RaceError, "without waiting on flags"),
        PartialAdd: (InterpreterError, "is never added|ends with flags"),
    }
    if isinstance(s, Barrier):
        error = (RaceError, "a `barrier.consumers` (between the partial store|after the flag)")
    else:
        error = expected[type(s)]
    bm, bn, bk = k.schedule.block
    with pytest.raises(error[0], match=error[1]):
        interpret_exact(without(k, s), tiles[0] * bm, tiles[1] * bn, 8 * bk, seed=3, schedules=1)


def check_split_on_the_gpu(compiled, size) -> None:
    """A `split_k` kernel (the first of `compiled`) at M x N x K on the GPU: both oracles'
    exact check, the same bits on three launches, and the tickets left at zero (each
    launch leaves them as it found them)."""
    import cupy as cp
    import numpy as np

    from tiledsl.gpu.runtime import device_arch, launcher, load_module
    from tiledsl.interp.oracle import check_exact, from_storage, make_inputs, to_storage
    from tiledsl.ir.targets import build_arch

    k, launch = compiled.kernels[0], compiled.launches[0]
    run = launcher(load_module(compiled.source, build_arch(device_arch(), (k,))), launch)
    g = k.gemm.as_written
    m, n, kk = size
    inputs = make_inputs(g, m, n, kk, "exact", np.random.default_rng(1))
    arrays = {
        g.a.name: cp.asarray(to_storage(g.a, inputs.a)),
        g.b.name: cp.asarray(to_storage(g.b, inputs.b)),
        g.c.name: cp.zeros((m, n), cp.float16),
    }
    outputs = []
    for _ in range(3):
        arrays[g.c.name].fill(0)
        run(arrays, g.size_env(m, n, kk))
        outputs.append(cp.asnumpy(arrays[g.c.name]))
    tile = k.gemm.oriented(k.schedule.block)[:2]
    check = check_exact(g, inputs, from_storage(g.c, outputs[0], (m, n)), tile, None)
    assert check.ok, check.detail
    assert all(np.array_equal(outputs[0].view(np.uint16), o.view(np.uint16)) for o in outputs)
    assert int(cp.count_nonzero(run.scratch["tickets"])) == 0
