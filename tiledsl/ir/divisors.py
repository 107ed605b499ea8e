"""Division by a value the host knows at launch, as a multiply-high and a shift.

A persistent kernel divides by grid-wide values (the grid's blocks, a group's width in
tiles, stream-K's sharers) before its first copy and at every tile. Divided at run time,
each `/` or `%` is a chain of some twenty dependent instructions (a float reciprocal, a
multiply, two corrections); the host computes these values once per launch anyway, so it
passes each divisor `d` with two constants, and the kernel divides as

    n / d = (umulhi(n, multiplier) + n) >> shift        for 0 <= n < 2**31

(Granlund and Montgomery's round-up method, "Division by invariant integers using
multiplication", 1994, with the 33-bit sum that n < 2**31 keeps inside 32 bits):
shift = ceil(log2 d), multiplier = floor(2**32 * (2**shift - d) / d) + 1. No branch:
d = 1 and powers of two come out of the same formula (multiplier 1, umulhi 0).

    >>> multiplier, shift = divisor_constants(7)
    >>> [divide(n, multiplier, shift) for n in (0, 6, 7, 48, 2**31 - 1)]
    [0, 0, 1, 6, 306783378]

The IR keeps `n / d`: the interpreter floors, the emitter's C spells the same `n / d`
with `d` a `Divisor` (tiledsl.emit.hopper), whose `/` and `%` are the lines above.
"""

from __future__ import annotations

import struct

#: The numerators the method is exact for: a kernel's non-negative 32-bit ints.
NUMERATOR_LIMIT = 2**31


def divisor_constants(d: int) -> tuple[int, int]:
    """(multiplier, shift) for dividing by `d` (1 <= d < 2**31); d = 0 (a divisor the
    kernel never divides by at these sizes, e.g. no stream-K tiles) gets (0, 0)."""
    if d == 0:
        return 0, 0
    if not 1 <= d < NUMERATOR_LIMIT:
        raise ValueError(f"divisor {d} is outside [1, 2**31)")
    shift = (d - 1).bit_length()  # ceil(log2 d)
    multiplier = (2**32 * (2**shift - d)) // d + 1
    return multiplier, shift


def divide(n: int, multiplier: int, shift: int) -> int:
    """What the kernel computes for n / d (a model of the C, for tests)."""
    high = (n * multiplier) >> 32  # __umulhi
    return (high + n) >> shift


def divisor_bytes(d: int) -> bytes:
    """The 12 bytes of the kernel's `struct Divisor { int value; unsigned multiplier,
    shift; }` for `d`, as a launch passes it by value."""
    multiplier, shift = divisor_constants(d)
    return struct.pack("<iII", d, multiplier, shift)
