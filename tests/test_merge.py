"""One file of every shape's winner (tiledsl.tune.merge, bench/shapes.py --dispatch): the
kernels copied from their files under comments, one product refused otherwise, the
layout brought to one, names kept distinct, and the result loaded and run as one callable
that follows its table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import BUILDABLE, kernel_text

import tiledsl
from tiledsl.errors import TileError, UsageError
from tiledsl.tune.dispatch import read_table, table_path
from tiledsl.tune.merge import Winner, merge

ROW = ("A: f16[M, K] row", "B: f16[K, N] row", "C: f32[M, N] row")
COL = ("A: f16[M, K] row", "B: f16[K, N] col", "C: f32[M, N] row")


def files(tmp_path: Path) -> tuple[Path, Path]:
    """A few-token file in torch's layout (B col) and a many-token one (B row), each with
    a kernel named `k` and one of its own."""
    few = tmp_path / "few.tuned.tile"
    few.write_text(
        kernel_text(*BUILDABLE, name="k", operands=COL)
        + kernel_text("block 32 x 64 x 32", *BUILDABLE[1:], name="narrow", operands=COL)
    )
    many = tmp_path / "many.tile"
    many.write_text(kernel_text("block 128 x 64 x 32", *BUILDABLE[1:], name="k", operands=ROW))
    return few, many


def winners(few: Path, many: Path) -> list[Winner]:
    return [
        Winner((16, 256, 128), few, "narrow", 0.010),
        Winner((64, 256, 128), few, "k", 0.020),
        Winner((512, 256, 128), many, "k", None),
        Winner((32, 256, 128), few, "narrow", 0.012),
    ]


def test_one_product_is_refused_until_its_layouts_are_one(tmp_path: Path) -> None:
    few, many = files(tmp_path)
    out = tmp_path / "all.tuned.tile"
    with pytest.raises(TileError) as err:
        merge(winners(few, many), out, origin="run.json")
    (diagnostic,) = err.value.diagnostics
    line = many.read_text().split("\n").index("    B: f16[K, N] row") + 1
    assert (diagnostic.loc.file, diagnostic.loc.line, diagnostic.loc.col) == (str(many), line, 5)
    assert diagnostic.message == (
        f"k has `B: f16[K, N] row`, but {few}'s narrow `B: f16[K, N] col`: one file holds "
        "one product"
    )
    assert str(err.value) == (
        f"{many}:{line}:5: error: {diagnostic.message}\n"
        "        B: f16[K, N] row\n"
        "        ^~~~~~~~~~~~~~~~\n"
        "note: declare the operands in one layout (bench/shapes.py --layout B=col), or merge "
        "only files of the same product"
    )
    assert not out.exists()
    with pytest.raises(UsageError, match="layout 'diag' for B: write one of row, col"):
        merge(winners(few, many), out, layouts={"B": "diag"}, origin="run.json")
    with pytest.raises(UsageError, match=f"{few} has no kernel 'gone'"):
        merge([Winner((1, 2, 3), few, "gone")], out, origin="run.json")
    with pytest.raises(UsageError, match="no shape has a winning kernel"):
        merge([], out, origin="run.json")


def test_the_winners_become_one_file_and_one_table(tmp_path: Path) -> None:
    few, many = files(tmp_path)
    out = tmp_path / "all.tuned.tile"
    text, table = merge(
        winners(few, many),
        out,
        layouts={"B": "col"},
        origin="run.json",
        device="NVIDIA H200",
        compiler="nvrtc 13.0",
    )
    # a kernel per winner, in the order of the shapes they first won; the many-token `k`
    # renamed beside the few-token one, and said to be redeclared
    assert [line.split()[1] for line in text.splitlines() if line.startswith("kernel ")] == [
        "narrow",
        "k",
        "k_2",
    ]
    assert (
        "# narrow: from few.tuned.tile; fastest at 16x256x128 (0.010 ms, 0.1 TFLOP/s), "
        "32x256x128 (0.012 ms, 0.2 TFLOP/s)\n" in text
    )
    assert (
        "# k_2: from many.tile's k; B col here, row in its file: its times are of its file's "
        "layout until this file is timed again; fastest at 512x256x128 (untimed)\n" in text
    )
    assert text.count("B: f16[K, N] col") == 3 and "B: f16[K, N] row" not in text
    relaid = [Winner((512, 256, 128), many, "k", 0.03, timed_relaid=True)]
    text_relaid, _ = merge(relaid, out, layouts={"B": "col"}, origin="run.json")
    assert "# k: from many.tile; B col here, row in its file, timed so; fastest at " in text_relaid
    assert [(e.size, e.kernel, e.point) for e in table.entries] == [
        ((16, 256, 128), "narrow", "few.tuned.tile:narrow"),
        ((64, 256, 128), "k", "few.tuned.tile:k"),
        ((512, 256, 128), "k_2", "many.tile:k"),
        ((32, 256, 128), "narrow", "few.tuned.tile:narrow"),
    ]
    assert (table.tile, table.device, table.compiler) == (out.name, "NVIDIA H200", "nvrtc 13.0")
    out.write_text(text)
    table_path(out).write_text(table.to_text())
    assert read_table(table_path(out), {"narrow", "k", "k_2"}) == table

    k = tiledsl.load(out)  # one callable, B as torch's weight: k(x, W.t())
    assert k.choose(512, 256, 128).kernel.name == "k_2"
    assert k.choose(32, 256, 128).kernel.name == "narrow"
    rng = np.random.default_rng(7)
    for m in (16, 200):
        a = rng.integers(-2, 3, (m, 128)).astype(np.float16)
        weight = rng.integers(-2, 3, (256, 128)).astype(np.float16)  # N x K rows
        got = k(a, weight.T)
        assert np.array_equal(got, a.astype(np.float64) @ weight.T.astype(np.float64))


def test_shapes_dispatch_writes_the_runs_winners(tmp_path: Path, monkeypatch, capsys) -> None:
    """bench/shapes.py --dispatch: each shape's fastest checked row (a failed or slower one
    never), its file found in this checkout by the part from examples/ on, and nothing
    written when the merge cannot be."""
    from test_bench import _bench_script

    shapes = _bench_script("shapes", monkeypatch)
    few = "/elsewhere/checkout/examples/tuned/few_tokens_swapped.tuned.tile"
    assert shapes.local_file(few) == shapes.ROOT / "examples/tuned/few_tokens_swapped.tuned.tile"

    def row(size, file, kernel, ms, ok=True, kind="tiledsl"):
        return {"size": list(size), "file": file, "kernel": kernel, "time_ms": ms, "ok": ok,
                "kind": kind, "label": kernel}  # fmt: skip

    small = "examples/tuned/small_m.tuned.tile"
    rows = [
        row((1, 4096, 4096), few, "few_tokens_swapped_grid_3", 0.014),
        row((1, 4096, 4096), small, "small_m_2", 0.010, ok=False),  # failed: never counts
        row((1, 4096, 4096), "", "cuBLAS", 0.009, kind="cublas"),
        row((64, 4096, 4096), few, "few_tokens_swapped_grid_3", 0.030),
        row((64, 4096, 4096), small, "small_m_2", 0.016),
    ]
    out = tmp_path / "llama.tuned.tile"
    device = {"name": "NVIDIA H200", "nvrtc": "13.0"}
    with pytest.raises(TileError, match="one file holds one product"):
        shapes.write_dispatch(rows, out, {}, "run.json", device)
    assert not out.exists() and not table_path(out).exists()
    shapes.write_dispatch(rows, out, {"B": "col"}, "run.json", device)
    assert capsys.readouterr().out.endswith(f"({2} kernel(s)) and {table_path(out)}\n")
    data = json.loads(table_path(out).read_text())
    assert [(e["size"], e["kernel"]) for e in data["entries"]] == [
        ([1, 4096, 4096], "few_tokens_swapped_grid_3"),
        ([64, 4096, 4096], "small_m_2"),
    ]
    assert data["device"] == "NVIDIA H200" and data["compiler"] == "nvrtc 13.0"
    assert tiledsl.load(out).choose(64, 4096, 4096).kernel.name == "small_m_2"


def test_shapes_times_files_redeclared_in_one_layout(tmp_path: Path, monkeypatch) -> None:
    """bench/shapes.py --layout B=col: a file declaring B row is timed from a copy under
    build/layouts/ at its path from examples/ on (its table beside it), which the rows'
    paths bring back to the file itself; a file declaring B col already is timed as it is."""
    from test_bench import _bench_script

    shapes = _bench_script("shapes", monkeypatch)
    monkeypatch.setattr(shapes, "RELAYOUT_ROOT", tmp_path / "build" / "layouts")
    many = shapes.ROOT / "examples" / "tuned" / "mid_m.tuned.tile"
    copy = shapes.relayout(many, {"B": "col"})
    assert copy == tmp_path / "build/layouts/B=col/examples/tuned/mid_m.tuned.tile"
    assert shapes.relaid(str(copy)) and not shapes.relaid(str(many))
    assert "B: f16[K, N] row" not in copy.read_text()
    assert copy.read_text().count("B: f16[K, N] col") == copy.read_text().count("kernel ")
    assert table_path(copy).read_text() == table_path(many).read_text()
    assert shapes.local_file(str(copy)) == many
    few = shapes.ROOT / "examples" / "tuned" / "few_tokens_swapped.tuned.tile"
    assert shapes.relayout(few, {"B": "col"}) == few
    assert tiledsl.load(copy).choose(512, 4096, 4096).kernel.name == "mid_m_1"
