"""What the interpreter raises when a kernel would go wrong on the GPU.

Its own module, below the executor, the race log, the tile locator, the pointer
contracts, the mbarriers, the clocks and the role scheduler, because each of them raises
these: no module of tiledsl.interp imports another that imports it back.
`tiledsl.interp.interpreter` re-exports them.
"""

from __future__ import annotations


class InterpreterError(Exception):
    """The IR did something the GPU would fault on, race on, or read garbage from."""


class RaceError(InterpreterError):
    """Two accesses to one shared-memory unit, one a write, that no barrier orders."""


class DeadlockError(InterpreterError):
    """No role of a warp-specialized block can advance: each is blocked on an mbarrier
    phase that no arrival or TMA byte still to come can complete (a hung kernel)."""
