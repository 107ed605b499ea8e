"""TMA tensor maps (`copy tma`): the launch description's TensorMapSpec, the driver's
arguments it encodes to (dims innermost first, strides in bytes, the box), what TMA refuses,
the persistent grid, and doctor's cuda-bindings line. Everything but the last test runs
without a GPU; that one encodes a real map through cuda-bindings."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from helpers import ROOT

from tiledsl.commands import doctor as D
from tiledsl.driver import compile_file
from tiledsl.emit.launch import (
    TENSOR_MAP_CTYPE,
    Launch,
    TensorMapSpec,
    launch_of,
    tensor_maps_of,
)
from tiledsl.errors import UsageError
from tiledsl.gpu import tensor_maps as T
from tiledsl.gpu.runtime import gpu_available
from tiledsl.ir.expr import ZERO, Const, Var
from tiledsl.ir.nodes import BarrierRef, GlobalTile, SharedTile, TmaLoad

M, N, K = Var("M"), Var("N"), Var("K")
SIZES = {"M": 4096, "N": 2048, "K": 1024}
POINTER = 0x7F00_0000_0000  # 256-byte aligned, as CuPy allocates


def spec(operand: str, layout: str, dtype: str = "f16", lines: int = 128) -> TensorMapSpec:
    """A's (M x K) or B's (K x N) map, dims innermost first, as launch_of writes it."""
    rows, cols = (M, K) if operand == "A" else (K, N)
    dims = (cols, rows) if layout == "row" else (rows, cols)
    return TensorMapSpec(f"map_{operand}", operand, dtype, layout, dims, (64, lines))


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize(
    "operand, layout, dims",
    [
        ("A", "row", [1024, 4096]),  # A[M, K] row-major: K contiguous
        ("A", "col", [4096, 1024]),  # column-major: M contiguous
        ("B", "row", [2048, 1024]),  # B[K, N] row-major: N contiguous
        ("B", "col", [1024, 2048]),  # column-major: K contiguous
    ],
)
def test_encode_arguments(operand, layout, dims, dtype) -> None:
    args = T.encode_arguments(spec(operand, layout, dtype), POINTER, SIZES)
    assert args == {
        "data_type": {
            "f16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
            "bf16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
        }[dtype],
        "rank": 2,
        "global_address": POINTER,
        "global_dims": dims,
        "global_strides": [dims[0] * 2],  # bytes between lines: the leading dimension's
        "box_dims": [64, 128],
        "element_strides": [1, 1],
        "interleave": "CU_TENSOR_MAP_INTERLEAVE_NONE",
        "swizzle": "CU_TENSOR_MAP_SWIZZLE_128B",
        "l2_promotion": "CU_TENSOR_MAP_L2_PROMOTION_L2_256B",
        "oob_fill": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE",  # zeros outside the operand
    }


def test_a_literal_dimension_is_a_number() -> None:
    s = TensorMapSpec("map_A", "A", "f16", "row", (Const(64), M), (64, 128))
    assert T.encode_arguments(s, POINTER, {"M": 300})["global_dims"] == [64, 300]
    assert s.to_json()["global_strides_bytes"] == ["128"]


def test_a_stride_not_a_multiple_of_16_bytes_is_refused() -> None:
    with pytest.raises(UsageError) as err:
        T.encode_arguments(spec("A", "row"), POINTER, {**SIZES, "K": 4099})
    message = str(err.value)
    assert "TMA cannot load A (f16, row-major; tensor map map_A)" in message
    assert "K = 4099 f16 elements = 8198 bytes apart, not a multiple of 16 bytes" in message
    assert "needs K to be a multiple of 8" in message
    # Column-major A is contiguous along M: there K does not matter, M does.
    T.encode_arguments(spec("A", "col"), POINTER, {**SIZES, "K": 4099})
    with pytest.raises(UsageError, match="M to be a multiple of 8"):
        T.encode_arguments(spec("A", "col"), POINTER, {**SIZES, "M": 100})


def test_a_misaligned_pointer_is_refused() -> None:
    with pytest.raises(UsageError, match=r"address 0x7f0000000008 is not 16-byte aligned"):
        T.encode_arguments(spec("B", "row"), POINTER + 8, SIZES)
    T.encode_arguments(spec("B", "row"), POINTER + 16, SIZES)


def test_dimensions_past_2_to_the_32_are_refused() -> None:
    problems = T.problems(spec("A", "row"), POINTER, {**SIZES, "M": 2**32 + 64})
    assert (
        len(problems) == 1
        and "outer dimension M = 4294967360 is outside 1 to 2^32" in (problems[0])
    )


def test_every_problem_is_reported_at_once() -> None:
    assert len(T.problems(spec("A", "row"), POINTER + 2, {**SIZES, "K": 4099})) == 2


@pytest.mark.parametrize(
    "box, dtype, swizzle, why",
    [
        ((64, 257), "f16", "128B", "1 to 256"),
        ((128, 64), "f16", "128B", "exceed the 128B swizzle"),
        ((4, 64), "f16", "none", "not a multiple of 16"),
        ((64, 64), "f32", "128B", "exceed the 128B swizzle"),  # 256 bytes: 32 f32 fit
        ((64, 64), "f8", "128B", "of f8 are not built"),
        ((64, 64), "f16", "256B", "unknown swizzle"),
    ],
)
def test_a_spec_no_size_can_fix_is_refused_when_made(box, dtype, swizzle, why) -> None:
    with pytest.raises(ValueError, match=why):
        TensorMapSpec("map_A", "A", dtype, "row", (K, M), box, swizzle)


def hand_built(persistent: bool = True) -> Launch:
    maps = (spec("A", "row"), spec("B", "col", lines=64))
    return Launch(
        "hgemm_tma",
        ((M + 127) // 128) * ((N + 127) // 128),
        384,
        98304,
        (
            *((m.param, TENSOR_MAP_CTYPE) for m in maps),
            ("A", "const half*"),
            ("B", "const half*"),
            ("C", "half*"),
            ("M", "int"),
            ("N", "int"),
            ("K", "int"),
        ),
        (128, 128, 64),
        tensor_maps=maps,
        persistent=persistent,
    )


def test_launch_to_json_says_how_to_build_the_maps_and_the_grid() -> None:
    got = hand_built().to_json()
    assert got["args"][:3] == [
        ["map_A", "const __grid_constant__ TensorMap"],
        ["map_B", "const __grid_constant__ TensorMap"],
        ["A", "const half*"],
    ]
    assert got["tensor_maps"] == [
        {
            "param": "map_A",
            "operand": "A",
            "dtype": "f16",
            "global_dims": ["K", "M"],
            "global_strides_bytes": ["K * 2"],
            "box": [64, 128],
            "swizzle": "128B",
            "oob_fill": "zero",
            "element_strides": [1, 1],
            "stored": False,
        },
        {
            "param": "map_B",
            "operand": "B",
            "dtype": "f16",
            "global_dims": ["K", "N"],
            "global_strides_bytes": ["K * 2"],
            "box": [64, 64],
            "swizzle": "128B",
            "oob_fill": "zero",
            "element_strides": [1, 1],
            "stored": False,
        },
    ]
    tiles = "(M + 127) / 128 * ((N + 127) / 128)"
    assert got["grid"]["x"] == tiles
    assert got["persistent"] == {"grid_x": f"min(multiprocessor count, {tiles})"}
    assert "padded to the next multiple of 128 bytes" in got["staging"]
    json.dumps(got)  # plain JSON
    plain = hand_built(persistent=False)
    plain = replace(plain, tensor_maps=(), args=plain.args[2:])
    assert "tensor_maps" not in plain.to_json() and "persistent" not in plain.to_json()


def test_a_persistent_grid_is_at_most_the_multiprocessor_count() -> None:
    launch = hand_built()
    assert launch.grid_dims(SIZES, sms=132) == (132, 1)  # 32 x 16 = 512 tiles
    assert launch.grid_dims({"M": 256, "N": 256, "K": 64}, sms=132) == (4, 1)
    with pytest.raises(ValueError, match="persistent: its grid needs the multiprocessor count"):
        launch.grid_dims(SIZES)
    assert replace(launch, persistent=False).grid_dims(SIZES) == (512, 1)


def test_launch_of_a_kernel_with_tma_loads() -> None:
    """The maps come from the TmaLoads (A then B, as first loaded), their params first."""
    kernel = compile_file(ROOT / "examples/tuned/wgmma_f32acc.tile").kernels[0]
    (bm, bn, bk), bar = kernel.schedule.block, BarrierRef("full", ZERO)

    def tma(operand: str, buffer: str, rows: int, cols: int) -> TmaLoad:
        src = GlobalTile(operand, (ZERO, ZERO), (ZERO, ZERO), rows, cols)
        return TmaLoad(SharedTile(buffer, ZERO, (ZERO, ZERO), rows, cols), src, bar)

    loads = (tma("B", "Bs", bk, bn), tma("A", "As", bm, bk), tma("B", "Bs", bk, bn))
    kernel = replace(kernel, body=(*loads, *kernel.body), persistent=True)
    launch = launch_of(kernel)
    assert [m.param for m in launch.tensor_maps] == ["map_B", "map_A"]
    b, a = launch.tensor_maps
    assert (a.global_dims, a.box, a.layout) == ((K, M), (64, 256), "row")
    assert (b.global_dims, b.box) == ((N, K), (64, 64))
    assert launch.args[:3] == (
        ("map_B", TENSOR_MAP_CTYPE),
        ("map_A", TENSOR_MAP_CTYPE),
        ("A", "const half*"),
    )
    assert launch.persistent
    assert launch.edge is not None and launch.edge.tensor_maps == () and not launch.edge.persistent
    assert tensor_maps_of(replace(kernel, body=kernel.body[3:])) == ()


def test_doctor_names_cuda_bindings_and_its_fix(monkeypatch) -> None:
    monkeypatch.setattr(D, "installed", lambda module: module != "cuda.bindings")
    found = D.check_cuda_bindings()
    assert found.status == D.MISSING and "`copy tma` kernels cannot run" in found.detail
    assert "pip install cuda-bindings" in found.fix and "tiledsl[gpu]" in found.fix
    assert D.check_cuda_bindings in D.CHECKS  # one of doctor's lines


def test_installed_survives_a_missing_parent_package() -> None:
    assert D.installed("no_such_package_tiledsl.bindings") is False


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
def test_a_real_map_is_128_bytes() -> None:
    pytest.importorskip("cuda.bindings")
    import cupy

    # 100 x 70 f16: rows 140 bytes apart, which TMA cannot take; the driver agrees.
    a = cupy.zeros((100, 70), cupy.float16)
    s = TensorMapSpec("map_A", "A", "f16", "row", (K, M), (64, 100))
    with pytest.raises(UsageError, match="K to be a multiple of 8"):
        T.encode(s, a.data.ptr, {"M": 100, "K": 70})
    cu = T.driver()
    args = T.encode_arguments(s, a.data.ptr, {"M": 100, "K": 72})
    err, _ = cu.cuTensorMapEncodeTiled(
        cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        2,
        a.data.ptr,
        [cu.cuuint64_t(70), cu.cuuint64_t(100)],
        [cu.cuuint64_t(140)],
        [cu.cuuint32_t(b) for b in args["box_dims"]],
        [cu.cuuint32_t(1), cu.cuuint32_t(1)],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    )
    assert err != cu.CUresult.CUDA_SUCCESS
    # 100 x 72: rows 144 bytes apart, encoded.
    b = cupy.zeros((100, 72), cupy.float16)
    value = T.encode(s, b.data.ptr, {"M": 100, "K": 72})
    assert value.dtype == "V128" and len(bytes(value)) == 128
    assert bytes(value) != bytes(128)
    assert T.encode(s, b.data.ptr, {"M": 100, "K": 72}) is value  # cached, not encoded again
