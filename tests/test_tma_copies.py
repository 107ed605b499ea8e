"""`copy tma` without `warp_specialize` (tiledsl.passes.tma_copies): the multi-buffered
wgmma pipeline with its tiles loaded by TMA, thread 0 issuing the copies, every thread
waiting on their `full` mbarrier, one block barrier per K step for the slot the copies
refill.

Checked here: the interpreter runs it exactly at several sizes (the twin off the tile
grid); the handoff proof, tracing the warpgroups in lock step, holds and finds every
handoff needed, and without the block barrier both it and the interpreter's race log see
the TMA copy overwrite a slot another warpgroup's wgmmas still read; the emitted code and
the launch."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import interpret_exact, without

from tiledsl.driver import compile_file, compile_source
from tiledsl.emit.launch import launch_of
from tiledsl.interp.errors import InterpreterError
from tiledsl.ir.nodes import HANDOFFS, Barrier, ExpectTx, KernelIR, TmaLoad, Wait, walk
from tiledsl.models.mbarrier_hazards import HandoffProblem, prove

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "hopper" / "tma.tile"
TEXT = EXAMPLE.read_text()
# one warpgroup of 64 x 128, 3 stages: quick to interpret
SMALL = (
    TEXT.replace("128 x 256 x 64", "64 x 128 x 64")
    .replace("m64n256k16", "m64n128k16")
    .replace("stages  4", "stages  3")
)
_KERNELS: dict[str, KernelIR] = {}


def kernel(name: str = "small") -> KernelIR:
    if name not in _KERNELS:
        text = {"small": SMALL, "example": TEXT, "two-warpgroups": SMALL.replace(
            "64 x 128 x 64", "128 x 128 x 64")}[name]  # fmt: skip
        _KERNELS[name] = compile_source(text, f"{name}.tile").kernels[0]
    return _KERNELS[name]


@pytest.mark.parametrize("name", ["small", "two-warpgroups"])
@pytest.mark.parametrize("tiles, steps", [((1, 1), 1), ((2, 3), 4), ((3, 1), 7)])
def test_the_tma_pipeline_is_exact(name, tiles, steps) -> None:
    k = kernel(name)
    assert k.specialization is None and [m.name for m in k.mbarriers] == ["full"]
    bm, bn, bk = k.schedule.block
    check, stats = interpret_exact(k, tiles[0] * bm, tiles[1] * bn, steps * bk, steps)
    assert check.ok, check.detail
    assert stats.tma_loads == 2 * tiles[0] * tiles[1] * steps
    assert stats.mbarrier_waits == tiles[0] * tiles[1] * steps  # every thread, once a step


def test_the_example_is_exact_off_the_tile_grid_and_at_lines_tma_cannot_address(capsys) -> None:
    # K = 100: A's rows are 200 bytes, no tensor map reads them as they lie; the GPU's
    # launcher stages A into 208-byte rows, which hold the same elements
    from helpers import cli

    r = cli(["run", "--cpu", str(EXAMPLE), "--size", "200x328x100"], capsys)
    assert r.code == 0, r.err
    assert "PASS" in r.out


def test_the_proof_holds_and_keeps_every_handoff() -> None:
    k = kernel("two-warpgroups")
    prove(k)
    kinds = [type(d.barrier).__name__ for d in k.sync_report]
    assert kinds == ["ExpectTx", "Barrier", "ExpectTx", "Wait", "Barrier", "Barrier"], kinds
    assert all(d.kept for d in k.sync_report)
    for s in {id(s): s for s in walk(k.body) if isinstance(s, HANDOFFS)}.values():
        with pytest.raises(HandoffProblem):
            prove(without(k, s))


def test_without_the_k_step_barrier_a_copy_overwrites_a_slot_being_read() -> None:
    k = kernel("two-warpgroups")
    loop_barrier = next(
        s for s in walk(k.body) if isinstance(s, Barrier) and s.reason.startswith("WAR: every")
    )
    with pytest.raises(HandoffProblem) as info:
        prove(without(k, loop_barrier))
    assert info.value.headline == "WAR on As", str(info.value)
    bm, bn, bk = k.schedule.block
    with pytest.raises(InterpreterError, match="race"):
        interpret_exact(without(k, loop_barrier), bm, bn, 6 * bk, 0)


def test_without_the_wait_the_compute_may_read_bytes_in_flight() -> None:
    k = kernel()
    wait = next(s for s in walk(k.body) if isinstance(s, Wait))
    bm, bn, bk = k.schedule.block
    # the read meets bytes in flight, or (if they landed first) a landing nobody observed
    with pytest.raises(InterpreterError, match="still filling|which no mbarrier.wait observed"):
        interpret_exact(without(k, wait), bm, bn, 4 * bk, 0)
    with pytest.raises(HandoffProblem) as info:
        prove(without(k, wait))
    assert info.value.headline == "RAW on As", str(info.value)


def test_the_emitted_code_issues_from_thread_0_and_waits_everywhere() -> None:
    compiled = compile_file(EXAMPLE)
    source = compiled.source
    k = compiled.kernels[0]
    assert k.threads == 256  # two warpgroups, no producer
    for line in (
        "if (threadIdx.x == 0) {",
        "mbarrier_expect_tx(&full[(kt + 2) % 4], STAGE_BYTES);",
        "tma_load_2d(&As[(kt + 2) % 4][0][0][0], &map_A, (kt + 2) * BK, bm * BM, "
        "&full[(kt + 2) % 4]);",
        "mbarrier_wait(&full[kt % STAGES], kt / STAGES % 2);",
        "__syncthreads();  // the barriers are initialised before any thread uses them",
    ):
        assert line in source, line
    assert "setmaxnreg" not in source.split('extern "C"')[1].split("---- kernel")[0]
    loads = [s for s in walk(k.body) if isinstance(s, TmaLoad)]
    assert {s.bar.name for s in loads} == {"full"}
    assert next(s for s in walk(k.body) if isinstance(s, ExpectTx)).bytes == 49152
    maps = [t.param for t in launch_of(k).tensor_maps]
    assert maps == ["map_A", "map_B"]
    assert k.edge is None  # no twin: TMA runs every size
