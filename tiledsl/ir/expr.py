"""Integer index expressions of the IR: constants, variables, +, *, // and %.

They are what tile offsets, loop bounds and buffer slots are made of. The same
tree is printed in the IR text, emitted as C, and evaluated by the numpy
interpreter (variables may be bound to numpy arrays, which broadcast), so all
three agree by construction.

    >>> bm = Var("bm")
    >>> str(bm * Const(64, "BM") + 16)
    'bm * BM + 16'

Constructors fold constants (`x * 1 -> x`, `x + 0 -> x`, `2 * 3 -> 6`) so that
passes can build offsets naively and still print readable IR.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


class Expr:
    """Base class; use the operators to build trees."""

    def __add__(self, other: Expr | int) -> Expr:
        return add(self, lift(other))

    def __radd__(self, other: int) -> Expr:
        return add(lift(other), self)

    def __mul__(self, other: Expr | int) -> Expr:
        return mul(self, lift(other))

    def __rmul__(self, other: int) -> Expr:
        return mul(lift(other), self)

    def __floordiv__(self, other: Expr | int) -> Expr:
        return floordiv(self, lift(other))

    def __mod__(self, other: Expr | int) -> Expr:
        return mod(self, lift(other))

    def __sub__(self, other: Expr | int) -> Expr:
        return sub(self, lift(other))

    def __rsub__(self, other: int) -> Expr:
        return sub(lift(other), self)

    def __str__(self) -> str:
        return to_c(self)


@dataclass(frozen=True, eq=True)
class Const(Expr):
    """An integer; `name` (not part of equality) is how C and the IR text spell it."""

    value: int
    name: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Var(Expr):
    name: str


@dataclass(frozen=True)
class BinOp(Expr):
    op: str  # "+", "-", "*", "/", "%", "min", "^"  ("/" floors: operands are non-negative)
    lhs: Expr
    rhs: Expr


ZERO = Const(0)


def lift(value: Expr | int) -> Expr:
    return value if isinstance(value, Expr) else Const(int(value))


def _const(e: Expr) -> int | None:
    return e.value if isinstance(e, Const) else None


def add(a: Expr, b: Expr) -> Expr:
    ca, cb = _const(a), _const(b)
    if ca is not None and cb is not None:
        return Const(ca + cb)
    if ca == 0:
        return b
    if cb == 0:
        return a
    return BinOp("+", a, b)


def sub(a: Expr, b: Expr) -> Expr:
    ca, cb = _const(a), _const(b)
    if ca is not None and cb is not None:
        return Const(ca - cb)
    if cb == 0:
        return a
    if a == b:
        return ZERO
    return BinOp("-", a, b)


def _extreme(op: str, pick, a: Expr | int, b: Expr | int) -> Expr:
    """min(a, b) or max(a, b), folded when both are constants or the same."""
    a, b = lift(a), lift(b)
    ca, cb = _const(a), _const(b)
    if ca is not None and cb is not None:
        return Const(pick(ca, cb))
    if a == b:
        return a
    return BinOp(op, a, b)


def minimum(a: Expr | int, b: Expr | int) -> Expr:
    return _extreme("min", min, a, b)


def maximum(a: Expr | int, b: Expr | int) -> Expr:
    return _extreme("max", max, a, b)


def mul(a: Expr, b: Expr) -> Expr:
    ca, cb = _const(a), _const(b)
    if ca is not None and cb is not None:
        return Const(ca * cb)
    if ca == 0 or cb == 0:
        return ZERO
    if ca == 1:
        return b
    if cb == 1:
        return a
    return BinOp("*", a, b)


def floordiv(a: Expr, b: Expr) -> Expr:
    ca, cb = _const(a), _const(b)
    if cb == 0:
        raise ZeroDivisionError("index expression divided by zero")
    if ca is not None and cb is not None:
        return Const(ca // cb)
    if cb == 1:
        return a
    return BinOp("/", a, b)


def mod(a: Expr, b: Expr) -> Expr:
    ca, cb = _const(a), _const(b)
    if ca is not None and cb is not None:
        return Const(ca % cb)
    if cb == 1:
        return ZERO
    return BinOp("%", a, b)


def xor(a: Expr | int, b: Expr | int) -> Expr:
    """Bitwise exclusive or: the XOR swizzle of shared memory (`pad xor`)."""
    a, b = lift(a), lift(b)
    ca, cb = _const(a), _const(b)
    if ca is not None and cb is not None:
        return Const(ca ^ cb)
    if cb == 0:
        return a
    if ca == 0:
        return b
    return BinOp("^", a, b)


def ceil_div(a: Expr, b: int | Const) -> Expr:
    """ceil(a / b) for a positive constant b, spelled `(a + B - 1) / B` when b is named."""
    divisor = lift(b)
    assert isinstance(divisor, Const) and divisor.value > 0
    less_one = Const(divisor.value - 1, f"{divisor.name} - 1" if divisor.name else None)
    return floordiv(add(a, less_one), divisor)


# `^` binds looser than + in C: below every other operator, so it is always bracketed inside one.
_PRECEDENCE = {"^": 0, "+": 1, "-": 1, "*": 2, "/": 2, "%": 2}


def to_c(e: Expr, parent: int = 0, named: bool = True) -> str:
    """C (and IR-text) spelling, with only the parentheses C needs.

    `named=False` spells constants as numbers, for text read outside the kernel.
    """
    if isinstance(e, Const):
        return (e.name if named else None) or str(e.value)
    if isinstance(e, Var):
        return e.name
    assert isinstance(e, BinOp)
    if e.op in ("min", "max"):
        return f"{e.op}({to_c(e.lhs, 0, named)}, {to_c(e.rhs, 0, named)})"
    prec = _PRECEDENCE[e.op]
    # Left-associative: the right operand of a same-precedence op needs brackets
    # unless the op is associative with it (+ after +, * after *).
    lhs = to_c(e.lhs, prec, named)
    right_prec = (
        prec if e.op in "+*" and isinstance(e.rhs, BinOp) and e.rhs.op == e.op else prec + 1
    )
    rhs = to_c(e.rhs, right_prec, named)
    text = f"{lhs} {e.op} {rhs}"
    return f"({text})" if prec < parent else text


class IntOverflow(ArithmeticError):
    """A value of an index expression that the generated code's `int` cannot hold."""

    def __init__(self, e: Expr, value: int) -> None:
        super().__init__(f"{to_c(e)} = {value} overflows a 32-bit int")
        self.expr, self.value = e, value


INT32 = (-(2**31), 2**31 - 1)


def evaluate(e: Expr, env: dict[str, Any], int32: bool = False) -> Any:
    """Value of `e` with variables from `env` (ints or numpy integer arrays).

    With `int32`, every intermediate value must fit the 32-bit `int` the emitted C
    computes it in, or IntOverflow is raised: Python's integers never overflow, the
    generated code's do, and the interpreter is a model of the generated code.
    """
    value = _evaluate(e, env, int32)
    if int32:
        _check_int32(e, value)
    return value


def _check_int32(e: Expr, value: Any) -> None:
    low, high = (value, value) if isinstance(value, int) else (np.min(value), np.max(value))
    if low < INT32[0] or high > INT32[1]:
        raise IntOverflow(e, int(high if high > INT32[1] else low))


def _evaluate(e: Expr, env: dict[str, Any], int32: bool) -> Any:
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        try:
            return env[e.name]
        except KeyError:
            raise KeyError(f"index variable '{e.name}' is not bound here") from None
    assert isinstance(e, BinOp)
    a, b = evaluate(e.lhs, env, int32), evaluate(e.rhs, env, int32)
    if e.op == "+":
        return a + b
    if e.op == "*":
        return a * b
    if e.op == "-":
        return a - b
    if e.op == "/":
        return a // b
    if e.op == "min":
        return min(a, b) if isinstance(a, int) and isinstance(b, int) else np.minimum(a, b)
    if e.op == "max":
        return max(a, b) if isinstance(a, int) and isinstance(b, int) else np.maximum(a, b)
    if e.op == "^":
        return a ^ b
    return a % b


def variables(e: Expr) -> frozenset[str]:
    if isinstance(e, Var):
        return frozenset({e.name})
    if isinstance(e, BinOp):
        return variables(e.lhs) | variables(e.rhs)
    return frozenset()


def substitute(e: Expr, bindings: dict[str, Expr]) -> Expr:
    """Replace variables by expressions, re-folding constants on the way up."""
    if isinstance(e, Var):
        return bindings.get(e.name, e)
    if isinstance(e, BinOp):
        build = {
            "+": add,
            "-": sub,
            "*": mul,
            "/": floordiv,
            "%": mod,
            "min": minimum,
            "^": xor,
        }[e.op]
        return build(substitute(e.lhs, bindings), substitute(e.rhs, bindings))
    return e
