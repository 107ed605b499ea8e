"""Meaning for a parsed kernel: the GEMM it computes and its resolved schedule.

`analyze(kernel)` reads the operand declarations, the computation line and the
directives of one `syntax.Kernel`, fills in the spec's defaults, and checks every
value — ranges, divisibility, the target's fragment shapes and limits — collecting
all problems of the file into one `TileError`. What the compiler cannot build yet
is refused afterwards by `tiledsl.support`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import syntax as S
from .errors import Collector, Loc
from .expr import Const, Expr, Var
from .targets import DEFAULT_TARGET, TARGETS, Target, parse_target_name

DTYPES = ("f16", "bf16", "f32")
LAYOUTS = ("row", "col")


@dataclass(frozen=True)
class OperandInfo:
    """A declared operand: element (r, c) of a row-major [R, C] operand is at r * C + c."""

    name: str
    dtype: str
    dims: tuple[Expr, ...]
    layout: str
    loc: Loc = field(compare=False, repr=False)

    @property
    def leading_dim(self) -> Expr:
        return self.dims[-1] if self.layout == "row" else self.dims[-2]

    def offset(self, row: Expr, col: Expr) -> Expr:
        if self.layout == "row":
            return row * self.leading_dim + col
        return col * self.leading_dim + row

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(map(str, self.dims))}] {self.layout}"


@dataclass(frozen=True)
class Gemm:
    """C (=|+=) A @ B with A: M x K, B: K x N, C: M x N."""

    a: OperandInfo
    b: OperandInfo
    c: OperandInfo
    m: Expr
    n: Expr
    k: Expr
    accumulate: bool  # '+=': C is read and added to
    text: str  # the computation line as written

    @property
    def size_args(self) -> tuple[str, ...]:
        """The run-time size parameters, in M, N, K order (literal dims are baked in)."""
        return tuple(e.name for e in (self.m, self.n, self.k) if isinstance(e, Var))

    def operand(self, name: str) -> OperandInfo:
        return {o.name: o for o in (self.a, self.b, self.c)}[name]


@dataclass(frozen=True)
class Schedule:
    block: tuple[int, int, int] = (0, 0, 0)
    mma: tuple[int, int, int] = (16, 16, 16)
    coarsen: tuple[int, int] = (1, 1)
    stages: int = 2
    copy_mode: str = "async"
    copy_bytes: int = 16
    pad: str = "auto"  # "auto", "none" or "explicit"
    pad_a: int = 0
    pad_b: int = 0
    swizzle: str = "grouped"
    swizzle_param: int = 8
    sync: str = "minimal"
    load_order: str = "ab"
    accumulate: str = "f32"
    epilogue: tuple[tuple[str, ...], ...] = ()
    epilogue_via: str = "direct"
    target: str = DEFAULT_TARGET
    attributes: tuple[str, ...] = ()
    written: frozenset[str] = frozenset()
    locs: tuple[tuple[str, Loc], ...] = field(default=(), compare=False, repr=False)
    kernel_loc: Loc = field(default=Loc("<string>", 1, 1), compare=False, repr=False)

    def loc(self, directive: str) -> Loc:
        """Where a directive was written, or the kernel's name where its default applies."""
        return dict(self.locs).get(directive, self.kernel_loc)

    @property
    def warps(self) -> tuple[int, int]:
        bm, bn, _ = self.block
        m, n, _ = self.mma
        cm, cn = self.coarsen
        return bm // (m * cm), bn // (n * cn)


@dataclass(frozen=True)
class Analysis:
    name: str
    gemm: Gemm
    schedule: Schedule
    target: Target


def analyze(kernel: S.Kernel, target_override: str | None = None) -> Analysis:
    """Resolve and check one kernel; raises TileError listing every problem found."""
    errs = Collector()
    sched, pads = _resolve_directives(kernel, target_override, errs)
    target = TARGETS.get(sched.target, TARGETS[DEFAULT_TARGET])
    gemm = _resolve_gemm(kernel, errs)
    if gemm is not None:
        sched = _resolve_operand_defaults(sched, gemm, pads, errs)
        _check_types(gemm, sched, target, errs)
    _check_shapes(sched, target, gemm, errs)
    errs.raise_if_any()
    assert gemm is not None
    return Analysis(kernel.name, gemm, sched, target)


# ---------------------------------------------------------------- directives


def _resolve_directives(
    kernel: S.Kernel, target_override: str | None, errs: Collector
) -> tuple[Schedule, dict]:
    seen: dict[str, S.Directive] = {}
    values: dict = {}
    for d in kernel.directives:
        if d.name in seen:
            first = seen[d.name].loc
            errs.add(d.loc, f"directive '{d.name}' given twice in kernel '{kernel.name}'",
                     f"the first '{d.name}' is at line {first.line}; keep one")
            continue
        seen[d.name] = d
        for arg in d.args:
            if isinstance(arg, S.TuningSet):
                errs.add(arg.loc, "a tuning set {…} makes this file a tuning space, "
                         "which compile and run cannot take",
                         "`tiledsl tune` (not built yet) will search it; for now write one value, "
                         f"e.g. {arg.options[0]}")
        reader = _READERS.get(d.name)
        if reader is not None:
            values.update(reader(d, errs))
    pads = values.pop("_pads", {})
    stages = values.get("stages", 2)
    defaults = {"copy_mode": "async" if stages >= 2 else "sync"}
    if target_override is not None:
        values["target"] = target_override
    written = frozenset(seen)
    locs = tuple((name, d.loc) for name, d in seen.items())
    if "block" not in seen:
        errs.add(kernel.loc, f"kernel '{kernel.name}' has no 'block' directive",
                 "every kernel needs its block tile, e.g. `block 128 x 128 x 32`")
    sched = Schedule(**{**defaults, **values}, written=written, locs=locs, kernel_loc=kernel.loc)
    return sched, pads


def _ints(d: S.Directive, count: int, errs: Collector, minimum: int = 1) -> tuple[int, ...] | None:
    nums = [a for a in d.args if isinstance(a, S.Num)]
    if len(nums) != count or any(isinstance(a, S.TuningSet) for a in d.args):
        return None
    out = []
    for num in nums:
        if isinstance(num.value, float) or num.value < minimum:
            errs.add(num.loc, f"'{d.name}' takes integers ≥ {minimum}, found {num.text}",
                     _HINTS.get(d.name, ""))
            return None
        out.append(num.value)
    return tuple(out)


def _word(d: S.Directive, index: int = 0) -> str:
    words = [a.text for a in d.args if isinstance(a, S.Word)]
    return words[index] if index < len(words) else ""


def _read_block(d, errs):
    v = _ints(d, 3, errs)
    return {"block": v} if v else {}


def _read_mma(d, errs):
    v = _ints(d, 3, errs)
    return {"mma": v} if v else {}


def _read_coarsen(d, errs):
    v = _ints(d, 2, errs)
    return {"coarsen": v} if v else {}


def _read_stages(d, errs):
    v = _ints(d, 1, errs, minimum=0)
    return {"stages": v[0]} if v else {}


def _read_copy(d, errs):
    mode = _word(d)
    v = _ints(d, 1, errs)
    if v is None:
        return {"copy_mode": mode}
    if v[0] not in (4, 8, 16):
        errs.add(d.args[-1].loc, f"copy vector width must be 4, 8 or 16 bytes, found {v[0]}",
                 "16-byte vectors are the fastest: `copy sync 16`")
        return {"copy_mode": mode}
    return {"copy_mode": mode, "copy_bytes": v[0]}


def _read_pad(d, errs):
    first = _word(d)
    if first in ("auto", "none") and len(d.args) == 1:
        return {"pad": first}
    pads = {}
    for group in d.groups:
        name, num = group[0], group[-1]
        if not isinstance(num, S.Num) or isinstance(num.value, float) or num.value < 0:
            errs.add(num.loc, f"a pad is a whole number of elements ≥ 0, found {num}",
                     "e.g. `pad A 8, B 8`")
            continue
        pads[str(name)] = (num.value, name.loc)
    return {"pad": "explicit", "_pads": pads}


def _read_swizzle(d, errs):
    kind = _word(d)
    if kind == "none":
        return {"swizzle": "none", "swizzle_param": 0}
    v = _ints(d, 1, errs)
    return {"swizzle": kind, "swizzle_param": v[0]} if v else {"swizzle": kind}


def _read_epilogue(d, errs):
    return {"epilogue": tuple(tuple(str(a) for a in g) for g in d.groups)}


def _read_target(d, errs):
    text = " ".join(str(a) for a in d.args)
    key = parse_target_name(text)
    if key is None:
        errs.add(d.loc, f"unknown target '{text}'",
                 "targets are: " + ", ".join(TARGETS) + (", musa mp_31 (not modelled yet)"))
        return {}
    return {"target": key}


def _simple(attr: str):
    return lambda d, errs: {attr: _word(d)}


_READERS = {
    "block": _read_block,
    "mma": _read_mma,
    "coarsen": _read_coarsen,
    "stages": _read_stages,
    "copy": _read_copy,
    "pad": _read_pad,
    "swizzle": _read_swizzle,
    "sync": _simple("sync"),
    "load_order": _simple("load_order"),
    "accumulate": _simple("accumulate"),
    "epilogue": _read_epilogue,
    "epilogue_via": _simple("epilogue_via"),
    "target": _read_target,
    "attributes": lambda d, errs: {"attributes": tuple(str(a) for a in d.args)},
}

_HINTS = {
    "block": "a block tile is written BM x BN x BK, e.g. 128 x 128 x 32",
    "mma": "a fragment shape is written M x N x K, e.g. 16 x 16 x 16",
    "coarsen": "warp coarsening is written CM x CN, e.g. 2 x 2",
    "stages": "stages is 0 (no shared memory), 1 (one tile), or ≥ 2 (a pipeline)",
    "swizzle": "e.g. `swizzle grouped 8`, `swizzle zigzag 2` or `swizzle none`",
}


# ---------------------------------------------------------------- the GEMM


def _resolve_gemm(kernel: S.Kernel, errs: Collector) -> Gemm | None:
    operands: dict[str, OperandInfo] = {}
    for op in kernel.operands:
        if op.name in operands:
            errs.add(op.loc, f"operand '{op.name}' declared twice", "give each operand one declaration")
            continue
        if op.dtype.text not in DTYPES:
            errs.add(op.dtype.loc, f"unknown element type '{op.dtype}'",
                     "element types are " + ", ".join(DTYPES))
        if op.layout.text not in LAYOUTS:
            errs.add(op.layout.loc, f"unknown layout '{op.layout}'",
                     "a layout is `row` (row-major) or `col` (column-major)")
        dims: list[Expr] = []
        for dim in op.dims:
            if isinstance(dim, S.Num):
                if isinstance(dim.value, float) or dim.value < 1:
                    errs.add(dim.loc, f"a dimension is a name or an integer ≥ 1, found {dim.text}",
                             "e.g. `A: f16[M, K] row` or `A: f16[4096, 4096] row`")
                    dims.append(Const(1))
                else:
                    dims.append(Const(int(dim.value)))
            else:
                dims.append(Var(dim.text))
        operands[op.name] = OperandInfo(op.name, op.dtype.text, tuple(dims), op.layout.text, op.loc)

    if not kernel.computations:
        errs.add(kernel.loc, f"kernel '{kernel.name}' has no computation line",
                 "write the product it computes, e.g. `C[m, n] += A[m, k] * B[k, n]`")
        return None
    if len(kernel.computations) > 1:
        extra = kernel.computations[1]
        errs.add(extra.loc, "a kernel computes one product; this is a second computation line",
                 "put each product in a kernel of its own")
    comp = kernel.computations[0]
    accesses = (comp.out, comp.lhs, comp.rhs)
    missing = [acc for acc in accesses if acc.name not in operands]
    for acc in missing:
        errs.add(acc.loc, f"'{acc.name}' is not a declared operand",
                 f"declare it before use, e.g. `{acc.name}: f16[M, K] row`")
    if missing:
        return None
    for acc in accesses:
        decl = operands[acc.name]
        if len(acc.indices) != len(decl.dims):
            errs.add(acc.loc, f"'{acc.name}' has {len(decl.dims)} dimensions but is indexed "
                     f"with {len(acc.indices)}", f"index it as {acc.name}[{', '.join('ij'[:len(decl.dims)])}…]")
            return None
    if any(len(acc.indices) != 2 for acc in accesses):
        errs.add(comp.loc, "only 2-D operands are built so far",
                 "batched operands (a leading batch dimension) come with any-shape support")
        return None
    out_i, out_j = (w.text for w in comp.out.indices)
    lhs, rhs = [tuple(w.text for w in acc.indices) for acc in (comp.lhs, comp.rhs)]
    reduction = set(lhs) & set(rhs)
    if len(reduction) != 1 or out_i not in lhs or out_j not in rhs or out_i == out_j:
        errs.add(comp.loc, "the computation is not a matrix product",
                 "write C[m, n] = A[m, k] * B[k, n]: the first factor shares C's first index, "
                 "the second shares C's second, and one index (k) is summed over")
        return None
    (k_idx,) = reduction
    if k_idx in (out_i, out_j) or lhs.count(k_idx) != 1 or rhs.count(k_idx) != 1:
        errs.add(comp.loc, f"the summed index '{k_idx}' must not index C",
                 "the index summed over appears in both factors and not in C")
        return None
    c, a, b = (operands[acc.name] for acc in accesses)
    # Bind each index letter to the dims it indexes; they must agree.
    bound: dict[str, tuple[Expr, S.Access]] = {}
    for acc, decl in ((comp.out, c), (comp.lhs, a), (comp.rhs, b)):
        for letter, dim in zip((w.text for w in acc.indices), decl.dims):
            if letter in bound and bound[letter][0] != dim:
                other = bound[letter][1]
                errs.add(acc.loc, f"index '{letter}' runs over {dim} in {acc.name} but over "
                         f"{bound[letter][0]} in {other.name}: the shapes do not agree",
                         "declare both operands with the same size along that index")
                return None
            bound.setdefault(letter, (dim, acc))
    # Transposed access (A[k, m]) is legal and means a transposed operand; the
    # storage layout as seen by the product is derived by support.py.
    text = f"{_access(comp.out)} {comp.op} {_access(comp.lhs)} * {_access(comp.rhs)}"
    return Gemm(
        a=_oriented(a, lhs, (out_i, k_idx)),
        b=_oriented(b, rhs, (k_idx, out_j)),
        c=_oriented(c, (out_i, out_j), (out_i, out_j)),
        m=bound[out_i][0],
        n=bound[out_j][0],
        k=bound[k_idx][0],
        accumulate=comp.op == "+=",
        text=text,
    )


def _oriented(op: OperandInfo, written: tuple[str, ...], wanted: tuple[str, str]) -> OperandInfo:
    """The operand as the product sees it: A[k, m] on a row-major [K, M] is a col-major M x K."""
    if written == wanted:
        return op
    flipped = "col" if op.layout == "row" else "row"
    return OperandInfo(op.name, op.dtype, tuple(reversed(op.dims)), flipped, op.loc)


def _access(acc: S.Access) -> str:
    return f"{acc.name}[{', '.join(w.text for w in acc.indices)}]"


def _resolve_operand_defaults(sched: Schedule, gemm: Gemm, pads: dict, errs: Collector) -> Schedule:
    from dataclasses import replace

    updates: dict = {}
    if "epilogue_via" not in sched.written:
        updates["epilogue_via"] = "direct" if gemm.c.dtype == "f32" else "shared"
    for name, (value, loc) in pads.items():
        if name == gemm.a.name:
            updates["pad_a"] = value
        elif name == gemm.b.name:
            updates["pad_b"] = value
        else:
            errs.add(loc, f"'{name}' is not an input operand; pad applies to "
                     f"{gemm.a.name} and {gemm.b.name}", f"e.g. `pad {gemm.a.name} 8, {gemm.b.name} 8`")
    return replace(sched, **updates)


# ---------------------------------------------------------------- checks


def _check_types(gemm: Gemm, sched: Schedule, target: Target, errs: Collector) -> None:
    for op in (gemm.a, gemm.b):
        if op.dtype not in target.mma_shapes:
            errs.add(op.loc, f"{target.name} tensor cores take no {op.dtype} inputs",
                     "inputs may be " + " or ".join(target.mma_shapes))
    if gemm.a.dtype != gemm.b.dtype:
        errs.add(gemm.b.loc, f"A and B must have one element type; found {gemm.a.dtype} and "
                 f"{gemm.b.dtype}", "declare both f16 (or both bf16)")
    if sched.accumulate not in ("f32", "f16"):
        errs.add(sched.loc("accumulate"), f"cannot accumulate in '{sched.accumulate}'",
                 "write `accumulate f32` (default) or `accumulate f16`")


def _check_shapes(sched: Schedule, target: Target, gemm: Gemm | None, errs: Collector) -> None:
    if sched.block == (0, 0, 0):
        return
    bm, bn, bk = sched.block
    m, n, k = sched.mma
    cm, cn = sched.coarsen
    dtype = gemm.a.dtype if gemm is not None else "f16"
    shapes = target.mma_shapes.get(dtype, ())
    if sched.mma not in shapes:
        errs.add(sched.loc("mma"), f"{target.name} has no {m} x {n} x {k} {dtype} fragment",
                 "fragment shapes here: " + ", ".join(" x ".join(map(str, s)) for s in shapes))
        return
    ok = True
    for what, size, unit, expl in (("BM", bm, m * cm, f"mma.M × CM = {m} × {cm}"),
                                   ("BN", bn, n * cn, f"mma.N × CN = {n} × {cn}"),
                                   ("BK", bk, k, f"mma.K = {k}")):
        if size % unit:
            ok = False
            errs.add(sched.loc("block"), f"{what} = {size} is not divisible by {expl} = {unit}",
                     f"make {what} a multiple of {unit}, e.g. {max(unit, size - size % unit)}")
    if not ok:
        return
    warps_m, warps_n = sched.warps
    threads = warps_m * warps_n * target.warp_width
    if threads > target.max_threads_per_block:
        errs.add(sched.loc("block"), f"{warps_m} x {warps_n} warps of {target.warp_width} threads = "
                 f"{threads} threads per block; {target.name} allows {target.max_threads_per_block}",
                 "use a smaller block tile, or coarsen warps (`coarsen 2 x 2`)")
    if gemm is not None and sched.stages >= 1:
        _check_copy_width(sched, gemm, errs)
    if gemm is not None:
        for dim, size, what in ((gemm.m, bm, "M"), (gemm.n, bn, "N"), (gemm.k, bk, "K")):
            if isinstance(dim, Const) and dim.value % size:
                errs.add(gemm.c.loc if what != "K" else gemm.a.loc,
                         f"{what} = {dim.value} is not a multiple of the block tile ({size})",
                         "edge tiles come with any-shape support; for now pick a multiple")


def _check_copy_width(sched: Schedule, gemm: Gemm, errs: Collector) -> None:
    """Each copied tile row must split into whole vectors, and each vector stay aligned."""
    bm, bn, bk = sched.block
    width = sched.copy_bytes
    for op, row_elems in ((gemm.a, bk), (gemm.b, bn)):
        size = _BYTES[op.dtype]
        if (row_elems * size) % width:
            errs.add(sched.loc("copy"), f"a {width}-byte copy vector does not divide a "
                     f"{row_elems}-element row of {op.name}'s block tile ({row_elems * size} bytes)",
                     f"use `copy {sched.copy_mode} {_largest_divisor(row_elems * size)}` or a wider tile")
        ld = op.leading_dim
        if isinstance(ld, Const) and (ld.value * size) % width:
            errs.add(op.loc, f"rows of {op.name} are {ld.value * size} bytes apart, so "
                     f"{width}-byte copies would be misaligned",
                     f"use `copy {sched.copy_mode} {_largest_divisor(ld.value * size)}`")


_BYTES = {"f16": 2, "bf16": 2, "f32": 4}


def _largest_divisor(nbytes: int) -> int:
    return next(w for w in (16, 8, 4, 2) if nbytes % w == 0)
