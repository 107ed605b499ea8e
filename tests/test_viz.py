"""`tiledsl viz`: every example drawn and rendered, the marks a pass leaves, stable bytes.

The SVG checks read the text Graphviz laid out (every <text> element, entities
decoded), so they see what a reader sees. Tests that render skip without `dot`;
the no-`dot` path is tested by hiding it from PATH.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import ROOT, cli, example_params, kernel_text, line_of

from tiledsl.driver import compile_source
from tiledsl.ir.nodes import For
from tiledsl.models.banks import fragment_ways
from tiledsl.passes import STAGE_NAMES
from tiledsl.viz import viz_source, write_viz
from tiledsl.viz.bank_map import fragment_loads, phases
from tiledsl.viz.diff import diff_body
from tiledsl.viz.ir_graph import stage_graph
from tiledsl.viz.tiles import tiles_graph, visiting_order

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot not on PATH")
HGEMM = ROOT / "examples" / "hgemm.tile"
F16 = ROOT / "examples" / "hgemm_f16.tile"
V1 = ROOT / "examples" / "ladder" / "v1.tile"
SVG = "{http://www.w3.org/2000/svg}"


def svg_text(path: Path) -> str:
    """All text of an SVG, one <text> element per line."""
    root = ET.parse(path).getroot()
    return "\n".join("".join(t.itertext()) for t in root.iter(f"{SVG}text"))


def struck(path: Path) -> list[str]:
    """The texts Graphviz drew struck through (<S> in a label)."""
    root = ET.parse(path).getroot()
    return [
        "".join(t.itertext())
        for t in root.iter(f"{SVG}text")
        if t.get("text-decoration") == "line-through"
    ]


def draw(path: Path, out: Path, fmt: str = "svg", text: str | None = None):
    text = path.read_text() if text is None else text
    return viz_source(text, str(path.relative_to(ROOT)), out, fmt)


# ---------------------------------------------------------------- every example


@needs_dot
@pytest.mark.parametrize("path", example_params())
def test_every_example_renders_with_its_labels(path: Path, tmp_path: Path) -> None:
    result = draw(path, tmp_path)
    assert result.note is None and result.rendered
    compiled = compile_source(path.read_text(), str(path))
    page = result.index.read_text()
    for kernel in compiled.kernels:
        stages = [(s, ran) for s, k, ran in compiled.snapshots if k.name == kernel.name]
        assert [s for s, _ in stages] == list(STAGE_NAMES)
        for number, (stage, ran) in enumerate(stages):
            svg = tmp_path / kernel.name / f"{number:02d}-{stage}.svg"
            assert svg.exists() == ran, svg
            if ran:
                text = svg_text(svg)
                assert f"{kernel.name} · {number:02d} {stage}" in text
                mma = "wgmma.mma_async" if kernel.schedule.instruction == "wgmma" else "mma_sync"
                assert mma in text and "legend" in text
                assert f'src="{kernel.name}/{number:02d}-{stage}.svg"' in page
            else:
                assert f"{number:02d} · {stage} — did not run" in page
        last = [f"{i:02d}-{s}" for i, (s, ran) in enumerate(stages) if ran][-1]
        final = svg_text(tmp_path / kernel.name / f"{last}.svg")
        for b in kernel.buffers:  # every buffer, with its pitch, in the last stage's picture
            assert b.name in final
            assert f"pitch {b.pitch}" in final or f"pitch {b.line_length} → {b.pitch}" in final
        tiles = svg_text(tmp_path / kernel.name / "tiles.svg")
        assert "tile decomposition" in tiles and "warp 0" in tiles
        tm, tn = (int(x) for x in _sample_size(tiles))
        assert {str(n) for n in range(tm * tn)} <= set(tiles.split("\n"))
        banks = svg_text(tmp_path / kernel.name / "banks.svg")
        assert "banks of one fragment load" in banks
        if kernel.schedule.instruction == "wgmma":  # no lanes read A and B: nothing to map
            assert "the tensor cores read A and B through descriptors" in banks
        elif kernel.schedule.stages >= 1:
            assert "legend" in banks and "banks 28–31" in banks
            # Line 0 of a fragment starts at byte 0: its words are in banks 0, 1, 2, 3, ...
            assert {"0", "1", "2", "3"} <= set(banks.split("\n"))
            assert "phase" in banks and "-way" in banks


def _sample_size(tiles_text: str) -> tuple[str, str]:
    line = next(x for x in tiles_text.split("\n") if x.startswith("a sample grid of"))
    tm, _, tn = line.split()[4:7]
    return tm, tn


# ---------------------------------------------------------------- what the pictures mark


@needs_dot
def test_hgemm_pictures_show_each_pass(tmp_path: Path) -> None:
    draw(HGEMM, tmp_path)
    d = tmp_path / "hgemm"
    smem = svg_text(d / "01-smem-tiling.svg")
    assert "+ As" in smem and "pitch 64" in smem and "+ Bs" in smem and "pitch 128" in smem
    assert "__syncthreads()" in smem and "copy.block.sync" in smem
    assert "was: a[0][0] ← A @ (bm * BM, kt * BK) + (wm * MMA_M, kk * MMA_K) 16x16" in smem
    multi = d / "05-multi-buffering.svg"
    assert "async.wait pending=1" in svg_text(multi)
    assert "__syncthreads()" in struck(multi)  # the two stages-1 barriers give way to one
    padding = svg_text(d / "07-padding.svg")
    assert "pitch 64 → 72" in padding and "pitch 128 → 136" in padding
    swizzle = svg_text(d / "08-swizzle.svg")
    assert "row by row (no swizzle) → grouped 8" in swizzle
    sync = svg_text(d / "09-sync-elimination.svg")
    assert "kept: needed: RAW on As (block scope)" in sync
    tiles = svg_text(d / "tiles.svg")
    assert "grouped 8: blocks walk 8 block-rows at a time" in tiles
    assert "copy k=2" in tiles and "mma k=0" in tiles and "holds k=1" in tiles
    banks = svg_text(d / "banks.svg")
    assert "As pitch 64" in banks and "8-way conflicts" in banks
    assert "As pitch 72" in banks and "conflict-free" in banks


@needs_dot
def test_a_removed_barrier_is_struck_through_with_its_reason(tmp_path: Path) -> None:
    text = F16.read_text().replace("sync    all", "sync    minimal")
    draw(F16, tmp_path, text=text)
    svg = tmp_path / "hgemm_f16" / "09-sync-elimination.svg"
    assert struck(svg).count("__syncthreads()") == 1
    assert any(
        line.startswith("WAR: every warp must be done reading As, Bs") for line in struck(svg)
    )
    words = " ".join(svg_text(svg).split())
    assert "removed: redundant: every hazard it orders" in words
    assert "is also ordered by another barrier" in words
    assert "this pass: 1 statement(s) removed" in words


@pytest.mark.parametrize("path", example_params())
def test_the_bank_map_is_the_bank_model(path: Path) -> None:
    """Each phase's ways, as drawn, agree with `tiledsl.models.banks` (what `check` prints)."""
    for kernel in compile_source(path.read_text(), str(path)).kernels:
        for name, load in fragment_loads(kernel):
            buf = kernel.buffer(name)
            for pitch in (buf.line_length, buf.pitch):
                drawn = max(ways for ways, _ in phases(buf, load, pitch).values())
                assert drawn == fragment_ways(kernel, load, pitch), (path, name, pitch)


def test_the_grid_order_is_the_swizzles() -> None:
    kernel = compile_source(HGEMM.read_text(), "hgemm.tile").kernels[0]
    env = visiting_order(kernel, 12, 4)
    # Grouped 8: the first 8 blocks walk down column 0 of the first group of 8 block-rows.
    assert list(env["bm"][:9]) == [0, 1, 2, 3, 4, 5, 6, 7, 0]
    assert list(env["bn"][:9]) == [0] * 8 + [1]
    # The last group holds the 4 block-rows left.
    assert list(env["bm"][32:36]) == [8, 9, 10, 11]


def test_diff_pairs_statements_by_kind() -> None:
    compiled = compile_source(HGEMM.read_text(), "hgemm.tile")
    (_, lower, _), (_, smem, _) = compiled.snapshots[:2]
    items = diff_body(lower.body, smem.body)
    assert [i.status for i in items] == ["same", "same", "same"]
    loop = dict(items[1].bodies)[""]
    assert [i.status for i in loop[:3]] == ["added", "added", "added"]  # copies, barrier
    inner = dict(loop[3].bodies)[""]
    assert [i.status for i in inner] == ["changed", "changed", "same"]


# ---------------------------------------------------------------- the IR will grow


@dataclasses.dataclass(frozen=True)
class Guard:
    """A statement kind the pictures do not know, holding a body."""

    edge: str
    body: tuple


@dataclasses.dataclass(frozen=True)
class Mystery:
    value: int


def test_unknown_nodes_get_a_generic_box(tmp_path: Path, monkeypatch) -> None:
    compiled = compile_source(HGEMM.read_text(), "hgemm.tile")
    final = compiled.kernels[0]
    loop = next(s for s in final.body if isinstance(s, For) and s.var == "kt")
    guarded = Guard("M % BM", (Mystery(7), *loop.body))
    body = tuple(dataclasses.replace(loop, body=(guarded,)) if s is loop else s for s in final.body)
    grown = dataclasses.replace(final, body=body)
    source = stage_graph(grown, "edge-guards", 7, final, "hgemm.tile")
    assert "Guard(edge=M % BM)" in source and "Mystery(value=7)" in source
    assert "copy k=2" in tiles_graph(grown, "hgemm.tile")  # the pipeline is traced through it
    grown_compiled = dataclasses.replace(
        compiled, kernels=(grown,), snapshots=[("lower", grown, True)]
    )
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    result = write_viz(grown_compiled, tmp_path / "out")
    assert "the IR printer cannot print this stage" in result.index.read_text()
    monkeypatch.undo()
    if shutil.which("dot"):
        path = tmp_path / "stage.dot"
        path.write_text(source)
        subprocess.run(["dot", "-Tsvg", "-o", str(tmp_path / "stage.svg"), str(path)], check=True)
        assert "Mystery(value=7)" in svg_text(tmp_path / "stage.svg")


# ---------------------------------------------------------------- stable bytes


def test_same_input_same_bytes(tmp_path: Path, monkeypatch) -> None:
    """Two runs, one in a process with another hash seed: identical .dot files and page."""
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # no dot: compare sources only
    draw(HGEMM, tmp_path / "a")
    script = (
        "import sys; from pathlib import Path; from tiledsl.viz import viz_source; "
        "viz_source(Path(sys.argv[1]).read_text(), sys.argv[2], sys.argv[3])"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PATH": str(tmp_path / "no-bin")}
    subprocess.run(
        [sys.executable, "-c", script, str(HGEMM), "examples/hgemm.tile", str(tmp_path / "b")],
        check=True,
        env=env,
        cwd=ROOT,
    )
    a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert a == b and len(a) == 10
    for rel in a:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel


# ---------------------------------------------------------------- the command line


def test_without_dot_it_writes_sources_and_says_so_once(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    out = tmp_path / "out"
    r = cli(["viz", V1, "-o", out], capsys)
    assert r.code == 0
    assert r.err.count("rendering needs Graphviz's `dot`") == 1 and "graphviz" in r.err
    assert sorted(p.name for p in (out / "hgemm_v1").iterdir()) == [
        "00-lower.dot",
        "banks.dot",
        "tiles.dot",
    ]
    page = (out / "index.html").read_text()
    assert 'href="hgemm_v1/00-lower.dot"' in page and "<img" not in page
    for stage in STAGE_NAMES[1:]:
        assert f"{stage} — did not run" in page
    assert f"wrote {out / 'hgemm_v1' / '00-lower.dot'}\n" in r.out


@needs_dot
def test_png_format(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    r = cli(["viz", ROOT / "examples" / "ladder" / "v2.tile", "-o", out, "--format", "png"], capsys)
    assert r.code == 0, r.err
    pngs = sorted(p.name for p in (out / "hgemm_v2").glob("*.png"))
    assert pngs == ["00-lower.png", "01-smem-tiling.png", "banks.png", "tiles.png"]
    assert (out / "hgemm_v2" / "tiles.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert 'src="hgemm_v2/01-smem-tiling.png"' in (out / "index.html").read_text()
    assert f"wrote {out / 'hgemm_v2' / '00-lower.dot'}, .png" in r.out
    assert f"wrote {out / 'index.html'}" in r.out


def test_output_is_required(capsys) -> None:
    r = cli(["viz", V1], capsys)
    assert r.code == 2 and "-o/--output" in r.err


def test_unknown_format_and_kernel_are_usage_errors(tmp_path: Path, capsys) -> None:
    r = cli(["viz", V1, "-o", tmp_path / "o", "--format", "pdf"], capsys)
    assert r.code == 2 and "--format" in r.err
    r = cli(["viz", V1, "-o", tmp_path / "o", "--kernel", "nope"], capsys)
    assert r.code == 2 and "no kernel 'nope'" in r.err and "hgemm_v1" in r.err
    r = cli(["viz", tmp_path / "missing.tile", "-o", tmp_path / "o"], capsys)
    assert r.code == 2 and "no such file" in r.err


def test_an_error_in_the_file_is_located_and_writes_nothing(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.tile"
    text = kernel_text("block 64 x 64 x", "stages 1")
    bad.write_text(text)
    out = tmp_path / "out"
    r = cli(["viz", bad, "-o", out], capsys)
    assert r.code == 1
    assert f"{bad}:{line_of(text, 'block 64 x 64 x')}:" in r.err
    assert "expected a number after 'x'" in r.err and "Traceback" not in r.err
    assert not out.exists()


def test_kernel_option_draws_one_kernel(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    two = tmp_path / "two.tile"
    first = kernel_text("block 64 x 64 x 32", "stages 1", "sync all", name="one")
    two.write_text(first + kernel_text("block 64 x 64 x 32", "stages 2", name="two"))
    r = cli(["viz", two, "-o", tmp_path / "out", "--kernel", "two"], capsys)
    assert r.code == 0, r.err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["index.html", "two"]


def test_the_roles_picture_draws_each_handoff_from_the_ir() -> None:
    from tiledsl.viz.handoffs import handoffs_graph

    compiled = compile_source((ROOT / "examples" / "hopper" / "epilogue.tile").read_text())
    (kernel,) = compiled.kernels
    dot = handoffs_graph(kernel, "epilogue.tile")
    stages = kernel.schedule.stages
    # the first use of each slot passes at once; every later wait is drawn from the copy or
    # the release that completes its phase
    assert dot.count("passes at once") == stages
    for slot in range(stages):
        assert f'label="full[{slot}] phase 0"' in dot
        assert f'label="full[{slot}] phase 1"' in dot
        assert f"wait empty[{slot}] parity 0" in dot  # its second use waits for phase 0
    assert 'label="empty[0] phase 0"' in dot and "C leaves by TMA" in dot
    # the release of step q's slot comes at step q + 1, and reaches the producer's step
    # q + STAGES
    assert 'consumer1:arriveempty -> producer4:waitempty [label="empty[0] phase 0"' in dot


def test_only_warp_specialized_kernels_get_the_roles_picture(tmp_path: Path) -> None:
    from tiledsl.viz import pictures

    hopper = compile_source((ROOT / "examples" / "hopper" / "ws.tile").read_text())
    assert [p.roles is not None for p in pictures(hopper)] == [True]
    assert [p.roles for p in pictures(compile_source(HGEMM.read_text()))] == [None]


@needs_dot
def test_the_direct_paths_k_teams_are_drawn(tmp_path: Path) -> None:
    from helpers import ROOT

    draw(ROOT / "examples" / "direct" / "few_tokens_direct.tile", tmp_path)
    d = tmp_path / "few_tokens_direct"
    tiles = svg_text(d / "tiles.svg")
    assert "1 x 1 warps x 8 K teams" in tiles
    assert "warps_k 8: 8 teams of these warps, team t on the K steps t, t + 8" in tiles
    teams = svg_text(d / "04-k-teams.svg")
    assert "buffer Ks added" in teams and "(kr * WARPS_K + kteam) * BK" in teams
