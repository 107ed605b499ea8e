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
twin, else the first that covers it at all. An empty product (M, N or the batch 0) returns
an empty C and runs nothing; K = 0 under a C of elements makes each element the epilogue of
a zero sum (zeros for a plain product, C itself for `C +=`, beta·C and a bias where the
epilogue has them, as torch's addmm gives), computed by the arrays' own library
(tiledsl.api.empty_sums), no kernel launched.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from ..driver import Compiled, compile_file, compile_source
from ..emit.launch import Launch, runtime_scalars
from ..errors import TileWarning, UsageError
from ..ir.dtypes import decode, encode
from ..ir.epilogue import Epilogue
from ..ir.expr import Const
from ..ir.nodes import KernelIR
from ..ir.partial_tiles import guards_fragments, tma_only
from ..lowering.edges import variant
from .empty_sums import write_empty_sums
from .gpu import run_on_gpu
from .operands import (
    ArgumentError,
    ArrayView,
    address,
    bind,
    conformed,
    declared_shape,
    describe,
    empty,
    signature,
)

if TYPE_CHECKING:
    from ..tune.dispatch import Table


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
    # the product as each file writes it: a kernel that swaps its operands computes the same
    products = {(g.text, str(g.a), str(g.b), str(g.c)) for g in (k.gemm.as_written for k in chosen)}
    if len(products) > 1:
        raise ArgumentError(
            f"{compiled.file} holds kernels of different products: load one with kernel=NAME "
            f"({', '.join(k.name for k in chosen)})"
        )
    if len({runtime_scalars(k) for k in chosen}) > 1:
        raise ArgumentError(
            f"{compiled.file}'s kernels differ in the epilogue values a call passes "
            f"(`alpha runtime`, `beta runtime`): load one with kernel=NAME "
            f"({', '.join(k.name for k in chosen)})"
        )
    table = None
    if is_path:  # a dispatch table beside the file: its picks, for its kernels
        from ..tune.dispatch import table_beside

        try:
            table = table_beside(text, compiled.kernels)
        except UsageError as err:
            raise ArgumentError(str(err)) from None
    return Kernel(compiled, chosen, table=table)


#: Plans a Kernel keeps (one per signature of the arrays it was called on) before it
#: forgets them all: a bound on what a program of ever new shapes makes it hold.
MAX_PLANS = 4096


@dataclass(frozen=True)
class Choice:
    """What runs a size: the kernel (the file's, or its guarded twin), its launch, its size
    parameters, and why it was chosen."""

    kernel: KernelIR
    launch: Launch
    sizes: dict[str, int]
    why: str
    # the dispatch table's pick from a tuned shape far from this one (tune.dispatch.FAR)
    far: bool = False


@dataclass
class Kernel:
    compiled: Compiled
    kernels: tuple[KernelIR, ...]
    # the GPU module, built at the first GPU call, and a launcher per kernel (api.gpu)
    _gpu: dict = field(default_factory=dict, repr=False)
    # the dispatch table beside the file (`tiledsl tune --sizes`), if it has one
    table: Table | None = None
    # a Plan per signature of the arrays a call was given (tiledsl.api.operands)
    _plans: dict = field(default_factory=dict, repr=False)
    # the names of the epilogue's operands, which a call passes by keyword
    _extra_names: frozenset = field(init=False, repr=False)

    # the epilogue's values a call passes (`epilogue alpha runtime`): the same in every
    # kernel of the callable (tiledsl.load refuses a file whose kernels differ in them)
    _runtime: tuple[str, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._extra_names = frozenset(op.name for op in self.gemm.extras)
        self._runtime = runtime_scalars(self.kernels[0])

    @property
    def gemm(self):
        """The product as the file writes it: what a call passes (whichever kernel runs)."""
        return self.kernels[0].gemm.as_written

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
                + ("; every size, partial tiles by TMA" if tma_only(k) else "")
                + ("; every size, guarded loads" if guards_fragments(k) else "")
            )
        return "\n".join(lines) + ">"

    def _launch(self, k: KernelIR) -> Launch:
        return self.compiled.launches[self.compiled.kernels.index(k)]

    # ------------------------------------------------------------ choosing a kernel
    def choose(self, m: int, n: int, k: int, batch: int = 1, arch: str | None = None) -> Choice:
        """The kernel (the file's, or its guarded twin) that runs M x N x K, its launch, its
        size parameters and why it was chosen; ArgumentError when none can. With `arch` (a
        GPU's, e.g. "sm_90"), of a file whose kernels target several architectures, only
        the kernels of the newest one that GPU runs are candidates (tiledsl run's rule)."""
        from ..commands.run import SizeError
        from ..tune.dispatch import choose_kernel

        size = (m, n, k)
        candidates = self.kernels
        if arch is not None:
            offered = self.compiled.for_device(arch)
            candidates = tuple(kern for kern in self.kernels if kern in offered) or candidates
        try:
            picked = choose_kernel(candidates, size, batch, self.table)
        except SizeError as err:
            raise ArgumentError(
                f"no kernel of {self.compiled.file} runs {m}x{n}x{k}: {err}"
            ) from None
        chosen, why = picked.kernel, picked.why
        run, launch = variant(chosen, self._launch(chosen), size)
        if run is not chosen:
            why += (
                f"; its guarded twin {run.name}: {m}x{n}x{k} is not a multiple of its block "
                f"tile {'x'.join(map(str, chosen.schedule.block))}"
            )
        return Choice(run, launch, picked.params, why, picked.far)

    def explain(self, m: int, n: int, k: int, batch: int = 1, arch: str | None = None) -> str:
        """Which kernel M x N x K takes (on a GPU of `arch`, e.g. "sm_90": see choose), why,
        and its grid."""
        c = self.choose(m, n, k, batch, arch)
        launch = c.launch
        return (
            f"{m}x{n}x{k}: {c.why}; {launch.blocks(c.sizes)} block tile(s) of "
            f"{'x'.join(map(str, c.kernel.schedule.block))}"
            + (", looped over by one block per SM (persistent)" if launch.persistent else "")
            + f"; {launch.threads} threads and {launch.smem_bytes} bytes of shared memory a block"
        )

    # ------------------------------------------------------------ the call
    def __call__(self, *args, out=None, copy: bool = False, **extras):
        """C = A B (and the epilogue) on the arrays: a new C, or `out`. Arrays that are not
        laid out as declared (or, on the GPU, not 16-byte aligned) are refused, unless
        `copy=True`, which copies them (and writes a copied `out` back)."""
        g = self.gemm
        scalars = self._scalars(extras) if self._runtime else None
        if len(args) != 2 or extras.keys() != self._extra_names:
            self._operands(args, extras)  # says what is wrong with the call
        if out is None and (g.accumulate or (scalars is not None and scalars.get("beta"))):
            raise ArgumentError(
                f"{g.text} reads {g.c.name}"
                + (f" (beta = {scalars['beta']:g})" if scalars and scalars.get("beta") else "")
                + f": pass out={g.c.name} (it is added to, in place)"
            )
        arrays = {g.a.name: args[0], g.b.name: args[1], **extras}
        given = out
        if copy:
            arrays = {name: conformed(a, g.operand(name)) for name, a in arrays.items()}
            if out is not None:
                out = conformed(out, g.c)
        # what was checked for arrays of these types, shapes and layouts is not checked
        # again: a call of a seen signature looks its plan up, and reads the addresses
        signed = [signature(a) for a in arrays.values()]
        out_signed = signature(out) if out is not None else None
        key = (*(sig for sig, _ in signed), out_signed[0] if out_signed else None)
        plan = self._plans.get(key)
        if plan is None:
            views = {name: describe(a) for name, a in arrays.items()}
            plan = self._plan(views, describe(out) if out is not None else None)
            if len(self._plans) >= MAX_PLANS:
                self._plans.clear()
            self._plans[key] = plan
        if out is None:
            out = empty(plan.library, plan.out_shape, g.c, max(plan.device, 0))
            out_pointer = address(out, plan.library)
        else:
            assert out_signed is not None
            out_pointer = out_signed[1]
        if plan.choice is None and plan.empty:  # M, N or the batch is 0: nothing runs
            return given if given is not None else out
        if plan.choice is None:  # K = 0: the epilogue of a zero sum, by the arrays' library
            biases = {name: arrays[name] for name in self._extra_names}
            write_empty_sums(self.kernels[0], out, biases, scalars or {}, plan.library)
        else:
            values = plan.choice.sizes if scalars is None else {**plan.choice.sizes, **scalars}
            if plan.on_gpu:
                pointers = dict(zip(arrays, (pointer for _, pointer in signed), strict=True))
                pointers[g.c.name] = out_pointer
                run_on_gpu(self, plan, pointers, values)
            else:
                _run_in_interpreter(plan.choice, arrays, out, plan.size, plan.batch, values)
        if given is not None and out is not given:  # copy=True made a copy of `out`
            _write_back(given, out)
            return given
        return out

    def _one_epilogue(self, why: str) -> None:
        """ArgumentError when the callable's kernels differ in their epilogue, which a
        call that runs none of them (`why`) would have to choose among."""
        kinds = {Epilogue.of(k.schedule, k.gemm) for k in self.kernels}
        if len(kinds) > 1:
            names = ", ".join(k.name for k in self.kernels)
            raise ArgumentError(
                f"{why}: C is what the epilogue makes of zero sums, and {self.compiled.file}'s "
                f"kernels have different epilogues: load one with kernel=NAME ({names})"
            )

    def _scalars(self, extras: dict) -> dict[str, float]:
        """The call's values of the epilogue's runtime alpha and beta (taken out of
        `extras`; alpha 1 and beta 0 when not given), checked as the directive's numbers."""
        from ..frontend.directives import F32_TINY, f32_problem
        from ..ir.epilogue import CALL_DEFAULTS

        values = {}
        for name in self._runtime:
            value = extras.pop(name, CALL_DEFAULTS[name])
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise ArgumentError(f"{name} must be a number, got {value!r}") from None
            problem = f32_problem(value)
            if problem == "not finite":
                raise ArgumentError(f"{name} = {value!r} is not a finite f32 number")
            if problem == "subnormal":
                raise ArgumentError(
                    f"{name} = {value!r} is below f32's smallest normal number "
                    f"({F32_TINY:.7g}), which the GPU flushes to zero: pass 0 or a larger value"
                )
            values[name] = value
        return values

    def _operands(self, args: tuple, extras: dict) -> dict:
        """The call's operands by name (A, B, then the epilogue's vectors), or ArgumentError
        when the call does not name them as the file declares them."""
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
        scalars = [word for word in ("alpha", "beta") if word in unknown]
        if scalars:
            raise ArgumentError(
                f"{self.kernels[0].name} takes no {scalars[0]} at run time: its epilogue's "
                f"alpha and beta are constants of the schedule; write `epilogue {scalars[0]} "
                "runtime` in the file to pass it at each call"
            )
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
        return {g.a.name: args[0], g.b.name: args[1], **extras}

    def _plan(self, views: dict[str, ArrayView], out_view: ArrayView | None) -> Plan:
        """Every check of the arrays against the declarations, and the kernel their size
        takes; ArgumentError naming the operand when they do not fit."""
        g = self.gemm
        every = {**views, **({g.c.name: out_view} if out_view is not None else {})}
        for name, v in every.items():
            if v.library == "torch" and not v.on_gpu:
                raise ArgumentError(
                    f"{name} is a torch tensor on the CPU: the kernel runs on the GPU (move "
                    "it with .cuda()), or pass numpy arrays to run it in the interpreter"
                )
        if len({v.on_gpu for v in every.values()}) > 1:
            where = ", ".join(
                f"{name} on the {'GPU' if v.on_gpu else 'CPU'}" for name, v in every.items()
            )
            raise ArgumentError(f"the operands must all be on the GPU or all on the CPU: {where}")
        devices = {v.device for v in every.values()}
        if devices != {-1}:
            import cupy

            current = int(cupy.cuda.Device().id)  # where CuPy, which launches, launches
            if devices != {current}:
                where = ", ".join(f"{name} on GPU {v.device}" for name, v in every.items())
                raise ArgumentError(
                    f"the operands must be on the GPU the kernel launches on, CuPy's current "
                    f"device ({current}): {where} (call under cupy.cuda.Device(i))"
                )
        dims = bind(g, views, out_view)
        m, n, k = (_value(e, dims) for e in (g.m, g.n, g.k))
        batch = _value(g.batch, dims) if g.batch is not None else 1
        shape = declared_shape(g.c, dims)
        assert shape is not None  # every name of C is one of A's or B's
        first = views[g.a.name]
        if 0 in (m, n, batch):  # as torch's and cuBLAS's: an empty C, no launch
            return Plan(None, shape, (m, n, k), batch, first.library, first.device)
        if k == 0:  # no launch either: the epilogue of zero sums (tiledsl.api.empty_sums)
            self._one_epilogue(f"{g.k} = 0")
            return Plan(None, shape, (m, n, k), batch, first.library, first.device)
        arch = None
        if first.on_gpu:
            from ..gpu.runtime import device_arch

            arch = device_arch()
        choice = self.choose(m, n, k, batch, arch)
        if choice.far:  # once per shape: the plan is kept for the arrays' signature
            warnings.warn(
                f"{self.compiled.file}: {m}x{n}x{k} takes {choice.why}",
                TileWarning,
                stacklevel=3,  # the caller's line: __call__, then _plan
            )
        return Plan(choice, shape, (m, n, k), batch, first.library, first.device)


@dataclass(frozen=True)
class Plan:
    """What a call on arrays of one signature runs: the kernel, C's shape, the size."""

    choice: Choice | None  # None: nothing runs (C is empty, or K = 0: empty sums)
    out_shape: tuple[int, ...]
    size: tuple[int, int, int]
    batch: int
    library: str  # of the operands: "numpy", "cupy" or "torch"
    device: int  # the GPU's ordinal (-1: the CPU, the interpreter)

    @property
    def on_gpu(self) -> bool:
        return self.device >= 0

    @property
    def empty(self) -> bool:
        """Whether C has no element (M, N or the batch 0)."""
        m, n, _ = self.size
        return 0 in (m, n, self.batch)


def _value(e, dims: dict[str, int]) -> int:
    """A declared dimension's value: a literal, or the size the arrays gave its name."""
    return e.value if isinstance(e, Const) else dims[e.name]


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


def _write_back(given, result) -> None:
    """`result` into the caller's `out` (copy=True computed into a conformed copy of it)."""
    if describe(given).library == "torch":
        given.copy_(result)
    else:
        given[...] = result


def _run_in_interpreter(choice: Choice, arrays: dict, out, size, batch: int, values) -> None:
    from ..interp.interpreter import interpret
    from ..limits import interpreter_problem

    kernel = choice.kernel
    problem = interpreter_problem(kernel.schedule.block, kernel.gemm.oriented(size), batch)
    if problem:
        raise ArgumentError(f"{kernel.name} in the numpy interpreter: {problem}")
    g = kernel.gemm.as_written
    storage = {name: _storage(a, g.operand(name)) for name, a in arrays.items()}
    storage[g.c.name] = _storage(out, g.c)
    interpret(kernel, storage, values)
    values = decode(storage[g.c.name], g.c.dtype)
    c = g.c.declared
    order = "C" if c.layout == "row" else "F"
    if c.batch is not None and c.layout == "col":
        rows, cols = out.shape[-2:]
        matrices = values.reshape(out.shape[0], -1)
        out[...] = np.stack([m.reshape((rows, cols), order="F") for m in matrices])
    else:
        out[...] = values.reshape(out.shape, order=order)
