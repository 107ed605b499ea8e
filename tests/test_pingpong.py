"""`warp_specialize pingpong`: two teams of consumer warpgroups take a persistent block's
tiles in turn, ordered by a `turn` mbarrier per team.

Checked here: the interpreter runs it exactly under several interleavings, at any grid
(one team with a tile more, teams with none) and at partial tiles (all TMA); the handoff
proof holds, and every handoff removed — the turn's wait and arrival included — comes back
as a race or deadlock; the emitted code and the refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import cli, interpret_exact, without

from tiledsl.driver import compile_file, compile_source
from tiledsl.ir.nodes import HANDOFFS, Arrive, Barrier, KernelIR, Wait, walk
from tiledsl.models.mbarrier_hazards import HandoffProblem, prove

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "hopper" / "pingpong.tile"
TEXT = EXAMPLE.read_text()
_KERNELS: dict[str, KernelIR] = {}


def kernel(name: str = "example") -> KernelIR:
    if name not in _KERNELS:
        text = {
            "example": TEXT,
            # one team: 64 x 128 tiles of one m64n128k16 warpgroup, C stored from registers
            "small": TEXT.replace("128 x 128 x 64", "64 x 128 x 64")
            .replace("    coarsen 2 x 1\n", "")
            .replace("    epilogue_via tma\n", ""),
            "stages-2": TEXT.replace("stages  5", "stages  2"),
        }[name]
        _KERNELS[name] = compile_source(text, f"{name}.tile").kernels[0]
    return _KERNELS[name]


# ---------------------------------------------------------------- exact


@pytest.mark.parametrize("name", ["example", "small", "stages-2"])
@pytest.mark.parametrize(
    "tiles, steps, blocks",
    [
        ((2, 2), 6, 1),  # one block: the teams take two tiles each
        ((3, 1), 7, 2),  # an odd count: block 0's team 0 has a tile more than team 1
        ((1, 1), 2, 1),  # one tile: team 1 has none
        ((2, 3), 3, 4),  # fewer K steps than stages; block 3 has one tile
    ],
)
def test_two_teams_are_exact_under_several_interleavings(name, tiles, steps, blocks) -> None:
    k = kernel(name)
    assert k.teams == 2 and k.persistent
    bm, bn, bk = k.schedule.block
    seed = steps  # a different interleaving per case; each runs two
    check, stats = interpret_exact(
        k, tiles[0] * bm, tiles[1] * bn, steps * bk, seed, seed=seed, schedules=2, blocks=blocks
    )
    assert check.ok, check.detail
    assert stats.tma_loads == 2 * tiles[0] * tiles[1] * steps


def test_partial_tiles_run_in_the_kernel_itself() -> None:
    """Every global access is TMA: zero-filled loads, clipped stores, no twin."""
    k = kernel()
    for m, n, kk in ((200, 328, 104), (136, 264, 72)):
        check, _ = interpret_exact(k, m, n, kk, seed=1, schedules=2, blocks=2)
        assert check.ok, check.detail


# ---------------------------------------------------------------- the proof


def test_the_proof_holds_and_keeps_every_handoff() -> None:
    k = kernel()
    prove(k)
    assert [m.name for m in k.mbarriers] == ["full", "empty", "turn"]
    assert all(d.kept for d in k.sync_report) and len(k.sync_report) == 13


def test_every_handoff_removed_is_caught() -> None:
    k = kernel()
    for s in {id(s): s for s in walk(k.body) if isinstance(s, HANDOFFS)}.values():
        with pytest.raises(HandoffProblem):
            prove(without(k, s))


def test_the_turns_are_what_keeps_a_team_from_passing_on_the_phase_before() -> None:
    """Without its turn a team waits on a stage only for its own tiles' phases, and a wait
    on parity 1 of a fresh barrier passes at once: team 1 would read a slot before it is
    filled, in some interleavings (the interpreter's seeds may miss them; the proof does
    not)."""
    k = kernel()
    turn = next(s for s in walk(k.body) if isinstance(s, Wait) and s.bar.name == "turn")
    with pytest.raises(HandoffProblem) as info:
        prove(without(k, turn))
    assert info.value.kind in ("race", "deadlock")
    handoff = next(s for s in walk(k.body) if isinstance(s, Arrive) and s.bar.name == "turn")
    with pytest.raises(HandoffProblem) as info:
        prove(without(k, handoff))
    assert info.value.headline == "a deadlock on turn[1]", str(info.value)


def test_the_handoff_waits_for_every_lane_of_the_team() -> None:
    """Lane 0 hands the turn over once the warpgroup barrier says every lane has passed its
    waits. Without the barrier a lagging warp of team 0 could still be at its first wait on
    turn[0] when team 1 hands the turn back: that wait (parity 1 of a barrier now in phase
    1) then waits for a phase that only comes after it — a hang the interpreter cannot
    show, since it runs a team's warps in lock step."""
    k = kernel()
    joined = next(s for s in walk(k.body) if isinstance(s, Barrier) and "hands over" in s.reason)
    with pytest.raises(HandoffProblem) as info:
        prove(without(k, joined))
    assert info.value.headline == "a missed phase of turn[0]", str(info.value)


# ---------------------------------------------------------------- code and refusals


def test_the_emitted_code_splits_the_consumers_into_teams() -> None:
    source = compile_file(EXAMPLE).source_for((kernel(),))
    for line in (
        "constexpr int TEAMS = 2;",
        "const int team = __shfl_sync(0xffffffffu, warp / (WARPS_M * WARPS_N), 0);",
        "if (warp == WARPS_M * WARPS_N * TEAMS) {",
        "for (int tl = team; tl < (tiles - pid + blocks - 1) / blocks; tl += 2) {",
        "mbarrier_wait(&turn[team], (tl / TEAMS + team + 1) % 2);",
        "if (lane == 0) mbarrier_arrive(&turn[(team + 1) % TEAMS]);",
        "warpgroup_barrier(1 + warp);  // every lane of the warpgroup has passed its waits",
        "mbarrier_init(&turn[s], 1);",
    ):
        assert line in source, line
    assert kernel().threads == 384


def test_pingpong_needs_persistent(tmp_path, capsys) -> None:
    path = tmp_path / "p.tile"
    path.write_text(TEXT.replace("    persistent\n", ""))
    r = cli(["compile", str(path)], capsys)
    assert r.code == 1
    assert r.err.splitlines()[0] == (
        f"{path}:19:5: error: warp_specialize pingpong gives a block's tiles to its two "
        "consumer teams in turn, so a block needs a loop over tiles"
    )
    assert "note: add `persistent`" in r.err


def test_a_team_too_big_for_the_register_file_is_refused(tmp_path, capsys) -> None:
    path = tmp_path / "p.tile"
    path.write_text(
        TEXT.replace("128 x 128 x 64", "256 x 128 x 64").replace("stages  5", "stages  2")
    )
    r = cli(["compile", str(path)], capsys)
    assert r.code == 1
    assert f"{path}:19:5: error: 4 consumer warpgroups and a producer are 640 threads" in r.err, (
        r.err
    )


def test_check_shows_the_teams(capsys) -> None:
    r = cli(["check", str(EXAMPLE)], capsys)
    assert r.code == 0
    assert "warp_specialize pingpong" in r.out
    assert "384 per block = 2 teams (pingpong, alternate tiles) of 1 warpgroups" in r.out
    assert "turn    2 x 8 bytes" in r.out
    assert (
        "  handoffs  proven to order every shared-memory access under every interleaving" in r.out
    )
    assert "; 13 kept, 0 removed;" in r.out
