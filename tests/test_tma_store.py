"""`epilogue_via tma`: C staged by stmatrix in a swizzled tile per consumer warpgroup and
written by the TMA unit (tiledsl.passes.warp_specialization), in the IR, the emitted code,
the launch, the interpreter — exact at tiles the TMA unit clips, every handoff of the
staging removed caught — and the refusals, each at the directive."""

from __future__ import annotations

import dataclasses

import pytest
from helpers import ROOT, interpret_exact, kernel_text, line_of

from tiledsl.driver import compile_source, lower_file
from tiledsl.emit.launch import launch_of
from tiledsl.errors import TileError
from tiledsl.gpu.staging import plan
from tiledsl.interp.interpreter import InterpreterError, RaceError
from tiledsl.ir.nodes import (
    Barrier,
    KernelIR,
    ProxyFence,
    StoreFrag,
    TmaStore,
    TmaStoreWait,
    map_body,
    walk,
)
from tiledsl.ir.partial_tiles import tma_only
from tiledsl.lowering.edges import needs_twin, variant

HOPPER = (
    "block 128 x 256 x 64",
    "mma m64n256k16",
    "stages 4",
    "copy tma",
    "warp_specialize",
    "persistent",
    "epilogue_via tma",
    "target cuda sm_90",
)
F16 = ("A: f16[M, K] row", "B: f16[K, N] row", "C: f16[M, N] row")


def text(*directives: str, operands: tuple[str, ...] = F16) -> str:
    return kernel_text(*directives, operands=operands)


def swap(directives: tuple[str, ...], old: str, new: str) -> tuple[str, ...]:
    assert old in directives, old
    return tuple(new if d == old else d for d in directives)


N128 = swap(
    swap(HOPPER, "block 128 x 256 x 64", "block 128 x 128 x 64"), "mma m64n256k16", "mma m64n128k16"
)
VARIANTS = {
    "persistent": text(*HOPPER),
    "not-persistent": text(*(d for d in HOPPER if d != "persistent")),
    "stages-3": text(*swap(HOPPER, "stages 4", "stages 3")),  # room for all 256 columns
    "coarsened": text(*swap(HOPPER, "mma m64n256k16", "mma m64n128k16"), "coarsen 1 x 2"),
    # one piece of two whole fragments side by side
    "coarsened-whole": text(
        *swap(swap(HOPPER, "mma m64n256k16", "mma m64n128k16"), "stages 4", "stages 3"),
        "coarsen 1 x 2",
    ),
    "n128": text(*N128),
    "bf16": text(*N128, operands=("A: bf16[M, K] row", "B: bf16[K, N] row", "C: bf16[M, N] row")),
    "f32-c": text(*HOPPER, operands=(*F16[:2], "C: f32[M, N] row")),  # float2 stores, 32-wide
    # the register epilogue before the staging: every step, a bias column per element
    "epilogue": text(
        *HOPPER,
        "epilogue alpha 1.5, beta 0.5, bias D, relu",
        operands=(*F16, "D: f32[N] row"),
    ),
    # ... and before the consumers' direct stores
    "epilogue-direct": text(
        *(d for d in HOPPER if d != "epilogue_via tma"),
        "epilogue alpha -2, bias D",
        operands=(*F16[:2], "C: f32[M, N] row", "D: f16[N] row"),
    ),
}
_KERNELS: dict[str, KernelIR] = {}


def kernel(name: str) -> KernelIR:
    if name not in _KERNELS:
        _KERNELS[name] = compile_source(VARIANTS[name], f"{name}.tile").kernels[0]
    return _KERNELS[name]


def run(k: KernelIR, m: int, n: int, kk: int, seed: int = 0, **options):
    return interpret_exact(k, m, n, kk, seed, seed=seed, **options)


def errors(source: str) -> list[tuple[int, int, str]]:
    with pytest.raises(TileError) as info:
        compile_source(source, "k.tile")
    return [(d.loc.line, d.loc.col, d.message) for d in info.value.diagnostics]


# ---------------------------------------------------------------- what is built


def test_the_staging_is_per_warpgroup_after_the_stages_and_as_wide_as_fits() -> None:
    k = kernel("persistent")
    cs = k.buffer("Cs")
    assert (cs.slots, cs.rows, cs.cols, cs.dtype, cs.per_warp) == (2, 64, 128, "f16", True)
    assert cs.xor and cs.panel == 64 and cs.alias is None
    offsets = k.mbarrier_offsets()
    assert offsets["full"] == 4 * (128 * 64 + 64 * 256) * 2 + cs.size_bytes  # after Cs
    assert k.smem_bytes == 230464 <= 227 * 1024
    assert kernel("stages-3").buffer("Cs").cols == 256  # one piece: the whole warpgroup
    assert kernel("coarsened").schedule.store_columns == 128  # one fragment per piece
    assert kernel("coarsened-whole").schedule.store_columns == 256  # both fragments at once


def test_the_consumers_hand_each_piece_over_and_drain_before_the_exit() -> None:
    k = kernel("persistent")
    kinds = [
        type(s).__name__
        for s in walk(k.body)
        if isinstance(s, (Barrier, ProxyFence, TmaStore, TmaStoreWait, StoreFrag))
    ]
    # per piece: wait for the last store's reads, barrier, stmatrix, fence, barrier, store;
    # and after the tile loop, the drain
    piece = ["TmaStoreWait", "Barrier", "StoreFrag", "ProxyFence", "Barrier", "TmaStore"]
    assert kinds == [*piece, "TmaStoreWait"]
    assert tma_only(k) and k.edge is None


def test_the_source_stores_by_stmatrix_and_tma_and_the_launch_lists_c_s_map() -> None:
    (k,) = lower_file(ROOT / "examples" / "hopper" / "epilogue.tile")
    compiled = compile_source((ROOT / "examples" / "hopper" / "epilogue.tile").read_text())
    source = compiled.source
    assert "// The guarded twin" not in source
    assert "stmatrix_x4(&Cs[warp]" in source and "tma_store_2d(&map_C" in source
    assert "const __grid_constant__ TensorMap map_C" in source
    assert "if (lane == 0) tma_store_wait_read();" in source
    assert "CS_LBO" not in source  # the staging is no wgmma operand
    launch = launch_of(k).to_json()
    assert [(m["operand"], m["box"]) for m in launch["tensor_maps"]] == [
        ("A", [64, 128]),
        ("B", [64, 64]),
        ("C", [64, 64]),
    ]
    assert "edge" not in launch and "staging" in launch
    assert [m["stored"] for m in launch["tensor_maps"]] == [False, False, True]


def test_tma_runs_every_size_and_stages_the_lines_it_cannot_address() -> None:
    k = kernel("persistent")
    for size in ((200, 328, 104), (200, 300, 104), (1, 1, 1), (4095, 4097, 4099)):
        assert not needs_twin(k, dict(zip("MNK", size)))
        assert variant(k, None, size)[0] is k
    launch = launch_of(k)
    assert plan(launch, {"M": 200, "N": 328, "K": 104}) == ()  # 208- and 656-byte lines
    b, c = plan(launch, {"M": 200, "N": 300, "K": 104})  # B's and C's 600-byte lines
    # the copies' lines start on 128 bytes (whole lines for TMA's box rows)
    assert (b.operand, b.lines, b.line_bytes, b.pitch, b.back) == ("B", 104, 600, 640, False)
    assert (c.operand, c.lines, c.line_bytes, c.pitch, c.back) == ("C", 200, 600, 640, True)
    a, b, c = plan(launch_of(kernel("epilogue")), {"M": 4095, "N": 4097, "K": 4099})
    assert [(s.operand, s.lines, s.line_bytes, s.pitch, s.back) for s in (a, b, c)] == [
        ("A", 4095, 8198, 8320, False),
        ("B", 4099, 8194, 8320, False),
        ("C", 4095, 8194, 8320, True),  # a TMA store: written to the copy, copied back
    ]
    direct = compile_source(text(*(d for d in HOPPER if d != "epilogue_via tma"))).kernels[0]
    # C stored from registers, guarded element by element: nothing of C to stage
    assert not needs_twin(direct, {"M": 200, "N": 300, "K": 104})
    assert [s.operand for s in plan(launch_of(direct), {"M": 5, "N": 3, "K": 7})] == ["A", "B"]


# ---------------------------------------------------------------- the interpreter


@pytest.mark.parametrize("name", list(VARIANTS))
def test_every_variant_is_exact_under_several_interleavings(name: str) -> None:
    k = kernel(name)
    bm, bn, bk = k.schedule.block
    check, stats = run(k, 2 * bm, 2 * bn, 6 * bk, schedules=2)
    assert check.ok, check.detail
    width = k.schedule.store_columns  # 0: C stored from the registers
    pieces = k.schedule.mma[1] * k.schedule.coarsen[1] // width if width else 0
    assert stats.tma_stores == 4 * pieces  # every tile, every piece (one statement: all warps)


@pytest.mark.parametrize("size", [(200, 328, 104), (136, 264, 72), (8, 8, 8)])
@pytest.mark.parametrize("name", ["persistent", "epilogue"])
def test_partial_tiles_are_clipped_by_the_tma_store(name: str, size) -> None:
    k = kernel(name)
    assert not needs_twin(k, dict(zip("MNK", size)))
    check, _ = run(k, *size, schedules=2)
    assert check.ok, check.detail


def without(k: KernelIR, kind, which: int = 0) -> KernelIR:
    """`k` without its `which`-th statement of type `kind`."""
    targets = [s for s in walk(k.body) if isinstance(s, kind)]
    target = targets[which]
    body = map_body(k.body, lambda s: () if s is target else s)
    return dataclasses.replace(k, body=body)


def caught(k: KernelIR) -> str:
    with pytest.raises(InterpreterError) as info:
        bm, bn, bk = k.schedule.block
        run(k, 2 * bm, 2 * bn, 4 * bk, schedules=1)
    return str(info.value)


def test_a_missing_wait_for_the_stores_reads_is_caught() -> None:
    message = caught(without(kernel("persistent"), TmaStoreWait, 0))
    assert "overwrites shared memory that a TMA store may still be reading" in message


def test_a_missing_drain_before_the_exit_is_caught() -> None:
    message = caught(without(kernel("persistent"), TmaStoreWait, 1))
    assert "may still be reading shared memory when its warpgroup ends" in message


def test_a_missing_proxy_fence_is_caught() -> None:
    message = caught(without(kernel("persistent"), ProxyFence))
    assert "without a fence.proxy.async" in message


@pytest.mark.parametrize("which", [0, 1])
def test_a_missing_warpgroup_barrier_is_a_race(which: int) -> None:
    k = without(kernel("persistent"), Barrier, which)
    with pytest.raises(RaceError) as info:
        run(k, 256, 512, 256, schedules=1)
    assert "Cs" in str(info.value)


def test_the_epilogue_runs_on_the_registers_before_c_leaves() -> None:
    from tiledsl.ir.nodes import EpilogueFrag

    for name in ("epilogue", "epilogue-direct"):
        k = kernel(name)
        stmts = list(walk(k.body))
        at = next(i for i, s in enumerate(stmts) if isinstance(s, EpilogueFrag))
        first_store = next(i for i, s in enumerate(stmts) if isinstance(s, StoreFrag))
        assert at < first_store
    source = compile_source(VARIANTS["epilogue"]).source.split("// The guarded twin")[0]
    assert "x = __fadd_rn(x, gc < N ? D[gc] : 0.0f);  // bias D[n]" in source
    assert "if (gr < M && gc < N) x = __fadd_rn(x, __fmul_rn(BETA," in source


# ---------------------------------------------------------------- refusals


def test_epilogue_via_tma_needs_warp_specialization() -> None:
    source = text(*(d for d in HOPPER if d not in ("copy tma", "warp_specialize", "persistent")))
    line = line_of(source, "epilogue_via tma")
    assert errors(source) == [
        (
            line,
            5,
            "epilogue_via tma is built for warp-specialized kernels (the consumer warpgroups "
            "stage C, one of their threads issues the TMA store)",
        )
    ]


def test_epilogue_via_tma_is_refused_off_the_wgmma_path() -> None:
    source = text(
        "block 64 x 64 x 32", "mma 16 x 16 x 16", "coarsen 2 x 2", "stages 3",
        "epilogue_via tma", "target cuda sm_80",
    )  # fmt: skip
    assert errors(source) == [
        (
            line_of(source, "epilogue_via tma"),
            5,
            "`epilogue_via tma` builds Hopper's TMA and warpgroup pipeline, which feeds wgmma",
        )
    ]


def test_epilogue_via_tma_takes_a_row_major_c() -> None:
    source = text(*HOPPER, operands=(*F16[:2], "C: f16[M, N] col"))
    assert errors(source) == [
        (line_of(source, "epilogue_via tma"), 5, "epilogue_via tma is built for a row-major C only")
    ]


def test_an_f32_c_is_staged_in_32_element_panels_and_stored_by_float2() -> None:
    k = kernel("f32-c")
    cs = k.buffer("Cs")
    assert (cs.dtype, cs.panel, cs.cols) == ("f32", 32, 64)  # 4 stages leave room for 64
    source = compile_source(VARIANTS["f32-c"]).source.split("// The guarded twin")[0]
    body = source.split('extern "C" __global__')[1]
    assert "make_float2(d[n8 * 4 + 0]" in body and "stmatrix_x4(&" not in body
    maps = launch_of(k).to_json()["tensor_maps"]
    assert maps[2] == {**maps[2], "operand": "C", "dtype": "f32", "box": [32, 64]}


def test_a_staging_that_cannot_fit_is_refused_at_stages() -> None:
    source = text(*swap(HOPPER, "stages 4", "stages 5"))
    ((line, col, message),) = errors(source)
    assert (line, col) == (line_of(source, "stages 5"), 5)
    assert message.startswith("this schedule needs 263248 bytes of shared memory per block")
