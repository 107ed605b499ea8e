"""The `epilogue` directive: element-wise work on each C element before it is written.

    ep = Epilogue.of(schedule, gemm)          # None without an epilogue directive
    out = ep.apply(acc, c_old, bias, xp)      # what the kernel computes, in float32

`epilogue alpha a, beta b, bias D, relu` computes, for each element (m, n),

    v = alpha * acc  +  beta * C_old[m, n]      (alpha 1, beta 0 for `=` and 1 for `+=`)
    then, in the order written:  v += D[n]  (bias)   and   v = max(v, 0)  (relu)

and stores v converted to C's type. `alpha runtime` (or `beta runtime`) makes the value a
parameter of the kernel (`float alpha`), passed at each launch: `bound(values)` is the
epilogue with the launch's values, which the interpreter and the oracles run; a kernel
whose beta is a parameter reads C only where the launch's beta is not 0 (so that C may be
uninitialised then, as cuBLAS promises). The kernel does each step as one float32
operation rounded to nearest (`__fmul_rn`, `__fadd_rn`: no fused multiply-add), so
`apply` -- the same steps in numpy float32 -- reproduces it bit for bit, which is
what lets the exact oracle check an epilogue with any alpha and beta.

The epilogue runs where C leaves the per-warp staging tile (`epilogue_via shared`),
because a bias needs each element's column, which a WMMA fragment does not reveal; on a
warp-specialized kernel it runs on the consumers' accumulators in their registers
(`EpilogueFrag`), whose wgmma layout gives each element's row and column. Under
`swap_operands` the kernel's accumulators are C^T's: a bias runs along their rows
(`bias_rows`), which only the register epilogue knows (the front end refuses the rest).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .gemm import Gemm
from .schedule import Schedule

#: The values `tiledsl run`, `bench` and `tune` launch a kernel's runtime alpha and beta
#: with (a user's call passes its own): neither 0 nor 1, so that every step is exercised.
CHECK_VALUES = {"alpha": 1.5, "beta": 0.75}
#: A call's runtime alpha and beta when it passes none (tiledsl.load, the torch operator):
#: the product itself, C = A x B, as cuBLAS's defaults are.
CALL_DEFAULTS = {"alpha": 1.0, "beta": 0.0}


@dataclass(frozen=True)
class Epilogue:
    alpha: float = 1.0
    beta: float = 0.0
    steps: tuple[tuple[str, str], ...] = ()  # ("bias", operand) and ("relu", "") in order
    runtime: tuple[str, ...] = ()  # "alpha" and/or "beta": kernel parameters, not constants
    # swap_operands: a bias is indexed by the kernel's row (C's column as written); the
    # same epilogue as the caller sees it, so not part of equality
    bias_rows: bool = field(default=False, compare=False)

    @classmethod
    def of(cls, schedule: Schedule, gemm: Gemm) -> Epilogue | None:
        """The schedule's epilogue (assumed checked by analysis), or None if it has none.

        A warp-specialized `C +=` without one has one all the same, beta 1: its consumers
        read C where their accumulators leave the registers (the register epilogue, which
        reads nothing outside C), and the accumulators start at zero."""
        if not schedule.epilogue:
            if gemm.accumulate and schedule.warp_specialize:
                return cls(1.0, 1.0, ())
            return None
        values = {"alpha": 1.0, "beta": 1.0 if gemm.accumulate else 0.0}
        steps, runtime = [], []
        for group in schedule.epilogue:
            if group[0] in ("alpha", "beta") and group[1] == "runtime":
                runtime.append(group[0])
            elif group[0] in ("alpha", "beta"):
                values[group[0]] = float(np.float32(float(group[1])))
            elif group[0] == "bias":
                steps.append(("bias", group[1]))
            elif group[0] == "relu":
                steps.append(("relu", ""))
        return cls(
            values["alpha"],
            values["beta"],
            tuple(steps),
            tuple(sorted(runtime)),
            bias_rows=gemm.written is not None,
        )

    @property
    def reads_c(self) -> bool:
        """Whether the kernel may read C (with a runtime beta: where the launch's is not 0)."""
        return self.beta != 0.0 or "beta" in self.runtime

    @property
    def scales(self) -> bool:
        """Whether the kernel multiplies by alpha (a runtime alpha: always)."""
        return self.alpha != 1.0 or "alpha" in self.runtime

    def bound(self, values) -> Epilogue:
        """The epilogue with the launch's values of its runtime alpha and beta (f32; one
        `values` does not name is CHECK_VALUES's, as tiledsl's own launches pass)."""
        if not self.runtime:
            return self
        given = {
            name: float(np.float32(values.get(name, CHECK_VALUES[name]))) for name in self.runtime
        }
        return replace(
            self,
            alpha=given.get("alpha", self.alpha),
            beta=given.get("beta", self.beta),
            runtime=(),
        )

    @property
    def bias_operands(self) -> tuple[str, ...]:
        return tuple(name for op, name in self.steps if op == "bias")

    def describe(self) -> str:
        alpha = "alpha" if "alpha" in self.runtime else f"{self.alpha:g}"
        beta = "beta" if "beta" in self.runtime else f"{self.beta:g}"
        parts = [f"v = {alpha} * acc"]
        if self.reads_c:
            parts[0] += f" + {beta} * C"
        for op, name in self.steps:
            parts.append(f"v += {name}[n]" if op == "bias" else "v = max(v, 0)")
        return "; ".join(parts)

    def apply(self, acc, c_old=None, biases: dict | None = None, xp=np, dtype=None):
        """float32 values of the stored elements: each step rounded as the kernel rounds it
        (with `dtype` float64: the exact-arithmetic reference the statistical oracle bounds).

        `acc` and `c_old` are arrays of one shape (c_old only read when beta != 0);
        `biases` maps an operand name to its values, broadcast along the last axis.
        """
        assert not self.runtime, "bind the runtime alpha and beta first (Epilogue.bound)"
        real = dtype or xp.float32
        v = acc.astype(real)
        if self.alpha != 1.0:
            v = real(self.alpha) * v
        if self.reads_c:
            v = v + real(self.beta) * c_old.astype(real)
        for op, name in self.steps:
            if op == "bias":
                assert biases is not None  # a bias step reads its operand's values
                v = v + biases[name].astype(real)
            else:
                v = xp.maximum(v, real(0))
        return v
