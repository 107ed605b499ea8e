"""Work shared among a host's GPUs: one spawned process per device, each taking the next
item when it is free, so that a worker that dies costs the item it held and nothing else.

    for index, device, result, lost in share(work, items, devices=[0, 1, 2, 3]):
        ...   # result = work(device, items[index]) in the worker of `device`; or `lost`

`work(device, item)` runs in the worker of `device` (a module-level function: the workers
are spawned, never forked from a process that may hold a CUDA context). Every item is
answered exactly once, in the order they finish:

- `result`: what `work` returned (an exception it raised is a `lost` text instead, and the
  worker goes on with the next item);
- `lost`: why there is no result: the worker holding the item exited (killed, out of
  memory, a crash in the driver), or every worker had exited before the item was taken.

A dead worker's device takes no more items; the others finish the list. The process that
calls `share` is the only one to see the results, so whatever it writes (the tune
record) is written by one process, a line at a time.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from multiprocessing import connection
from typing import Any

#: Seconds the caller waits on the workers' pipes and processes before it looks again.
POLL_SECONDS = 0.2

#: Why an item has no result when no worker was left to take it.
NO_WORKER_LEFT = "no GPU worker was left to time it (a worker that died may have held it)"


def share(
    work: Callable[[int, Any], Any],
    items: list,
    devices: list[int],
    poll: float = POLL_SECONDS,
) -> Iterator[tuple[int, int | None, Any, str | None]]:
    """(item index, device, result, lost) for every item, as each is done (see above)."""
    if not items:
        return
    context = multiprocessing.get_context("spawn")
    tasks = context.Queue()
    for index, item in enumerate(items):
        tasks.put((index, item))
    for _ in devices:
        tasks.put(None)  # one stop per worker
    # each worker answers on a pipe of its own and marks the item it holds in shared
    # memory: both are written before the call returns, so a worker killed the next
    # instant has lost nothing it finished (a queue's message could die in its buffer)
    held = context.Array("q", [-1] * len(devices))
    workers = {}
    for slot, device in enumerate(devices):
        mine, theirs = context.Pipe(duplex=False)
        process = context.Process(
            target=_worker, args=(work, device, slot, held, tasks, theirs), daemon=True
        )
        process.start()
        theirs.close()
        workers[device] = (slot, process, mine)
    pending = set(range(len(items)))
    try:
        while pending:
            waits: list = [conn for _, _, conn in workers.values()]
            waits += [process.sentinel for _, process, _ in workers.values()]
            ready = connection.wait(waits, timeout=poll) if waits else []
            for device, (slot, process, conn) in list(workers.items()):
                yield from _answers(conn, device, pending)
                if conn in ready or process.sentinel in ready:
                    if process.is_alive():
                        continue
                    yield from _answers(conn, device, pending)  # what it sent before it went
                    del workers[device]
                    index = held[slot]
                    if index >= 0 and index in pending:
                        pending.discard(index)
                        code = process.exitcode
                        yield (
                            index,
                            device,
                            None,
                            (f"the worker on GPU {device} exited (code {code}) while on it"),
                        )
            if not workers:
                for index in sorted(pending):
                    yield index, None, None, NO_WORKER_LEFT
                pending.clear()
    finally:
        for _, process, conn in workers.values():
            if process.is_alive():
                process.terminate()
            process.join(timeout=5)
            conn.close()


def _answers(conn, device: int, pending: set[int]):
    """The answers waiting on a worker's pipe."""
    while True:
        try:
            if not conn.poll():
                return
            kind, index, payload = conn.recv()
        except (EOFError, OSError):  # the worker is gone: its pipe is closed
            return
        if index not in pending:
            continue
        pending.discard(index)
        if kind == "done":
            yield index, device, payload, None
        else:
            yield index, device, None, f"the worker on GPU {device} raised {payload}"


def _worker(work, device: int, slot: int, held, tasks, answers) -> None:
    while True:
        task = tasks.get()
        if task is None:
            return
        index, item = task
        held[slot] = index
        try:
            answer = ("done", index, work(device, item))
        except Exception as err:  # the item's answer; the worker goes on
            answer = ("error", index, f"{type(err).__name__}: {err}")
        answers.send(answer)
