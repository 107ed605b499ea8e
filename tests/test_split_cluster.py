"""`split_k S via cluster`: a block per slice of every tile's K steps, the tile's slices one
thread-block cluster; every slice but the first leaves its partial sum in its own shared
memory (Ps) and arrives on slice 0's `sums`, slice 0 adds them over distributed shared
memory in slice order, hands each slice's Ps back (`taken`) and stores C.

Checked here: the interpreter runs the kernel exactly at odd shapes, in several cluster
orders, every other slice's partial sum read once; each handoff of the exchange taken out
is caught, by the interpreter or the proof or both; the emitted code and launch (a cluster
of the slices, no workspace, no tickets); the directive's errors, its round trip and its
tuning set; on a GPU, both oracles, the same bits on every launch, and the same bits as
`split_k S` through the workspace (the same order of additions)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from helpers import cli, interpret_exact, line_of, small_hopper, without

from tiledsl.driver import compile_source
from tiledsl.frontend.formatter import format_program
from tiledsl.frontend.parser import parse
from tiledsl.gpu.runtime import gpu_available
from tiledsl.interp.errors import InterpreterError
from tiledsl.ir.nodes import (
    Arrive,
    Barrier,
    KernelIR,
    Ticket,
    Wait,
    walk,
)
from tiledsl.models.mbarrier_hazards import HandoffProblem, prove
from tiledsl.tune.space import expand

SMALL = small_hopper("small_split_cluster", "split_k 2 via cluster")
EXAMPLE = Path(__file__).parent.parent / "examples/hopper/split_k_cluster.tile"
_KERNELS: dict[int, KernelIR] = {}


def kernel(split: int = 2) -> KernelIR:
    if split not in _KERNELS:
        text = SMALL.replace("split_k 2", f"split_k {split}")
        _KERNELS[split] = compile_source(text, "small.tile").kernels[0]
    return _KERNELS[split]


def _statement(k: KernelIR, kind, where: str = "") -> object:
    found = [s for s in walk(k.body) if isinstance(s, kind) and where in getattr(s, "reason", "")]
    (statement,) = {id(s): s for s in found}.values()
    return statement


# ---------------------------------------------------------------- exact


@pytest.mark.parametrize(
    "split, m, n, steps",
    [
        (2, 64, 128, 8),  # one tile, one cluster of two slices
        (3, 64, 256, 7),  # two tiles in three uneven slices
        (2, 128, 256, 5),  # four clusters
        (4, 64, 128, 2),  # fewer K steps than slices: two empty slices add zeros
        (3, 70, 200, 5),  # partial tiles along M and N (TMA's zeros, guarded C stores)
    ],
)
def test_split_k_via_cluster_is_exact_in_every_cluster_order(split, m, n, steps) -> None:
    k = kernel(split)
    assert k.split_cluster and k.blocks_per_cluster == split and not k.tickets
    bk = k.schedule.block[2]
    check, stats = interpret_exact(k, m, n, steps * bk - 3, seed=steps, schedules=4)
    assert check.ok, check.detail
    tiles = -(-m // 64) * -(-n // 128)
    assert stats.partial_sums == tiles * (split - 1)  # every other slice's, read once
    assert stats.blocks == tiles * split


def test_the_example_is_exact_at_few_tokens_and_odd_sizes() -> None:
    k = compile_source(EXAMPLE.read_text(), EXAMPLE.name).kernels[0]
    for m, n, kk in ((16, 128, 512), (5, 70, 37), (17, 130, 300)):
        check, _ = interpret_exact(k, m, n, kk, schedules=2)
        assert check.ok, (m, n, kk, check.detail)


# ---------------------------------------------------------------- each handoff removed


def test_the_wait_for_slice_0s_reads_removed_lets_a_slice_exit_under_them() -> None:
    """Without `taken`, a slice may exit (its shared memory gone) before slice 0 reads it."""
    k = kernel(2)
    broken = without(k, _statement(k, Wait, "slice 0 has read"))
    with pytest.raises(HandoffProblem, match="block 1 may exit while another block"):
        prove(broken)
    with pytest.raises(InterpreterError, match="which may have exited"):
        interpret_exact(dataclasses.replace(broken, sync_report=()), 64, 128, 256, schedules=4)


def test_the_wait_for_the_partial_sums_removed_is_a_race() -> None:
    k = kernel(2)
    broken = without(k, _statement(k, Wait, "every other slice's partial sum"))
    with pytest.raises(HandoffProblem, match="(RAW|WAR) on Ps of block 1"):
        prove(broken)


def test_the_warpgroup_barrier_before_the_arrival_removed_is_a_race() -> None:
    """Lane 0 arrives for the warpgroup: the other lanes' stores to Ps must come first."""
    k = kernel(2)
    broken = without(k, _statement(k, Barrier, "before lane 0's arrival"))
    with pytest.raises(HandoffProblem, match="(RAW|WAR) on Ps of block 1"):
        prove(broken)


def test_the_hand_back_removed_deadlocks() -> None:
    k = kernel(2)
    broken = without(k, _statement(k, Arrive, "is read: its block may exit"))
    with pytest.raises(HandoffProblem, match="deadlock|waits"):
        prove(broken)


def test_the_proof_traces_the_tiles_slices_together() -> None:
    k = kernel(3)
    prove(k)
    assert not any(isinstance(s, Ticket) for s in walk(k.body))
    kept = [d for d in k.sync_report if d.kept]
    assert kept and all(d.why for d in kept)


# ---------------------------------------------------------------- code, launch


def test_the_emitted_code_is_a_cluster_of_the_slices_with_no_workspace() -> None:
    compiled = compile_source(SMALL, "small.tile")
    source = compiled.source
    for line in (
        "constexpr int SPLIT_K = 2;  // split_k via cluster",
        "__cluster_dims__(small_split_cluster_schedule::SPLIT_K, 1, 1)",
        "mbarrier_init(&sums[0], WARPS_M * WARPS_N * (SPLIT_K - 1));",
        "mbarrier_init(&taken[0], WARPS_M * WARPS_N);",
        "cluster_sync();  // every slice's barriers are initialised",
        "if (slice == 0) {",
        "mbarrier_wait_cluster(&sums[0], 0);",
        "peer_load_float4(&partial[",
        "if (lane == 0) mbarrier_arrive_cluster(&taken[0], c);",
        "if (lane == 0) mbarrier_arrive_cluster(&sums[0], 0);",
        "mbarrier_wait(&taken[0], 0);",
    ):
        assert line in source, line
    kernel_text = source.split('extern "C"')[1]
    assert "take_ticket(" not in kernel_text and "workspace" not in kernel_text
    launch = compiled.launches[0]
    described = launch.to_json()
    assert described["cluster"] == {"x": 2, "y": 1, "z": 1}
    assert "split_k" not in described  # no workspace or tickets to allocate
    assert not any(name in ("workspace", "tickets") for name, _ in launch.args)
    assert launch.grid_dims({"M": 130, "N": 256, "K": 64}) == (3 * 2 * 2, 1)
    k = compiled.kernels[0]
    assert [m.name for m in k.mbarriers][-2:] == ["sums", "taken"]
    assert k.buffer("Ps").size_bytes == 64 * 128 * 4


def test_check_and_compile_name_the_cluster_split(capsys) -> None:
    r = cli(["compile", str(EXAMPLE), "--explain-sync"], capsys)
    assert r.code == 0, r.err
    r = cli(["check", str(EXAMPLE), "--size", "16x4096x11008"], capsys)
    assert r.code == 0, r.err
    # the schedule, the split and the grid as a cluster of the slices, not the workspace's
    assert "warp_specialize  split_k 2 via cluster  " in r.out
    lines = r.out.splitlines()
    split = lines[line_of(r.out, "  split-K  ") - 1]
    assert "one thread-block cluster of 2" in split and "over distributed shared memory" in split
    assert "workspace:" not in split and "ticket counter" not in split
    grid = lines[line_of(r.out, "64 tiles in 2 slices of 43 K steps") - 1]
    assert "as a cluster (64 clusters)" in grid and "no block waits for another" not in grid


# ---------------------------------------------------------------- the directive


def _refusal(tmp_path: Path, capsys, text: str) -> list[str]:
    path = tmp_path / "s.tile"
    path.write_text(text)
    r = cli(["compile", str(path)], capsys)
    assert r.code == 1
    assert not list(tmp_path.glob("s.cu*"))
    return [line.replace(f"{path}:", "") for line in r.err.splitlines()]


@pytest.mark.parametrize(
    "change, message, fix",
    [
        (
            ("    split_k 2 via cluster", "    persistent\n    split_k 2 via cluster"),
            "split_k 2 via cluster beside persistent",
            "drop `persistent` (a block per slice), or write `persistent split_k 2`",
        ),
        (
            ("split_k 2 via cluster", "split_k 9 via cluster"),
            "split_k 9 via cluster: a cluster holds at most 8 blocks",
            "write at most `split_k 8 via cluster`, or `split_k 9` (through the workspace)",
        ),
        (
            ("    split_k 2 via cluster", "    split_k 2 via cluster\n    cluster 2 x 1"),
            "split_k in thread-block clusters is not built yet",
            "drop `cluster`",
        ),
    ],
)
def test_split_k_via_cluster_is_refused_where_it_is_not_built(
    tmp_path, capsys, change, message, fix
) -> None:
    text = SMALL.replace(*change)
    err = _refusal(tmp_path, capsys, text)
    # `persistent` then `split_k 2 via cluster` reads as one directive, at `persistent`
    line = line_of(text, "persistent" if "persistent" in text else "split_k ")
    first = next(e for e in err if e.startswith(f"{line}:5: error: "))
    assert message in first, err
    assert any(fix in e for e in err), err


def test_the_direct_path_refuses_the_cluster_split(tmp_path, capsys) -> None:
    text = (Path(__file__).parent.parent / "examples/direct/few_tokens_direct.tile").read_text()
    assert "split_k 2" in text
    text = text.replace("    split_k 2 ", "    split_k 2 via cluster ", 1)
    err = _refusal(tmp_path, capsys, text)
    assert any("split_k 2 via cluster is built for the warp-specialized wgmma" in e for e in err)
    assert any("write `split_k 2`" in e for e in err), err


def test_a_split_via_what_it_does_not_know_is_a_syntax_error(tmp_path, capsys) -> None:
    err = _refusal(tmp_path, capsys, SMALL.replace("via cluster", "via dsmem"))
    assert err[0].startswith(f"{line_of(SMALL, 'split_k 2')}:"), err


def test_the_directive_prints_back_as_written() -> None:
    program = parse(SMALL, "s.tile")
    text = format_program(program)
    assert "split_k 2 via cluster" in text
    assert parse(text, "s.tile") == program
    default = compile_source(SMALL.replace("via cluster", "via workspace"), "w.tile").kernels[0]
    assert default.tickets and not default.split_cluster


def test_the_slices_are_a_tuning_set_and_one_slice_is_no_split() -> None:
    points = expand(parse(SMALL.replace("split_k 2", "split_k {1, 2, 4}"), "space.tile"))
    assert [p.label for p in points] == [
        "split_k 1 via cluster",
        "split_k 2 via cluster",
        "split_k 4 via cluster",
    ]
    kernels = [compile_source(p.text, "p.tile").kernels[0] for p in points]
    assert [(k.grid_split, k.split_cluster) for k in kernels] == [(0, False), (2, True), (4, True)]
    for point in points:
        assert parse(point.text, "p.tile") == point.program


# ---------------------------------------------------------------- on the GPU


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
@pytest.mark.parametrize(
    "size", [(16, 4096, 11008), (1, 4096, 4096), (17, 1000, 4099), (3, 200, 100)]
)
def test_split_k_via_cluster_on_the_gpu_is_exact_and_has_the_workspace_splits_bits(size) -> None:
    import cupy as cp

    from tiledsl.gpu.runtime import device_arch, launcher, load_module
    from tiledsl.interp.oracle import check_exact, from_storage, make_inputs, to_storage
    from tiledsl.ir.targets import build_arch

    text = EXAMPLE.read_text()
    runs = {}
    for label, source in (("cluster", text), ("workspace", text.replace(" via cluster", ""))):
        compiled = compile_source(source, f"{label}.tile")
        k, launch = compiled.kernels[0], compiled.launches[0]
        runs[label] = (
            k,
            launcher(load_module(compiled.source, build_arch(device_arch(), (k,))), launch),
        )
    k = runs["cluster"][0]
    assert k.split_cluster and not runs["workspace"][0].split_cluster
    g = k.gemm.as_written
    m, n, kk = size
    for data in ("exact", "normal"):
        inputs = make_inputs(g, m, n, kk, data, np.random.default_rng(1))
        arrays = {
            g.a.name: cp.asarray(to_storage(g.a, inputs.a)),
            g.b.name: cp.asarray(to_storage(g.b, inputs.b)),
            g.c.name: cp.zeros((m, n), cp.float16),
        }
        outputs = {}
        for label, (_, run) in runs.items():
            for _ in range(3 if label == "cluster" else 1):
                arrays[g.c.name].fill(0)
                run(arrays, g.size_env(m, n, kk))
                outputs.setdefault(label, []).append(cp.asnumpy(arrays[g.c.name]).view(np.uint16))
        first = outputs["cluster"][0]
        assert all(np.array_equal(first, o) for o in outputs["cluster"])  # every launch
        assert np.array_equal(first, outputs["workspace"][0])  # the same order of additions
        if data == "exact":
            tile = k.gemm.oriented(k.schedule.block)[:2]
            out = from_storage(g.c, first.view(np.float16), (m, n))
            check = check_exact(g, inputs, out, tile, None)
            assert check.ok, check.detail
