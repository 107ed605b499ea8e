"""The handoff proof (tiledsl.models.mbarrier_hazards): a warp-specialized kernel's mbarrier
handoffs, warpgroup barriers, proxy fence and TMA store waits order every shared-memory
access under every interleaving, and no wait deadlocks — statically, without data.

Every Hopper kernel tiledsl builds passes it; every handoff statement removed in turn
comes back as the race, deadlock or broken count it prevents, named exactly; a broken
kernel is refused at the `warp_specialize` directive; `--explain-sync` shows each
decision; and a handoff the proof holds without is what `sync minimal` removes.
"""

from __future__ import annotations

import dataclasses

import pytest
from helpers import cli, without

from tiledsl.driver import compile_file, compile_source
from tiledsl.errors import TileError
from tiledsl.ir.expr import Const, Var
from tiledsl.ir.nodes import (
    HANDOFFS,
    Arrive,
    Barrier,
    If,
    KernelIR,
    MmaWait,
    ProxyFence,
    Roles,
    TmaStoreWait,
    Wait,
    map_body,
    walk,
)
from tiledsl.models.mbarrier_hazards import HandoffProblem, decide, prove

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
    epilogue_via tma
    target  cuda sm_90
}"""


def variant(*edits: tuple[str, str]) -> str:
    text = WS
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    return text


N128 = [("128 x 256 x 64", "128 x 128 x 64"), ("m64n256k16", "m64n128k16")]
VARIANTS = {
    "epilogue": variant(),
    "registers-out": variant(("    epilogue_via tma\n", "")),
    "not-persistent": variant(("    persistent\n", "")),
    "one-consumer": variant(("128 x 256 x 64", "64 x 128 x 64"), ("m64n256k16", "m64n128k16")),
    "coarsened": variant(
        ("m64n256k16", "m64n128k16"), ("stages  4", "stages  4\n    coarsen 1 x 2")
    ),
    "stages-2": variant(*N128, ("stages  4", "stages  2")),
    "f32-c": variant(*N128, ("C: f16[M, N]", "C: f32[M, N]")),
}
_KERNELS: dict[str, KernelIR] = {}


def kernel(name: str) -> KernelIR:
    if name not in _KERNELS:
        _KERNELS[name] = compile_source(VARIANTS[name], f"{name}.tile").kernels[0]
    return _KERNELS[name]


def problem(k: KernelIR) -> HandoffProblem:
    with pytest.raises(HandoffProblem) as info:
        prove(k)
    return info.value


def handoffs(k: KernelIR) -> list:
    return list({id(s): s for s in walk(k.body) if isinstance(s, HANDOFFS)}.values())


# ---------------------------------------------------------------- what passes


@pytest.mark.parametrize(
    "path",
    [
        "examples/hopper/ws.tile",
        "examples/hopper/persistent.tile",
        "examples/hopper/epilogue.tile",
        "examples/tuned/hopper_tuned.tile",
        "examples/tuned/hopper_tuned_192.tile",
        "examples/epilogue_hopper.tile",
        "examples/main.tile",
    ],
)
def test_every_hopper_example_is_proven_and_keeps_each_handoff(path: str) -> None:
    kernels = [k for k in compile_file(path).kernels if k.mbarriers]
    assert kernels
    for k in kernels:
        prove(k)
        assert len(k.sync_report) == len(handoffs(k)) > 0
        for d in k.sync_report:
            assert d.kept and d.why.startswith("needed: without it, "), d.why


@pytest.mark.parametrize("name", list(VARIANTS))
def test_every_variant_is_proven(name: str) -> None:
    k = kernel(name)
    prove(k)
    assert all(d.kept for d in k.sync_report)


# ---------------------------------------------------------------- each handoff removed

#: What breaks without each handoff statement of the `epilogue` variant, in program order:
#: (the problem's kind, its headline).
EPILOGUE = [
    ("race", "WAR on As"),  # the producer's wait on empty: it overwrites a slot being read
    ("count", "unannounced bytes on full[0]"),  # expect_tx
    ("race", "RAW on As"),  # the consumers' wait on full: they read before the bytes land
    ("deadlock", "a deadlock on empty[0], full[0]"),  # the release of the previous step's slot
    ("deadlock", "a deadlock on empty[3], full[3]"),  # the release after a tile's last step
    ("race", "WAR on Cs"),  # the store's wait before Cs is written again
    ("race", "WAR on Cs"),  # the warpgroup barrier after it (only lane 0 waited)
    ("race", "RAW on Cs"),  # fence.proxy.async: the lanes' writes, unseen by the TMA unit
    ("race", "RAW on Cs"),  # the warpgroup barrier before the TMA store
    ("race", "a TMA store still reading Cs at the block's exit"),  # the drain
]


def test_each_handoff_removed_is_named_exactly() -> None:
    k = kernel("epilogue")
    found = handoffs(k)
    assert [type(s) for s in found] == [
        Wait, type(found[1]), Wait, Arrive, Arrive, TmaStoreWait, Barrier, ProxyFence,
        Barrier, TmaStoreWait,
    ]  # fmt: skip
    for s, (kind, headline) in zip(found, EPILOGUE, strict=True):
        err = problem(without(k, s))
        assert (err.kind, err.headline) == (kind, headline), str(err)


@pytest.mark.parametrize("name", ["registers-out", "not-persistent", "one-consumer", "coarsened"])
def test_every_handoff_removed_is_caught(name: str) -> None:
    k = kernel(name)
    for s in handoffs(k):
        err = problem(without(k, s))
        assert err.kind in ("race", "deadlock", "count")
        assert "full[" in str(err) or "empty[" in str(err) or "Cs" in str(err) or " on " in str(err)


def test_the_messages_say_who_where_and_at_what_size() -> None:
    k = kernel("epilogue")
    release = next(s for s in walk(k.body) if isinstance(s, Arrive) and "previous" in s.reason)
    assert str(problem(without(k, release))) == (
        "a deadlock on empty[0], full[0] — consumer warpgroup 0 waits in `mbarrier.wait "
        "full[step % STAGES] parity step / STAGES % 2` (tl = 0, kt = 4, step = 4) for the phase "
        "of parity 1 of full[0], which is in phase 1 with 0 of 1 arrival(s) in and 0 byte(s) "
        "still to land; consumer warpgroup 1 waits in `mbarrier.wait full[step % STAGES] "
        "parity step / STAGES % 2` (tl = 0, kt = 4, step = 4) for the phase of parity 1 of "
        "full[0], which is in phase 1 with 0 of 1 arrival(s) in and 0 byte(s) still to land; "
        "the producer waits in `mbarrier.wait empty[step % STAGES] parity (step / STAGES + 1) "
        "% 2` (tl = 0, kt = 4, step = 4) for the phase of parity 0 of empty[0], which is in "
        "phase 0 with 0 of 2 arrival(s) in and 0 byte(s) still to land; nothing else can run "
        "(one block of 1 tile(s), 5 K step(s) each)"
    )
    full = next(s for s in walk(k.body) if isinstance(s, Wait) and s.bar.name == "full")
    assert str(problem(without(k, full))) == (
        "RAW on As — `copy.tma As[step % STAGES] + (0, 0) 128x64 <- A @ (bm * BM, kt * BK) + "
        "(0, 0) 128x64, on full[step % STAGES]` (the producer, tl = 0, kt = 0, step = 0) and "
        "`load_frag a[0][0] <- As[step % STAGES] + (wm * MMA_M, kk * MMA_K) 64x16` (consumer "
        "warpgroup 0's wgmmas, tl = 0, kt = 0, step = 0) are not ordered by any handoff (one "
        "block of 1 tile(s), 1 K step(s) each)"
    )


@pytest.mark.parametrize("name", ["epilogue", "not-persistent"])
def test_a_flipped_parity_is_caught(name: str) -> None:
    k = kernel(name)
    for s in handoffs(k):
        if isinstance(s, Wait):
            flipped = without(k, s, (dataclasses.replace(s, parity=(s.parity + 1) % 2),))
            assert problem(flipped).kind in ("race", "deadlock")


@pytest.mark.parametrize("pending", [1, 0])
def test_a_removed_wgmma_retire_is_caught(pending: int) -> None:
    """Without `mma.wait pending=1` a slot is released while its wgmmas still read it;
    without the last `pending=0`, the last step's slot too."""
    k = kernel("epilogue")
    wait = next(s for s in walk(k.body) if isinstance(s, MmaWait) and s.pending == pending)
    err = problem(without(k, wait))
    # at one tile of one K step, nothing reuses the slot: the group is just never retired
    expected = ("WAR on As", "WAR on Bs") if pending else ("wgmmas never waited for",)
    assert err.kind == "race" and err.headline in expected, str(err)
    assert "wgmma" in str(err)


def test_an_arrival_count_below_the_consumers_is_caught() -> None:
    """`empty` counting one arrival where two consumer warpgroups arrive: the first one's
    release would free the slot while the other one's wgmmas still read it, and the other
    one's counts toward the next phase."""
    k = kernel("epilogue")
    bars = tuple(
        dataclasses.replace(m, arrivals=1) if m.name == "empty" else m for m in k.mbarriers
    )
    err = problem(dataclasses.replace(k, mbarriers=bars))
    assert (err.kind, err.headline) == ("race", "an early arrival on empty[0]"), str(err)
    assert "consumer warpgroup 1 (lane 0)" in str(err)


def test_one_warpgroup_that_does_not_release_is_caught() -> None:
    """Only consumer warpgroup 0 releases its slots: a hazard of one warpgroup that a
    lock-step run of the consumers cannot show; the proof runs each warpgroup on its own."""
    k = kernel("epilogue")
    for s in walk(k.body):
        if isinstance(s, Arrive):
            k = without(k, s, (If(Var("warp"), "==", Const(0), (s,)),))
    err = problem(k)
    assert err.kind == "deadlock" and err.headline.startswith("a deadlock on empty["), str(err)


def test_a_doubled_release_is_caught() -> None:
    k = kernel("epilogue")
    release = next(s for s in walk(k.body) if isinstance(s, Arrive))
    assert problem(without(k, release, (release, release))).kind in ("race", "deadlock")


def test_a_copy_nobody_waits_for_is_caught() -> None:
    k = kernel("not-persistent")

    def idle(s):
        if isinstance(s, Roles):
            return Roles(s.producer, dataclasses.replace(s.consumer, body=()))
        return s

    err = problem(dataclasses.replace(k, body=map_body(k.body, idle)))
    assert err.headline.startswith("a TMA copy nobody waits for on full["), str(err)


# ---------------------------------------------------------------- refusal, decisions


def test_a_kernel_that_fails_the_proof_is_refused_at_warp_specialize() -> None:
    k = kernel("epilogue")
    fence = next(s for s in walk(k.body) if isinstance(s, ProxyFence))
    with pytest.raises(TileError) as info:
        decide(without(k, fence), remove=True)
    (d,) = info.value.diagnostics
    assert (d.loc.line, d.loc.col) == (10, 5)  # the `warp_specialize` line
    assert d.message.startswith("the roles' handoffs do not order every access: RAW on Cs — ")
    assert "tiledsl bug" in " ".join(d.notes)


def test_sync_minimal_removes_a_handoff_the_proof_holds_without() -> None:
    """A second warpgroup barrier right after the first one orders nothing more."""
    k = kernel("epilogue")
    first = next(s for s in walk(k.body) if isinstance(s, Barrier))
    extra = Barrier("warp", "an extra barrier")
    doubled = without(k, first, (first, extra))
    decisions, removed = decide(doubled, remove=True)
    assert removed == {id(extra)} or removed == {id(first)}
    redundant = [d for d in decisions if not d.kept]
    assert len(redundant) == 1 and redundant[0].why == "redundant: the proof holds without it"
    kept, nothing = decide(doubled, remove=False)
    assert not nothing and all(d.kept for d in kept)


def test_explain_sync_shows_each_handoff_decision(tmp_path, capsys) -> None:
    path = tmp_path / "ws.tile"
    path.write_text(WS)
    r = cli(["compile", str(path), "--explain-sync"], capsys)
    assert r.code == 0
    out = r.out
    assert "The handoff proof kept 10 handoff statement(s) and removed 0" in out
    assert "     #1 kept: mbarrier.wait empty[step % STAGES] parity (step / STAGES + 1) % 2" in out
    assert "        needed: without it, WAR on As — `load_frag a[0][0]" in out
    assert "     #8 kept: fence.proxy.async" in out
    assert "        needed: without it, RAW on Cs — `store_frag Cs[warp]" in out


def test_the_warp_specialization_picture_says_what_each_handoff_prevents(tmp_path, capsys):
    path = tmp_path / "ws.tile"
    path.write_text(WS)
    assert cli(["viz", str(path), "-o", str(tmp_path / "out")], capsys).code == 0
    (dot,) = (tmp_path / "out" / "ws").glob("*-warp-specialization.dot")
    text = dot.read_text()
    assert "kept: needed: without it, RAW on As" in text
    assert "kept: needed: without it, a deadlock on empty[0]" in text
    assert "kept: needed: without it, RAW on Cs" in text


def test_a_second_compile_reuses_the_proof_on_its_own_statements() -> None:
    """decide's verdicts are kept by the kernel's IR text and schedule: a second compile of
    the same file gets them at once, attached to its own statements (what --explain-sync
    and the pictures look up by identity)."""
    first = compile_source(WS, "ws.tile").kernels[0]
    second = compile_source(WS, "ws.tile").kernels[0]
    assert [d.why for d in first.sync_report] == [d.why for d in second.sync_report]
    mine = {id(s) for s in walk(second.body) if isinstance(s, HANDOFFS)}
    assert {id(d.barrier) for d in second.sync_report} == mine
