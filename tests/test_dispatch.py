"""Dispatch tables (`tiledsl tune FILE --sizes SUITE`), without a GPU: the table's rule
(the shape itself, else the nearest tuned shape whose kernel covers it), reading a suite
and a table with located errors, the suite search with a fake timer writing one `.tile`
of kernels and its table, and the table followed by tiledsl.load, `tiledsl check --size`
and `tiledsl run`."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers import cli, kernel_text

import tiledsl
from tiledsl.driver import compile_source
from tiledsl.errors import UsageError
from tiledsl.tune.dispatch import (
    Entry,
    Pick,
    Table,
    choose_kernel,
    read_suite,
    read_table,
    table_path,
)
from tiledsl.tune.record import Result
from tiledsl.tune.suite import tune_suite

# block {64, 128} x 64 x 32: two points, both feasible at the suite's shapes
SPACE = kernel_text(
    "block {64, 128} x 64 x 32",
    "coarsen 1 x 1",
    "stages 2",
    "pad none",
    "swizzle none",
    "sync all",
    name="k",
)


class SizeAwareTimer:
    """A fake GPU on which 64-row blocks win small M and 128-row blocks large M."""

    device = "Fake GPU"
    compiler = "fakec 1.0"

    def __init__(self) -> None:
        self.timed: list[tuple[str, tuple[int, int, int]]] = []

    def measure(self, points, size, jobs):
        for point in points:
            self.timed.append((point.label, size))
            small = "block 64" in point.label
            ms = (1.0 if small else 2.0) if size[0] <= 64 else (2.0 if small else 1.0)
            yield point, Result("ok", ms, 2.0, "bit-exact", self.device)


def table(*entries: tuple[tuple[int, int, int], str]) -> Table:
    return Table("x.tile", tuple(Entry(size, name) for size, name in entries))


def test_the_shape_itself_else_the_nearest_tuned_shape_that_covers_it() -> None:
    t = table(((64, 4096, 4096), "small"), ((2048, 4096, 4096), "large"))
    assert t.pick((64, 4096, 4096)) == Pick("small", "tuned at 64x4096x4096")
    picked = t.pick((1024, 4096, 4096))  # log2 distance 1 to 2048, 4 to 64
    assert picked.kernel == "large" and not picked.far
    assert picked.why == "the nearest tuned shape, 2048x4096x4096 (log2 distance 1.00)"
    assert t.pick((128, 4096, 4096)).kernel == "small"  # 1 from 64, 4 from 2048
    assert t.pick((1024, 4096, 4096), covering={"small"}).kernel == "small"
    assert t.pick((1024, 4096, 4096), covering=set()) is None


def test_a_shape_far_from_every_tuned_shape_is_picked_and_called_far() -> None:
    """Past FAR (a factor of four in one dimension) the nearest kernel still runs, and the
    pick says that nothing was timed near the shape, with the table's range."""
    t = table(((1, 12288, 4096), "few"), ((16, 4096, 11008), "more"))
    assert not t.pick((64, 4096, 11008)).far  # log2 distance 2: a factor of four
    assert t.pick((65, 4096, 11008)).far
    picked = t.pick((4095, 4097, 4099))
    assert picked.kernel == "more" and picked.far
    assert picked.why == (
        "the nearest tuned shape, 16x4096x11008 (log2 distance 9.43); far from every shape "
        "the table was tuned at (M 1-16, N 4096-12288, K 4096-11008): its speed at "
        "4095x4097x4099 is unmeasured; add the shape to the suite (`tiledsl tune SPACE "
        "--sizes SUITE`) or load a file tuned near it"
    )
    assert table(((64, 256, 128), "k")).span() == "M 64, N 256, K 128"


def test_a_tie_goes_to_the_first_entry() -> None:
    t = table(((512, 512, 512), "a"), ((2048, 512, 512), "b"))
    assert t.pick((1024, 512, 512)).kernel == "a"


def test_reading_a_suite_and_its_errors(tmp_path: Path) -> None:
    suite = tmp_path / "suite.txt"
    suite.write_text("# shapes\n64x4096x4096\n\n2048x4096x4096  # the prefill\n64x4096x4096\n")
    assert read_suite(suite) == [(64, 4096, 4096), (2048, 4096, 4096)]
    suite.write_text("64x4096x4096\n64 x 4096\n")
    with pytest.raises(UsageError) as err:
        read_suite(suite)
    assert str(err.value).startswith(f"{suite}:2: '64 x 4096' is not a size MxNxK")
    suite.write_text("# nothing\n")
    with pytest.raises(UsageError, match="holds no size"):
        read_suite(suite)


def test_a_table_that_cannot_be_read_or_names_another_kernel_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.dispatch.json"
    assert read_table(path) is None
    path.write_text("{not json")
    with pytest.raises(UsageError, match="not a dispatch table"):
        read_table(path)
    path.write_text(json.dumps({"entries": [{"size": [1, 2, 3], "kernel": "gone"}]}))
    with pytest.raises(UsageError) as err:
        read_table(path, {"k_1"})
    assert str(err.value).startswith(f"{path} names kernel 'gone', which its .tile file")


def suite_run(tmp_path: Path, timer=None, **options) -> tuple[int, Path]:
    space = tmp_path / "space.tile"
    space.write_text(SPACE)
    out = tmp_path / "space.tuned.tile"
    status = tune_suite(
        SPACE,
        str(space),
        [(64, 256, 128), (512, 256, 128)],
        budget=None,
        kernel=None,
        record=tmp_path / "record.jsonl",
        output=out,
        jobs=1,
        timer_factory=lambda: timer,
        **options,
    )
    return status, out


def test_a_suite_search_writes_a_kernel_per_winner_and_the_table(tmp_path: Path) -> None:
    status, out = suite_run(tmp_path, SizeAwareTimer())
    assert status == 0
    compiled = compile_source(out.read_text(), str(out))
    assert [k.name for k in compiled.kernels] == ["k_1", "k_2"]
    assert [k.schedule.block[0] for k in compiled.kernels] == [64, 128]
    data = json.loads(table_path(out).read_text())
    assert data["tile"] == "space.tuned.tile" and data["device"] == "Fake GPU"
    assert [(e["size"], e["kernel"]) for e in data["entries"]] == [
        ([64, 256, 128], "k_1"),
        ([512, 256, 128], "k_2"),
    ]
    assert "# k_1: block 64 x 64 x 32; fastest at 64x256x128 (1.000 ms" in out.read_text()


def test_a_suite_prunes_each_point_once_and_checks_only_its_size_per_shape(monkeypatch) -> None:
    """Compiling a point to source does not depend on the size: a suite of shapes
    compiles each point once (a GPU waits while the CPUs prune)."""
    from tiledsl.frontend.parser import parse
    from tiledsl.tune import search
    from tiledsl.tune.space import expand

    points = expand(parse(SPACE, "space.tile"))
    sizes = [(64, 256, 128), (512, 256, 128), (100, 256, 128)]
    per_size = [search.prune(points, size, jobs=1) for size in sizes]
    compiled = []
    real = search.compile_program
    monkeypatch.setattr(search, "compile_program", lambda p: compiled.append(p) or real(p))
    assert search.prune_sizes(points, sizes, jobs=1) == per_size
    assert len(compiled) == len(points)


def test_a_time_limit_writes_the_shapes_searched_and_a_rerun_resumes(
    tmp_path: Path, capsys
) -> None:
    """--time-limit: no shape starts after the limit; the ones searched are written (status
    1, the others named), and a rerun with the record times only what is left."""
    ticks = iter([0.0, 0.0, 100.0])  # the start, the first shape, then past the limit
    timer = SizeAwareTimer()
    status, out = suite_run(tmp_path, timer, time_limit=10, clock=lambda: next(ticks))
    assert status == 1
    assert "the time limit (10 s) is reached; not searched: 512x256x128" in capsys.readouterr().out
    data = json.loads(table_path(out).read_text())
    assert [e["size"] for e in data["entries"]] == [[64, 256, 128]]
    timed = len(timer.timed)
    assert suite_run(tmp_path, timer)[0] == 0  # no limit: the rest
    assert [e["size"] for e in json.loads(table_path(out).read_text())["entries"]] == [
        [64, 256, 128],
        [512, 256, 128],
    ]
    assert all(size == (512, 256, 128) for _, size in timer.timed[timed:])


def test_a_suite_search_without_a_gpu_writes_nothing(tmp_path: Path) -> None:
    status, out = suite_run(tmp_path, None)
    assert status == 1 and not out.exists() and not table_path(out).exists()


def test_load_check_and_run_follow_the_table(tmp_path: Path, capsys) -> None:
    status, out = suite_run(tmp_path, SizeAwareTimer())
    assert status == 0
    k = tiledsl.load(out)
    assert k.table is not None
    assert k.explain(64, 256, 128).startswith(
        "64x256x128: k_1: the dispatch table's pick, tuned at 64x256x128"
    )
    assert k.explain(1024, 256, 128).startswith(
        "1024x256x128: k_2: the dispatch table's pick, the nearest tuned shape, 512x256x128"
    )
    rng = np.random.default_rng(3)
    a = rng.integers(-2, 3, (64, 128)).astype(np.float16)
    b = rng.integers(-2, 3, (128, 256)).astype(np.float16)
    assert np.array_equal(k(a, b), a.astype(np.float64) @ b.astype(np.float64))
    shown = cli(["check", out, "--size", "100x256x128"], capsys)
    assert shown.code == 0
    assert shown.out.startswith(
        "100x256x128 takes k_1: the dispatch table's pick, the nearest tuned shape, 64x256x128"
    )
    ran = cli(["run", "--cpu", out, "--size", "64x256x128", "--size", "512x256x128"], capsys)
    assert ran.code == 0, ran.err
    assert "64x256x128 takes k_1: the dispatch table's pick, tuned at 64x256x128" in ran.out
    assert "512x256x128 takes k_2" in ran.out
    assert ran.out.count("PASS") >= 2


def test_a_call_far_from_every_tuned_shape_warns_once_and_runs(tmp_path: Path, capsys) -> None:
    """tiledsl.load's callable at a shape far from the table's (64 and 512 x 256 x 128):
    the nearest kernel runs, exactly, and a TileWarning says so once for that shape; check
    --size says it too. A shape near a tuned one runs without a word."""
    assert suite_run(tmp_path, SizeAwareTimer())[0] == 0
    out = tmp_path / "space.tuned.tile"
    k = tiledsl.load(out)
    rng = np.random.default_rng(5)
    b = rng.integers(-2, 3, (128, 64)).astype(np.float16)
    far = rng.integers(-2, 3, (4, 128)).astype(np.float16)  # 4 x 64 x 128: distance 6
    with pytest.warns(tiledsl.TileWarning) as caught:
        got = k(far, b)
    assert np.array_equal(got, far.astype(np.float64) @ b.astype(np.float64))
    assert len(caught) == 1
    assert str(caught[0].message).startswith(
        f"{out}: 4x64x128 takes k_1: the dispatch table's pick, the nearest tuned shape, "
        "64x256x128 (log2 distance 6.00); far from every shape the table was tuned at "
        "(M 64-512, N 256, K 128)"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same shape again: the plan kept, no warning
        k(far, b)
        near = rng.integers(-2, 3, (100, 128)).astype(np.float16)
        k(near, rng.integers(-2, 3, (128, 256)).astype(np.float16))
    shown = cli(["check", out, "--size", "4x64x128"], capsys)
    assert shown.code == 0
    assert "far from every shape the table was tuned at (M 64-512, N 256, K 128)" in shown.out


def test_without_a_table_the_first_kernel_that_covers_a_size_without_its_twin() -> None:
    two = kernel_text("block 128 x 64 x 32", "stages 2", name="big") + kernel_text(
        "block 64 x 64 x 32", "stages 2", name="small"
    )
    kernels = compile_source(two, "two.tile").kernels
    assert choose_kernel(kernels, (128, 64, 32)).kernel.name == "big"
    chosen = choose_kernel(kernels, (64, 64, 32))
    assert chosen.kernel.name == "small" and "without its guarded twin" in chosen.why
    assert not chosen.far
