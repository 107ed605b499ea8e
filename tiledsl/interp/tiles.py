"""Where a tile's elements are: in one block's shared-memory arena or in a global array.

    memory = Memory(kernel, arrays, offsets, arena_bytes, env)   # one per block
    role_memory = memory.with_env(role_env)                      # the same bytes, a role's names
    data, flat, units = memory.locate(tile, rows, cols, what)    # elements (rows, cols)
    data, flat, units, issuers = memory.warp_tile(tile, what)    # a whole tile, per warp

Shared memory is one byte arena, as on the GPU, so buffers that alias (a C staging tile
over the A/B tiles) share bytes; each buffer is a typed view of its bytes. The arena
starts as all-ones bytes (NaN in f16 and f32), so reading what nothing wrote shows in
the result. A shared element also has its 2-byte units (`UNIT`), what the race log and
the in-flight marks count; a global one has none (the race log watches shared memory only).

Index arithmetic is the generated code's: 32-bit ints, which must not overflow
(`checked_int`); an index outside its buffer or operand is an error, not a wrap.
"""

from __future__ import annotations

import copy

import numpy as np

from ..ir.dtypes import STORAGE
from ..ir.expr import IntOverflow, Var, evaluate
from ..ir.nodes import DTYPE_BYTES, KernelIR, SharedTile, Tile
from .errors import InterpreterError

UNIT = 2  # bytes: the granule of the race log and the in-flight marks (the smallest element)


def checked_int(e, env: dict, what: str):
    """`e` as the generated code computes it: in a 32-bit int, which must not overflow."""
    try:
        return evaluate(e, env, int32=True)
    except IntOverflow as err:
        raise InterpreterError(
            f"{what}: {err} in the generated code (tiledsl.limits refuses such sizes)"
        ) from None


class Memory:
    """One block's memory: its shared arena, typed per buffer, and the global arrays.

    `env` is the block's environment (the running loop variables included): tile offsets
    are evaluated in it when a tile is located, so it is shared, not copied.
    """

    def __init__(
        self,
        kernel: KernelIR,
        arrays: dict[str, np.ndarray],
        offsets: dict[str, int],
        arena_bytes: int,
        env: dict,
    ):
        self.kernel = kernel
        self.arrays = arrays
        self.offsets = offsets
        self.env = env
        self.warps = kernel.agent_warps  # a pingpong team's: see with_env
        self.first_warp = 0  # the first of the warps it evaluates for (a team's)
        self.threads = kernel.threads
        self.arena = np.full(arena_bytes, 0xFF, np.uint8)
        self.views: dict[str, np.ndarray] = {
            b.name: self.arena[offsets[b.name] : offsets[b.name] + b.size_bytes]
            .view(STORAGE[b.dtype])  # bf16: its bits
            .reshape(-1)
            for b in kernel.buffers
        }

    def with_env(self, env: dict, first_warp: int = 0) -> Memory:
        """The same memory (arena, views, arrays) seen from another environment: a role's,
        whose loop variables and names are its own (a team's: from its first warp on)."""
        other = copy.copy(self)
        other.env = env
        other.first_warp = first_warp
        return other

    def dtype(self, tile: Tile) -> str:
        if isinstance(tile, SharedTile):
            return self.kernel.buffer(tile.buffer).dtype
        return self.kernel.gemm.operand(tile.operand).dtype

    def locate(self, tile: Tile, rows, cols, what: str, inside: list | None = None):
        """(flat array, flat indices, 2-byte units or None) of elements (rows, cols) of `tile`.

        Offsets may differ per warp, so results carry a leading warp axis (or 1).
        With `inside` (a guarded copy's global side), elements outside the operand are
        pointed at element 0 instead of refused, and `inside[0]` gets the in-bounds mask.
        """
        r = self._per_warp(tile.offset[0], rows) + rows
        c = self._per_warp(tile.offset[1], rows) + cols
        if isinstance(tile, SharedTile):
            return self._locate_shared(tile, r, c, rows, what)
        return self._locate_global(tile, r, c, rows, what, inside)

    def warp_tile(self, tile: Tile, what: str, inside: list | None = None):
        """`locate` of the whole tile for a warp-collective op: (data, flat, units, issuers),
        broadcast over the warps; the issuer is the whole warp (ids after the thread ids,
        since the lane mapping of fragment ops is unspecified). With `inside` (a guarded
        store into C), `inside[0]` gets the in-bounds mask, broadcast like `flat`."""
        rows, cols = np.arange(tile.rows)[:, None], np.arange(tile.cols)[None, :]
        data, flat, units = self.locate(tile, rows, cols, what, inside)
        flat = np.broadcast_to(flat, (self.warps, tile.rows, tile.cols))
        if inside:
            inside[0] = np.broadcast_to(inside[0], flat.shape)
        if units is None:
            return data, flat, None, None
        units = np.broadcast_to(units, (self.warps, *units.shape[1:]))
        warps = self.first_warp + np.arange(self.warps)
        issuers = (self.threads + warps).reshape(-1, *([1] * (units.ndim - 1)))
        return data, flat, units, issuers

    def _per_warp(self, e, rows):
        """`e`'s value in each warp, shaped to broadcast against `rows`."""
        return np.asarray(evaluate(e, self.env)).reshape(-1, *([1] * rows.ndim))

    def _locate_shared(self, tile: SharedTile, r, c, rows, what: str):
        buf = self.kernel.buffer(tile.buffer)
        slot = self._per_warp(tile.slot, rows)
        if (
            (r < 0).any()
            or (r >= buf.rows).any()
            or (c < 0).any()
            or (c >= buf.cols).any()
            or (slot < 0).any()
            or (slot >= buf.slots).any()
        ):
            raise InterpreterError(f"{what} reaches outside shared buffer {buf.name}")
        flat = buf.element(slot, r, c)
        size = DTYPE_BYTES[buf.dtype]
        first = (self.offsets[buf.name] + flat * size) // UNIT
        units = (
            first if size == UNIT else np.stack([first + u for u in range(size // UNIT)], axis=-1)
        )
        return self.views[buf.name], flat, units

    def _locate_global(self, tile, r, c, rows, what: str, inside: list | None):
        env = self.env
        op = self.kernel.gemm.operand(tile.operand)
        gr = self._per_warp(tile.origin[0], rows) + r
        gc = self._per_warp(tile.origin[1], rows) + c
        for name, value in (("the row", gr), ("the column", gc)):  # ints in the kernel
            checked_int(Var("x"), {"x": value}, f"{what}: {name} in {op.name}")
        n_rows, n_cols = (int(evaluate(d, env)) for d in op.dims[-2:])
        if inside is not None:
            mask = (gr >= 0) & (gr < n_rows) & (gc >= 0) & (gc < n_cols)
            inside.append(mask)
            gr, gc = np.where(mask, gr, 0), np.where(mask, gc, 0)
        elif (gr < 0).any() or (gr >= n_rows).any() or (gc < 0).any() or (gc >= n_cols).any():
            raise InterpreterError(
                f"{what} reaches outside {op.name} ({n_rows} x {n_cols}) in block {env['pid']}"
            )
        flat = np.asarray(evaluate(op.offset(Var("r"), Var("c")), {**env, "r": gr, "c": gc}))
        if op.batch is not None:  # this block's product of the batch
            flat = flat + env["bz"] * int(evaluate(op.matrix_elements, env))
        return self.arrays[op.name], flat, None
