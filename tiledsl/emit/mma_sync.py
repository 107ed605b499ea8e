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

**The direct path** (`stages 0`, K-contiguous A and B: tiledsl.frontend.direct): no
shared memory. A lane loads 16 bytes of each of its rows straight from global memory:
columns 4t .. 4t + 7 of a 32-column group of K, which are its elements of *two* k16
steps once K is permuted within the group the same way in A and B,

    step s (0, 1) of the group:  fragment columns t, t + 1   <- K columns 4t + 4s + 0, 1
                                 fragment columns t + 8, + 9  <- K columns 4t + 4s + 2, 3

so that each vector's words 2s and 2s + 1 are step s's registers (A's a0/a2 from row g's
vector, a1/a3 from row g + 8's; B's b0/b1 from token g's). The sum over the group is the
same sum, added in another order. The group's first step loads the vectors into
registers of their own (`a_vec`, `b_vec`), its second reads them again. A K step that lies
inside K with both operands on 16 bytes loads each vector at once, only its line tested
(`direct_vector_inside`), and so does the last step of a ragged K whose rows are whole
vectors (K a multiple of 8), each vector tested against K too; any other step vector by
vector, element by element where a vector reaches past K or is not on 16 bytes, zeros
outside (`direct_vector`): the kernel runs every size itself. C leaves from the
registers, rounded element by element.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir.dtypes import DTYPES
from ..ir.expr import Const, Var, evaluate, substitute, variables
from ..ir.nodes import (
    K_FRAGMENTS,
    Fill,
    For,
    FragRef,
    GlobalTile,
    KernelIR,
    LoadFrag,
    Mma,
    PartialAdd,
    PartialStore,
    SharedTile,
    StoreFrag,
    Ticket,
    walk,
)
from ..ir.paths import MMA_SYNC
from .lowering import PathLowering
from .partials import TICKET_HELPERS, partial_sum

#: The direct path's three forms of a K step's loads (`MmaSyncLowering._direct_step`): a step
#: inside K on 16 bytes (each vector one load, its line tested), the last step of a ragged K
#: of whole vectors (one load, its line and K tested), any other (element by element where
#: a vector reaches past K or is not on 16 bytes).
INSIDE, RAGGED, EDGE = "inside", "ragged", "edge"

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


DIRECT_VECTOR_HELPERS = """\
// mma.sync's direct path (stages 0): a lane's 8 consecutive K elements of one row of A (one
// column of B) from global memory as one 16-byte vector where it lies inside the operand and
// on 16 bytes; element by element where it reaches past K, zeros outside the operand.
__device__ __forceinline__ uint4 direct_vector(const unsigned short* p, bool inside, int at,
                                               int extent) {
    if (inside && at + 8 <= extent && (reinterpret_cast<unsigned long long>(p) & 15) == 0)
        return __ldg(reinterpret_cast<const uint4*>(p));
    unsigned e[8];
    #pragma unroll
    for (int i = 0; i < 8; ++i) e[i] = inside && at + i < extent ? p[i] : 0u;
    return make_uint4(e[0] | e[1] << 16, e[2] | e[3] << 16, e[4] | e[5] << 16, e[6] | e[7] << 16);
}
// the same inside a K step that lies inside K and on 16 bytes: only the line's test, a select
// rather than a branch, so that nvcc may issue a step's loads ahead of its mmas
__device__ __forceinline__ uint4 direct_vector_inside(const unsigned short* p, bool inside) {
    return inside ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0u, 0u, 0u, 0u);
}
// word i of a vector (i is a constant once the fragment steps are unrolled)
__device__ __forceinline__ unsigned direct_word(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}"""


class MmaSyncLowering(PathLowering):
    path = MMA_SYNC

    def helpers(self, kernels: tuple[KernelIR, ...]) -> list[str]:
        """ldmatrix, and one mma helper per (inputs, accumulator) pair of `kernels`."""
        if not kernels:
            return []
        out = [_LDMATRIX_HELPERS, ""]
        if any(k.schedule.direct for k in kernels):
            out += [DIRECT_VECTOR_HELPERS, ""]
        if any(k.grid_split for k in kernels):  # the direct path's split_k
            out += [TICKET_HELPERS]
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

    def constants(self, k: KernelIR) -> list[str]:
        """The direct path's split_k: the slices, and a block's partial sum."""
        if not k.grid_split:
            return []
        return [
            f"constexpr int SPLIT_K = {k.grid_split};  // split_k: a block per slice of every "
            "tile's K steps (tiles x SPLIT_K blocks); the last slice to finish adds them",
            "constexpr int TEAM_THREADS = WARPS_M * WARPS_N * WARP_SIZE, PARTIAL_FLOATS = BM * "
            "BN;  // a block's partial sum in the workspace: the accumulators of one copy of the "
            "block's warps (K team 0's)",
            *(
                [
                    f"constexpr int SLICE_MULTIPLE = {k.schedule.warps_k};  // split_k: a "
                    "slice's K steps are whole rounds of the K teams (warps_k)"
                ]
                if k.schedule.warps_k > 1
                else []
            ),
        ]

    def prologue(self, k: KernelIR) -> list[str]:
        """split_k: the shared word that hands the ticket from thread 0 to the block."""
        if not k.grid_split:
            return []
        return [
            *([] if k.buffers else self.shared_memory(k)),
            f"unsigned* ticket_box = reinterpret_cast<unsigned*>(smem + {k.ticket_box_offset()});"
            "  // split_k: the tile's ticket, from thread 0 to the others",
        ]

    def loop(self, emitter, k: KernelIR, s) -> list[str] | None:
        if s.role == K_FRAGMENTS and k.schedule.direct:
            return self._direct_step(emitter, k, s)
        return paired_loop(emitter, k, s)

    #: which of the direct path's K steps is being emitted (`_direct_step`): INSIDE, RAGGED,
    #: or EDGE (the default, what any statement outside a direct K step takes)
    interior = EDGE

    def _direct_step(self, emitter, k: KernelIR, s: For) -> list[str]:
        """The direct path's fragment steps of one K step, three times: for a step that
        lies inside K with every operand on 16 bytes (each vector one load, only its line
        tested); for the last step of a ragged K whose rows are whole vectors (K a multiple
        of 8, operands on 16 bytes: each vector one load, tested against its line and K,
        a vector past K all zeros), so that its loads, too, leave before its first multiply
        (element by element, each vector's loads wait on the multiply before them, as
        the SASS shows: the step's load latencies one after another at the end of every
        warp's K loop); and for any other (unaligned operands, or K not a multiple of 8): vector by
        vector, element by element where it must. The IR's loads are the same guarded
        loads in each."""
        first = next(st for st in walk(s.body) if isinstance(st, LoadFrag))
        tile = first.src
        assert isinstance(tile, GlobalTile)
        role = k.fragment(first.frag.name).role
        k0 = _along_k(tile.origin, role)
        g = k.gemm
        aligned = " | ".join(
            f"reinterpret_cast<unsigned long long>({op.name})" for op in (g.a, g.b)
        )
        # each operand's rows a whole 16 bytes (once per leading dimension: both are K here)
        leads = dict.fromkeys(emitter.expr(op.leading_dim) for op in (g.a, g.b))
        lines = " && ".join(f"{lead} % 8 == 0" for lead in leads)
        extent = emitter.expr(g.k)
        pointers = f"({aligned}) % 16 == 0"
        # ... and K a whole number of vectors (said once where a leading dimension is K)
        whole = " && ".join(f"{x} % 8 == 0" for x in dict.fromkeys((*leads, extent)))
        loop = replace(s, role="")  # emitted by the shared emitter from here
        bodies = {}
        try:
            for mode in (INSIDE, RAGGED, EDGE):
                self.interior = mode
                bodies[mode] = emitter.stmts(k, (loop,))
        finally:
            self.interior = EDGE
        return [
            f"if ({emitter.expr(k0)} + BK <= {extent} && {lines} && {pointers}) {{"
            "  // a K step inside K, on 16 bytes",
            *("    " + x for x in bodies[INSIDE]),
            f"}} else if ({whole} && {pointers}) {{"
            "  // the last step of a ragged K of whole vectors, on 16 bytes",
            *("    " + x for x in bodies[RAGGED]),
            "} else {  // an operand not on 16 bytes, or K not a multiple of 8",
            *("    " + x for x in bodies[EDGE]),
            "}",
        ]

    def statement(self, emitter, k: KernelIR, s) -> list[str] | None:
        return statement(emitter, k, s, self.interior)


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
            if k.schedule.direct:
                rows = 2 if f.role == "matrix_a" else 1
                out.append(
                    f"uint4 {f.name}_vec[{i}][{j}][{rows}];  // direct path: the lane's 16 "
                    f"bytes of K of each of its {rows} line(s), for two k16 steps"
                )
    out.append("const int g = lane / 4, t = lane % 4 * 2;  // a lane's row and column pair in C")
    return out


def statement(emitter, k: KernelIR, s, interior: str = EDGE) -> list[str] | None:
    """The mma.sync spelling of a fragment statement, or None for anything else
    (`interior`: which form of a direct path's K step a load is in, INSIDE, RAGGED or EDGE,
    `MmaSyncLowering._direct_step`)."""
    match s:
        case Fill():
            return _fill(k, s)
        case LoadFrag():
            frag = k.fragment(s.frag.name)
            if frag.role == "accumulator":
                return _accumulator_elements(emitter, k, s.src, s.frag, load=True, add=s.add)
            if not isinstance(s.src, SharedTile):
                if k.schedule.direct:
                    return _direct_load(emitter, k, s, interior)
                return _elementwise_load(emitter, k, s)
            layout = k.buffer(s.src.buffer).layout
            helper, row, col = LDMATRIX[(frag.role, layout)]
            where = emitter.element(k, s.src, row, col)
            return [f"{helper}({s.frag}, &{where});"]
        case Mma():
            name = helper_name(k.gemm.a.dtype, k.fragment(s.acc.name).dtype)
            return [f"{name}({s.acc}, {s.a}, {s.b});"]
        case StoreFrag() if isinstance(s.dst, GlobalTile) and k.schedule.direct:
            return by_team0(s, _direct_store(emitter, k, s))
        case PartialStore() | PartialAdd():  # the direct path's split_k
            return by_team0(s, partial_sum(emitter, k, s, "TEAM_THREADS"))
        case Ticket():
            return [
                f"if (threadIdx.x == 0) *ticket_box = take_ticket(&tickets[{emitter.expr(s.slot)}]"
                f", SPLIT_K);  // {s.reason}",
                "__syncthreads();  // every thread reads the ticket after thread 0's acquire",
                f"const int {s.var} = *ticket_box;",
            ]
        case StoreFrag():
            return _accumulator_elements(emitter, k, s.dst, s.frag, load=False)
    return None


def by_team0(s, lines: list[str]) -> list[str]:
    """A store of C or a partial sum, by K team 0 alone where the statement says so."""
    if not s.by_team0:
        return lines
    return [
        "if (kteam == 0) {  // K team 0; the others hold the same sum",
        *("    " + x for x in lines),
        "}",
    ]


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


def _direct_load(emitter, k: KernelIR, s: LoadFrag, interior: str) -> list[str]:
    """A or B straight from global memory on the direct path (see the module's text): one
    16-byte vector per row of the lane (A: rows g and g + 8; B: token g), K permuted within
    its 32-column group, each register a word of a vector."""
    frag = k.fragment(s.frag.name)
    tile = s.src
    assert isinstance(tile, GlobalTile)
    # the step's place in its 32-column group of K (BK is a multiple of 32: the offset's)
    step = f"({emitter.expr(_along_k(tile.offset, frag.role))}) / 16 % 2"
    column = f"4 * t - 16 * ({step})"  # the vector's first K column, within the tile
    if frag.role == "matrix_a":  # rows g, g + 8 of a row-major M x K tile
        lines_of = [("g", column), ("g + 8", column)]
    else:  # token g of a column-major K x N tile
        lines_of = [(column, "g")]
    vectors = f"{frag.name}_vec" + str(s.frag)[len(frag.name) :]
    out = [
        f"{{  // {s.frag} <- {tile.operand}: the lane's 16 bytes of K"
        + (" of rows g and g + 8" if frag.role == "matrix_a" else " of token g")
        + " (K permuted within 32 columns: words 2s, 2s + 1 are step s's)",
        f"    if (({step}) == 0) {{  // the group's first step loads its vectors",
    ]
    for v, (row, col) in enumerate(lines_of):
        load = direct_vector_call(emitter, k, tile, frag.role, row, col, interior)
        out.append(f"        {vectors}[{v}] = {load};")
    out.append("    }")
    words = [(0, 0), (1, 0), (0, 1), (1, 1)] if frag.role == "matrix_a" else [(0, 0), (0, 1)]
    for q, (v, w) in enumerate(words):
        out.append(f"    {s.frag}[{q}] = direct_word({vectors}[{v}], 2 * ({step}) + {w});")
    return [*out, "}"]


def direct_vector_call(
    emitter, k: KernelIR, tile: GlobalTile, role: str, row: str, col: str, interior: str
) -> str:
    """The helper call that loads the lane's 16-byte vector of K at element (row, col) of a
    direct tile (A: a row of the row-major M x K operand; B: a column of the column-major
    K x N one): only its line tested in a K step inside K (`interior` INSIDE), its line and
    K in the last step of a ragged K of whole vectors (RAGGED), else element by element
    where it reaches past K (EDGE)."""
    gr, gc = emitter.global_rc(tile, row, col)
    line, along = (gr, gc) if role == "matrix_a" else (gc, gr)
    count = k.gemm.m if role == "matrix_a" else k.gemm.n
    pointer = f"reinterpret_cast<const unsigned short*>(&{emitter.element(k, tile, row, col)})"
    inside = f"{line} < {emitter.expr(count)}"
    if interior == INSIDE:
        return f"direct_vector_inside({pointer}, {inside})"
    extent = emitter.expr(k.gemm.k)
    if interior == RAGGED:  # K a multiple of 8 and the vector on 8 elements: in or out whole
        return f"direct_vector_inside({pointer}, {inside} && {along} + 8 <= {extent})"
    return f"direct_vector({pointer}, {inside}, {along}, {extent})"


def _along_k(pair: tuple, role: str):
    """The K coordinate of a direct tile's origin or offset: A's column (M x K, row-major),
    B's row (K x N, column-major)."""
    return pair[1] if role == "matrix_a" else pair[0]


def _direct_store(emitter, k: KernelIR, s: StoreFrag) -> list[str]:
    """The direct path's accumulators into C, lane by lane: elements (g, t), (g, t + 1),
    (g + 8, t), (g + 8, t + 1), each rounded to C's type and stored where it lies inside
    C (a guarded store)."""
    tile = s.dst
    assert isinstance(tile, GlobalTile)
    dtype = emitter.dtype_of(k, tile)
    acc = k.fragment(s.frag.name).dtype
    m, n = emitter.expr(k.gemm.m), emitter.expr(k.gemm.n)
    out = [
        f"// {s.frag} -> {tile.operand}: each lane's elements at rows g, g + 8 and columns t, "
        f"t + 1, rounded to {dtype} one by one; only those inside C are written"
    ]
    for q, (row, col) in enumerate(
        (("g", "t"), ("g", "t + 1"), ("g + 8", "t"), ("g + 8", "t + 1"))
    ):
        at = emitter.element(k, tile, row, col)
        value = emitter.converted(f"{s.frag}[{q}]", acc, dtype)
        gr, gc = emitter.global_rc(tile, row, col)
        out.append(f"if ({gr} < {m} && {gc} < {n}) {at} = {value};")
    return out


def _fill(k: KernelIR, s: Fill) -> list[str]:
    frag = k.fragment(s.frag.name)
    if frag.dtype == "f32":
        return [f"for (int q = 0; q < 4; ++q) {s.frag}[q] = {float(s.value)!r}f;"]
    # Two f16 values per register: the value's bits in both halves.
    pair = f"static_cast<unsigned>(__half_as_ushort(__float2half({float(s.value)!r}f))) * 0x10001u"
    return [f"for (int q = 0; q < 2; ++q) {s.frag}[q] = {pair};"]


def _accumulator_elements(
    emitter, k: KernelIR, tile, ref: FragRef, load: bool, add: bool = False
) -> list[str]:
    """An accumulator to or from a tile, lane by lane: element q of a lane is at row
    g + q / 2 * 8, column t + q % 2. Pairs along a row of a row-major tile move as one
    vector (a float2, or two halves as one 32-bit word); a column-major tile element by
    element. Registers are only read and written whole, so they stay registers. `add`
    (f32, row-major shared tile: the K teams' sums): the accumulator plus the tile."""
    acc_t, frag = k.fragment(ref.name).dtype, str(ref)
    layout = emitter.layout_of(k, tile)
    arrow = "+=" if add else "<-" if load else "->"
    out = [
        f"// {frag} {arrow} {emitter.tile_name(tile)}: each lane's elements "
        "at rows g, g + 8 and columns t, t + 1"
    ]
    if add:
        assert acc_t == "f32" and layout == "row"  # tiledsl.passes.k_teams's Ks
        for h, row in enumerate(("g", "g + 8")):
            first = emitter.element(k, tile, row, "t")
            out.append(
                f"{{ const float2 v = *reinterpret_cast<const float2*>(&{first}); "
                f"{frag}[{2 * h}] += v.x; {frag}[{2 * h + 1}] += v.y; }}"
            )
        return out
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
