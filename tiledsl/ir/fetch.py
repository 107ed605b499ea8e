"""`persistent stream_k_aligned`'s fetched hand-over: where an owner block's first
contributor's partial sum lands in its shared memory when its producer fetches it.

An aligned owner's piece (the one holding its tile's last K step, with the tile's first
steps in the blocks before it) is its block's last, so after the piece's last K step the
producer loads no more tiles, and the stage slots of the STAGES - 1 steps before the last
step are free for good once their wgmmas retire. The producer, idle after its last load,
acquires the contributor's flag and claims those slots as `parts` more steps of its
pipeline (wait `empty`, expect the bytes on `full`, a 1-D cp.async.bulk of each part);
the consumers wait on those `full` barriers after their last wgmmas and add the partial
sum from shared memory, not from L2 (128 KB at 2-3 round trips of L2 a thread: 3.1 us of
the 8.4 us stream-K's hand-over cost at 2048 x 4096 x 11008 on the H200).

The workspace holds a block's partial sum as the consumer threads' registers, 16 bytes
(4 accumulators) at a time, thread after thread: row R (R = (i * cols + j) * quads + v,
quads = a thread's accumulators / 4) is CONSUMER_THREADS float4s. Part p is bytes
[p * STAGE_BYTES, ...) of it and lands in the slot of step last + 1 + p, the stage's
buffers one after another (A's slot, then B's). Every buffer's slot being a whole number
of rows, a row's place (part, buffer, row within it) is known when the kernel is built
(the emitted code's unrolled loop folds it).
"""

from __future__ import annotations

from .nodes import DTYPE_BYTES, KernelIR


def stage_buffers(kernel: KernelIR) -> tuple[tuple[str, int], ...]:
    """The buffers of a pipeline stage (a slot per stage, shared by the block's warps), in
    the kernel's order: (name, a slot's bytes)."""
    return tuple(
        (b.name, b.lines * b.pitch * DTYPE_BYTES[b.dtype])
        for b in kernel.buffers
        if b.slots == kernel.schedule.stages and not b.per_warp and b.alias is None
    )


def row_bytes(kernel: KernelIR) -> int:
    """A workspace row: 16 bytes of every consumer thread."""
    return kernel.consumer_warps * kernel.warp_width * 16


def partial_bytes(kernel: KernelIR) -> int:
    bm, bn, _ = kernel.schedule.block
    return bm * bn * 4


def fetch_parts(kernel: KernelIR) -> int:
    """How many stage slots an owner's fetched partial sum fills; 0 where the kernel adds it
    from the workspace (not aligned stream-K, pingpong teams, or slots too few or not a
    whole number of workspace rows)."""
    s = kernel.schedule
    if not (s.stream_k and s.aligned) or s.teams != 1:
        return 0
    buffers = stage_buffers(kernel)
    row = row_bytes(kernel)
    if not buffers or any(size % row for _, size in buffers):
        return 0
    parts = -(-partial_bytes(kernel) // stage_bytes(kernel))
    return parts if parts <= s.stages - 1 else 0


def part_bytes(kernel: KernelIR, part: int) -> int:
    stage = stage_bytes(kernel)
    return min(stage, partial_bytes(kernel) - part * stage)


def pieces_of_part(kernel: KernelIR, part: int) -> tuple[tuple[str, int, int], ...]:
    """Part `part`'s bulk copies: (buffer, byte offset in the partial sum, bytes), each to
    the start of the buffer's slot."""
    start, left = part * stage_bytes(kernel), part_bytes(kernel, part)
    pieces = []
    for name, size in stage_buffers(kernel):
        if left <= 0:
            break
        take = min(size, left)
        pieces.append((name, start, take))
        start, left = start + take, left - take
    return tuple(pieces)


def part_spans(
    kernel: KernelIR, offsets: dict[str, int], first: int, part: int
) -> tuple[tuple[str, int, int], ...]:
    """Where part `part` lands, part 0 in the stage slot of step `first`: (buffer, lo, hi),
    the byte span of the block's shared memory each of its bulk copies writes."""
    sizes = dict(stage_buffers(kernel))
    slot = (first + part) % kernel.schedule.stages
    return tuple(
        (name, offsets[name] + slot * sizes[name], offsets[name] + slot * sizes[name] + nbytes)
        for name, _, nbytes in pieces_of_part(kernel, part)
    )


def stage_bytes(kernel: KernelIR) -> int:
    """A stage's bytes: what a K step's TMA copies bring (STAGE_BYTES)."""
    return sum(size for _, size in stage_buffers(kernel))
