"""tiledsl.tune.pool without GPUs: work shared among fake devices (spawned processes), every
item answered once; a worker that dies loses the item it held, and the others finish the
list; an exception is that item's answer; with every worker dead, the rest are answered
as lost. (The multi-GPU `tiledsl tune` on a real host: issue 20.)"""

from __future__ import annotations

import pool_work

from tiledsl.tune.pool import NO_WORKER_LEFT, share


def test_every_item_is_answered_once_and_the_devices_share_them() -> None:
    got = list(share(pool_work.square, list(range(40)), devices=[0, 1, 2]))
    assert sorted(index for index, *_ in got) == list(range(40))
    assert all(result == (index * index, device) for index, device, result, _ in got)
    assert all(lost is None for *_, lost in got)
    assert len({device for _, device, _, _ in got}) >= 2  # the work was spread


def test_a_worker_that_dies_loses_its_item_and_the_others_finish() -> None:
    got = {
        index: (device, result, lost)
        for index, device, result, lost in share(
            pool_work.dies_on_seven, list(range(20)), devices=[0, 1]
        )
    }
    assert sorted(got) == list(range(20))
    device, result, lost = got[7]
    assert result is None and lost.startswith(f"the worker on GPU {device} exited (code 3)")
    others = [index for index in got if index != 7]
    assert all(got[i][1] == (i * i, got[i][0]) for i in others)
    assert {got[i][0] for i in others} == {1 - device} | ({device} & {got[i][0] for i in others})


def test_an_exception_is_that_items_answer() -> None:
    got = {index: lost for index, _, _, lost in share(pool_work.raises_on_three, [0, 1, 2, 3], [0])}
    assert got[3] == "the worker on GPU 0 raised RuntimeError: a failing check"
    assert got[0] is None and got[2] is None


def test_with_every_worker_dead_the_rest_are_lost() -> None:
    got = list(share(pool_work.always_dies, list(range(5)), devices=[0, 1]))
    assert sorted(index for index, *_ in got) == list(range(5))
    assert all(result is None for _, _, result, _ in got)
    reasons = [lost for *_, lost in got]
    assert sum(r.startswith("the worker on GPU") for r in reasons) == 2
    assert reasons.count(NO_WORKER_LEFT) == 3


SPACE = ("block {64, 128} x 64 x 32", "stages {1, 2}", "pad none", "swizzle none", "sync all")


def tune_space(tmp_path, timer_factory) -> int:
    """tune_file of a 4-point space (written as tmp_path/space.tile) at 256 x 128 x 64, its
    record (record.jsonl) and best point (best.tile) in `tmp_path`."""
    from helpers import kernel_text, tune_file_in

    text = kernel_text(*SPACE)
    space = tmp_path / "space.tile"
    space.write_text(text)
    return tune_file_in(tmp_path, text, space, (256, 128, 64), timer_factory)


def test_a_multi_gpu_tune_survives_a_dead_worker_and_a_rerun_resumes(tmp_path, monkeypatch) -> None:
    """The GPU timer with two (fake) GPUs: every point timed by one of them, the record
    saying which; the worker that dies costs its point ("worker died"), the others finish;
    a rerun times that point only and finds the same best."""
    import json

    from tiledsl.tune import pool
    from tiledsl.tune import workers as tune_gpu

    monkeypatch.setattr(
        tune_gpu, "parallel_map", lambda fn, items, jobs, always_spawn: [None] * len(items)
    )
    monkeypatch.setattr(
        tune_gpu,
        "share",
        lambda work, items, devices: pool.share(pool_work.fake_time, items, devices),
    )
    monkeypatch.setattr(  # one point left: timed in this process, on GPU 0
        tune_gpu,
        "time_point",
        lambda program, size, settings: pool_work.fake_time(0, (program, size, settings)),
    )
    timer = object.__new__(tune_gpu.GpuTimer)  # no CuPy here: the fields by hand
    timer.count, timer.device, timer.arch, timer.settings = 2, "Fake GPU", "sm_90", None
    timer.compiler = "fakec 1.0"
    record = tmp_path / "record.jsonl"

    def run() -> int:
        return tune_space(tmp_path, lambda: timer)

    assert run() == 1  # a point was lost: the run says so, and writes the best of the rest
    assert (tmp_path / "best.tile").is_file()
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    died = [e for e in lines if e["status"] == "worker died"]
    assert len(died) == 1 and "block 128 x 64 x 32, stages 2" in died[0]["point"]
    assert died[0]["detail"].startswith(f"the worker on GPU {died[0]['gpu']} exited (code 4)")
    timed = [e for e in lines if e["status"] == "ok" and "re-timed" not in e["detail"]]
    assert len(timed) == 3 and {e["gpu"] for e in timed} <= {0, 1}
    # where both GPUs timed points (the dying worker may have gone first): the fastest 3
    # again, side by side on GPU 0
    again_on_one = [e for e in lines if "re-timed on GPU 0" in e["detail"]]
    both = len({e["gpu"] for e in timed}) > 1
    assert len(again_on_one) == (3 if both else 0)
    assert {e["gpu"] for e in again_on_one} <= {0}
    monkeypatch.setenv("SURVIVE", "1")
    (tmp_path / "best.tile").unlink()
    assert run() == 0
    again = [json.loads(line) for line in record.read_text().splitlines()][len(lines) :]
    assert [e["point"] for e in again] == [died[0]["point"]]  # only the lost point
    assert again[0]["status"] == "ok" and again[0]["gpu"] == 0


class TwoGpuTimer:
    """A fake host of two GPUs: GPU 0 times 10 % slow, so GPU 1's 2-stage point looks
    fastest; on one GPU (retime) the 1-stage point is."""

    device = "Fake GPU"
    compiler = "fakec 1.0"

    def measure(self, points, size, jobs):
        from tiledsl.tune.record import Result

        for i, point in enumerate(points):
            base = 1.0 if "block 128" in point.label else 2.0
            yield point, Result("ok", base * (1.0 if i % 2 else 1.1), 2.0, "bit-exact", gpu=i % 2)

    def retime(self, points, size):
        from tiledsl.tune.record import Result

        for point in points:
            base = (1.0 if "block 128" in point.label else 2.0) * (
                0.9 if "stages 1" in point.label else 1.0
            )
            yield point, Result("ok", base, 2.0, "bit-exact; re-timed on GPU 0", gpu=0)


def test_a_best_timed_across_gpus_is_chosen_on_one(tmp_path) -> None:
    """The fastest 3 of a search that two GPUs timed are timed again on one, and the best
    is chosen from those times (recorded as such)."""
    import json

    from tiledsl.tune import search as tune

    record = tmp_path / "record.jsonl"
    assert tune_space(tmp_path, TwoGpuTimer) == 0
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    again = [e for e in lines if "re-timed" in e["detail"]]
    assert len(again) == tune.FINALISTS and {e["gpu"] for e in again} == {0}
    best = (tmp_path / "best.tile").read_text()
    # measured apart, stages 2 (GPU 1, 1.0 ms) beat stages 1 (GPU 0, 1.1 ms); on one GPU
    # stages 1 wins (0.9 ms)
    assert "block 128 x 64 x 32, stages 1" in best and "0.900 ms" in best
