"""`tiledsl.load`: a `.tile` file as a Python callable.

    k = tiledsl.load("examples/hgemm.tile")       # or the text of one; kernel=, target=
    C = k(A, B)                                    # a new C
    k(A, B, out=C)                                 # into C (required for `C += ...`)
    k(A, B, D=bias)                                # an epilogue's declared vectors
    print(k)                                       # the schedule, the launch, the paths
    print(k.explain(4096, 4096, 4096))             # which kernel a size takes, and why

numpy arrays run in the interpreter (the same product, on the CPU, with its race check:
the same code runs where there is no GPU); CuPy arrays and torch tensors run on the GPU,
on the caller's current stream, without a copy. A file with several kernels of the same
product is one callable: a size takes the first kernel that covers it without its guarded
twin, else the first that covers it at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from ..driver import Compiled, compile_file, compile_source
from ..emit.launch import Launch
from ..ir.dtypes import STORAGE, decode, encode
from ..ir.expr import Const
from ..ir.nodes import KernelIR
from ..lowering.edges import needs_twin, variant
from .operands import ArgumentError, ArrayView, bind, declared_shape, describe


def load(path_or_text: str | Path, kernel: str | None = None, target: str | None = None):
    """Compile a `.tile` file (a path, or the text of one) and return its kernels as one
    callable (`kernel`: only the one of that name). Raises tiledsl.errors.TileError with
    the located diagnostics when the file does not compile."""
    text = str(path_or_text)
    is_path = isinstance(path_or_text, Path) or (
        "\n" not in text and "{" not in text and text.endswith(".tile")
    )
    if is_path and not Path(text).is_file():
        raise ArgumentError(f"no .tile file {text}")
    compiled = compile_file(text, target) if is_path else compile_source(text, "<string>", target)
    chosen = compiled.kernels
    if kernel is not None:
        chosen = tuple(k for k in compiled.kernels if k.name == kernel)
        if not chosen:
            names = ", ".join(k.name for k in compiled.kernels)
            raise ArgumentError(f"no kernel '{kernel}' in {compiled.file}; it has: {names}")
    products = {(k.gemm.text, str(k.gemm.a), str(k.gemm.b), str(k.gemm.c)) for k in chosen}
    if len(products) > 1:
        raise ArgumentError(
            f"{compiled.file} holds kernels of different products: load one with kernel=NAME "
            f"({', '.join(k.name for k in chosen)})"
        )
    return Kernel(compiled, chosen)


@dataclass(frozen=True)
class Choice:
    """What runs a size: the kernel (the file's, or its guarded twin), its launch, its size
    parameters, and why it was chosen."""

    kernel: KernelIR
    launch: Launch
    sizes: dict[str, int]
    why: str


@dataclass
class Kernel:
    compiled: Compiled
    kernels: tuple[KernelIR, ...]
    # the GPU module, built at the first GPU call, and a launcher per kernel (api.gpu)
    _gpu: dict = field(default_factory=dict, repr=False)

    @property
    def gemm(self):
        return self.kernels[0].gemm

    def __repr__(self) -> str:
        g = self.gemm
        lines = [
            f"<tiledsl kernel {' | '.join(k.name for k in self.kernels)} from "
            f"{self.compiled.file}: {g.text}",
            "  operands " + ", ".join(str(op) for op in (g.a, g.b, *g.extras, g.c)),
        ]
        for k in self.kernels:
            s = k.schedule
            launch = self._launch(k)
            lines.append(
                f"  {k.name}: block {'x'.join(map(str, s.block))}, {s.path.name} "
                f"{'x'.join(map(str, s.mma))}, {s.stages} stage(s), {k.threads} threads, "
                f"{launch.smem_bytes} bytes of shared memory"
                + (", persistent" if k.persistent else "")
                + (f"; other sizes take {k.edge.name} (guarded)" if k.edge is not None else "")
            )
        return "\n".join(lines) + ">"

    def _launch(self, k: KernelIR) -> Launch:
        return self.compiled.launches[self.compiled.kernels.index(k)]

    # ------------------------------------------------------------ choosing a kernel
    def choose(self, m: int, n: int, k: int, batch: int = 1) -> Choice:
        """The kernel (the file's, or its guarded twin) that runs M x N x K, its launch, its
        size parameters and why it was chosen; ArgumentError when none can."""
        from ..commands.run import SizeError, check_size

        size = (m, n, k)
        covering, why_not, params = [], [], {}
        for kern in self.kernels:
            try:
                params[kern.name] = check_size(kern, size, batch)
            except SizeError as err:
                why_not.append(f"{kern.name}: {err}")
                continue
            covering.append(kern)
        if not covering:
            raise ArgumentError(
                f"no kernel of {self.compiled.file} runs {m}x{n}x{k}: " + "; ".join(why_not)
            )
        sizes = covering[0].gemm.size_env(*size)
        fast = [kern for kern in covering if not needs_twin(kern, sizes)]
        chosen = (fast or covering)[0]
        run, launch = variant(chosen, self._launch(chosen), size)
        if run is not chosen:
            why = (
                f"{chosen.name}'s guarded twin {run.name}: {m}x{n}x{k} is not a multiple of "
                f"its block tile {'x'.join(map(str, chosen.schedule.block))}"
            )
        elif len(self.kernels) > 1:
            why = (
                f"{chosen.name}: the first kernel of the file that covers {m}x{n}x{k} "
                "without its guarded twin"
            )
        else:
            why = f"{chosen.name} itself"
        return Choice(run, launch, params[chosen.name], why)

    def explain(self, m: int, n: int, k: int, batch: int = 1) -> str:
        """Which kernel M x N x K takes, why, and its grid."""
        c = self.choose(m, n, k, batch)
        launch = c.launch
        return (
            f"{m}x{n}x{k}: {c.why}; {launch.blocks(c.sizes)} block tile(s) of "
            f"{'x'.join(map(str, c.kernel.schedule.block))}"
            + (", looped over by one block per SM (persistent)" if launch.persistent else "")
            + f"; {launch.threads} threads and {launch.smem_bytes} bytes of shared memory a block"
        )

    # ------------------------------------------------------------ the call
    def __call__(self, *args, out=None, **extras):
        g = self.gemm
        if len(args) != 2:
            raise ArgumentError(
                f"{self.kernels[0].name} takes {g.a.name} and {g.b.name} (and, by name, "
                f"out={g.c.name}"
                + "".join(f", {op.name}=" for op in g.extras)
                + f"), got {len(args)} positional argument(s)"
            )
        names = {op.name for op in g.extras}
        unknown = sorted(set(extras) - names)
        if unknown:
            raise ArgumentError(
                f"{self.kernels[0].name} has no operand '{unknown[0]}'; its extras are: "
                + (", ".join(sorted(names)) or "none")
            )
        missing = sorted(names - set(extras))
        if missing:
            raise ArgumentError(
                f"{self.kernels[0].name}'s epilogue reads {missing[0]}: pass {missing[0]}=..."
            )
        arrays = {g.a.name: args[0], g.b.name: args[1], **extras}
        if g.accumulate and out is None:
            raise ArgumentError(
                f"{g.text} reads {g.c.name}: pass out={g.c.name} (it is added to, in place)"
            )
        views = {name: describe(a) for name, a in arrays.items()}
        out_view = describe(out) if out is not None else None
        every = [*views.values(), *([out_view] if out_view is not None else [])]
        cpu_tensors = [name for name, v in views.items() if v.library == "torch" and not v.on_gpu]
        if cpu_tensors or (
            out_view is not None and out_view.library == "torch" and not out_view.on_gpu
        ):
            name = cpu_tensors[0] if cpu_tensors else g.c.name
            raise ArgumentError(
                f"{name} is a torch tensor on the CPU: the kernel runs on the GPU (move it "
                "with .cuda()), or pass numpy arrays to run it in the interpreter"
            )
        places = {v.on_gpu for v in every}
        if len(places) > 1:
            where = ", ".join(
                f"{name} on the {'GPU' if v.on_gpu else 'CPU'}"
                for name, v in [*views.items(), *([(g.c.name, out_view)] if out_view else [])]
            )
            raise ArgumentError(f"the operands must all be on the GPU or all on the CPU: {where}")
        dims = bind(g, views, out_view)
        m, n, k = (_value(e, dims) for e in (g.m, g.n, g.k))
        batch = _value(g.batch, dims) if g.batch is not None else 1
        choice = self.choose(m, n, k, batch)
        if out is None:
            shape = declared_shape(g.c, dims)
            assert shape is not None  # every name of C is one of A's or B's
            out = _empty_like(every[0], shape, g.c)
        if places == {True}:
            from .gpu import run_on_gpu

            run_on_gpu(self, choice, arrays, out)
        else:
            _run_in_interpreter(choice, arrays, out, (m, n, k), batch)
        return out


def _value(e, dims: dict[str, int]) -> int:
    """A declared dimension's value: a literal, or the size the arrays gave its name."""
    return e.value if isinstance(e, Const) else dims[e.name]


def _numpy_dtype(dtype: str):
    """numpy's dtype of a declared type (bf16: ml_dtypes', which numpy lacks)."""
    if dtype != "bf16":
        return np.dtype(STORAGE[dtype])
    try:
        import ml_dtypes
    except ImportError:
        raise ArgumentError(
            "numpy has no bfloat16: install ml_dtypes (its bfloat16 arrays are taken), or "
            "call the kernel on torch tensors"
        ) from None
    return np.dtype(ml_dtypes.bfloat16)


def _empty_like(view: ArrayView, shape: tuple[int, ...], op) -> object:
    """A new C for the call, in the library and on the device of the inputs, laid out as
    declared (column-major: each matrix's columns contiguous)."""
    op = op.declared
    order: Literal["C", "F"] = "C" if op.layout == "row" else "F"
    if view.library == "numpy":
        if op.layout == "col" and len(shape) == 3:
            return np.empty((shape[0], shape[2], shape[1]), _numpy_dtype(op.dtype)).swapaxes(1, 2)
        return np.empty(shape, _numpy_dtype(op.dtype), order=order)
    if view.library == "cupy":
        import cupy

        if op.layout == "col" and len(shape) == 3:
            return cupy.empty((shape[0], shape[2], shape[1]), STORAGE[op.dtype]).swapaxes(1, 2)
        return cupy.empty(shape, STORAGE[op.dtype], order=order)
    import torch

    dtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[op.dtype]
    if op.layout == "row":
        return torch.empty(shape, dtype=dtype, device="cuda")
    flipped = (*shape[:-2], shape[-1], shape[-2])
    return torch.empty(flipped, dtype=dtype, device="cuda").transpose(-1, -2)


def _storage(array, op) -> np.ndarray:
    """A numpy array's elements in the declared storage order (1-D), as the kernel reads."""
    op = op.declared
    order: Literal["C", "F"] = "C" if op.layout == "row" else "F"
    if op.batch is not None and op.layout == "col":  # each matrix column-major, in order
        flat = np.concatenate([np.ravel(np.asarray(m), order="F") for m in array])
    else:
        flat = np.ravel(np.asarray(array), order=order)
    if op.dtype == "bf16":
        return encode(flat.astype(np.float32), "bf16")
    return flat.copy()


def _run_in_interpreter(choice: Choice, arrays: dict, out, size, batch: int) -> None:
    from ..interp.interpreter import interpret
    from ..limits import interpreter_problem

    kernel = choice.kernel
    problem = interpreter_problem(kernel.schedule.block, size, batch)
    if problem:
        raise ArgumentError(f"{kernel.name} in the numpy interpreter: {problem}")
    g = kernel.gemm
    storage = {name: _storage(a, g.operand(name)) for name, a in arrays.items()}
    storage[g.c.name] = _storage(out, g.c)
    interpret(kernel, storage, choice.sizes)
    values = decode(storage[g.c.name], g.c.dtype)
    c = g.c.declared
    order = "C" if c.layout == "row" else "F"
    if c.batch is not None and c.layout == "col":
        rows, cols = out.shape[-2:]
        matrices = values.reshape(out.shape[0], -1)
        out[...] = np.stack([m.reshape((rows, cols), order="F") for m in matrices])
    else:
        out[...] = values.reshape(out.shape, order=order)
