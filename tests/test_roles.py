"""Warp-specialized kernels in the interpreter: roles run concurrently, mbarriers, TMA.

The producer (one thread issuing TMA copies) and the consumers (the IR warps, computing)
are interleaved by a seeded scheduler; the TMA copies land when it says. Each kernel must
be exact against the oracle under several interleavings, and every handoff removed (each
Wait, Arrive, ExpectTx, the wgmma retire, a parity flipped) must come back as a race, a
deadlock or a broken mbarrier count that names the role and the barrier — never a pass,
never a hang.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers import interpret_exact, without

from tiledsl.driver import compile_source
from tiledsl.interp import roles
from tiledsl.interp.interpreter import (
    DeadlockError,
    InterpreterError,
    RaceError,
    has_roles,
)
from tiledsl.interp.mbarriers import MBarriers
from tiledsl.ir.expr import Const
from tiledsl.ir.nodes import (
    Arrive,
    BarrierRef,
    ExpectTx,
    KernelIR,
    Let,
    MBarrier,
    MmaWait,
    Roles,
    Wait,
    map_body,
    walk,
)

WS = """kernel ws {
    A: f16[M, K] row
    B: f16[K, N] row
    C: f16[M, N] row
    C[m, n] = A[m, k] * B[k, n]
    block   128 x 256 x 64
    mma     m64n256k16
    stages  4
    copy    tma
    warp_specialize
    persistent
    swizzle grouped 8
    target  cuda sm_90
}"""


def variant(*edits: tuple[str, str]) -> str:
    text = WS
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    return text


NOT_PERSISTENT = ("    persistent\n", "")
N128 = [("128 x 256 x 64", "128 x 128 x 64"), ("m64n256k16", "m64n128k16")]
VARIANTS = {
    "persistent": variant(),
    "not-persistent": variant(NOT_PERSISTENT),
    "n128": variant(*N128),
    "one-consumer": variant(("128 x 256 x 64", "64 x 128 x 64"), ("m64n256k16", "m64n128k16")),
    "coarsened": variant(
        ("m64n256k16", "m64n128k16"), ("stages  4", "stages  4\n    coarsen 1 x 2")
    ),
    "col-a": variant(*N128, ("A: f16[M, K] row", "A: f16[M, K] col")),
    "col-b": variant(*N128, ("B: f16[K, N] row", "B: f16[K, N] col")),
    "bf16": variant(*N128, ("f16[M, K]", "bf16[M, K]"), ("f16[K, N]", "bf16[K, N]")),
    "f32-c": variant(*N128, ("C: f16[M, N]", "C: f32[M, N]")),
    "stages-2": variant(*N128, ("stages  4", "stages  2")),
}
_KERNELS: dict[str, KernelIR] = {}


def kernel(name: str) -> KernelIR:
    if name not in _KERNELS:
        _KERNELS[name] = compile_source(VARIANTS[name], f"{name}.tile").kernels[0]
    return _KERNELS[name]


def run(k: KernelIR, m: int, n: int, kk: int, data_seed: int = 0, **options):
    """Interpret `k` at M x N x K on exact inputs; (the oracle's check, the stats)."""
    return interpret_exact(k, m, n, kk, data_seed, **options)


def size(k: KernelIR, tiles=(2, 2), steps: int = 6) -> tuple[int, int, int]:
    """Tiles along M and N, and K steps: more steps than stages, so the phases wrap."""
    bm, bn, bk = k.schedule.block
    return tiles[0] * bm, tiles[1] * bn, steps * bk


# ---------------------------------------------------------------- exact


@pytest.mark.parametrize("name", list(VARIANTS))
def test_every_variant_is_exact_under_several_interleavings(name: str) -> None:
    k = kernel(name)
    assert has_roles(k) and k.producer_warps == 1
    for seed in (0, 1):
        check, stats = run(k, *size(k), data_seed=seed, seed=seed, schedules=2)
        assert check.ok, check.detail
        assert stats.schedules == 2 and stats.tma_loads == stats.mbarrier_waits
        tiles = 4 if k.persistent else stats.blocks
        assert stats.tma_loads == 2 * tiles * 6  # A and B, per K step of every tile
        assert stats.blocks == (3 if k.persistent else 4)  # min(tiles, 3) persistent blocks


@pytest.mark.parametrize("blocks", [1, 2, 5])
def test_any_persistent_grid_is_exact(blocks: int) -> None:
    """One block for every tile, some blocks with one tile more, blocks with none."""
    k = kernel("n128")
    check, stats = run(k, *size(k, (2, 2), 5), seed=blocks, blocks=blocks, schedules=3)
    assert check.ok, check.detail
    assert stats.blocks == blocks and stats.tma_loads == 2 * 4 * 5


def test_tma_fills_what_lies_outside_the_operand_with_zeros() -> None:
    """K not a multiple of BK: the last boxes hang over A's and B's edge along K."""
    k = kernel("n128")
    m, n, _ = size(k)
    check, _ = run(k, m, n, 5 * 64 - 24, seed=4)
    assert check.ok, check.detail


def test_the_default_size_runs_in_seconds() -> None:
    k = kernel("not-persistent")
    check, stats = run(k, 256, 256, 192)
    assert check.ok and stats.steps > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["persistent", "coarsened", "col-a", "col-b"])
def test_many_seeds_and_steps(name: str) -> None:
    k = kernel(name)
    for seed in range(4):
        check, _ = run(k, *size(k, (2, 3), 9), data_seed=seed, seed=seed, schedules=3)
        assert check.ok, check.detail


def test_schedules_and_blocks_are_checked() -> None:
    with pytest.raises(ValueError, match="not persistent"):
        run(kernel("not-persistent"), 128, 256, 64, blocks=2)
    with pytest.raises(ValueError, match="at least one"):
        run(kernel("persistent"), 128, 256, 64, schedules=0)
    with pytest.raises(ValueError, match="at least one block"):
        run(kernel("persistent"), 128, 256, 64, blocks=0)


# ---------------------------------------------------------------- the handoffs removed


def handoffs(k: KernelIR):
    """Each mbarrier statement of `k`, and a name for it."""
    for s in walk(k.body):
        if isinstance(s, (Wait, Arrive, ExpectTx)):
            yield f"{type(s).__name__} {s.bar}", s


def _caught(k: KernelIR, seed: int, **options) -> InterpreterError:
    with pytest.raises(InterpreterError) as info:
        run(k, *size(k), seed=seed, **options)
    return info.value


@pytest.mark.parametrize("name", ["persistent", "not-persistent", "one-consumer", "col-b"])
def test_every_handoff_removed_is_caught(name: str) -> None:
    k = kernel(name)
    found = list(handoffs(k))
    # the producer's wait and expect_tx; the consumers' wait and release, and, when a block
    # has more tiles, the release after its last step (that the next tile's producer awaits)
    assert len(found) == (5 if k.persistent else 4)
    for what, s in found:
        broken = without(k, s)
        for seed in (0, 1, 2):
            err = _caught(broken, seed)
            message = str(err)
            assert "producer" in message or "consumer" in message, (what, message)
            assert "full[" in message or "empty[" in message, (what, message)


@pytest.mark.parametrize("name", ["persistent", "not-persistent"])
def test_a_flipped_parity_is_caught(name: str) -> None:
    k = kernel(name)
    for what, s in handoffs(k):
        if isinstance(s, Wait):
            flipped = without(k, s, (dataclasses.replace(s, parity=(s.parity + 1) % 2),))
            for seed in (0, 1, 2):
                assert "role" in str(_caught(flipped, seed)), what


@pytest.mark.parametrize("pending", [1, 0])
def test_a_removed_wgmma_retire_is_caught(pending: int) -> None:
    """Without `mma.wait pending=1` the consumers release a slot that their wgmmas still
    read; without the final `pending=0`, the last step's slot too. Which report comes
    depends on the interleaving: the overwrite of a slot a wgmma still reads, or, when the
    copy lands before the consumer's next step, the race with its operand read
    (`load_frag`: the wgmma's descriptor of that slot)."""
    k = kernel("persistent")
    wait = next(s for s in walk(k.body) if isinstance(s, MmaWait) and s.pending == pending)
    for seed in (0, 1, 2):
        message = str(_caught(without(k, wait), seed))
        assert "consumer" in message
        assert "a wgmma of the consumer role may still be reading" in message or (
            "read by the consumer role in `load_frag" in message and "copy.tma" in message
        ), message


def test_a_missing_expect_tx_leaves_bytes_unannounced() -> None:
    k = kernel("persistent")
    expect = next(s for s in walk(k.body) if isinstance(s, ExpectTx))
    message = str(_caught(without(k, expect), 0))
    assert "bytes that no mbarrier.expect_tx announced" in message
    assert "the producer's TMA copy" in message and "full[0]" in message


def test_a_missing_full_wait_is_a_race_or_an_early_read() -> None:
    k = kernel("not-persistent")
    wait = next(s for s in walk(k.body) if isinstance(s, Wait) and s.bar.name == "full")
    kinds = set()
    for seed in range(6):
        err = _caught(without(k, wait), seed)
        kinds.add(type(err))
        if isinstance(err, RaceError):
            assert "by the producer role in `copy.tma" in str(err)
            assert "by the consumer role in `load_frag" in str(err)
    assert kinds <= {RaceError, InterpreterError}


def test_a_deadlock_names_each_role_barrier_phase_and_step() -> None:
    k = kernel("persistent")
    release = next(s for s in walk(k.body) if isinstance(s, Arrive) and "previous" in s.reason)
    err = _caught(without(k, release), 0)
    assert isinstance(err, DeadlockError)
    message = str(err)
    assert message.startswith("deadlock in block 0: no role can advance")
    assert "producer: blocked in `mbarrier.wait empty[step % STAGES] parity" in message
    # the producer's fifth step waits for the consumers' release of step 0's slot
    assert "at tl = 0, kt = 4, step = 4: it waits for the phase of parity 0 of empty[0]" in message
    assert "empty[0] is in phase 0 (parity 0) with 0 of 2 arrival(s) in" in message
    assert "consumer: blocked in `mbarrier.wait full[step % STAGES]" in message


def test_an_arrival_count_below_the_consumers_is_caught() -> None:
    """`empty` counting one arrival where two consumer warpgroups arrive: the first one's
    arrival would free the slot while the second still reads it."""
    k = kernel("n128")
    bars = tuple(
        dataclasses.replace(m, arrivals=1) if m.name == "empty" else m for m in k.mbarriers
    )
    message = str(_caught(dataclasses.replace(k, mbarriers=bars), 0))
    assert "in the consumer role: 2 arrival(s) on empty[" in message
    assert "more arrivals than the barrier counts" in message


def test_a_doubled_release_is_caught() -> None:
    """Two releases per step complete two phases: the parity the producer waits for comes
    round again, and it waits for ever."""
    k = kernel("n128")
    release = next(s for s in walk(k.body) if isinstance(s, Arrive))
    for seed in (0, 1):
        err = _caught(without(k, release, (release, release)), seed)
        assert isinstance(err, DeadlockError | RaceError), err


def test_a_copy_nobody_waits_for_is_caught() -> None:
    """The consumers do nothing: the producer's copies land (or not) unobserved."""
    k = kernel("not-persistent")

    def idle(s):
        if isinstance(s, Roles):
            return Roles(s.producer, dataclasses.replace(s.consumer, body=()))
        return s

    idle_kernel = dataclasses.replace(k, body=map_body(k.body, idle))
    for seed in (0, 1, 2):
        with pytest.raises(InterpreterError, match="copy.tma") as info:
            run(idle_kernel, *size(k, steps=4), seed=seed)
        assert "in flight" in str(info.value) or "no mbarrier.wait observed" in str(info.value)


def test_the_scheduler_has_a_step_bound(monkeypatch) -> None:
    monkeypatch.setattr(roles, "MAX_STEPS", 50)
    with pytest.raises(InterpreterError, match="did not finish in 50 scheduler steps"):
        run(kernel("n128"), *size(kernel("n128")))


def test_a_let_is_a_32_bit_int() -> None:
    k = kernel("persistent")
    big = Let("tiles", Const(2**31))
    broken = dataclasses.replace(k, body=(big, *k.body[1:]))
    with pytest.raises(InterpreterError, match="let tiles"):
        run(broken, *size(k))


def test_the_tma_contract_is_checked() -> None:
    """A box lands as the operand is stored: a column-major buffer for a row-major A
    would need the TMA to transpose."""
    k = kernel("n128")
    bufs = tuple(
        dataclasses.replace(b, layout="col", pitch=b.rows) if b.name == "As" else b
        for b in k.buffers
    )
    with pytest.raises(InterpreterError, match="a TMA box lands as it is stored"):
        run(dataclasses.replace(k, buffers=bufs), *size(k))


# ---------------------------------------------------------------- the parts alone


def test_mbarrier_phases_parity_and_transaction_bytes() -> None:
    k = dataclasses.replace(kernel("n128"), mbarriers=(MBarrier("bar", 2, 2, "test"),))
    bars = MBarriers(k)
    stmt = Arrive(BarrierRef("bar", Const(1)))
    assert bars.passes("bar", 1, 1) and not bars.passes("bar", 1, 0)  # fresh: phase 0
    bars.arrive("bar", 1, 1, 128, [3, 0], "producer", stmt)  # expect_tx: 1 arrival, 128 B
    bars.arrive("bar", 1, 1, 0, [0, 5], "consumer", stmt)
    assert bars.phase("bar", 1) == 0  # arrivals in, bytes not
    bars.complete_tx("bar", 1, 128, [4, 0], "producer", stmt)
    assert bars.phase("bar", 1) == 1 and bars.passes("bar", 1, 0)
    assert bars.acquire("bar", 1) == [4, 5]  # every release joined
    with pytest.raises(InterpreterError, match="expects only 0 more"):
        bars.complete_tx("bar", 1, 2, None, "producer", stmt)
    bars.arrive("bar", 1, 2, 0, None, "consumer", stmt)
    with pytest.raises(InterpreterError, match="more arrivals"):
        bars.arrive("bar", 0, 3, 0, None, "consumer", stmt)
    assert bars.phase("bar", 1) == 2 and bars.passes("bar", 1, 1)


def test_seeds_give_different_interleavings() -> None:
    def thread(name: str, index: int, trace: list):
        def steps():
            for _ in range(30):
                trace.append(name)
                yield None

        return roles.Thread(name, index, steps(), lambda: name)

    orders = set()
    for seed in range(4):
        trace: list[str] = []
        sched = roles.Scheduler(np.random.default_rng(seed), None, 0)
        sched.run([thread("p", 0, trace), thread("c", 1, trace)], [], lambda i: None)
        assert trace.count("p") == trace.count("c") == 30
        orders.add(tuple(trace))
    assert len(orders) == 4
