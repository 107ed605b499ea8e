"""`cluster CM x CN`: thread-block clusters on the warp-specialized path. The blocks of a
cluster compute neighbouring tiles; each loads its part of the tiles it shares (B's along
M, A's along N) and the TMA unit multicasts it into every sharer; the consumers release a
stage in every block they share a tile with; a cluster barrier keeps each block alive
until the others are done with it.

Checked here: the interpreter runs a cluster's blocks concurrently and exactly, at every
cluster shape, persistent or not, at cluster tiles that reach past C and at partial tiles;
the handoff proof holds, and every handoff removed — the remote releases and the cluster
barrier included — comes back as a race or a deadlock, in the proof and in the
interpreter; the emitted code, the launch and the refusals."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from helpers import cli, interpret_exact, small_hopper, without

from tiledsl.driver import compile_file, compile_source
from tiledsl.emit.launch import launch_of
from tiledsl.interp.errors import DeadlockError, InterpreterError
from tiledsl.ir.nodes import HANDOFFS, Arrive, Barrier, KernelIR, TmaLoad, map_body, walk
from tiledsl.models.mbarrier_hazards import HandoffProblem, prove

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "hopper" / "cluster.tile"
TEXT = EXAMPLE.read_text()

# one consumer warpgroup on 64 x 128 tiles, C stored from its registers: quick to interpret
SMALL = small_hopper("small_cluster", "persistent", "    cluster 2 x 2\n")
_KERNELS: dict[tuple[str, str], KernelIR] = {}


def kernel(cluster: str = "2 x 1", variant: str = "small") -> KernelIR:
    key = (cluster, variant)
    if key not in _KERNELS:
        text = {
            "small": SMALL,
            "not-persistent": SMALL.replace("    persistent\n", ""),
            "pingpong": ROOT.joinpath("examples", "hopper", "pingpong.tile")
            .read_text()
            .replace("    persistent\n", "    persistent\n    cluster 2 x 2\n"),
            "example": TEXT.replace("cluster 2 x 1", "cluster 2 x 2"),
        }[variant].replace("cluster 2 x 2", f"cluster {cluster}")
        _KERNELS[key] = compile_source(text, f"{variant}.tile").kernels[0]
    return _KERNELS[key]


# ---------------------------------------------------------------- exact


@pytest.mark.parametrize("cluster", ["2 x 1", "1 x 2", "2 x 2"])
@pytest.mark.parametrize(
    "tiles, steps, blocks",
    [
        ((2, 2), 3, None),  # one cluster tile (2 x 2) or two
        ((3, 1), 2, 2),  # 3 tiles along M: a cluster tile reaches past C
        ((2, 3), 1, 4),  # one K step; two clusters of 2, or one of 4
    ],
)
def test_clusters_are_exact_under_several_interleavings(cluster, tiles, steps, blocks) -> None:
    k = kernel(cluster)
    bm, bn, bk = k.schedule.block
    seed = steps + tiles[0]  # a different interleaving per case; each runs two
    if blocks is not None and blocks % k.cluster_size:
        blocks = k.cluster_size
    check, stats = interpret_exact(
        k, tiles[0] * bm, tiles[1] * bn, steps * bk, seed, seed=seed, schedules=2, blocks=blocks
    )
    assert check.ok, check.detail
    assert stats.cluster_barriers == stats.blocks


# the swapped few-token kernel (weights x tokens^T, K-contiguous B and a column-major C) with
# 32 tokens a block: cuBLAS's form at 64 tokens (docs/performance.md, "What cuBLAS runs")
SWAPPED = """\
kernel swapped_cluster {
    A: f16[M, K] row
    B: f16[K, N] col
    C: f16[M, N] col
    C[m, n] = A[m, k] * B[k, n]

    block   64 x 32 x 64
    mma     m64n32k16
    stages  3
    copy    tma
    warp_specialize
    persistent
    cluster 1 x 2
    swizzle grouped 8
    target  cuda sm_90
}
"""


@pytest.mark.parametrize("cluster", ["1 x 2", "2 x 1"])
@pytest.mark.parametrize("m, n, k", [(128, 64, 192), (200, 70, 130), (127, 61, 37)])
def test_a_swapped_narrow_kernel_in_clusters_is_exact(cluster, m, n, k) -> None:
    """B's lines are its 32 columns here (K-contiguous): two blocks along M multicast 16
    lines each, two along N share A's 64 rows; partial tiles and cluster tiles past C."""
    kern = compile_source(SWAPPED.replace("cluster 1 x 2", f"cluster {cluster}"), "s.tile")
    check, stats = interpret_exact(kern.kernels[0], m, n, k, m + n, seed=k, schedules=2)
    assert check.ok, check.detail
    assert stats.cluster_barriers == stats.blocks


@pytest.mark.parametrize("variant", ["not-persistent", "pingpong"])
def test_clusters_without_a_tile_loop_and_with_two_teams(variant) -> None:
    k = kernel("2 x 2", variant)
    bm, bn, bk = k.schedule.block
    check, _ = interpret_exact(k, 3 * bm, 3 * bn, 3 * bk, seed=5, schedules=2)
    assert check.ok, check.detail


def test_partial_tiles_and_cluster_tiles_past_c_run_in_the_kernel_itself() -> None:
    """TMA zero-fills the loads and clips the stores: no twin, at any size it can map."""
    k = compile_file(EXAMPLE).kernels[0]
    for m, n, kk in ((200, 328, 136), (384, 264, 72)):
        check, stats = interpret_exact(k, m, n, kk, seed=1, schedules=2, blocks=2)
        assert check.ok, check.detail
        assert stats.tma_stores > 0


def test_the_multicast_carries_each_shared_tile_once_per_cluster() -> None:
    """2 x 2: each block loads half of A's tile and half of B's, each half landing in two
    blocks: two TMA loads per block per K step, issued once each."""
    k = kernel("2 x 2")
    loads = [s for s in walk(k.body) if isinstance(s, TmaLoad)]
    assert [(s.src.operand, s.multicast, s.dst.rows, s.dst.cols) for s in loads] == [
        ("A", "row", 32, 64),
        ("B", "column", 32, 128),
    ]
    bm, bn, bk = k.schedule.block
    _, stats = interpret_exact(k, 2 * bm, 2 * bn, 3 * bk, seed=2, schedules=1)
    assert stats.tma_loads == 4 * 2 * 3  # blocks x loads x steps (each landing in two)


# ---------------------------------------------------------------- the proof


def test_the_proof_holds_and_keeps_every_handoff() -> None:
    k = compile_file(EXAMPLE).kernels[0]
    prove(k)
    empty = next(m for m in k.mbarriers if m.name == "empty")
    assert empty.arrivals == 2 * 2  # two consumer warpgroups in each of two blocks
    assert all(d.kept for d in k.sync_report) and len(k.sync_report) == 11


@pytest.mark.parametrize("cluster", ["2 x 1", "2 x 2"])
def test_every_handoff_removed_is_caught(cluster) -> None:
    k = kernel(cluster)
    for s in {id(s): s for s in walk(k.body) if isinstance(s, HANDOFFS)}.values():
        with pytest.raises(HandoffProblem):
            prove(without(k, s))


def test_without_the_cluster_barrier_a_block_may_exit_while_used() -> None:
    k = kernel("2 x 1")
    barrier = next(s for s in k.body if isinstance(s, Barrier) and s.scope == "cluster")
    with pytest.raises(HandoffProblem) as info:
        prove(without(k, barrier))
    assert info.value.headline == (
        "block 1 may exit while another block of its cluster still uses it"
    ), str(info.value)
    bm, bn, bk = k.schedule.block
    with pytest.raises(InterpreterError, match="which may have exited: a cluster barrier"):
        interpret_exact(without(k, barrier), 2 * bm, bn, 2 * bk, seed=3, schedules=4)


def test_a_release_to_this_block_alone_deadlocks_the_cluster() -> None:
    """The empty barrier counts the releases of every sharing block's consumers: released
    in its own block only, the slot is never free again."""
    k = kernel("2 x 1")
    release = next(s for s in walk(k.body) if isinstance(s, Arrive) and s.sharers)
    local = dataclasses.replace(release, sharers=False)
    broken = dataclasses.replace(k, body=map_body(k.body, lambda s: local if s is release else s))
    with pytest.raises(HandoffProblem) as info:
        prove(broken)
    assert info.value.kind == "deadlock", str(info.value)
    bm, bn, bk = k.schedule.block
    with pytest.raises(DeadlockError, match=r"empty\[0\]"):
        interpret_exact(broken, 2 * bm, bn, 3 * bk, seed=4, schedules=1)


# ---------------------------------------------------------------- code, launch, refusals


def test_the_emitted_code_multicasts_and_releases_across_the_cluster() -> None:
    source = compile_file(EXAMPLE).source
    for line in (
        "__cluster_dims__(hopper_cluster_schedule::CLUSTER_SIZE, 1, 1)",
        "constexpr int CLUSTER_M = 2, CLUSTER_N = 1, CLUSTER_SIZE = 2;",
        "const int rank = blockIdx.x % CLUSTER_SIZE;",
        "const int pid = blockIdx.x / CLUSTER_SIZE;",
        "// blocks: the launch's clusters, a Divisor parameter (tiledsl.passes.launch_scalars)",
        "const int bm = cbm * CLUSTER_M + crow;",
        "tma_load_2d_multicast(&Bs[step % STAGES][0][crow * 32][0], &map_B, bn * BN, "
        "kt * BK + crow * 32, &full[step % STAGES], column_mask);",
        "mbarrier_arrive_remote(&empty[(step + STAGES - 1) % STAGES], r);",
        "mbarrier_init(&empty[s], 4);",
        "mbarrier.arrive.shared::cluster.b64",
    ):
        assert line in source, line
    assert source.count("cluster_sync();") == 2  # after the barriers' init, before the exit
    assert ".release.cluster.shared::cluster" not in source  # it halved the speed


def test_the_launch_holds_whole_clusters() -> None:
    launch = launch_of(compile_file(EXAMPLE).kernels[0])
    assert launch.cluster_size == 2
    sizes = {"M": 4096, "N": 4096, "K": 4096}
    assert launch.grid_dims(sizes, sms=132) == (132, 1)
    assert launch.grid_dims(sizes, sms=133) == (132, 1)  # whole clusters
    assert launch.grid_dims({"M": 384, "N": 256, "K": 64}, sms=132) == (4, 1)  # 2 cluster tiles
    described = launch.to_json()
    assert described["cluster"] == {"x": 2, "y": 1, "z": 1}
    assert described["persistent"]["grid_x"].startswith("min(multiprocessor count / 2 * 2, ")


@pytest.mark.parametrize(
    "change, col, message",
    [
        (
            ("cluster 2 x 1", "cluster 4 x 4"),
            5,
            "a cluster of 4 x 4 = 16 blocks: at most 8 blocks are portable",
        ),
        (
            ("cluster 2 x 1", "cluster 3 x 1"),
            5,
            "the 3 blocks of a cluster along M share B's tile of 64 lines, each multicasting "
            "a part of whole 8-line swizzle atoms, and 64 lines do not split so",
        ),
        (
            ("cluster 2 x 1", "cluster 0 x 1"),
            13,
            "'cluster' takes integers ≥ 1, found 0",
        ),
    ],
)
def test_refusals_are_located(tmp_path, capsys, change, col, message) -> None:
    path = tmp_path / "c.tile"
    path.write_text(TEXT.replace(*change))
    r = cli(["compile", str(path)], capsys)
    assert r.code == 1
    assert r.err.splitlines()[0] == f"{path}:21:{col}: error: {message}", r.err
    assert not list(tmp_path.glob("c.cu*"))


def test_a_cluster_needs_the_warp_specialized_pipeline(tmp_path, capsys) -> None:
    path = tmp_path / "c.tile"
    path.write_text(
        TEXT.replace("    warp_specialize\n", "")
        .replace("    persistent\n", "")
        .replace("    epilogue_via tma\n", "")
        .replace("copy    tma", "copy    async 16")
    )
    r = cli(["compile", str(path)], capsys)
    assert r.code == 1
    assert r.err.splitlines()[0] == (
        f"{path}:19:5: error: cluster is built for warp-specialized TMA kernels (the "
        "producer multicasts the tiles the cluster's blocks share)"
    ), r.err
    assert "note: add `copy tma` and `warp_specialize`" in r.err


def test_a_persistent_cluster_launch_holds_the_resident_clusters(monkeypatch) -> None:
    """The launcher asks the driver how many clusters fit at once (a cluster's blocks share
    a GPC) and launches that many, not SMs / cluster size."""
    from types import SimpleNamespace

    from tiledsl.gpu import runtime, tensor_maps

    asked = {}

    class Config:
        pass

    def max_active(function, config):
        asked.update(function=function, threads=config.blockDimX, smem=config.sharedMemBytes)
        return "ok", 30

    fake = SimpleNamespace(
        CUlaunchConfig=Config,
        CUfunction=lambda ptr: ("function", ptr),
        cuOccupancyMaxActiveClusters=max_active,
    )
    monkeypatch.setattr(tensor_maps, "driver", lambda: fake)
    monkeypatch.setattr(tensor_maps, "check", lambda cu, status, call: None)
    launch = launch_of(compile_file(EXAMPLE).kernels[0])
    fn = SimpleNamespace(kernel=SimpleNamespace(ptr=1234))
    assert runtime.resident_clusters(fn, launch) == 30
    assert asked == {"function": ("function", 1234), "threads": 384, "smem": launch.smem_bytes}
    # a CuPy that does not show the function's handle: the clusters the SM count allows
    monkeypatch.setattr(runtime, "multiprocessor_count", lambda: 132)
    assert runtime.resident_clusters(SimpleNamespace(), launch) == 66
