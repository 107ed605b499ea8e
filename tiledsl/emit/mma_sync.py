"""The mma.sync fragment lowering (`mma m16n8k16`): same IR, registers in PTX's layout.

WMMA hides where each lane's elements sit; mma.sync does not, which is what makes it
usable with a swizzled tile (`pad xor`): ldmatrix takes one row address per lane, so
each lane can point at its row's swizzled chunk, where load_matrix_sync only takes a
base pointer and a stride.

Per warp, one m16n8k16 step (PTX ISA, "Matrix fragments for mma.m16n8k16"), with
g = lane / 4 and t = 2 * (lane % 4) (the emitted code's `g` and `t`):

    A 16x16: 4 registers of 2 halves: (g, t..t+1), (g+8, ..), (g, t+8..t+9), (g+8, t+8..)
    B 16x8:  2 registers of 2 halves: (k = t..t+1, n = g), (k = t+8..t+9, n = g)
    C 16x8:  4 floats (g, t), (g, t+1), (g+8, t), (g+8, t+1); f16: 2 registers, 2 halves

ldmatrix.x4 loads four 8x8 matrices, one 16-byte row per lane address (lanes 0-7 the
first matrix, 8-15 the second, ...); `.trans` hands each lane the transposed elements,
which is how an N-contiguous tile of B (or an M-contiguous tile of A) reaches the
layout above. The four lowerings below are the four (operand, tile layout) pairs.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir.dtypes import DTYPES
from ..ir.expr import Const, Var, evaluate, substitute, variables
from ..ir.nodes import Fill, For, FragRef, KernelIR, LoadFrag, Mma, SharedTile, StoreFrag
from ..ir.paths import MMA_SYNC
from .lowering import PathLowering

#: (role, tile storage layout) -> (ldmatrix helper, lane's row in the tile, its column)
LDMATRIX = {
    ("matrix_a", "row"): ("ldmatrix_x4", "lane % 16", "lane / 16 * 8"),
    ("matrix_a", "col"): ("ldmatrix_x4_trans", "lane / 8 % 2 * 8", "lane % 8 + lane / 16 * 8"),
    ("matrix_b", "row"): ("ldmatrix_x2_trans", "lane % 16", "0"),
    ("matrix_b", "col"): ("ldmatrix_x2", "lane / 8 % 2 * 8", "lane % 8"),
}

_LDMATRIX_HELPERS = """\
// mma.sync path (mma m16n8k16): ldmatrix moves 8x8 matrices of 16-bit elements from
// shared memory into registers in mma's layout, one 16-byte row address per lane.
__device__ __forceinline__ unsigned smem_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_address(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_address(p)));
}
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[2], unsigned (&q)[2], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(q[0]), "=r"(q[1]) : "r"(smem_address(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[2], unsigned (&q)[2],
                                                  const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(q[0]), "=r"(q[1]) : "r"(smem_address(p)));
}
__device__ __forceinline__ void ldmatrix_x2(unsigned (&r)[2], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(smem_address(p)));
}
__device__ __forceinline__ void ldmatrix_x2_trans(unsigned (&r)[2], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(smem_address(p)));
}"""


def mma_helper(inputs: str, acc: str) -> str:
    """One m16n8k16 instruction: d += a * b, inputs f16 or bf16, accumulators f32 or f16."""
    name = helper_name(inputs, acc)
    ptx = f"mma.sync.aligned.m16n8k16.row.col.{DTYPES[acc].ptx}.{inputs}.{inputs}.{DTYPES[acc].ptx}"
    if acc == "f32":
        return f"""__device__ __forceinline__ void {name}(float (&d)[4], const unsigned (&a)[4],
                                               const unsigned (&b)[2]) {{
    asm("{ptx} "
        "{{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};\\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}}"""
    return f"""__device__ __forceinline__ void {name}(unsigned (&d)[2], const unsigned (&a)[4],
                                               const unsigned (&b)[2]) {{
    asm("{ptx} "
        "{{%0, %1}}, {{%2, %3, %4, %5}}, {{%6, %7}}, {{%0, %1}};\\n"
        : "+r"(d[0]), "+r"(d[1])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}}"""


def helper_name(inputs: str, acc: str) -> str:
    return f"mma_m16n8k16_{inputs}_{acc}"


class MmaSyncLowering(PathLowering):
    path = MMA_SYNC

    def helpers(self, kernels: tuple[KernelIR, ...]) -> list[str]:
        """ldmatrix, and one mma helper per (inputs, accumulator) pair of `kernels`."""
        if not kernels:
            return []
        out = [_LDMATRIX_HELPERS, ""]
        for inputs, acc in sorted({(k.gemm.a.dtype, k.schedule.accumulate) for k in kernels}):
            out += [
                f"// mma m16n8k16, {inputs} inputs, {acc} accumulators",
                mma_helper(inputs, acc),
            ]
        return [*out, ""]

    def mma_note(self, k: KernelIR) -> str:
        return (
            "one mma.sync instruction per fragment; ldmatrix loads A and B "
            "(registers in PTX's layout: see the helpers above)"
        )

    def declarations(self, emitter, k: KernelIR) -> list[str]:
        return declarations(k)

    def loop(self, emitter, k: KernelIR, s) -> list[str] | None:
        return paired_loop(emitter, k, s)

    def statement(self, emitter, k: KernelIR, s) -> list[str] | None:
        return statement(emitter, k, s)


def declarations(k: KernelIR) -> list[str]:
    """Fragment arrays as registers: `unsigned a[CM][1][4]` and so on."""
    out = []
    for f in k.fragments:
        i, j = f.count
        if f.role == "accumulator":
            if f.dtype == "f32":
                out.append(
                    f"float {f.name}[{i}][{j}][4];  // accumulators: (g, t..t+1), (g+8, t..t+1)"
                )
            else:
                out.append(
                    f"unsigned {f.name}[{i}][{j}][2];  // f16 accumulators, 2 per register: "
                    "rows g, g+8"
                )
        else:
            regs = 4 if f.role == "matrix_a" else 2
            what = "16x16 A" if f.role == "matrix_a" else "16x8 B"
            out.append(
                f"unsigned {f.name}[{i}][{j}][{regs}];  // {what} fragments: {regs} registers "
                f"of 2 {f.dtype} elements per lane"
            )
    out.append("const int g = lane / 4, t = lane % 4 * 2;  // a lane's row and column pair in C")
    return out


def statement(emitter, k: KernelIR, s) -> list[str] | None:
    """The mma.sync spelling of a fragment statement, or None for anything else."""
    match s:
        case Fill():
            return _fill(k, s)
        case LoadFrag():
            frag = k.fragment(s.frag.name)
            if frag.role == "accumulator":
                return _accumulator_elements(emitter, k, s.src, s.frag, load=True)
            if not isinstance(s.src, SharedTile):
                return _elementwise_load(emitter, k, s)
            layout = k.buffer(s.src.buffer).layout
            helper, row, col = LDMATRIX[(frag.role, layout)]
            where = emitter.element(k, s.src, row, col)
            return [f"{helper}({s.frag}, &{where});"]
        case Mma():
            name = helper_name(k.gemm.a.dtype, k.fragment(s.acc.name).dtype)
            return [f"{name}({s.acc}, {s.a}, {s.b});"]
        case StoreFrag():
            return _accumulator_elements(emitter, k, s.dst, s.frag, load=False)
    return None


#: B fragments two at a time (fragments j and j + 1, side by side along N): one
#: ldmatrix.x4 instead of two .x2, lanes 16-31 pointing at the second fragment.
PAIRED_B = {
    "row": ("ldmatrix_x4_trans", "lane % 16", "lane / 16 * 8"),
    "col": ("ldmatrix_x4", "lane / 8 % 2 * 8", "lane % 8 + lane / 16 * 8"),
}


def paired_loop(emitter, k: KernelIR, loop: For) -> list[str] | None:
    """`for j: load b[..][j]` over an even count of adjacent B fragments, as x4 loads of
    pairs; None where the loop is anything else (then it is emitted as written)."""
    if not (loop.unroll and len(loop.body) == 1 and isinstance(loop.body[0], LoadFrag)):
        return None
    load = loop.body[0]
    if not isinstance(load.src, SharedTile) or k.fragment(load.frag.name).role != "matrix_b":
        return None
    count = 0
    if isinstance(loop.stop, Const):
        assert isinstance(loop.start, Const)  # fragment loops start at Const(0)
        count = loop.stop.value - loop.start.value
    j = Var(loop.var)
    # Fragment j + 1 must sit MMA_N columns after fragment j, and in the next registers.
    if count % 2 or loop.step != 1 or load.frag.i != substitute(load.frag.i, {loop.var: j + 1}):
        return None
    if not _steps_by(load.src.offset[1], loop.var, k.schedule.mma[1]):
        return None
    if not _steps_by(load.frag.j, loop.var, 1) or load.src.offset[0] != substitute(
        load.src.offset[0], {loop.var: j + 1}
    ):
        return None
    helper, row, lane_col = PAIRED_B[k.buffer(load.src.buffer).layout]
    second = replace(load.frag, j=substitute(load.frag.j, {loop.var: j + 1}))
    where = emitter.element(k, load.src, row, lane_col)
    return [
        "// B fragments j and j + 1 in one ldmatrix.x4 (lanes 16-31 address fragment j + 1)",
        "#pragma unroll",
        f"for (int {loop.var} = {emitter.expr(loop.start)}; "
        f"{loop.var} < {emitter.expr(loop.stop)}; "
        f"{loop.var} += 2) {{",
        f"    {helper}({load.frag}, {second}, &{where});",
        "}",
    ]


def _steps_by(e, var: str, amount: int) -> bool:
    """Whether `e` grows by exactly `amount` when `var` grows by 1, whatever the other
    variables are (checked on a spread of values: index expressions are affine in an
    unrolled loop's variable, or else this says no)."""
    names = sorted(variables(e) - {var})
    bumped = substitute(e, {var: Var(var) + 1})
    for seed in range(8):
        env = {name: (seed * 7 + 3 * n) % 5 for n, name in enumerate(names)}
        env[var] = seed % 4
        if evaluate(bumped, env) - evaluate(e, env) != amount:
            return False
    return True


#: (role) -> each register's two elements as (row, column) in the fragment's tile
_ELEMENTS = {
    "matrix_a": [("g", "t"), ("g + 8", "t"), ("g", "t + 8"), ("g + 8", "t + 8")],
    "matrix_b": [("t", "g"), ("t + 8", "g")],
}


def _elementwise_load(emitter, k: KernelIR, s: LoadFrag) -> list[str]:
    """A or B straight from global memory (only IR stopped before smem-tiling does this):
    each register packs two elements, the second one row (B) or column (A) after the first."""
    frag = k.fragment(s.frag.name)
    bits = "__half_as_ushort" if frag.dtype == "f16" else "__bfloat16_as_ushort"
    out = [
        f"// {s.frag} <- {emitter.tile_name(s.src)}, element by element (no ldmatrix from global)"
    ]
    for q, (row, col) in enumerate(_ELEMENTS[frag.role]):
        first = emitter.element(k, s.src, row, col)
        if frag.role == "matrix_a":
            second = emitter.element(k, s.src, row, f"{col} + 1")
        else:
            second = emitter.element(k, s.src, f"{row} + 1", col)
        out.append(
            f"{s.frag}[{q}] = static_cast<unsigned>({bits}({first})) | "
            f"static_cast<unsigned>({bits}({second})) << 16;"
        )
    return out


def _fill(k: KernelIR, s: Fill) -> list[str]:
    frag = k.fragment(s.frag.name)
    if frag.dtype == "f32":
        return [f"for (int q = 0; q < 4; ++q) {s.frag}[q] = {float(s.value)!r}f;"]
    # Two f16 values per register: the value's bits in both halves.
    pair = f"static_cast<unsigned>(__half_as_ushort(__float2half({float(s.value)!r}f))) * 0x10001u"
    return [f"for (int q = 0; q < 2; ++q) {s.frag}[q] = {pair};"]


def _accumulator_elements(emitter, k: KernelIR, tile, ref: FragRef, load: bool) -> list[str]:
    """An accumulator to or from a tile, lane by lane: element q of a lane is at row
    g + q / 2 * 8, column t + q % 2. Pairs along a row of a row-major tile move as one
    vector (a float2, or two halves as one 32-bit word); a column-major tile element by
    element. Registers are only read and written whole, so they stay registers."""
    acc_t, frag = k.fragment(ref.name).dtype, str(ref)
    layout = emitter.layout_of(k, tile)
    out = [
        f"// {frag} {'<-' if load else '->'} {emitter.tile_name(tile)}: each lane's elements "
        "at rows g, g + 8 and columns t, t + 1"
    ]
    if acc_t == "f32":
        pairs = [
            (row, "t", f"{frag}[{2 * h}]", f"{frag}[{2 * h + 1}]")
            for h, row in enumerate(("g", "g + 8"))
        ]
        return out + float_pairs(emitter, k, tile, pairs, load)
    for h, row in enumerate(("g", "g + 8")):
        first, second = emitter.element(k, tile, row, "t"), emitter.element(k, tile, row, "t + 1")
        reg = f"{frag}[{h}]"  # two halves: column t in the low 16 bits, t + 1 in the high
        if layout == "row" and load:
            out.append(f"{reg} = *reinterpret_cast<const unsigned*>(&{first});")
        elif layout == "row":
            out.append(f"*reinterpret_cast<unsigned*>(&{first}) = {reg};")
        elif load:
            out.append(
                f"{reg} = static_cast<unsigned>(__half_as_ushort({first})) | "
                f"static_cast<unsigned>(__half_as_ushort({second})) << 16;"
            )
        else:
            out += [
                f"{first} = __ushort_as_half(static_cast<unsigned short>({reg} & 0xffffu));",
                f"{second} = __ushort_as_half(static_cast<unsigned short>({reg} >> 16));",
            ]
    return out


def float_pairs(emitter, k: KernelIR, tile, pairs, load: bool) -> list[str]:
    """f32 accumulator registers to or from a tile, two at a time: each (row, col, lo, hi)
    holds the elements at (row, col) and (row, col + 1). Along a row of a row-major tile a
    pair moves as one float2; a column-major tile element by element. (mma.sync's lanes and
    wgmma's threads hold their accumulators this way.)"""
    row_major = emitter.layout_of(k, tile) == "row"
    out = []
    for row, col, lo, hi in pairs:
        first = emitter.element(k, tile, row, col)
        second = emitter.element(k, tile, row, f"{col} + 1")
        if row_major and load:
            out.append(
                f"{{ const float2 v = *reinterpret_cast<const float2*>(&{first}); "
                f"{lo} = v.x; {hi} = v.y; }}"
            )
        elif row_major:
            out.append(f"*reinterpret_cast<float2*>(&{first}) = make_float2({lo}, {hi});")
        elif load:
            out += [f"{lo} = {first};", f"{hi} = {second};"]
        else:
            out += [f"{first} = {lo};", f"{second} = {hi};"]
    return out
