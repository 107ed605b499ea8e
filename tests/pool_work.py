"""Work for tests/test_pool.py's workers: module-level, so that spawned processes import it."""

from __future__ import annotations

import os
import time


def square(device: int, item: int) -> tuple[int, int]:
    """item², and the device whose worker computed it; a little time, so both share."""
    time.sleep(0.01)
    return item * item, device


def dies_on_seven(device: int, item: int) -> tuple[int, int]:
    """The worker that takes item 7 exits at once, as a crash in the driver would."""
    if item == 7:
        os._exit(3)
    return square(device, item)


def raises_on_three(device: int, item: int) -> tuple[int, int]:
    if item == 3:
        raise RuntimeError("a failing check")
    return square(device, item)


def always_dies(device: int, item: int) -> None:
    os._exit(9)


def fake_time(gpu: int, item) -> object:
    """A GPU worker's timing, faked: 1 ms on GPU 0, 1.1 on the others; the worker that
    takes the 128-row, 2-stage point dies (a crash in the driver), unless SURVIVE is set."""
    from tiledsl.frontend.formatter import format_program
    from tiledsl.tune.record import Result

    program, _, _ = item
    text = format_program(program)
    if "block 128 x 64 x 32" in text and "stages 2" in text and not os.environ.get("SURVIVE"):
        os._exit(4)
    return Result("ok", 1.0 + 0.1 * gpu, 2.0, "bit-exact", "Fake GPU")
