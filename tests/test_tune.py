"""`tiledsl tune` without a GPU: expanding a space into plain files, pruning with located
reasons, the budget's sample, the JSON-lines record and its reuse, the best file, the
summary line and the command line (the GPU faked by a timer); on a GPU (marked `gpu`),
a small space tuned for real."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import OPERANDS, ROOT, cli, kernel_text, line_of, tune_file_in

from tiledsl.driver import compile_program, compile_source
from tiledsl.errors import TileError
from tiledsl.frontend.formatter import format_program
from tiledsl.frontend.parser import parse
from tiledsl.gpu.runtime import gpu_available
from tiledsl.tune import search as tune
from tiledsl.tune.record import Result, read_record, reusable
from tiledsl.tune.search import choose, sample_order, verdict
from tiledsl.tune.space import MAX_POINTS, expand, point_count

SPACE = ROOT / "examples" / "spaces" / "hgemm_space.tile"

# 2 x 2 x 2 = 8 points; coarsen 3 x 1 does not divide the 64-row block: 4 pruned.
DIRECTIVES = (
    "block {64, 128} x 64 x 32",
    "coarsen {1, 3} x 1",
    "stages {1, 2}",
    "pad none",
    "swizzle none",
    "sync all",
)
TEXT = kernel_text(*DIRECTIVES)
SIZE = (256, 128, 64)


def space(text: str = TEXT, name: str = "space.tile"):
    return parse(text, name)


def write(tmp_path: Path, text: str = TEXT, name: str = "space.tile") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


class FakeTimer:
    """Stands in for the GPU: a time per point from `ms`, failures for labels in `fail`."""

    device = "Fake GPU"
    compiler = "fakec 1.0"

    def __init__(self, fail: tuple[str, ...] = ()):
        self.fail = fail
        self.timed: list[str] = []

    @staticmethod
    def ms(label: str) -> float:
        """Bigger blocks and deeper pipelines are faster: a known winner."""
        return 1.0 - 0.25 * ("block 128" in label) - 0.125 * ("stages 2" in label)

    def measure(self, points, size, jobs):
        for point in points:
            self.timed.append(point.label)
            if point.label in self.fail:
                yield point, Result("failed check", detail="exact oracle: 1 of 9 differ")
            else:
                yield point, Result("ok", self.ms(point.label), 2.0, "bit-exact", self.device)


def run(tmp_path: Path, timer=None, text: str = TEXT, size=SIZE, **options) -> int:
    """`tune_file` on `text` at `size` with the timer given (the fake GPU unless a test
    passes a real one), record and best file in tmp_path."""
    path = write(tmp_path, text)
    return tune_file_in(tmp_path, text, path, size, lambda: timer, **options)


# ---------------------------------------------------------------- expansion


def test_expansion_is_the_product_of_the_sets_last_fastest() -> None:
    points = expand(space())
    assert point_count(space().kernel()) == len(points) == 8
    assert [p.label for p in points[:3]] == [
        "block 64 x 64 x 32, coarsen 1 x 1, stages 1",
        "block 64 x 64 x 32, coarsen 1 x 1, stages 2",
        "block 64 x 64 x 32, coarsen 3 x 1, stages 1",
    ]
    assert len({p.text for p in points}) == 8


def test_a_point_is_a_plain_file_whose_canonical_text_round_trips() -> None:
    for point in expand(space()):
        assert point.text.count("{") == 1  # the kernel's brace only: no sets left
        again = parse(point.text, "point.tile")
        assert again == point.program  # locations aside, the same file
        assert format_program(again) == point.text  # canonical: a fixed point
        if "coarsen 1 x 1" in point.label:
            compiled = compile_source(point.text, "point.tile")
            assert compiled.kernels[0].schedule.block[0] in (64, 128)


def test_a_repeated_option_is_one_point_and_no_sets_is_one_point() -> None:
    assert len(expand(space(kernel_text("block {64, 64} x 64 x 32", "stages 1")))) == 1
    (only,) = expand(space(kernel_text("block 64 x 64 x 32", "stages 1")))
    assert only.label == "the kernel as written (no tuning sets)"
    assert only.choices == ()


def test_a_space_of_several_kernels_of_one_product_is_their_union() -> None:
    two = space(kernel_text(*DIRECTIVES, name="a") + kernel_text("block 64 x 64 x 32", name="b"))
    points = expand(two)
    assert len(points) == 8 + 1
    assert points[0].label == "kernel a, block 64 x 64 x 32, coarsen 1 x 1, stages 1"
    assert points[-1].label == "kernel b"
    assert [k.name for k in points[-1].program.kernels] == ["b"]
    with pytest.raises(ValueError, match="no kernel 'c'.*a, b"):
        expand(two, "c")
    assert len(expand(two, "b")) == 1
    assert [k.name for k in expand(two, "a")[0].program.kernels] == ["a"]
    assert expand(two, "a")[0].label == "block 64 x 64 x 32, coarsen 1 x 1, stages 1"


def test_a_space_of_several_products_needs_a_kernel_named() -> None:
    f16 = tuple(o.replace("C: f32", "C: f16") for o in OPERANDS)
    two = space(
        kernel_text(*DIRECTIVES, name="a")
        + kernel_text("block 64 x 64 x 32", name="b", operands=f16)
    )
    with pytest.raises(ValueError, match="2 kernels .*different products.*--kernel NAME"):
        expand(two)
    assert len(expand(two, "b")) == 1


def test_a_huge_space_is_refused_at_the_kernel() -> None:
    sets = ", ".join(str(16 * i) for i in range(1, 31))
    text = kernel_text(f"block {{{sets}}} x {{{sets}}} x {{{sets}}}")
    assert 30**3 > MAX_POINTS
    with pytest.raises(TileError) as caught:
        expand(space(text))
    assert caught.value.first.loc.line == 1
    assert "27000 points" in caught.value.first.message


# ---------------------------------------------------------------- pruning


def test_pruning_gives_the_first_reason_located_in_the_space() -> None:
    verdicts = [verdict(p.program, SIZE) for p in expand(space())]
    pruned = [v for v in verdicts if v.reason]
    assert len(pruned) == 4
    line = line_of(TEXT, "block {")
    for v in pruned:
        assert v.reason.startswith(f"space.tile:{line}:5: BM = ")
        assert v.reason.endswith("is not divisible by mma.M × CM = 16 × 3 = 48")
    assert all(v.vendor == "cuda" and v.size == SIZE for v in verdicts if not v.reason)


def test_a_point_that_cannot_run_the_size_is_pruned() -> None:
    text = kernel_text("block 64 x 64 x 32", "stages {0, 1}", "pad none", "swizzle none")
    ragged = (100, 64, 64)
    reasons = [verdict(p.program, ragged).reason for p in expand(space(text))]
    assert reasons[0].startswith("at 100x64x64: M = 100 is not a multiple")
    assert reasons[1] is None  # stages 1 has a guarded twin for edge tiles


def test_the_default_size_keeps_a_declared_literal() -> None:
    operands = ("A: f16[512, K] row", "B: f16[K, N] row", "C: f32[512, N] row")
    text = kernel_text("block 64 x 64 x 32", "stages 1", operands=operands)
    (point,) = expand(space(text))
    assert verdict(point.program).size == (512, 4096, 4096)


def test_pruning_on_worker_processes_agrees_with_pruning_here() -> None:
    points = expand(space())
    here = tune.prune(points, SIZE, jobs=1)
    assert tune.prune(points, SIZE, jobs=2) == here


def test_parallel_map_runs_here_for_one_job_unless_told_to_spawn() -> None:
    here = os.getpid()
    assert list(tune.parallel_map(os.getpid, [()], jobs=4)) == [here]
    (there,) = tune.parallel_map(os.getpid, [()], jobs=1, always_spawn=True)
    assert there != here
    assert list(tune.parallel_map(os.getpid, [], jobs=4, always_spawn=True)) == []


# ---------------------------------------------------------------- the budget and the record


def test_the_budget_sample_is_fixed_spread_and_independent_of_the_other_points() -> None:
    points = expand(space(kernel_text("block {32, 64, 128} x {32, 64, 128} x 32", "stages 1")))
    chosen, left = choose(points, set(), 4)
    assert (len(chosen), left) == (4, 5)
    assert chosen == choose(points, set(), 4)[0]  # deterministic
    assert chosen == [p for p in points if p in chosen]  # in expansion order
    assert {p.text for p in chosen} == {p.text for p in sorted(points, key=sample_order)[:4]}
    assert chosen != points[:4]  # spread over the space, not its first corner
    # A point's place in the order is its own: another set option leaves the others' order.
    wider = expand(space(kernel_text("block {32, 64, 128, 256} x {32, 64, 128} x 32", "stages 1")))
    narrow = {p.text for p in points}
    assert [p.text for p in sorted(wider, key=sample_order) if p.text in narrow] == [
        p.text for p in sorted(points, key=sample_order)
    ]


def test_a_rerun_with_the_same_budget_times_the_next_points() -> None:
    points = expand(space(kernel_text("block {32, 64, 128} x {32, 64, 128} x 32", "stages 1")))
    first, _ = choose(points, set(), 4)
    second, left = choose(points, {p.text for p in first}, 4)
    assert not {p.text for p in first} & {p.text for p in second}
    assert left == 1
    assert choose(points, {p.text for p in points}, 4) == ([], 0)


def test_read_record_skips_torn_lines(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    good = {"schedule": "a", "size": [8, 8, 8], "device": "d", "compiler": "c", "status": "ok"}
    good["time_ms"] = 1.0
    path.write_text(json.dumps(good) + '\n{"schedule": "b", "sta\n[1, 2]\n')
    warnings = []
    assert read_record(path, warn=warnings.append) == [good]
    assert warnings == [
        f"{path}:2: skipped a record line: it is not JSON (Unterminated string starting at)",
        f"{path}:3: skipped a record line: it is not a JSON object",
    ]
    assert read_record(tmp_path / "none.jsonl") == []


def test_only_passes_at_the_same_size_device_and_compiler_are_reused() -> None:
    timer = FakeTimer()
    base = {"size": list(SIZE), "device": timer.device, "compiler": timer.compiler}
    entries = [
        {**base, "schedule": "a", "status": "ok", "time_ms": 2.0},
        {**base, "schedule": "a", "status": "ok", "time_ms": 1.5},  # the later line wins
        {**base, "schedule": "b", "status": "failed check", "time_ms": None},
        {**base, "schedule": "c", "status": "ok", "time_ms": 1.0, "size": [1, 2, 3]},
        {**base, "schedule": "d", "status": "ok", "time_ms": 1.0, "device": "Other"},
        {**base, "schedule": "e", "status": "ok", "time_ms": 1.0, "compiler": "fakec 2.0"},
    ]
    found = reusable(entries, SIZE, timer.device, timer.compiler)
    assert list(found) == ["a"]
    assert found["a"].time_ms == 1.5 and found["a"].reused


def test_the_code_key_leaves_out_comments_but_not_strings() -> None:
    """What a point compiles to, without the comments that quote its directives as written:
    a `//` inside a string literal (an asm template) is code."""
    from tiledsl.tune.search import _without_comment

    assert _without_comment("    x = 1;  // stages 2 (line 7)") == "    x = 1;  "
    assert (
        _without_comment('asm("add // not a comment"); // one') == 'asm("add // not a comment"); '
    )
    assert _without_comment("// a whole line") == ""
    timer = FakeTimer()
    base = {"size": list(SIZE), "device": timer.device, "compiler": timer.compiler}
    entries = [
        {**base, "schedule": "a", "code": "k1", "status": "ok", "time_ms": 2.0},
        {**base, "schedule": "b", "status": "ok", "time_ms": 1.0},  # an older line: no code
    ]
    assert list(reusable(entries, SIZE, timer.device, timer.compiler, key="code")) == ["k1"]


# ---------------------------------------------------------------- the whole search, faked GPU


def test_tune_records_every_point_and_writes_the_best_as_a_plain_file(
    tmp_path: Path, capsys
) -> None:
    timer = FakeTimer()
    assert run(tmp_path, timer) == 0
    out = capsys.readouterr().out
    lines = [json.loads(line) for line in (tmp_path / "record.jsonl").read_text().splitlines()]
    assert sorted(e["status"] for e in lines) == ["ok"] * 4 + ["pruned"] * 4
    for e in lines:
        assert (e["size"], e["device"], e["compiler"]) == (list(SIZE), "Fake GPU", "fakec 1.0")
        assert parse(e["schedule"], "r.tile").kernels  # the key is a whole file
    ok = {e["point"]: e for e in lines if e["status"] == "ok"}
    best = ok["block 128 x 64 x 32, coarsen 1 x 1, stages 2"]
    assert best["time_ms"] == 0.625
    assert best["tflops"] == pytest.approx(2 * 256 * 128 * 64 / (0.625 * 1e9))
    pruned = [e for e in lines if e["status"] == "pruned"]
    assert all(e["detail"].startswith("space.tile:") or ":" in e["detail"] for e in pruned)

    text = (tmp_path / "best.tile").read_text()
    assert text.startswith("# The fastest point of space.tile")
    assert text.endswith(best["schedule"])
    compiled = compile_source(text, "best.tile")  # what `tiledsl compile` takes
    assert compiled.kernels[0].schedule.block == (128, 64, 32)
    assert compiled.kernels[0].schedule.stages == 2

    summary = out.strip().splitlines()[-1]
    assert summary.startswith("tune: 8 points, 4 pruned, 4 timed (0 reused) in ")
    assert summary.endswith(
        "; best 0.625 ms 0.0 TFLOP/s (3.20x cuBLAS): block 128 x 64 x 32, coarsen 1 x 1, stages 2"
    )
    assert [line[:12] for line in out.splitlines() if line.startswith("tune  ")] == [
        f"tune   {i}/4  " for i in range(1, 5)
    ]  # one line per candidate (stderr is no terminal here)
    assert "fastest of 4 at 256x128x64 on Fake GPU (fakec 1.0):" in out


def test_a_rerun_reuses_the_record_and_times_nothing_again(tmp_path: Path, capsys) -> None:
    assert run(tmp_path, FakeTimer()) == 0
    before = (tmp_path / "record.jsonl").read_text()
    again = FakeTimer()
    assert run(tmp_path, again) == 0
    assert again.timed == []
    out = capsys.readouterr().out
    assert "reused 4 results from" in out
    assert "tune: 8 points, 4 pruned, 4 timed (4 reused) in " in out
    assert "(recorded)" in out
    assert (tmp_path / "record.jsonl").read_text() == before  # pruned lines not repeated


def test_a_point_respelled_with_the_same_code_is_reused_by_its_code(tmp_path: Path, capsys) -> None:
    """A space that gains a set respells its old points (`coarsen 1 x 1` written where
    nothing was): their text is new, their code is not, so the record's times hold and
    only the new points are timed. A point whose code changed is timed again."""
    without = tuple(d for d in DIRECTIVES if not d.startswith("coarsen"))
    assert run(tmp_path, FakeTimer(), text=kernel_text(*without)) == 0
    lines = [json.loads(line) for line in (tmp_path / "record.jsonl").read_text().splitlines()]
    assert len(lines) == 4 and all(len(e["code"]) == 64 for e in lines)
    capsys.readouterr()
    again = FakeTimer()
    assert run(tmp_path, again, text=kernel_text(*without, "coarsen {1, 2} x 1")) == 0
    assert len(again.timed) == 4  # the coarsened points only: their code is new
    assert all("coarsen 2 x 1" in label for label in again.timed)
    out = capsys.readouterr().out
    assert "(same size, device and compiler; 4 of them by their generated code)" in out


def test_a_budget_times_n_then_the_next_n(tmp_path: Path, capsys) -> None:
    first = FakeTimer()
    assert run(tmp_path, first, budget=3) == 0
    assert len(first.timed) == 3
    assert ", 1 left by --budget" in capsys.readouterr().out
    second = FakeTimer()
    assert run(tmp_path, second, budget=3) == 0
    assert len(second.timed) == 1 and second.timed[0] not in first.timed
    assert "4 timed (3 reused)" in capsys.readouterr().out


def test_a_failed_check_fails_the_run_but_the_best_is_written(tmp_path: Path, capsys) -> None:
    bad = "block 128 x 64 x 32, coarsen 1 x 1, stages 2"
    assert run(tmp_path, FakeTimer(fail=(bad,))) == 1
    captured = capsys.readouterr()
    assert f"failed  {bad}: failed check: exact oracle" in captured.err
    assert "4 timed (0 reused, 1 failed)" in captured.out
    chosen = "# Chosen: block 128 x 64 x 32, coarsen 1 x 1, stages 1."  # the next fastest
    assert chosen in (tmp_path / "best.tile").read_text().splitlines()
    # A failure is not reused: the next run tries it again.
    again = FakeTimer()
    assert run(tmp_path, again) == 0
    assert again.timed == [bad]


def test_no_point_passing_writes_nothing(tmp_path: Path, capsys) -> None:
    labels = tuple(p.label for p in expand(space()))
    assert run(tmp_path, FakeTimer(fail=labels)) == 1
    assert not (tmp_path / "best.tile").exists()
    assert "no point passed its checks" in capsys.readouterr().out


def test_all_pruned_is_an_error(tmp_path: Path, capsys) -> None:
    text = kernel_text("block {40, 72} x 64 x 32", "stages 1")  # not multiples of 16
    assert run(tmp_path, FakeTimer(), text=text) == 1
    assert "all 2 points are pruned" in capsys.readouterr().err


def test_without_a_gpu_tune_says_what_it_would_time_and_exits_1(tmp_path: Path, capsys) -> None:
    assert run(tmp_path, None, budget=2) == 1
    captured = capsys.readouterr()
    assert "would time 2 of the 4 feasible points at 256x128x64" in captured.out
    assert "timing needs a CUDA GPU" in captured.err and "--dry-run" in captured.err
    assert not (tmp_path / "record.jsonl").exists()


def test_default_record_and_best_file_go_to_the_working_directory(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(tmp_path, FakeTimer(), record=None, output=None) == 0
    assert (tmp_path / "tune-space.jsonl").is_file()
    assert (tmp_path / "space.best.tile").is_file()


def test_a_musa_space_is_listed_but_not_timed(tmp_path: Path, capsys) -> None:
    musa = ("mma 32 x 32 x 16", "coarsen 4 x 2", "stages 1", "copy sync 8", "target musa mp_22")
    text = kernel_text("block 256 x {128, 256} x 64", *musa)
    assert run(tmp_path, FakeTimer(), text=text, dry_run=True) == 0
    assert run(tmp_path, FakeTimer(), text=text) == 1
    assert "this space targets musa" in capsys.readouterr().err


def test_the_gpu_timer_reports_compile_errors_then_times_the_rest(monkeypatch) -> None:
    from tiledsl.errors import ToolchainError
    from tiledsl.tune import workers as tune_gpu

    points = [p for p in expand(space()) if "coarsen 1 x 1" in p.label]
    broken = points[1].program

    def serial_map(fn, items, jobs, always_spawn):  # NVRTC runs in spawned workers: faked here
        assert always_spawn
        return ("no" if program == broken else None for program, _ in items)

    monkeypatch.setattr(tune_gpu, "parallel_map", serial_map)
    monkeypatch.setattr(
        tune_gpu, "time_point", lambda program, size, settings: Result("ok", 1.0, device="G")
    )
    timer = object.__new__(tune_gpu.GpuTimer)  # no CuPy here: the fields by hand
    timer.count, timer.device, timer.arch, timer.settings = 1, "G", "sm_90", None
    got = [(p.label, r.status, r.detail) for p, r in timer.measure(points, SIZE, jobs=1)]
    assert got[0] == (points[1].label, "compile error", "no")
    assert [g[1] for g in got[1:]] == ["ok"] * 3
    err = ToolchainError("NVRTC failed", log="x.cu(3): error: nope\nmore", source_path="/t/x.cu")
    assert tune_gpu.complaint(err) == "NVRTC failed; x.cu(3): error: nope; source kept at /t/x.cu"


# ---------------------------------------------------------------- the command line


def test_cli_dry_run_lists_points_and_exits_0(tmp_path: Path, capsys) -> None:
    r = cli(["tune", write(tmp_path), "--size", "256x128x64", "--dry-run", "--jobs", "1"], capsys)
    assert r.code == 0
    lines = r.out.splitlines()
    assert sum(line.startswith("pruned  ") for line in lines) == 4
    assert sum(line.startswith("time    ") for line in lines) == 4
    assert r.out.strip().splitlines()[-1] == (
        "tune --dry-run: 8 points, 4 pruned, 4 to time at 256x128x64 (the record is not read)"
    )
    r = cli(["tune", write(tmp_path), "--dry-run", "--budget", "1", "--jobs", "1"], capsys)
    assert "1 to time at 4096x4096x4096, 3 left by --budget" in r.out
    assert sum(line.startswith("later   ") for line in r.out.splitlines()) == 3


def test_cli_without_a_gpu_exits_1(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr("tiledsl.tune.workers.gpu_timer", lambda: None)
    r = cli(["tune", write(tmp_path), "--jobs", "1"], capsys)
    assert r.code == 1
    assert "timing needs a CUDA GPU" in r.err


def test_cli_tunes_with_a_gpu(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr("tiledsl.tune.workers.gpu_timer", FakeTimer)
    record, best = tmp_path / "r.jsonl", tmp_path / "out" / "b.tile"
    argv = ["tune", write(tmp_path), "--size", "256x128x64", "--record", record, "-o", best]
    r = cli([*argv, "--jobs", "1"], capsys)
    assert r.code == 0, r.err
    assert r.out.strip().splitlines()[-1].startswith("tune: 8 points, 4 pruned, 4 timed")
    assert f"wrote {best}" in r.out
    assert cli(["compile", best], capsys).code == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--size", "12x12"], "a size is written MxNxK"),
        (["--budget", "0"], "argument --budget: expected 1 to 20000, found 0"),
        (["--jobs", "0"], "argument --jobs: expected 1 to 1024, found 0"),
        (["--kernel", "nope"], "no kernel 'nope'"),
        (["--time-limit", "60"], "--time-limit bounds a suite's search: it goes with --sizes"),
        (["--time-limit", "0"], "argument --time-limit: expected 1 to 10000000, found 0"),
    ],
)
def test_cli_usage_errors_exit_2(tmp_path: Path, capsys, argv, message) -> None:
    r = cli(["tune", write(tmp_path), "--dry-run", *argv], capsys)
    assert r.code == 2
    assert message in r.err


def test_cli_several_kernels_of_several_products_need_one_named(tmp_path: Path, capsys) -> None:
    f16 = tuple(o.replace("C: f32", "C: f16") for o in OPERANDS)
    text = kernel_text(*DIRECTIVES, name="a") + kernel_text(
        "block 64 x 64 x 32", name="b", operands=f16
    )
    r = cli(["tune", write(tmp_path, text), "--dry-run"], capsys)
    assert r.code == 2 and "--kernel NAME" in r.err
    r = cli(["tune", write(tmp_path, text), "--dry-run", "--kernel", "b", "--jobs", "1"], capsys)
    assert r.code == 0
    same = kernel_text(*DIRECTIVES, name="a") + kernel_text("block 64 x 64 x 32", name="b")
    r = cli(["tune", write(tmp_path, same), "--dry-run", "--jobs", "1"], capsys)
    assert r.code == 0, r.err
    assert "time    kernel b" in r.out and "kernel a, block 64 x 64 x 32" in r.out


def test_cli_a_broken_space_is_a_located_error(tmp_path: Path, capsys) -> None:
    text = kernel_text("block {64, 128 x 64 x 32")
    r = cli(["tune", write(tmp_path, text), "--dry-run"], capsys)
    assert r.code == 1
    assert r.err.startswith(f"{tmp_path / 'space.tile'}:{line_of(text, 'block')}:")
    assert "tuning set" in r.err


# ---------------------------------------------------------------- the shipped space


def test_the_hgemm_space_prunes_to_72_points_that_compile() -> None:
    points = expand(parse(SPACE.read_text(), str(SPACE)))
    assert len(points) == 96
    verdicts = tune.prune(points, None, jobs=1)
    feasible = [p for p, v in zip(points, verdicts) if v.reason is None]
    assert len(feasible) == 72
    assert {v.size for v in verdicts if v.size} == {(4096, 4096, 4096)}
    # examples/hgemm.tile's schedule is one of them.
    hgemm = "block 128 x 128 x 64, coarsen 4 x 4, stages 3"
    assert hgemm in {p.label for p in feasible}
    assert compile_program(feasible[0].program).kernels[0].name == "hgemm"


# ---------------------------------------------------------------- on a GPU


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU and CuPy")
def test_tune_on_the_gpu(tmp_path: Path, capsys) -> None:
    from tiledsl.tune.workers import gpu_timer

    text = kernel_text("block {64, 128} x 64 x 32", "coarsen {1, 2} x 2", "stages {1, 2}")
    record, best = tmp_path / "record.jsonl", tmp_path / "best.tile"
    status = run(tmp_path, gpu_timer(), text=text, size=(512, 512, 256), jobs=2)
    assert status == 0, capsys.readouterr()
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    ok = [e for e in lines if e["status"] == "ok"]
    assert ok and all(e["time_ms"] > 0 and "bit-exact" in e["detail"] for e in ok)
    assert compile_source(best.read_text(), "best.tile").kernels
    again = gpu_timer()
    assert run(tmp_path, again, text=text, size=(512, 512, 256), jobs=2) == 0
    assert f"reused {len(ok)} results" in capsys.readouterr().out


def test_a_set_of_wgmma_shapes_pairs_each_block_with_the_instructions_that_fill_it() -> None:
    text = (ROOT / "examples" / "spaces" / "small_m_space.tile").read_text()
    points = expand(parse(text, "small_m_space.tile"))
    assert len(points) == 4 * 4 * 2 * 3
    assert points[0].label == "block 64 x 64 x 64, mma m64n64k16, stages 5, persistent"
    assert points[1].label.endswith("stages 5, persistent stream_k")
    assert points[2].label.endswith("stages 5, persistent split_k 2")
    assert compile_source(points[2].text, "p.tile").kernels[0].schedule.split_k == 2
    assert "persistent tiles" not in points[0].text  # the default, written as `persistent`
    for point in points:
        assert parse(point.text, "point.tile") == point.program
        assert format_program(point.program) == point.text
    by_label = {p.label: p for p in points}
    fits = by_label["block 64 x 192 x 64, mma m64n192k16, stages 5, persistent stream_k"]
    assert verdict(fits.program, (16, 4096, 4096)).reason is None
    # a wgmma wider than the block's columns is no point of the space: pruned, located
    wider = by_label["block 64 x 64 x 64, mma m64n128k16, stages 5, persistent"]
    reason = verdict(wider.program, (16, 4096, 4096)).reason
    assert reason is not None and reason.startswith("small_m_space.tile:")


def test_a_cluster_wider_than_the_tiles_of_c_is_pruned_at_that_size() -> None:
    """Blocks of a cluster past C's edge compute nothing: no point to time at that size."""
    text = (ROOT / "examples" / "spaces" / "small_m_cluster_space.tile").read_text()
    by_label = {p.label: p for p in expand(parse(text, "small_m_cluster_space.tile"))}
    along_m = by_label["block 64 x 128 x 64, mma m64n128k16, stages 6, cluster 2 x 1"]
    # 64 tokens are one 64-row tile: the cluster's second block row would be idle
    # located at the space's `cluster` line (line 23, column 5), like a compile error
    assert verdict(along_m.program, (64, 12288, 4096)).reason == (
        "small_m_cluster_space.tile:23:5: at 64x12288x4096: cluster 2 x 1: M = 64 is 1 "
        "block tile(s) of 64, so 1 of the cluster's 2 blocks along M would compute nothing"
    )
    assert verdict(along_m.program, (128, 12288, 4096)).reason is None
    along_n = by_label["block 64 x 192 x 64, mma m64n192k16, stages 6, cluster 1 x 4"]
    reason = verdict(along_n.program, (128, 500, 4096)).reason
    assert reason is not None and "N = 500 is 3 block tile(s) of 192, so 1 of" in reason
    assert verdict(along_n.program, (128, 769, 4096)).reason is None  # 5 tiles, the last partial


SPACES = sorted((ROOT / "examples" / "spaces").glob("*.tile"))


@pytest.mark.slow
@pytest.mark.parametrize("space", SPACES, ids=[p.name for p in SPACES])
def test_every_shipped_space_leaves_points_to_time(space: Path) -> None:
    """A tuning space in examples/spaces/ that prunes to nothing would tune nothing: its
    points, pruned as `tune --dry-run` prunes them (at the default size), until one is
    left to time (the command's own dry run is tested above; this keeps CI from pruning
    every point of every space)."""
    points = expand(parse(space.read_text(), space.name))
    assert any(verdict(point.program).reason is None for point in points), space.name
