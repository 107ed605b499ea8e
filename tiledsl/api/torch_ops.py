"""A loaded kernel as a torch operator (`tiledsl.torch.register`): a `torch.library` custom
op with a fake implementation, so that `torch.compile` traces through it without a graph
break (the fake says what C will be: its shape, type and strides, without running) and
CUDA graphs capture its launch.

    op = tiledsl.torch.register("examples/hgemm.tile")          # torch.ops.tiledsl.hgemm
    y = op(x, w)                                                # C = A B, a new tensor
    y = torch.ops.tiledsl.hgemm(x, w)                           # the same operator
    step = torch.compile(lambda x, w: torch.relu(op(x, w)), fullgraph=True)

The op's arguments are the file's operands in order (A, B, then the epilogue's vectors),
by position (the dispatcher binds keywords to positions by the schema's names);
a `C +=` kernel's op takes C after them and adds to it in place (its schema marks C
mutated) and returns nothing, as does a kernel whose beta is a runtime value; a runtime
alpha and beta come last, as floats (`float alpha=1.0, float beta=0.0`). Its name is
the kernel's unless given; the name is the operator's in the process
(torch.ops.tiledsl.NAME), so a second registration under it must be of the same kernel."""

from __future__ import annotations

from pathlib import Path

from ..ir.epilogue import CALL_DEFAULTS
from ..ir.expr import Const, Var
from ..ir.gemm import Gemm
from .kernel import Kernel, load
from .operands import ArgumentError, torch_dtype, torch_empty

#: The custom ops made in this process, by name: torch keeps an operator for good once
#: it is defined, so a name is bound to one kernel.
_OPS: dict[str, tuple[Kernel, object]] = {}


def register(kernel: Kernel | str | Path, name: str | None = None, **load_args):
    """The torch operator (torch.ops.tiledsl.NAME) that runs `kernel` (a loaded Kernel, or
    what tiledsl.load takes, with its kernel= and target=)."""
    import torch

    k = kernel if isinstance(kernel, Kernel) else load(kernel, **load_args)
    name = name or k.kernels[0].name
    if not name.isidentifier():
        raise ArgumentError(f"'{name}' cannot name a torch operator: give an identifier")
    if name in _OPS:
        known, op = _OPS[name]
        if known is not k:
            raise ArgumentError(
                f"torch.ops.tiledsl.{name} is another kernel already (an operator lives as "
                "long as the process): register this one under another name"
            )
        return op
    g = k.gemm  # the product as the file writes it (tiledsl.api.kernel.Kernel.gemm)
    inputs = [g.a.name, g.b.name, *(op.name for op in g.extras)]
    arguments = ", ".join(f"Tensor {n}" for n in inputs)
    extras = inputs[2:]
    # defined through torch.library.Library, whose kernels the C++ dispatcher calls
    # directly: torch.library.custom_op wraps each call in Python layers of its own, which
    # cost about 30 µs a call more on the H200 (bench/call_overhead.py, 2026-12-02)
    library = _library(torch)
    # an epilogue's runtime alpha and beta: float arguments after the tensors (alpha 1 and
    # beta 0 unless given); a beta reads C, so that op takes C and writes it in place
    scalars = k._runtime
    floats = "".join(f", float {n}={CALL_DEFAULTS[n]!r}" for n in scalars)
    count = len(inputs)

    def call(tensors: tuple, kwargs: dict, out=None):
        # the dispatcher passes a trailing float left at its default not at all (or by name)
        values = {**dict(zip(scalars, tensors[count:], strict=False)), **kwargs}
        named = dict(zip(extras, tensors[2:count], strict=True))
        return k(tensors[0], tensors[1], out=out, **named, **values)

    if g.accumulate or "beta" in scalars:
        library.define(f"{name}({arguments}, Tensor(a!) {g.c.name}{floats}) -> ()")

        def run_in_place(*args, **kwargs):
            c = kwargs.pop(g.c.name) if g.c.name in kwargs else args[count]
            call(args[:count] + args[count + 1 :], kwargs, out=c)

        def fake_in_place(*args, **kwargs):
            return None

        run, fake = run_in_place, fake_in_place
    else:
        library.define(f"{name}({arguments}{floats}) -> Tensor")

        def run_new(*args, **kwargs):
            return call(args, kwargs)

        def fake_new(*args, **kwargs):
            return fake_output(g, dict(zip(inputs, args[:count], strict=True)))

        run, fake = run_new, fake_new
    # the CPU's kernel is the same call: it refuses a CPU tensor with tiledsl's message
    for key in ("CUDA", "CPU"):
        library.impl(name, run, key)
    torch.library.register_fake(f"tiledsl::{name}", fake, lib=library)
    op = getattr(torch.ops.tiledsl, name)
    _OPS[name] = (k, op)
    return op


def _library(torch):
    """The `tiledsl` operator namespace of this process (torch.library.Library, made once:
    its operators live as long as it does)."""
    global _LIBRARY
    if _LIBRARY is None:
        _LIBRARY = torch.library.Library("tiledsl", "FRAGMENT")
    return _LIBRARY


_LIBRARY = None


def output_shape(g: Gemm, shapes: dict) -> tuple:
    """C's shape from the operands' shapes (sizes, or torch's symbolic sizes under dynamic
    shapes): each declared name takes the size of the first operand that has it."""
    dims: dict = {}
    for name in (g.a.name, g.b.name, *(op.name for op in g.extras)):
        for e, size in zip(g.operand(name).declared.all_dims, shapes[name], strict=False):
            if isinstance(e, Var):
                dims.setdefault(e.name, size)
    out = []
    for e in g.c.declared.all_dims:
        if isinstance(e, Const):
            out.append(e.value)
        elif isinstance(e, Var) and e.name in dims:
            out.append(dims[e.name])
        else:
            raise ArgumentError(f"{g.c.name}'s dimension {e} is given by no operand")
    return tuple(out)


def fake_output(g: Gemm, tensors: dict):
    """What the op returns, without running: a new C of the declared type and layout."""
    shape = output_shape(g, {n: t.shape for n, t in tensors.items()})
    c = g.c.declared
    return torch_empty(shape, torch_dtype(c.dtype), c.layout, tensors[g.a.name].device)
