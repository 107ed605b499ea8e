"""The wgmma lowering (`mma m64nNk16`, sm_90a): same IR, a warpgroup per IR warp.

wgmma is issued by a warpgroup (4 consecutive warps, 128 threads) and computes a
64 x N tile: A and B are read by the tensor cores straight from shared memory,
through 64-bit descriptors, and the accumulators stay in the warpgroup's registers.
So on this path the IR's `warp` is a warpgroup (`WARP_SIZE = 128`); a LoadFrag of A
or B builds a descriptor (no data moves), Mma issues one wgmma, and the IR's
MmaFence / MmaCommit / MmaWait are wgmma.fence / commit_group / wait_group.

Shared memory is in the hardware's 128-byte swizzle (`pad xor` on this path,
`SharedBuffer.panel`): each line is cut into 64-element (128-byte) panels, stored
panel after panel; 16-byte chunk c of line l sits at chunk c ^ (l % 8). Descriptor
(PTX ISA, "Matrix Descriptor Format"): start address, leading and stride byte offsets
(LBO, SBO) in 16-byte units, and the swizzle mode (1: 128 bytes) in bits 62-63.

    K-contiguous tile (A row-major, B col-major): 8 lines of 128 bytes make a 1024-byte
      core group; SBO = 1024 between groups along M (N); a k16 step starts 32 bytes in.
    M/N-contiguous tile (B row-major, A col-major; the instruction's transpose bit):
      SBO = 1024 between groups of 8 K-lines, LBO = the panel size between 64-wide
      panels along N (M); a k16 step starts 2048 bytes (16 lines) in.

Accumulators (PTX ISA, "wgmma .m64nNk16 register fragment"): thread `lane` of the
warpgroup holds, for each 8 columns n8, 4 floats: rows wq * 16 + g and + 8 (wq = lane
/ 32, g = lane % 32 / 4), columns n8 * 8 + t and + 1 (t = lane % 4 * 2) — mma.sync's
m16n8 layout, four warps deep and N / 8 wide.

The shared tiles are read by the async proxy: every thread fences its own writes
(`fence.proxy.async`) before each block barrier, and the kernel rounds its dynamic
shared memory up to 1024 bytes, where the swizzle's phase is zero.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import error
from ..ir.expr import ZERO
from ..ir.fetch import fetch_parts
from ..ir.nodes import (
    DTYPE_BYTES,
    Barrier,
    EpilogueFrag,
    Fill,
    FragRef,
    GlobalTile,
    KernelIR,
    LoadFrag,
    Mma,
    MmaCommit,
    MmaFence,
    MmaWait,
    SharedTile,
    StoreFrag,
)
from ..ir.paths import WGMMA
from . import hopper
from .lowering import PathLowering
from .mma_sync import float_pairs
from .partials import TICKET_HELPERS

_HELPERS = """\
// wgmma path (mma m64nNk16, sm_90a): a warpgroup's A and B are read from 128-byte-
// swizzled shared memory through descriptors; wgmmas run asynchronously in groups.
__device__ __forceinline__ unsigned long long wgmma_desc(const void* tile, unsigned lbo,
                                                         unsigned sbo) {
    const unsigned long long address = static_cast<unsigned>(__cvta_generic_to_shared(tile));
    return (address & 0x3FFFF) >> 4 | static_cast<unsigned long long>(lbo >> 4) << 16 |
           static_cast<unsigned long long>(sbo >> 4) << 32 | 1ull << 62;  // 1: 128-byte swizzle
}
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory");
}
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\\n" :: "n"(PENDING) : "memory");
}
// The IR's warp-scope barrier on this path: the warpgroup's 128 threads, on a named
// barrier of its own (0 is __syncthreads'), where __syncwarp would order only 32.
__device__ __forceinline__ void warpgroup_barrier(int id) {
    asm volatile("bar.sync %0, 128;\\n" :: "r"(id) : "memory");
}
// Shared memory written by this thread (cp.async, stores) is next read by the tensor
// cores, through the async proxy: order it before the barrier that hands it over.
__device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");
}"""


def helper_name(n: int, inputs: str) -> str:
    return f"wgmma_m64n{n}k16_{inputs}_f32"


def wgmma_helper(n: int, inputs: str) -> str:
    """One wgmma of 64 x n x 16: d (n / 2 floats per thread) += A(desc) * B(desc)."""
    regs = n // 2
    outs = ", ".join(f"%{i}" for i in range(regs))
    operands = ",\n          ".join(
        ", ".join(f'"+f"(d[{i}])' for i in range(row, min(row + 8, regs)))
        for row in range(0, regs, 8)
    )
    ptx = f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{inputs}.{inputs}"
    return f"""template <int TRANS_A, int TRANS_B>
__device__ __forceinline__ void {helper_name(n, inputs)}(float (&d)[{regs}], unsigned long long a,
                                                  unsigned long long b) {{
    asm volatile("{ptx} "
        "{{{outs}}}, "
        "%{regs}, %{regs + 1}, 1, 1, 1, %{regs + 2}, %{regs + 3};\\n"
        : {operands}
        : "l"(a), "l"(b), "n"(TRANS_A), "n"(TRANS_B));
}}"""


class WgmmaLowering(PathLowering):
    path = WGMMA
    helpers_after_swizzle = True

    def helpers(self, kernels: tuple[KernelIR, ...]) -> list[str]:
        if not kernels:
            return []
        out = [_HELPERS, ""]
        if any(hopper.specialized(k) for k in kernels):
            out += [hopper.HELPERS, ""]
        if any(hopper.in_clusters(k) for k in kernels):
            out += [hopper.CLUSTER_HELPERS, ""]
        if any(k.split_cluster for k in kernels):
            out += [hopper.SPLIT_CLUSTER_HELPERS, ""]
        if any(hopper.stores_by_tma(k) for k in kernels):
            out += [hopper.STORE_HELPERS, ""]
        if any(k.hands_over for k in kernels):  # stream-K's flags, split-K's tickets
            flags = hopper.FLAG_HELPERS if any(k.stream_k for k in kernels) else ""
            tickets = TICKET_HELPERS if any(k.tickets for k in kernels) else ""
            if any(fetch_parts(k) for k in kernels):  # stream_k_aligned's fetched hand-over
                flags += hopper.FETCH_HELPERS
            out += [flags + tickets + hopper.NAMED_BARRIER_HELPER, ""]
        if any(v.passed == "divisor" for k in kernels for v in k.launch_scalars):
            out += [hopper.DIVISOR_HELPERS, ""]
        for n, inputs in sorted({(k.schedule.mma[1], k.gemm.a.dtype) for k in kernels}):
            out += [
                f"// wgmma m64n{n}k16, {inputs} inputs, f32 accumulators",
                wgmma_helper(n, inputs),
            ]
        return out + [""]

    def mma_note(self, k: KernelIR) -> str:
        return (
            "one wgmma per fragment, issued by a warpgroup (the IR's warp: 4 warps, "
            "WARP_SIZE 128); A and B read from shared memory by descriptor"
        )

    def swizzle_note(self) -> str:
        return (
            "no padding; the 128-byte swizzle wgmma's descriptors read: lines in "
            "128-byte panels, chunk c of line l at chunk c ^ (l % 8)"
        )

    def target_note(self) -> str:
        return ", built for sm_90a (wgmma)"

    def constants(self, k: KernelIR) -> list[str]:
        return descriptor_constants(k) + hopper.constants(k)

    def prologue(self, k: KernelIR) -> list[str]:
        return hopper.prologue(k)

    def shared_memory(self, k: KernelIR) -> list[str]:
        return [
            "extern __shared__ __align__(1024) unsigned char smem_base[];",
            "// wgmma's swizzle is a function of address bits 4-9: start on 1024 bytes (the launch",
            "// gives 1024 bytes of slack; dynamic shared memory is not promised that alignment)",
            "unsigned char* smem = smem_base + (1024 - static_cast<unsigned>("
            "__cvta_generic_to_shared(smem_base)) % 1024) % 1024;",
        ]

    def declarations(self, emitter, k: KernelIR) -> list[str]:
        return declarations(k)

    def statement(self, emitter, k: KernelIR, s) -> list[str] | None:
        return hopper.statement(emitter, k, s) or statement(emitter, k, s)

    def statement_list(self, k: KernelIR, lines: list[str]) -> list[str]:
        return hopper.join_elected(lines) if hopper.specialized(k) else lines


def k_major(k: KernelIR, buffer: str) -> bool:
    """Whether a tile's lines run along K (A row-major, B col-major): no transpose."""
    b = k.buffer(buffer)
    is_a = buffer == k.gemm.a.name + "s"
    return (b.layout == "row") == is_a


def descriptor_constants(k: KernelIR) -> list[str]:
    """LBO and SBO of each swizzled tile wgmma reads (A's and B's), named (see the
    module's text)."""
    out = []
    read = {k.gemm.a.name + "s", k.gemm.b.name + "s"}
    for b in k.buffers:
        if not b.panel or b.name not in read:
            continue
        up = b.name.upper()
        panel_bytes = b.lines * b.panel * DTYPE_BYTES[b.dtype]
        if k_major(k, b.name):
            out.append(
                f"constexpr unsigned {up}_LBO = 16, {up}_SBO = 1024;  // wgmma descriptor: "
                "K-contiguous lines, 1024 bytes per 8 lines (LBO unused)"
            )
        else:
            out.append(
                f"constexpr unsigned {up}_LBO = {panel_bytes}, {up}_SBO = 1024;  // wgmma "
                f"descriptor: {b.panel}-wide panels {panel_bytes} bytes apart, 1024 bytes "
                "per 8 K-lines (transposed)"
            )
    return out


def declarations(k: KernelIR) -> list[str]:
    out = []
    n = k.schedule.mma[1]
    g = k.gemm  # the operands' own names (swap_operands: B is the wgmma's A)
    for f in k.fragments:
        i, j = f.count
        if f.role == "accumulator":
            out.append(
                f"float {f.name}[{i}][{j}][{n // 2}];  // accumulators: per 8 columns n8, "
                "rows wq*16 + g, + 8, columns n8*8 + t, + 1"
            )
        else:
            what = f"{g.a.name}'s 64x16" if f.role == "matrix_a" else f"{g.b.name}'s 16x{n}"
            out.append(
                f"unsigned long long {f.name}[{i}][{j}];  // wgmma descriptors of {what} tiles "
                "in shared memory"
            )
    out.append(
        "const int wq = lane / 32, g = lane % 32 / 4, t = lane % 4 * 2;  // a thread's warp "
        "in the warpgroup, its row and column pair in C"
    )
    return out


def statement(emitter, k: KernelIR, s) -> list[str] | None:
    """The wgmma spelling of a fragment or group statement, or None for anything else."""
    n = k.schedule.mma[1]
    match s:
        case Fill():
            return [f"for (int q = 0; q < {n // 2}; ++q) {s.frag}[q] = {float(s.value)!r}f;"]
        case LoadFrag():
            frag = k.fragment(s.frag.name)
            if frag.role == "accumulator":
                return _accumulator(emitter, k, s.src, s.frag, load=True)
            if isinstance(s.src, GlobalTile) or not k.buffer(s.src.buffer).panel:
                raise error(
                    k.schedule.loc("mma"),
                    "wgmma reads A and B from 128-byte-swizzled shared memory only; this IR "
                    "stops before smem-tiling, multi-buffering or padding have made it",
                    "compile without --stop-after, or stop after `padding` or later",
                )
            up = s.src.buffer.upper()
            where = emitter.element(k, s.src, "0", "0")
            return [f"{s.frag} = wgmma_desc(&{where}, {up}_LBO, {up}_SBO);"]
        case Mma():
            a_buf, b_buf = _buffer_of(k, s.a), _buffer_of(k, s.b)
            trans_a = 0 if k_major(k, a_buf) else 1
            trans_b = 0 if k_major(k, b_buf) else 1
            name = helper_name(n, k.gemm.a.dtype)
            return [f"{name}<{trans_a}, {trans_b}>({s.acc}, {s.a}, {s.b});"]
        case EpilogueFrag():
            return _register_epilogue(emitter, k, s)
        case StoreFrag() if _stmatrix_target(emitter, k, s.dst):
            return _stmatrix_store(emitter, k, s)
        case StoreFrag() if s.cols is not None:
            return _window_store(emitter, k, s)
        case StoreFrag():
            return _accumulator(emitter, k, s.dst, s.frag, load=False, guard=s.guard)
        case Barrier(scope="warp"):
            # the IR's warp is a warpgroup: its named barrier (1 + warp), its 128 threads
            return [f"warpgroup_barrier(1 + warp);  // {s.reason}"]
        case Barrier():
            # what this thread wrote to shared memory, visible to the tensor cores' async proxy
            return ["fence_proxy_async();", f"__syncthreads();  // {s.reason}"]
        case MmaFence():
            return ["wgmma_fence();  // the accumulators' earlier accesses before the wgmmas below"]
        case MmaCommit():
            return ["wgmma_commit();  // this step's wgmmas form one group"]
        case MmaWait():
            what = (
                "every wgmma has read its tiles and written its accumulators"
                if s.pending == 0
                else f"all but the last {s.pending} group(s) have read their tiles"
            )
            return [f"wgmma_wait<{s.pending}>();  // {what}"]
    return None


def _buffer_of(k: KernelIR, ref: FragRef) -> str:
    """The shared buffer the descriptors of fragment `ref` point into (A's or B's tile)."""
    role = k.fragment(ref.name).role
    return (k.gemm.a if role == "matrix_a" else k.gemm.b).name + "s"


def _accumulator(
    emitter, k: KernelIR, tile, ref: FragRef, load: bool, guard: bool = False
) -> list[str]:
    """An accumulator to or from a tile, thread by thread (see the module's text): per 8
    columns n8, pairs at rows wq*16 + g and + 8 (`ptx_mma.float_pairs`). A guarded store
    writes only what lies inside C."""
    if not load and emitter.dtype_of(k, tile) in _PAIRS:
        return _converted_store(emitter, k, tile, ref, guard)
    out = [
        f"// {ref} {'<-' if load else '->'} {emitter.tile_name(tile)}: each thread's pairs at rows "
        "wq*16 + g, + 8, columns n8*8 + t, + 1" + _GUARD_NOTE * guard,
        "#pragma unroll",
        f"for (int n8 = 0; n8 < {k.schedule.mma[1] // 8}; ++n8) {{",
    ]
    for h, row in enumerate(("wq * 16 + g", "wq * 16 + g + 8")):
        lo, hi = f"{ref}[n8 * 4 + {2 * h}]", f"{ref}[n8 * 4 + {2 * h + 1}]"
        lines = float_pairs(emitter, k, tile, [(row, "n8 * 8 + t", lo, hi)], load)
        if not guard:
            out += ["    " + line for line in lines]
        elif emitter.layout_of(k, tile) == "row":  # a pair along the row: one word if aligned
            first = emitter.element(k, tile, row, "n8 * 8 + t")
            second = emitter.element(k, tile, row, "n8 * 8 + t + 1")
            one_by_one = [f"{first} = {lo};", f"{second} = {hi};"]
            out += _pair_inside_c(emitter, k, tile, row, "n8 * 8 + t", lines, one_by_one)
        else:  # column-major: the pair's elements a column apart, each tested
            for line, col in zip(lines, ("n8 * 8 + t", "n8 * 8 + t + 1"), strict=True):
                out += _inside_c(emitter, k, tile, row, col, [line])
    return out + ["}"]


#: How a guarded store of C says what it skips.
_GUARD_NOTE = "; only elements inside C are written (partial tiles)"


def _inside_c(emitter, k: KernelIR, tile, row: str, col: str, lines: list[str]) -> list[str]:
    """`lines` (one thread's store at element (row, col) of a tile of C), run only where
    that element lies inside C."""
    gr, gc = emitter.global_rc(tile, row, col)
    m, n = emitter.expr(k.gemm.m), emitter.expr(k.gemm.n)
    return [f"    if ({gr} < {m} && {gc} < {n}) {{", *("        " + x for x in lines), "    }"]


def _pair_inside_c(
    emitter, k: KernelIR, tile, row: str, col: str, pair: list[str], one_by_one: list[str]
) -> list[str]:
    """A thread's pair at (row, col) and (row, col + 1) of a row-major tile of C, where it
    lies inside C: as one word (`pair`) where C's leading dimension is even (the pair then
    starts on a whole word, col being even, and ends inside C if it starts there), else
    its two elements (`one_by_one`), the second only if inside C too. Every size runs a
    TMA kernel (tiledsl.lowering.edges), odd leading dimensions included."""
    gr, gc = emitter.global_rc(tile, row, col)
    m, n = emitter.expr(k.gemm.m), emitter.expr(k.gemm.n)
    lead = emitter.expr(k.gemm.c.leading_dim)
    first, second = one_by_one
    return [
        f"    if ({gr} < {m} && {gc} < {n}) {{",
        f"        if ({lead} % 2 == 0) {{  // the pair is one aligned word",
        *("            " + x for x in pair),
        "        } else {  // an odd leading dimension: the elements one by one",
        f"            {first}",
        f"            if ({gc} + 1 < {n}) {second}",
        "        }",
        "    }",
    ]


#: 16-bit C types a thread's float pair is stored as: (the pair type, its conversion)
_PAIRS = {
    "f16": ("__half2", "__floats2half2_rn"),
    "bf16": ("__nv_bfloat162", "__floats2bfloat162_rn"),
}


def _stmatrix_target(emitter, k: KernelIR, tile) -> bool:
    """A 16-bit tile in the 128-byte swizzle: `epilogue_via tma`'s staging of C."""
    if not isinstance(tile, SharedTile):
        return False
    b = k.buffer(tile.buffer)
    return b.dtype in _PAIRS and bool(b.panel) and b.xor


def _stmatrix_store(emitter, k: KernelIR, s) -> list[str]:
    """f32 accumulators rounded to 16 bits and written by stmatrix.x4: per 16 columns,
    four 8x8 pieces (rows 0-7 and 8-15 of the warp's 16, columns 0-7 and 8-15), lanes
    8p..8p+7 giving the row addresses of piece p; in the 128-byte swizzle the 8 rows of
    a piece fall on 8 different bank groups."""
    tile, ref = s.dst, s.frag
    first, width = s.cols if s.cols is not None else (ZERO, k.schedule.mma[1])
    pack = _PACK[emitter.dtype_of(k, tile)]
    n8 = f"({emitter.expr(first)}) / 8 + 2 * j" if s.cols is not None else "2 * j"
    at = emitter.element(k, tile, "sr", "16 * j + sc")
    regs = ", ".join(f"{pack}(d[n8 * 4 + {q}], d[n8 * 4 + {q + 1}])" for q in (0, 2, 4, 6))
    window = f" columns [{emitter.expr(first)}, + {width})" if s.cols is not None else ""
    return [
        f"{{  // {ref}{window} -> {emitter.tile_name(tile)}, rounded to "
        f"{emitter.dtype_of(k, tile)}, by stmatrix: 8x8 pieces, lane % 32 / 8 = the piece",
        f"    float (&d)[{k.schedule.mma[1] // 2}] = {ref};",
        "    const int sr = wq * 16 + lane % 32 / 8 % 2 * 8 + lane % 8, sc = lane % 32 / 16 * 8;"
        "  // this lane's row address: its piece's row lane % 8",
        "    #pragma unroll",
        f"    for (int j = 0; j < {width // 16}; ++j) {{  // 16 columns: n8 and n8 + 1",
        f"        const int n8 = {n8};",
        f"        stmatrix_x4(&{at}, {regs});",
        "    }",
        "}",
    ]


def _register_epilogue(emitter, k: KernelIR, s: EpilogueFrag) -> list[str]:
    """alpha, beta, bias and relu on each accumulator of the thread, one rounded f32 step at
    a time (__fmul_rn / __fadd_rn, as the exact oracle replays them), before C is stored:
    element e of 8 columns n8 is at row wq*16 + g (+ 8 for e >= 2), column n8*8 + t + e % 2.
    What lies outside C (a partial tile) reads nothing; it is never stored."""
    ep, ref, g = s.epilogue, s.frag, k.gemm
    row0, col0 = emitter.global_rc(s.tile, "wq * 16 + g", "t")
    m, n = emitter.expr(g.m), emitter.expr(g.n)
    at = emitter.element(k, replace(s.tile, origin=(ZERO, ZERO), offset=(ZERO, ZERO)), "gr", "gc")
    old = emitter.converted(at, g.c.dtype, "f32")
    # a bias's index: the element's column, or its row under swap_operands (C's column)
    place, inside_bias = ("gr", f"gr < {m}") if ep.bias_rows else ("gc", f"gc < {n}")
    body = [
        "const int gr = er + e / 2 * 8, gc = ec + n8 * 8 + e % 2;  // the element's place in C",
        f"float x = {ref}[n8 * 4 + e];",
        *emitter.epilogue_steps(k, ep, old, place, inside_bias, f"gr < {m} && gc < {n}"),
        f"{ref}[n8 * 4 + e] = x;",
    ]
    return [
        f"{{  // epilogue on {ref} in registers: {ep.describe()}",
        f"    const int er = {row0}, ec = {col0};  // this thread's first row and column",
        "    #pragma unroll",
        f"    for (int n8 = 0; n8 < {k.schedule.mma[1] // 8}; ++n8) {{",
        "        #pragma unroll",
        "        for (int e = 0; e < 4; ++e) {  // rows g, g + 8 and columns t, t + 1",
        *("            " + line for line in body),
        "        }",
        "    }",
        "}",
    ]


def _window_store(emitter, k: KernelIR, s) -> list[str]:
    """A window of f32 accumulators into an f32 shared tile (the TMA store's staging of an
    f32 C): each thread's pairs as float2, in the 128-byte swizzle 8 rows of a warp's
    store fall on different bank groups."""
    tile, ref = s.dst, s.frag
    if emitter.dtype_of(k, tile) != "f32" or not isinstance(tile, SharedTile):
        raise error(
            k.schedule.loc("epilogue_via"),
            "a window of an accumulator's columns is stored into shared memory only (the "
            "TMA store's staging of C)",
            "write `epilogue_via tma` on a warp-specialized kernel",
        )
    first, width = s.cols
    out = [
        f"{{  // {ref} columns [{emitter.expr(first)}, + {width}) -> {emitter.tile_name(tile)}: "
        "each thread's pairs at rows wq*16 + g, + 8, columns n8*8 + t, + 1 of the window",
        f"    float (&d)[{k.schedule.mma[1] // 2}] = {ref};",
        "    #pragma unroll",
        f"    for (int j = 0; j < {width // 8}; ++j) {{",
        f"        const int n8 = ({emitter.expr(first)}) / 8 + j;",
    ]
    for h, row in enumerate(("wq * 16 + g", "wq * 16 + g + 8")):
        at = emitter.element(k, tile, row, "j * 8 + t")
        out.append(
            f"        *reinterpret_cast<float2*>(&{at}) = make_float2(d[n8 * 4 + {2 * h}], "
            f"d[n8 * 4 + {2 * h + 1}]);"
        )
    return out + ["    }", "}"]


#: 16-bit C types: the helper (tiledsl.emit.hopper) that rounds two floats into one word
_PACK = {"f16": "pack_f16x2", "bf16": "pack_bf16x2"}


def _converted_store(emitter, k: KernelIR, tile, ref: FragRef, guard: bool) -> list[str]:
    """f32 accumulators into a 16-bit C (warp specialization's consumers): each pair
    rounded once and stored as one 4-byte word along a row-major C's row; into a
    column-major C the pair's two elements lie a column apart, so each is rounded and
    stored on its own. A guarded store writes only what lies inside C."""
    dtype = emitter.dtype_of(k, tile)
    pair, convert = _PAIRS[dtype]
    note = _GUARD_NOTE * guard

    def stored(row: str, col: str, lines: list[str]) -> list[str]:
        return _inside_c(emitter, k, tile, row, col, lines) if guard else ["    " + lines[0]]

    if emitter.layout_of(k, tile) != "row":
        out = [
            f"// {ref} -> {emitter.tile_name(tile)} (column-major): each thread's elements at "
            f"rows wq*16 + g, + 8, columns n8*8 + t, + 1, rounded to {dtype} one by one{note}",
            "#pragma unroll",
            f"for (int n8 = 0; n8 < {k.schedule.mma[1] // 8}; ++n8) {{",
        ]
        for h, row in enumerate(("wq * 16 + g", "wq * 16 + g + 8")):
            for e, col in enumerate(("n8 * 8 + t", "n8 * 8 + t + 1")):
                at = emitter.element(k, tile, row, col)
                value = emitter.converted(f"{ref}[n8 * 4 + {2 * h + e}]", "f32", dtype)
                out += stored(row, col, [f"{at} = {value};"])
        return out + ["}"]
    out = [
        f"// {ref} -> {emitter.tile_name(tile)}: each thread's pairs at rows wq*16 + g, + 8, "
        f"columns n8*8 + t, + 1, rounded to {emitter.dtype_of(k, tile)} (one 4-byte store)" + note,
        "#pragma unroll",
        f"for (int n8 = 0; n8 < {k.schedule.mma[1] // 8}; ++n8) {{",
    ]
    for h, row in enumerate(("wq * 16 + g", "wq * 16 + g + 8")):
        at = emitter.element(k, tile, row, "n8 * 8 + t")
        lo, hi = f"{ref}[n8 * 4 + {2 * h}]", f"{ref}[n8 * 4 + {2 * h + 1}]"
        line = f"*reinterpret_cast<{pair}*>(&{at}) = {convert}({lo}, {hi});"
        if not guard:
            out.append("    " + line)
            continue
        second = emitter.element(k, tile, row, "n8 * 8 + t + 1")
        one_by_one = [
            f"{at} = {emitter.converted(lo, 'f32', dtype)};",
            f"{second} = {emitter.converted(hi, 'f32', dtype)};",
        ]
        out += _pair_inside_c(emitter, k, tile, row, "n8 * 8 + t", [line], one_by_one)
    return out + ["}"]
