"""The fma lowering (`mma fma`): the direct path's loads, the CUDA cores' math.

A few-token product is a read of its weights. mma.sync's direct path hands each lane 16
bytes of K of two weight rows, so that one load instruction of a warp reads 64 bytes of
each of 8 rows; a warp that reads one row, 512 bytes of it an instruction, reads the
weights faster (0.87-0.90 of the memory bound against 0.76-0.79 at 1 x 4096 x 11008 on an
H100, docs/probes/direct_read.py), and with one token a row of C is a dot product that
needs no tensor core (docs/probes/gemv_rows.py: 0.84-0.95 of the bound where the direct
path reached 0.64-0.87). So here a warp's fragment is one line of A by one line of B
over 256 K elements:

    A 1 x 256 (a weight row, row-major):   lane l's uint4 = elements 8l .. 8l + 7
    B 256 x 1 (a token, column-major):     lane l's uint4 = elements 8l .. 8l + 7
    C 1 x 1:                               lane l's float = its partial sum

An mma is `acc = fma_dot8(a, b, acc)`: the vectors' 8 pairs converted to f32 and added by
fused multiply-adds, in order. The fragment's value is the sum of its 32 lanes' partials:
whatever leaves the registers (C, a K team's sum in shared memory, a split's partial sum)
is first added across the warp by `warp_total` (a butterfly of shuffles: a fixed order,
the same bits on every run), and lane 0 moves it; what comes in (a K team's or a slice's
sum) is added to lane 0's partial. The loads are mma.sync's direct loads (its helpers and
its two spellings of a K step: tiledsl.emit.mma_sync), one vector per line.
"""

from __future__ import annotations

from ..ir.nodes import (
    Fill,
    GlobalTile,
    KernelIR,
    LoadFrag,
    Mma,
    PartialAdd,
    PartialStore,
    SharedTile,
    StoreFrag,
)
from ..ir.paths import FMA
from .mma_sync import DIRECT_VECTOR_HELPERS, MmaSyncLowering, by_team0, direct_vector_call
from .partials import TICKET_HELPERS

FMA_HELPERS = """\
// fma path (`mma fma`): the CUDA cores' fused multiply-adds. A lane holds 8 consecutive K
// elements of a line of A and of B (a 16-byte vector each) and an f32 partial sum; a warp's
// fragment is the sum of its 32 partials.
// (a bf16 is the top half of an f32's bits: no conversion instruction, no header)
__device__ __forceinline__ float2 pair_to_float2(unsigned word, bool bf16) {
    if (bf16) return make_float2(__uint_as_float(word << 16), __uint_as_float(word & 0xffff0000u));
    return __half22float2(*reinterpret_cast<const __half2*>(&word));
}
// the 8 products of two vectors added to `sum`, in order (f16 or bf16 inputs)
template <bool BF16>
__device__ __forceinline__ float fma_dot8(const uint4& a, const uint4& b, float sum) {
    const unsigned aw[4] = {a.x, a.y, a.z, a.w}, bw[4] = {b.x, b.y, b.z, b.w};
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 x = pair_to_float2(aw[i], BF16), y = pair_to_float2(bw[i], BF16);
        sum = fmaf(x.x, y.x, sum);
        sum = fmaf(x.y, y.y, sum);
    }
    return sum;
}
// the warp's 32 partials added, every lane given the total: a butterfly, the same order on
// every run (every lane of the warp must call it)
__device__ __forceinline__ float warp_total(float partial) {
    #pragma unroll
    for (int d = 16; d > 0; d /= 2) partial += __shfl_xor_sync(0xffffffffu, partial, d);
    return partial;
}"""


class FmaLowering(MmaSyncLowering):
    """mma.sync's direct path (its K steps, split_k's constants and ticket) with the
    fragments above."""

    path = FMA

    def helpers(self, kernels: tuple[KernelIR, ...]) -> list[str]:
        if not kernels:
            return []
        out = [DIRECT_VECTOR_HELPERS, "", FMA_HELPERS, ""]
        if any(k.grid_split for k in kernels):
            out += [TICKET_HELPERS]
        return out

    def mma_note(self, k: KernelIR) -> str:
        return (
            "no tensor core: a warp's fragment is a line of A by a line of B over 256 K "
            "elements, each lane's 8 by fused multiply-adds into an f32 partial sum, the "
            "warp's 32 partials added by shuffles when the sum leaves (see the helpers above)"
        )

    def declarations(self, emitter, k: KernelIR) -> list[str]:
        out = []
        for f in k.fragments:
            i, j = f.count
            if f.role == "accumulator":
                out.append(
                    f"float {f.name}[{i}][{j}];  // the lane's partial sum of each fragment "
                    "(the fragment: the warp's 32 partials added)"
                )
            else:
                line = "row of A" if f.role == "matrix_a" else "column of B"
                out.append(
                    f"uint4 {f.name}[{i}][{j}];  // the lane's 8 K elements of a {line}: "
                    "K elements 8 lane .. 8 lane + 7 of the fragment"
                )
        return out

    def statement(self, emitter, k: KernelIR, s) -> list[str] | None:
        match s:
            case Fill():
                value = float(s.value)
                if value == 0.0:
                    return [f"{s.frag} = 0.0f;"]
                return [f"{s.frag} = lane == 0 ? {value!r}f : 0.0f;  // lane 0 holds the value"]
            case LoadFrag() if k.fragment(s.frag.name).role != "accumulator":
                return _vector_load(emitter, k, s, self.interior)
            case LoadFrag():
                return _into_lane0(emitter, k, s)
            case Mma():
                bf16 = "true" if k.gemm.a.dtype == "bf16" else "false"
                return [f"{s.acc} = fma_dot8<{bf16}>({s.a}, {s.b}, {s.acc});"]
            case StoreFrag():
                return by_team0(s, _total_out(emitter, k, s))
            case PartialStore() | PartialAdd():
                return by_team0(s, _partial(emitter, k, s))
        return super().statement(emitter, k, s)  # the ticket


def _vector_load(emitter, k: KernelIR, s: LoadFrag, interior: str) -> list[str]:
    """The lane's 16-byte vector of the fragment's line, K elements 8 lane .. 8 lane + 7
    (zeros outside the operand; element by element where it reaches past K)."""
    role = k.fragment(s.frag.name).role
    assert isinstance(s.src, GlobalTile)
    row, col = ("0", "8 * lane") if role == "matrix_a" else ("8 * lane", "0")
    return [f"{s.frag} = {direct_vector_call(emitter, k, s.src, role, row, col, interior)};"]


def _total_out(emitter, k: KernelIR, s: StoreFrag) -> list[str]:
    """The fragment's value (the warp's partials added) to C, rounded to C's type, or to
    a shared tile (a K team's sum), by lane 0; C only where it lies inside C."""
    tile = s.dst
    at = emitter.element(k, tile, "0", "0")
    acc = k.fragment(s.frag.name).dtype
    value = emitter.converted("total", acc, emitter.dtype_of(k, tile))
    where = "lane == 0"
    if isinstance(tile, GlobalTile):
        gr, gc = emitter.global_rc(tile, "0", "0")
        m, n = emitter.expr(k.gemm.m), emitter.expr(k.gemm.n)
        where = f"lane == 0 && {gr} < {m} && {gc} < {n}"
    return [
        f"{{  // {s.frag} -> {emitter.tile_name(tile)}: the warp's partials added, lane 0 stores",
        f"    const float total = warp_total({s.frag});",
        f"    if ({where}) {at} = {value};",
        "}",
    ]


def _into_lane0(emitter, k: KernelIR, s: LoadFrag) -> list[str]:
    """A sum from a shared tile (a K team's) into the fragment: lane 0's partial takes it
    (`add`: adds it), the others' stay (add) or become 0."""
    assert isinstance(s.src, SharedTile)
    at = emitter.element(k, s.src, "0", "0")
    if s.add:
        return [f"if (lane == 0) {s.frag} += {at};  // {emitter.tile_name(s.src)}'s sum"]
    return [f"{s.frag} = lane == 0 ? {at} : 0.0f;"]


def _partial(emitter, k: KernelIR, s: PartialStore | PartialAdd) -> list[str]:
    """split_k's partial sum of the block in workspace slot `s.slot` (PARTIAL_FLOATS = BM x
    BN floats: one a fragment, fragment (i, j) of the team's warp w at (w * I + i) * J + j),
    stored by lane 0 after the warp's total, or added to lane 0's partial."""
    acc = k.fragment_of("accumulator")
    rows, cols = acc.count
    slot = emitter.expr(s.slot)
    index = f"({slot}) * PARTIAL_FLOATS + (warp % (WARPS_M * WARPS_N) * {rows} + i) * {cols} + j"
    if isinstance(s, PartialStore):
        body = [
            f"const float total = warp_total({acc.name}[i][j]);",
            f"if (lane == 0) __stcg(&workspace[{index}], total);",
        ]
    else:
        body = [f"if (lane == 0) {acc.name}[i][j] += __ldcg(&workspace[{index}]);"]
    return [
        f"{{  // {s.reason}",
        "    #pragma unroll",
        f"    for (int i = 0; i < {rows}; ++i) {{",
        "        #pragma unroll",
        f"        for (int j = 0; j < {cols}; ++j) {{",
        *("            " + x for x in body),
        "        }",
        "    }",
        "}",
    ]
