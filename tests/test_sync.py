"""sync-elimination and --explain-sync: what stays, what goes, and why."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from helpers import cli

from tiledsl.driver import compile_source
from tiledsl.interp.interpreter import interpret
from tiledsl.interp.oracle import check_exact, from_storage, make_inputs, to_storage
from tiledsl.ir.nodes import Barrier, For
from tiledsl.models.hazards import decide
from tiledsl.passes.sync_elimination import sync_elimination

ROOT = Path(__file__).resolve().parent.parent


def source(name: str, sync: str = "minimal") -> str:
    text = (ROOT / "examples" / name).read_text()
    return text.replace("sync    all", f"sync    {sync}")


def barriers(kernel):
    from tiledsl.ir.nodes import walk

    return [s for s in walk(kernel.body) if isinstance(s, Barrier)]


def exact(kernel, m, n, k):
    g = kernel.gemm
    inputs = make_inputs(g, m, n, k, "exact", np.random.default_rng(7))
    arrays = {
        g.a.name: to_storage(g.a, inputs.a),
        g.b.name: to_storage(g.b, inputs.b),
        g.c.name: to_storage(g.c, inputs.c_in).copy(),
    }
    interpret(kernel, arrays, {"M": m, "N": n, "K": k})
    return check_exact(g, inputs, from_storage(g.c, arrays[g.c.name], (m, n)), (1, 1)).ok


def test_single_buffer_keeps_the_second_barrier_and_says_why():
    """The S4000 write-up's 'delete the second __syncthreads': with one buffer it is a WAR."""
    kernel = compile_source(source("ladder/v2.tile"), "v2.tile").kernels[0]
    report = kernel.sync_report
    assert [d.kept for d in report] == [True, True]
    assert report[1].why.startswith("needed: WAR on As (block scope)")
    assert "load_frag a[0][0] <- As[0]" in report[1].why
    assert "copy.block.sync As[0]" in report[1].why
    assert len(barriers(kernel)) == 2


def test_the_pipeline_barrier_stays():
    kernel = compile_source(source("hgemm.tile"), "hgemm.tile").kernels[0]
    (decision,) = kernel.sync_report
    assert decision.kept and decision.why.startswith("needed: RAW on As")


def test_a_fence_ordered_by_the_loops_own_barrier_goes():
    """With stages 1 the K loop ends with a barrier, so the fence before C's staging (which
    reuses the A/B bytes) orders nothing new and is removed; the result stays exact."""
    minimal = compile_source(source("hgemm_f16.tile"), "f16.tile").kernels[0]
    every = compile_source(source("hgemm_f16.tile", "all"), "f16.tile").kernels[0]
    removed = [d for d in minimal.sync_report if not d.kept]
    assert len(removed) == 1
    assert removed[0].barrier.reason.startswith("WAR: every warp must be done reading As, Bs")
    assert len(barriers(minimal)) == len(barriers(every)) - 1
    assert exact(minimal, 128, 256, 64)


def test_an_extra_barrier_is_removed():
    kernel = compile_source(source("ladder/v2.tile", "all"), "v2.tile").kernels[0]
    extra = Barrier("block", "an extra barrier nothing needs")

    def add(body):
        out = []
        for stmt in body:
            if isinstance(stmt, For):
                stmt = dataclasses.replace(stmt, body=add(stmt.body))
            out.append(stmt)
            if isinstance(stmt, Barrier) and stmt.reason.startswith("RAW"):
                out.append(extra)
        return tuple(out)

    padded = dataclasses.replace(kernel, body=add(kernel.body))
    assert len(barriers(padded)) == 3
    cleaned = sync_elimination(padded)
    assert len(barriers(cleaned)) == 2
    gone = [d for d in cleaned.sync_report if not d.kept]
    assert len(gone) == 1 and gone[0].why.startswith("redundant")
    assert exact(cleaned, 64, 128, 64)


def test_sync_all_keeps_everything_but_still_explains():
    kernel = compile_source(source("hgemm_f16.tile", "all"), "f16.tile").kernels[0]
    assert kernel.sync_report == ()
    decisions, removed = decide(kernel, remove=False)
    assert removed == frozenset()
    assert all(d.kept for d in decisions)
    assert sum(d.why.startswith("redundant") for d in decisions) == 1


def test_explain_sync_on_the_command_line(tmp_path, capsys):
    path = tmp_path / "v2.tile"
    path.write_text(source("ladder/v2.tile"))
    r = cli(["compile", str(path), "--explain-sync"], capsys)
    assert r.code == 0
    lines = r.out.splitlines()
    assert lines[0] == "kernel hgemm_v2 (sync minimal): 2 barrier(s) kept, 0 removed"
    assert lines[1] == "  #1 __syncthreads()  kept"
    assert lines[2] == f"     placed by `stages  1` at {path}:13:5"
    assert "needed: WAR on As (block scope)" in r.out
    assert 'extern "C"' not in r.out  # the explanation replaces the source on stdout
