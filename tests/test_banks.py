"""The bank-conflict model (tiledsl.models.banks) on the numbers of the RTX 5080 seed, section 6.

The seed (000_8a9653163a711292.txt): v4's As (64 x 32 halves) gives 4-way and Bs
(32 x 64 halves) 8-way conflicts on the WMMA fragment loads; padding the rows to
BK_PAD = 40 and BN_PAD = 72 halves removes them (v5).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tiledsl.driver import compile_file
from tiledsl.models.banks import best_pad, conflicts, cost, unpadded

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def v4():
    return compile_file(ROOT / "examples/ladder/v4.tile").kernels[0]


@pytest.fixture(scope="module")
def hgemm():
    return compile_file(ROOT / "examples/hgemm.tile").kernels[0]


def ways(kernel, buffer: str, pitch: int | None, kind: str) -> list[int]:
    """The modelled ways of the `kind` ("copy" / "fragment load") accesses of `buffer`."""
    return [a.ways for a in conflicts(kernel, buffer, pitch) if kind in a.what]


def test_v4_tiles_are_unpadded(v4):
    assert (v4.buffer("As").rows, v4.buffer("As").cols, v4.buffer("As").pitch) == (64, 32, 32)
    assert (v4.buffer("Bs").rows, v4.buffer("Bs").cols, v4.buffer("Bs").pitch) == (32, 64, 64)


@pytest.mark.parametrize(
    "buffer, pitch, expected",
    [("As", 32, 4), ("Bs", 64, 8), ("As", 40, 1), ("Bs", 72, 1)],
    ids=["As-unpadded-4way", "Bs-unpadded-8way", "As-BK_PAD40", "Bs-BN_PAD72"],
)
def test_fragment_load_ways_match_the_seed(v4, buffer, pitch, expected):
    assert ways(v4, buffer, pitch, "fragment load") == [expected]


def test_the_kernels_own_pitch_is_the_default(v4):
    assert conflicts(v4, "As") == conflicts(v4, "As", 32)
    assert conflicts(v4, "Bs") == conflicts(v4, "Bs", 64)


def test_every_access_is_reported_once(v4):
    whats = [a.what for name in ("As", "Bs") for a in conflicts(v4, name)]
    assert whats == [
        "async copy into As",
        "fragment load of a from As",
        "async copy into Bs",
        "fragment load of b from Bs",
    ]


@pytest.mark.parametrize("buffer, pitch", [("As", 32), ("Bs", 64)])
def test_16_byte_copies_are_conflict_free_unpadded(v4, buffer, pitch):
    assert v4.schedule.copy_bytes == 16
    assert ways(v4, buffer, pitch, "copy") == [1]


def test_padding_cuts_the_modelled_cost(v4):
    assert cost(v4, "As", 40) < cost(v4, "As", 32)
    assert cost(v4, "Bs", 72) < cost(v4, "Bs", 64)


@pytest.mark.parametrize("buffer", ["As", "Bs"])
def test_best_pad_on_v4_is_8(v4, buffer):
    assert best_pad(v4, buffer) == 8


def test_v5_pads_to_the_seeds_pitches_and_is_conflict_free():
    v5 = compile_file(ROOT / "examples/ladder/v5.tile").kernels[0]
    assert v5.buffer("As").pitch == 40 and v5.buffer("Bs").pitch == 72
    assert ways(v5, "As", None, "fragment load") == [1]
    assert ways(v5, "Bs", None, "fragment load") == [1]


def test_pad_auto_in_hgemm_gives_pitches_72_and_136(hgemm):
    assert hgemm.schedule.pad == "auto"
    assert hgemm.buffer("As").cols == 64 and hgemm.buffer("As").pitch == 72
    assert hgemm.buffer("Bs").cols == 128 and hgemm.buffer("Bs").pitch == 136
    for name in ("As", "Bs"):
        assert ways(hgemm, name, None, "fragment load") == [1]


def test_unpadded_restores_natural_pitches(hgemm):
    plain = unpadded(hgemm)
    assert [(b.name, b.pitch) for b in plain.buffers] == [("As", 64), ("Bs", 128)]
    assert ways(plain, "As", None, "fragment load")[0] > 1
    assert ways(plain, "Bs", None, "fragment load")[0] > 1
