"""Index expressions: folding, C spelling, evaluation, and the alignment analysis."""

from __future__ import annotations

import numpy as np

from tiledsl.ir.expr import Const, Var, ceil_div, evaluate, substitute, to_c, variables
from tiledsl.ir.verify import interval, pow2_alignment

x, y = Var("x"), Var("y")


def test_constructors_fold_constants():
    assert x * 1 is x
    assert x + 0 is x
    assert str(x * 0) == "0"
    assert Const(2) * 3 == Const(6)
    assert (x + 2) * 1 == x + 2
    assert x % 1 == Const(0)


def test_c_spelling_needs_only_required_parentheses():
    assert to_c(x * 4 + y) == "x * 4 + y"
    assert to_c((x + y) * 4) == "(x + y) * 4"
    assert to_c(x // (y + 1)) == "x / (y + 1)"
    assert to_c(x + (y + 1)) == "x + y + 1"
    assert to_c(x // 4 * 4) == "x / 4 * 4"
    assert to_c(x * (y // 2)) == "x * (y / 2)"


def test_named_constants_print_by_name_unless_asked_not_to():
    bk = Const(32, "BK")
    e = ceil_div(Var("K"), bk)
    assert to_c(e) == "(K + BK - 1) / BK"
    assert to_c(e, named=False) == "(K + 31) / 32"
    assert Const(32, "BK") == Const(32)  # the name is spelling, not meaning


def test_evaluate_broadcasts_over_numpy_arrays():
    e = x * 16 + y % 4
    assert evaluate(e, {"x": 2, "y": 7}) == 35
    out = evaluate(e, {"x": np.arange(3), "y": 5})
    assert out.tolist() == [1, 17, 33]
    assert evaluate(ceil_div(x, 32), {"x": 33}) == 2


def test_substitute_and_variables():
    e = substitute(x * 4 + y, {"y": Const(3)})
    assert to_c(e) == "x * 4 + 3"
    assert variables(x * y + 1) == frozenset({"x", "y"})


def test_pow2_alignment():
    assert pow2_alignment(Const(48), {}) == 16
    assert pow2_alignment(x * 8 + 16, {}) == 8
    assert pow2_alignment(Var("K") * 2, {"K": 32}) == 64
    assert pow2_alignment(x // 2, {}) == 1


def test_interval():
    assert interval(x * 16 + y, {"x": (0, 3), "y": (0, 15)}) == (0, 63)
    assert interval(x % 8, {"x": (0, 100)}) == (0, 7)
