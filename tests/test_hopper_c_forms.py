"""The forms of C a warp-specialized kernel takes beside `C = A * B` into a row-major C.

`C += A * B`: the consumers' accumulators start at zero and the register epilogue adds C
(beta 1) where the accumulators leave the registers, reading nothing outside C — so a
kernel whose loads and stores are TMA still runs every size itself (it has no twin).
Exact in the interpreter for each way C leaves, with pingpong teams, with bf16 and an f32
C; the handoff proof holds; the source says where C is read.

A column-major C, stored from the registers element by element (the TMA store takes a
row-major C only: a located refusal, tests/test_tma_store.py)."""

from __future__ import annotations

import pytest
from helpers import interpret_exact

from tiledsl.driver import compile_source
from tiledsl.ir.epilogue import Epilogue
from tiledsl.ir.nodes import EpilogueFrag, Fill, LoadFrag, walk
from tiledsl.lowering.edges import needs_twin
from tiledsl.models.mbarrier_hazards import prove

ACC = """kernel acc {
    A: f16[M, K] row
    B: f16[K, N] row
    C: f16[M, N] row
    C[m, n] += A[m, k] * B[k, n]
    block   128 x 256 x 64
    mma     m64n256k16
    stages  4
    copy    tma
    warp_specialize
    persistent
    epilogue_via tma
    target  cuda sm_90
}"""

VARIANTS = {
    "tma-store": ACC,
    "registers-out": ACC.replace("    epilogue_via tma\n", ""),
    "pingpong": ACC.replace("128 x 256 x 64", "128 x 128 x 64")
    .replace("m64n256k16", "m64n128k16\n    coarsen 2 x 1")
    .replace("warp_specialize", "warp_specialize pingpong"),
    "bf16-f32-c": ACC.replace("f16[M, K]", "bf16[M, K]")
    .replace("f16[K, N]", "bf16[K, N]")
    .replace("C: f16", "C: f32"),
    "relu": ACC.replace("    epilogue_via tma\n", "    epilogue_via tma\n    epilogue relu\n"),
}


@pytest.mark.parametrize("name", list(VARIANTS))
@pytest.mark.parametrize("size", [(2, 2, 5), (200, 328, 104), (195, 97, 61)])
def test_accumulating_into_c_is_exact(name: str, size) -> None:
    k = compile_source(VARIANTS[name], f"{name}.tile").kernels[0]
    if size[0] in (2,):  # whole tiles: 2 x 2 of them, 5 K steps
        bm, bn, bk = k.schedule.block
        size = (2 * bm, 2 * bn, 5 * bk)
    run = k.edge if needs_twin(k, dict(zip("MNK", size))) else k
    assert run is not None
    options = {"seed": 3, "schedules": 2, "blocks": 2} if run.persistent else {}
    check, _ = interpret_exact(run, *size, 1, **options)
    assert check.ok, check.detail


def test_c_is_read_in_the_epilogue_not_loaded_into_the_accumulators() -> None:
    k = compile_source(ACC, "acc.tile").kernels[0]
    assert Epilogue.of(k.schedule, k.gemm) == Epilogue(1.0, 1.0, ())
    body = list(walk(k.body))
    assert any(isinstance(s, Fill) for s in body)
    assert not any(isinstance(s, LoadFrag) and s.frag.name == "acc" for s in body)
    assert [s.epilogue.beta for s in body if isinstance(s, EpilogueFrag)] == [1.0]
    prove(k)
    assert k.edge is None  # every size runs this kernel: partial tiles by TMA
    source = compile_source(ACC, "acc.tile").source_for((k,))
    assert (
        "// C += (default): each C element, on the accumulators in registers, before C is "
        "stored or staged: v = 1 * acc + 1 * C"
    ) in source
    assert "constexpr float ALPHA = 1.0f, BETA = 1.0f;" in source


def test_the_pictures_draw_the_register_epilogue(tmp_path, capsys) -> None:
    from helpers import cli

    path = tmp_path / "acc.tile"
    path.write_text(ACC)
    assert cli(["viz", str(path), "-o", str(tmp_path / "out")], capsys).code == 0
    (dot,) = (tmp_path / "out" / "acc").glob("00-lower.dot")
    text = dot.read_text()
    assert "epilogue on the accumulators" in text
    assert "acc[0][0]: v = 1 * acc + 1 * C" in text


COLUMN_MAJOR = ACC.replace("C: f16[M, N] row", "C: f16[M, N] col").replace(
    "    epilogue_via tma\n", ""
)
COLUMN_VARIANTS = {
    "f16": COLUMN_MAJOR.replace("+=", "="),
    "bf16": COLUMN_MAJOR.replace("+=", "=").replace("f16[", "bf16["),
    "f32": COLUMN_MAJOR.replace("+=", "=").replace("C: f16", "C: f32"),
    "accumulate": COLUMN_MAJOR,
    "epilogue": COLUMN_MAJOR.replace("+=", "=").replace(
        "    persistent\n", "    persistent\n    epilogue alpha 2, relu\n"
    ),
}


@pytest.mark.parametrize("name", list(COLUMN_VARIANTS))
@pytest.mark.parametrize("size", [(2, 2, 5), (200, 328, 104)])
def test_a_column_major_c_is_exact(name: str, size) -> None:
    k = compile_source(COLUMN_VARIANTS[name], f"{name}.tile").kernels[0]
    assert k.gemm.c.layout == "col" and k.specialization is not None
    if size[0] == 2:
        bm, bn, bk = k.schedule.block
        size = (2 * bm, 2 * bn, 5 * bk)
    run = k.edge if needs_twin(k, dict(zip("MNK", size))) else k
    assert run is not None
    options = {"seed": 1, "schedules": 2, "blocks": 2} if run.persistent else {}
    check, _ = interpret_exact(run, *size, 2, **options)
    assert check.ok, check.detail


def test_a_column_major_16_bit_c_is_stored_element_by_element() -> None:
    compiled = compile_source(COLUMN_VARIANTS["f16"], "col.tile")
    source = compiled.source_for(compiled.kernels[:1])
    assert "(column-major): each thread's elements at rows wq*16 + g" in source
    assert "__half2" not in source.split('extern "C"')[1].split("// The guarded twin")[0]
