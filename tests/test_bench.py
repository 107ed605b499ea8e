"""`tiledsl bench` without a GPU: the timing loop on a fake clock, input rotation, rows,
the table, JSON, the plot, the progress bar and the command line (GPU work faked);
on a GPU (marked `gpu`), a real measurement of an example against cuBLAS."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT, cli

from tiledsl.commands import bench
from tiledsl.commands.bench import Row, Settings
from tiledsl.driver import compile_file
from tiledsl.gpu import timing
from tiledsl.gpu.baselines import baseline_gemm, triton
from tiledsl.gpu.runtime import gpu_available, l2_bytes
from tiledsl.gpu.timing import Timing, median, operand_bytes, operand_sets, rotation_count
from tiledsl.interp.oracle import Check
from tiledsl.progress import Progress

MiB = 2**20
L2 = 50 * MiB


def test_median() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert median([7.0]) == 7.0


@pytest.mark.parametrize(
    ("size", "sets"),
    [
        ((2048, 2048, 2048), 7),  # 16 MiB a set: 7 sets = 112 MiB > 100 MiB
        ((4096, 4096, 4096), 2),  # 64 MiB a set
        ((8192, 8192, 8192), 1),  # 256 MiB: one set is already past the L2
        ((128, 128, 64), timing.MAX_SETS),  # tiny: capped
    ],
)
def test_rotation_count_exceeds_twice_the_l2(size, sets) -> None:
    per_set = operand_bytes(size)
    assert rotation_count(per_set, L2) == sets
    if sets < timing.MAX_SETS:
        assert sets * per_set > 2 * L2
        assert (sets - 1) * per_set <= 2 * L2  # and no more sets than that takes


def test_operand_sets_are_small_integers_in_f16() -> None:
    sets = operand_sets((32, 48, 16), 3, np, seed=1)
    assert len(sets) == 3
    for a, b in sets:
        assert a.dtype == np.float16 and a.shape == (32 * 16,)
        assert b.dtype == np.float16 and b.shape == (16 * 48,)
        assert set(np.unique(a)) <= {-2, -1, 0, 1, 2}
    assert not np.array_equal(sets[0][0], sets[1][0])  # distinct sets, or no rotation


def test_operand_sets_of_normal_values() -> None:
    """--data normal: standard normal values rounded to f16 (a model's, not integers)."""
    ((a, b),) = operand_sets((64, 64, 64), 1, np, seed=2, data="normal")
    assert a.dtype == np.float16 and b.shape == (64 * 64,)
    assert not np.array_equal(a, np.round(a))
    assert 0.8 < float(np.std(a.astype(np.float64))) < 1.2


class FakeClock:
    """Simulated GPU time: each call advances it; events read it when recorded."""

    def __init__(self, durations: dict[int, float]):
        self.now = 0.0
        self.durations = durations
        self.log: list[str] = []

    def call(self, i: int):
        def run() -> None:
            self.log.append(f"call {i}")
            self.now += self.durations[i]

        return run

    def event(self) -> dict:
        return {}

    def record(self, event: dict) -> None:
        event["t"] = self.now

    def elapsed_ms(self, start: dict, stop: dict) -> float:
        return stop["t"] - start["t"]

    def synchronize(self) -> None:
        self.log.append("sync")

    def hold(self, ms: float) -> None:
        assert ms >= 1.0
        self.log.append("hold")
        self.now += ms


def test_time_calls_rotates_warms_up_holds_and_takes_the_median() -> None:
    clock = FakeClock({0: 1.0, 1: 2.0, 2: 6.0})
    calls = [clock.call(i) for i in range(3)]
    t = timing.time_calls(calls, clock, warmup=4, repeat=7, set_bytes=100)
    assert clock.log[:4] == ["call 0", "call 1", "call 2", "call 0"]  # warm-up, rotated
    assert clock.log[4:6] == ["sync", "hold"]  # the hold comes right before the timed runs
    timed = clock.log[6:-1]
    assert timed == [f"call {i % 3}" for i in range(7)]
    assert clock.log[-1] == "sync"
    # times 1, 2, 6, 1, 2, 6, 1 -> median 2
    assert (t.runs, t.sets, t.set_bytes) == (7, 3, 100)
    assert (t.median_ms, t.min_ms, t.max_ms) == pytest.approx((2.0, 1.0, 6.0))
    assert t.to_json()["input_bytes"] == 300
    assert "median of 7 runs over 3 input set(s)" in t.describe()


def test_time_calls_touches_every_set_in_warm_up() -> None:
    clock = FakeClock({i: 1.0 for i in range(5)})
    timing.time_calls([clock.call(i) for i in range(5)], clock, warmup=2, repeat=1)
    assert clock.log[:5] == [f"call {i}" for i in range(5)]


def test_time_calls_refuses_nothing_to_time() -> None:
    with pytest.raises(ValueError):
        timing.time_calls([], FakeClock({}), repeat=3)


def test_time_rounds_takes_turns_and_keeps_the_median_of_each_rounds_median() -> None:
    """Round r starts at list r: the kernel and its baseline alternate who goes first."""
    clock = FakeClock({0: 1.0, 1: 2.0, 2: 5.0})
    kernel, baseline = [clock.call(0)], [clock.call(1), clock.call(2)]
    got = timing.time_rounds([kernel, baseline], clock, 3, warmup=0, repeat=3, set_bytes=8)
    firsts = [clock.log[i + 1] for i, e in enumerate(clock.log) if e == "hold"]
    assert firsts == ["call 0", "call 1", "call 1", "call 0", "call 0", "call 1"]
    mine, theirs = got
    assert mine.round_medians_ms == pytest.approx((1.0, 1.0, 1.0))
    assert mine.median_ms == pytest.approx(1.0)
    # the baseline's runs take its two sets in turn (2, 5, 2 ms): 2 ms per round
    assert theirs.round_medians_ms == pytest.approx((2.0, 2.0, 2.0))
    assert (theirs.min_ms, theirs.max_ms) == pytest.approx((2.0, 5.0))
    assert (theirs.runs, theirs.sets) == (9, 2)
    assert "median of 3 rounds' medians, 3 runs each, over 2 input set(s)" in theirs.describe()
    assert theirs.to_json()["round_medians_ms"] == pytest.approx([2.0, 2.0, 2.0])


def test_one_round_is_time_calls() -> None:
    clock = FakeClock({0: 1.0, 1: 3.0})
    (t,) = timing.time_rounds([[clock.call(0), clock.call(1)]], clock, warmup=0, repeat=4)
    assert t.round_medians_ms == () and t.median_ms == pytest.approx(2.0)
    assert "round_medians_ms" not in t.to_json() and "median of 4 runs" in t.describe()
    with pytest.raises(ValueError):
        timing.time_rounds([[clock.call(0)]], clock, 0)


def make_rows() -> list[Row]:
    size = (4096, 4096, 4096)
    passed = [Check("exact oracle", True, "bit-exact"), Check("statistical oracle", True, "0.003")]
    mine = Row("hgemm", "tiledsl", "hgemm", "hgemm.tile", size, "f32", passed)
    mine.timing = Timing(0.5, 0.49, 0.6, 50, 2, 64 * MiB)
    ref = Row("cuBLAS", "cublas", "hgemm", "hgemm.tile", size, "f16", list(passed))
    ref.timing = Timing(0.2, 0.19, 0.25, 50, 2, 64 * MiB)
    tri = Row(
        "Triton", "triton", "hgemm", "hgemm.tile", size, "f16", skipped="triton not installed"
    )
    small = (2048, 2048, 2048)
    bad = Row("hgemm", "tiledsl", "hgemm", "hgemm.tile", small, "f32")
    bad.checks = [Check("exact oracle", False, "3 of 4194304 elements differ")]
    for r in (mine, ref, tri):
        r.cublas_ms = 0.2
    return [bad, mine, ref, tri]


def test_row_numbers() -> None:
    bad, mine, ref, tri = make_rows()
    assert mine.tflops == pytest.approx(2 * 4096**3 / 0.5e9)
    assert mine.ratio == pytest.approx(0.4)
    assert ref.ratio == pytest.approx(1.0)
    assert (mine.status, ref.status, tri.status, bad.status) == ("PASS", "PASS", "SKIP", "FAIL")
    assert bad.ms is None and bad.tflops is None and bad.ratio is None


def test_table_says_time_tflops_ratio_and_check() -> None:
    text = bench.table(make_rows())
    lines = text.splitlines()
    assert lines[0].split() == ["size", "kernel", "C", "ms", "TFLOP/s", "x", "cuBLAS", "check"]
    row = next(line for line in lines if line.startswith("4096x4096x4096") and "hgemm" in line)
    assert "0.500" in row and "274.9" in row and "0.40" in row and "PASS bit-exact" in row
    assert "f32" in row
    assert "triton not installed" in text
    failed = next(line for line in lines if line.startswith("2048x2048x2048"))
    assert "FAIL exact oracle" in failed and "(not timed)" in failed


def test_json_record(tmp_path: Path) -> None:
    device = {"name": "NVIDIA H200", "arch": "sm_90", "cupy": "14.2.0", "nvrtc": "13.0"}
    doc = bench.record(make_rows(), Settings(repeat=50), device)
    path = tmp_path / "out" / "bench.json"
    bench.save_json(doc, path)
    back = json.loads(path.read_text())
    assert back["device"] == device
    assert back["settings"]["repeat"] == 50
    assert back["date"] and back["tiledsl"]
    rows = back["rows"]
    assert [r["status"] for r in rows] == ["FAIL", "PASS", "PASS", "SKIP"]
    assert rows[1]["timing"]["input_sets"] == 2
    assert rows[1]["ratio_to_cublas"] == pytest.approx(0.4)
    assert rows[3]["skipped"] == "triton not installed"
    assert rows[0]["checks"][0]["ok"] is False


def test_plot_draws_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "plot.png"
    bench.plot(make_rows(), out, title="NVIDIA H200")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_from_saved_json(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "bench.json"
    bench.save_json(bench.record(make_rows(), Settings(), {"name": "GPU"}), path)
    bench.plot_file(path, tmp_path / "again.svg")
    assert "<svg" in (tmp_path / "again.svg").read_text()


def test_matplotlib_missing_is_named(monkeypatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    assert "pip install 'tiledsl[bench]'" in bench.matplotlib_missing()


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal() -> None:
    pipe = io.StringIO()
    with Progress(3, "bench", stream=pipe) as bar:
        bar.step("one")
    assert pipe.getvalue() == ""
    tty = Tty()
    with Progress(2, "bench", stream=tty) as bar:
        bar.step("hgemm 4096x4096x4096")
        assert "\r" in tty.getvalue() and "0/2" in tty.getvalue()
        bar.step("cuBLAS")
        assert "1/2" in tty.getvalue() and "cuBLAS" in tty.getvalue()
    assert tty.getvalue().endswith("\r")  # erased: the next output starts on a clean line
    quiet = Tty()
    with Progress(2, stream=quiet, enabled=False) as bar:
        bar.step("x")
    assert quiet.getvalue() == ""


def test_triton_baseline_says_when_it_is_missing(monkeypatch) -> None:
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    b = triton()
    assert b.unavailable == "triton not installed" and b.run is None


def test_baseline_gemm_is_a_plain_f16_product(examples_dir: Path) -> None:
    kernel = compile_file(examples_dir / "hgemm_f16.tile").kernels[0]
    assert kernel.gemm.accumulate and kernel.gemm.c.dtype == "f16"
    plain = baseline_gemm(kernel.gemm)
    assert not plain.accumulate
    assert (plain.c.dtype, plain.c.layout) == ("f16", "row")
    assert plain.a == kernel.gemm.a and plain.b == kernel.gemm.b


# ---------------------------------------------------------------- the command line


def test_bench_without_a_gpu_says_so(capsys, examples_dir, monkeypatch) -> None:
    monkeypatch.setattr("tiledsl.gpu.runtime.gpu_available", lambda: False)
    r = cli(["bench", examples_dir / "hgemm.tile"], capsys)
    assert r.code == 1
    assert "bench times kernels on a CUDA GPU" in r.err and "tiledsl doctor" in r.err


def test_bench_bad_size_is_a_usage_error(capsys, examples_dir) -> None:
    r = cli(["bench", examples_dir / "hgemm.tile", "--size", "4096x4096"], capsys)
    assert r.code == 2 and "MxNxK" in r.err


@pytest.fixture
def fake_gpu(monkeypatch):
    """A bench whose measurement is canned: the command line's own work is what is tested."""
    seen = {}

    def measure(entries, sizes, settings, target=None, kernel=None):
        seen.update(entries=entries, sizes=sizes, settings=settings, kernel=kernel)
        return make_rows()[1:] if not seen.get("fail") else make_rows()

    monkeypatch.setattr("tiledsl.gpu.runtime.gpu_available", lambda: True)
    monkeypatch.setattr("tiledsl.gpu.runtime.device_info", lambda: {"name": "Fake GPU"})
    monkeypatch.setattr(bench, "measure", measure)
    return seen


def test_bench_writes_table_json_and_plot(capsys, examples_dir, tmp_path, fake_gpu) -> None:
    pytest.importorskip("matplotlib")
    out_json, out_png = tmp_path / "b.json", tmp_path / "b.png"
    argv = ["bench", examples_dir / "hgemm.tile", "--size", "4096x4096x4096", "--size", "2048^3"]
    r = cli(argv, capsys)
    assert r.code == 2  # 2048^3 is not a size
    argv = argv[:-1] + ["2048x2048x2048", "--json", out_json, "--plot", out_png, "--no-triton"]
    r = cli([*argv, "--repeat", "20", "--no-cache", "--rounds", "3"], capsys)
    assert r.code == 0, r.err
    assert fake_gpu["sizes"] == [(4096, 4096, 4096), (2048, 2048, 2048)]
    settings = fake_gpu["settings"]
    assert settings.repeat == 20 and not settings.use_cache and settings.baselines == ("cublas",)
    assert settings.rounds == 3
    assert json.loads(out_json.read_text())["settings"]["rounds"] == 3
    assert "TFLOP/s" in r.out and "note: cuBLAS: cupy.matmul" in r.out
    assert json.loads(out_json.read_text())["device"] == {"name": "Fake GPU"}
    assert out_png.read_bytes()[:4] == b"\x89PNG"


def test_bench_fails_on_a_failed_check(capsys, examples_dir, fake_gpu) -> None:
    fake_gpu["fail"] = True
    r = cli(["bench", examples_dir / "hgemm.tile"], capsys)
    assert r.code == 1
    assert "FAIL exact oracle" in r.out


def test_bench_without_matplotlib_warns_and_measures(
    capsys, examples_dir, tmp_path, fake_gpu, monkeypatch
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    r = cli(["bench", examples_dir / "hgemm.tile", "--plot", tmp_path / "p.png"], capsys)
    assert r.code == 0
    assert "warning: the plot needs matplotlib" in r.err
    assert not (tmp_path / "p.png").exists()
    assert "TFLOP/s" in r.out


def test_bench_unknown_kernel_is_a_usage_error(capsys, examples_dir, monkeypatch) -> None:
    monkeypatch.setattr("tiledsl.gpu.runtime.gpu_available", lambda: True)
    monkeypatch.setattr("tiledsl.gpu.runtime.device_arch", lambda: "sm_90")
    r = cli(["bench", examples_dir / "hgemm.tile", "--kernel", "nope"], capsys)
    assert r.code == 2 and "no kernel 'nope'" in r.err


def test_bench_size_that_does_not_fit_is_a_usage_error(capsys, examples_dir, monkeypatch) -> None:
    monkeypatch.setattr("tiledsl.gpu.runtime.gpu_available", lambda: True)
    # v1's fragments read global memory directly: no guarded twin, multiples of 64 x 16 only.
    r = cli(["bench", examples_dir / "ladder" / "v1.tile", "--size", "100x16x16"], capsys)
    assert r.code == 2
    assert "M = 100" in r.err and "not a multiple" in r.err


# ---------------------------------------------------------------- on a GPU


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
def test_measure_an_example_against_cublas(examples_dir: Path) -> None:
    rows = bench.measure(
        [("hgemm", str(examples_dir / "hgemm.tile"))],
        [(1024, 1024, 1024)],
        Settings(warmup=2, repeat=5, seed=3),
        progress=False,
    )
    kinds = [r.kind for r in rows]
    assert kinds == ["tiledsl", "cublas", "triton"]
    mine, ref, tri = rows
    assert mine.status == "PASS" and mine.checks[0].detail == "bit-exact"
    assert ref.status == "PASS", bench.table(rows)
    assert mine.ms > 0 and ref.ms > 0 and mine.ratio == pytest.approx(ref.ms / mine.ms)
    assert tri.status in ("PASS", "SKIP"), bench.table(rows)
    rotated = mine.timing.sets * mine.timing.set_bytes
    assert rotated > 2 * l2_bytes() or mine.timing.sets == timing.MAX_SETS


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
def test_measure_in_rounds_times_every_row_each_round(examples_dir: Path) -> None:
    rows = bench.measure(
        [("hgemm", str(examples_dir / "hgemm.tile"))],
        [(512, 512, 512)],
        Settings(warmup=2, repeat=5, seed=3, rounds=3, baselines=("cublas",)),
        progress=False,
    )
    mine, ref = rows
    assert mine.status == ref.status == "PASS", bench.table(rows)
    for row in rows:
        assert len(row.timing.round_medians_ms) == 3 and row.timing.runs == 15
        assert row.ms == pytest.approx(sorted(row.timing.round_medians_ms)[1])
    assert bench.record(rows, Settings(rounds=3))["settings"]["rounds"] == 3


def _best_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("best", ROOT / "bench" / "best.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_best_judges_against_the_fastest_cublas_of_the_size() -> None:
    """bench/best.py: a slow cuBLAS sample beside one row must not meet a target for it."""
    from tiledsl.ir.schedule import Schedule

    best = _best_script()
    size = [8192, 8192, 8192]
    flop = 2 * 8192**3

    def row(kind, kernel, ms):
        return {
            "label": kernel,
            "kind": kind,
            "kernel": kernel,
            "size": size,
            "ok": True,
            "time_ms": ms,
            "tflops": flop / (ms * 1e9),
        }

    rows = [
        row("tiledsl", "w32", 2.383),
        row("cublas", "w32", 1.516),  # a slow cuBLAS sample
        row("tiledsl", "w16", 2.284),
        row("cublas", "w16", 1.232),
    ]
    schedules = {"w32": Schedule(accumulate="f32"), "w16": Schedule(accumulate="f16")}
    found = {v["class"]: v for v in best.verdicts(rows, schedules)}
    f32 = found["any path, f32 accumulation"]
    assert f32["best"] == "w32" and round(f32["ratio_to_cublas"], 3) == round(1.232 / 2.383, 3)
    assert not f32["met"]  # 0.52x, though its own cuBLAS row would say 0.64x
    assert found["WMMA, f32 accumulation"]["met"]  # >= 0.50x
    assert found["WMMA, any accumulation"]["best"] == "w16"


def _bench_script(name: str, monkeypatch):
    """bench/NAME.py as a module (it imports best.py beside it)."""
    import importlib.util

    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(f"{name}_bench", ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hopper_script(monkeypatch):
    return _bench_script("hopper", monkeypatch)


def test_hopper_bf16_variants_and_their_ratios(tmp_path: Path, monkeypatch) -> None:
    """bench/hopper.py --bf16: the same schedule with bf16 operands, compared with its own
    f16 time of the run; the f16 verdicts leave the bf16 rows out."""
    hopper = _hopper_script(monkeypatch)
    variant = hopper.bf16_variant(ROOT / "examples" / "hopper" / "cluster.tile", tmp_path)
    c = compile_file(variant)
    g = c.kernels[0].gemm
    assert (g.a.dtype, g.b.dtype, g.c.dtype) == ("bf16", "bf16", "bf16")
    original = compile_file(ROOT / "examples" / "hopper" / "cluster.tile").kernels[0]
    assert c.kernels[0].schedule == original.schedule  # the schedule as written

    def row(label, kind, tflops):
        return {
            "label": label,
            "kind": kind,
            "size": [4096] * 3,
            "ok": True,
            "tflops": tflops,
            "time_ms": 1.0 / tflops,
        }

    rows = [
        row("cluster", "tiledsl", 860.0),
        row("cuBLAS", "cublas", 861.0),
        row("cluster-bf16", "tiledsl", 900.0),  # faster, but not an f16 row
        row("epilogue", "tiledsl", 860.0),
        row("epilogue-bf16", "tiledsl", 820.0),
    ]
    ratios = {r["schedule"]: r for r in hopper.bf16_ratios(rows)}
    assert ratios["cluster"]["met"] and round(ratios["cluster"]["ratio"], 3) == 1.047
    assert not ratios["epilogue"]["met"]  # 0.953: more than 3 % below f16
    assert "geometric mean bf16/f16" in hopper.render_bf16(list(ratios.values()))
    f16 = [r for r in rows if not r["label"].endswith(hopper.BF16)]
    assert hopper.verdicts(f16)[0]["best"] in ("cluster", "epilogue")


def test_shapes_are_the_36_llama_projections_and_judged_on_memory_at_few_tokens(
    tmp_path: Path, monkeypatch
) -> None:
    """bench/shapes.py: 0.9x the fastest cuBLAS and 1.0x Triton per shape, 85 % of the copy
    bandwidth's bound up to M = 64, and the geometric mean over the shapes."""
    shapes = _bench_script("shapes", monkeypatch)
    assert len(shapes.llama_shapes()) == 36 and (1, 22016, 4096) in shapes.llama_shapes()
    bandwidth = 4e12  # bytes per second
    decode, prefill = (16, 4096, 4096), (2048, 4096, 4096)
    bound_ms = shapes.operand_bytes(decode) / bandwidth * 1e3  # 8.45 µs

    def row(kind, size, ms, label=None):
        m, n, k = size
        return {
            "label": label or kind,
            "kind": kind,
            "kernel": label or kind,
            "size": list(size),
            "ok": True,
            "time_ms": ms,
            "tflops": 2 * m * n * k / (ms * 1e9),
        }

    rows = [
        row("tiledsl", decode, bound_ms / 0.80, "small_m"),  # 0.80 of the bound: missed
        row("cublas", decode, bound_ms / 0.70),
        row("cublas", decode, bound_ms / 0.75),  # the faster cuBLAS sample counts
        row("triton", decode, bound_ms / 0.5),
        row("tiledsl", prefill, 0.150, "hopper"),
        row("tiledsl", prefill, 0.140, "hopper_tuned"),  # the best row of the shape
        row("cublas", prefill, 0.125),  # 0.893x: missed
        row("triton", prefill, 0.160),
    ]
    found = {tuple(v["size"]): v for v in shapes.verdicts(rows, bandwidth)}
    d, p = found[decode], found[prefill]
    assert d["of_bound"] == pytest.approx(0.80) and d["memory_judged"]
    assert d["ratio_to_cublas"] == pytest.approx(0.80 / 0.75) and not d["met"]
    assert p["best"] == "hopper_tuned" and not p["memory_judged"]
    assert p["ratio_to_cublas"] == pytest.approx(0.125 / 0.140) and not p["met"]
    totals = shapes.summary(list(found.values()))
    assert totals["met"] == 0 and totals["shapes"] == 2
    assert totals["geomean_cublas"] == pytest.approx(math.sqrt(0.80 / 0.75 * 0.125 / 0.140))
    text = shapes.render(list(found.values()), totals, bandwidth)
    assert "copy bandwidth: 4.00 TB/s" in text and "0 of 2" in text
    rows[0]["time_ms"] = bound_ms / 0.90  # 0.90 of the bound, 1.2x cuBLAS, 1.8x Triton
    found = {tuple(v["size"]): v for v in shapes.verdicts(rows, bandwidth)}
    assert found[decode]["met"]
    if bench.matplotlib_missing() is None:
        picture = tmp_path / "shapes.png"
        shapes.plot(list(found.values()), picture, "a test")
        assert picture.read_bytes().startswith(b"\x89PNG")


def test_shapes_times_each_group_of_files_where_it_may_win(monkeypatch) -> None:
    """bench/shapes.py's default plan: the 64-row tiles up to 256 tokens, the tiles tuned at
    a few hundred tokens at N = 4096, the swapped kernel (`swap_operands`) up to 16, the
    many-token rungs from 128 on, each at M x N x K as the caller writes it."""
    shapes = _bench_script("shapes", monkeypatch)
    sizes = shapes.llama_shapes()
    plan = shapes.default_plan(sizes)
    assert [len(at) for _, at in plan] == [20, 6, 8, 24, 12, 4, 4, 6, 8, 8, 4]
    # the files tuned over suites of their own: timed at their suites' shapes, the 64-row
    # clustered space's kernels at fewer tokens on the same weights too
    assert [files for files, _ in plan[4:]] == [[f] for f, *_ in shapes.SUITE_TUNED]
    assert plan[4][1] == [
        (1, 12288, 4096),
        (16, 12288, 4096),
        (64, 12288, 4096),
        (128, 12288, 4096),
        (1, 4096, 4096),
        (16, 4096, 4096),
        (64, 4096, 4096),
        (128, 4096, 4096),
        (1, 4096, 11008),
        (16, 4096, 11008),
        (64, 4096, 11008),
        (128, 4096, 11008),
    ]
    assert plan[5][1] == plan[6][1] and {s[0] for s in plan[5][1]} == {256, 512}
    # the tiles that make N = 12288 and 22016 one round of the SMs, at their suite's tokens
    assert plan[7][1] == [(m, n, 4096) for n in (12288, 22016) for m in (1, 16, 64)]
    # the direct path's tiles (mma.sync, stages 0), at 1 and 16 tokens; the fma path's at 1
    assert sorted(plan[8][1]) == sorted(s for s in sizes if s[0] in (1, 16))
    assert sorted(plan[10][1]) == sorted(s for s in sizes if s[0] == 1)
    mid = [(m, 4096, k) for k in (4096, 11008) for m in (256, 512, 1000)]
    assert plan[1] == ([shapes.MID_TOKENS], mid)
    assert plan[2][0] == [shapes.SWAPPED] and all(s[0] <= 16 for s in plan[2][1])
    assert plan[3][0] == list(shapes.MANY_TOKENS)


def test_shapes_suite_groups_follow_their_suites_and_skip_files_not_written(
    tmp_path: Path, monkeypatch
) -> None:
    """A file tuned over a suite is timed at the asked shapes its suite holds, at fewer
    tokens on those weights where its entry says so, and left out while it is not written."""
    shapes = _bench_script("shapes", monkeypatch)
    suite = tmp_path / "suite.txt"
    suite.write_text("# 64 tokens\n64x4096x4096\n64x12288x4096\n")
    written = tmp_path / "w.tuned.tile"
    written.write_text("")
    monkeypatch.setattr(
        shapes,
        "SUITE_TUNED",
        (
            (written, suite, False),
            (written, suite, True),
            (tmp_path / "absent.tuned.tile", suite, False),
        ),
    )
    groups = shapes.suite_groups(shapes.llama_shapes())
    fewer = [(1, 12288, 4096), (16, 12288, 4096), (64, 12288, 4096)]
    assert groups == [
        ([written], [(64, 12288, 4096), (64, 4096, 4096)]),
        ([written], [*fewer, (1, 4096, 4096), (16, 4096, 4096), (64, 4096, 4096)]),
    ]


def test_shapes_from_json_takes_each_shape_from_the_last_run_that_timed_it(monkeypatch) -> None:
    """Merged runs: a later run that times a shape again replaces the earlier one's rows
    there (kernels, cuBLAS and Triton alike); shapes it leaves alone keep theirs."""
    shapes = _bench_script("shapes", monkeypatch)

    def row(label, kind, size, ms):
        return {"label": label, "kind": kind, "size": list(size), "time_ms": ms}

    first = {
        "rows": [
            row("a", "tiledsl", (1, 2, 3), 1.0),
            row("cuBLAS", "cublas", (1, 2, 3), 0.5),
            row("a", "tiledsl", (4, 5, 6), 2.0),
        ]
    }
    second = {
        "rows": [row("b", "tiledsl", (1, 2, 3), 0.9), row("cuBLAS", "cublas", (1, 2, 3), 0.8)]
    }
    rows = shapes.latest_rows([first, second])
    assert [(r["label"], r["size"]) for r in rows] == [
        ("a", [4, 5, 6]),
        ("b", [1, 2, 3]),
        ("cuBLAS", [1, 2, 3]),
    ]
    assert [r["label"] for r in shapes.latest_rows([second, first])] == ["a", "cuBLAS", "a"]


def test_a_result_merged_again_keeps_each_runs_date(monkeypatch) -> None:
    """`--from-json` over a result that is itself a merge: its runs are kept, each with
    the shapes it still counts at (a run whose shapes were all timed again drops out), and
    a plain run is named by its file."""
    shapes = _bench_script("shapes", monkeypatch)

    def rows(*sizes):
        return [{"label": "k", "kind": "tiledsl", "size": list(s), "time_ms": 1.0} for s in sizes]

    merged = {
        "rows": rows((1, 2, 3), (4, 5, 6), (7, 8, 9)),
        "runs": [
            {"run": "early.json", "date": "d1", "settings": {"rounds": 1}, "shapes": ["1x2x3"]},
            {"run": "mid.json", "date": "d2", "settings": {}, "shapes": ["4x5x6", "7x8x9"]},
        ],
    }
    again = {"rows": rows((1, 2, 3), (4, 5, 6)), "date": "d3", "settings": {"rounds": 2}}
    runs = shapes.merged_runs(["canonical.json", "/tmp/again.json"], [merged, again])
    assert runs == [
        {"run": "mid.json", "date": "d2", "settings": {}, "shapes": ["7x8x9"]},
        {
            "run": "again.json",
            "date": "d3",
            "settings": {"rounds": 2},
            "shapes": ["1x2x3", "4x5x6"],
        },
    ]
