"""The CUDA spelling of warp specialization (tiledsl.passes.warp_specialization): TMA
copies, mbarrier handoffs, the producer and consumer roles, setmaxnreg, persistence.

Used by the wgmma lowering (tiledsl.emit.wgmma) for the statements only these kernels
have; everything else (the wgmmas, the accumulator store) is the wgmma path's.

    TmaLoad    one cp.async.bulk.tensor.2d per 64-element panel of the tile (the 128-byte
               swizzle box), by the producer's elected thread, counted on the mbarrier
    ExpectTx   mbarrier.arrive.expect_tx: the producer's arrival and the bytes to come
    Arrive     mbarrier.arrive by thread 0 of each consumer warpgroup, once the wgmmas
               that read the slot have retired (wgmma.wait_group) — the whole warpgroup's,
               since a wgmma is one instruction of the warpgroup
    Wait       mbarrier.try_wait.parity in a loop, by every thread that reads what the
               phase hands over
    TmaStore   one cp.async.bulk.tensor.2d store per 64-element panel of the staged
               piece of C, by thread 0 of the consumer warpgroup, as one bulk group
    TmaStoreWait
               cp.async.bulk.wait_group.read 0 by that thread: its stores have read Cs
    ProxyFence fence.proxy.async by every thread: its stmatrix writes, visible to the TMA
               unit once the warpgroup's barrier hands them over
    Roles      one if/else on the warpgroup: the producer gives registers back
               (setmaxnreg.dec), the consumers take them (setmaxnreg.inc); ptxas honours
               that only with a register cap at entry (`__launch_bounds__(THREADS, 1)`)
               and each role one branch of a single if/else (else it warns C7508)
"""

from __future__ import annotations

from ..ir.nodes import (
    Arrive,
    ExpectTx,
    KernelIR,
    Let,
    ProxyFence,
    Roles,
    TmaLoad,
    TmaStore,
    TmaStoreWait,
    Wait,
    walk,
)

HELPERS = """\
// Hopper pipelines: TMA tensor copies counted on mbarriers, warp specialization.
// The 128-byte CUtensorMap the host encodes (cuTensorMapEncodeTiled), passed by value.
struct alignas(64) TensorMap {
    unsigned long long bytes[16];
};
__device__ __forceinline__ unsigned shared_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbarrier_init(unsigned long long* bar, unsigned arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\\n" :: "r"(shared_address(bar)),
                 "r"(arrivals));
}
// The initialised barriers, visible to the async proxy (the TMA unit) before any copy.
__device__ __forceinline__ void mbarrier_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;\\n" ::: "memory");
}
// One arrival, and `bytes` more to come from TMA copies completing on this barrier.
__device__ __forceinline__ void mbarrier_expect_tx(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\\n"
                 :: "r"(shared_address(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(unsigned long long* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\\n" :: "r"(shared_address(bar))
                 : "memory");
}
// Until the phase of `bar` with this parity has completed (a fresh barrier is in phase 0:
// waiting on parity 1 passes at once).
__device__ __forceinline__ void mbarrier_wait(unsigned long long* bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile("{\\n .reg .pred p;\\n"
                     " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\\n"
                     " selp.u32 %0, 1, 0, p;\\n}\\n"
                     : "=r"(done) : "r"(shared_address(bar)), "r"(parity) : "memory");
    } while (!done);
}
// A box of the tensor map at element coordinates (x innermost, y), into shared memory in
// the map's swizzle; its bytes complete a transaction on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const TensorMap* map, int x, int y,
                                            unsigned long long* bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\\n"
                 :: "r"(shared_address(dst)), "l"(map), "r"(x), "r"(y),
                    "r"(shared_address(bar)) : "memory");
}
template <int REGISTERS>
__device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\\n" :: "n"(REGISTERS));
}
template <int REGISTERS>
__device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\\n" :: "n"(REGISTERS));
}"""


STORE_HELPERS = """\
// epilogue_via tma: C staged by stmatrix in shared memory, written by the TMA unit.
// The TMA unit writes a box of shared memory (in the map's swizzle) to the tensor at
// (x innermost, y), skipping what lies outside it; the copy joins this thread's bulk group.
__device__ __forceinline__ void tma_store_2d(const TensorMap* map, const void* src, int x,
                                             int y) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\\n"
                 :: "l"(map), "r"(x), "r"(y), "r"(shared_address(src)) : "memory");
}
__device__ __forceinline__ void tma_store_commit() {
    asm volatile("cp.async.bulk.commit_group;\\n" ::: "memory");
}
// Until this thread's bulk groups have read their shared memory (which may be reused).
__device__ __forceinline__ void tma_store_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read 0;\\n" ::: "memory");
}
// Four 8x8 tiles of 16-bit elements: register i of every lane to tile i, whose row r lane
// 8i + r addresses.
__device__ __forceinline__ void stmatrix_x4(void* row, unsigned r0, unsigned r1, unsigned r2,
                                            unsigned r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\\n"
                 :: "r"(shared_address(row)), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}
__device__ __forceinline__ unsigned pack_f16x2(float lo, float hi) {
    __half2 pair = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&pair);
}
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
    __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&pair);
}"""


def specialized(k: KernelIR) -> bool:
    return bool(k.mbarriers)


def stores_by_tma(k: KernelIR) -> bool:
    return any(isinstance(s, TmaStore) for s in walk(k.body))


def constants(k: KernelIR) -> list[str]:
    if not specialized(k):
        return []
    roles = k.specialization
    assert roles is not None  # specialized: the pass built both
    stage = next(s for s in walk(k.body) if isinstance(s, ExpectTx))
    store = (
        [
            f"constexpr int STORE_COLUMNS = {k.schedule.store_columns};  // epilogue_via tma: "
            "the columns of C a consumer warpgroup stages in Cs per TMA store"
        ]
        if stores_by_tma(k)
        else []
    )
    return store + [
        f"constexpr int STAGES = {k.schedule.stages}, STAGE_BYTES = {stage.bytes};  // "
        "mbarrier stages: A's and B's tiles of one K step, by TMA",
        f"constexpr int PRODUCER_REGISTERS = {roles.producer.registers}, CONSUMER_REGISTERS = "
        f"{roles.consumer.registers};  // setmaxnreg per role (tiledsl.models.registers)",
    ]


def prologue(k: KernelIR) -> list[str]:
    """The mbarrier arrays after the shared buffers, initialised by thread 0."""
    if not specialized(k):
        return []
    offsets = k.mbarrier_offsets()
    out = []
    for m in k.mbarriers:
        out.append(
            f"unsigned long long* {m.name} = reinterpret_cast<unsigned long long*>(smem + "
            f"{offsets[m.name]});  // {m.purpose}"
        )
    out.append("if (threadIdx.x == 0) {")
    # one loop per array length: the stages' barriers, then (pingpong) the teams' turns
    for name in ("STAGES", "TEAMS"):
        arrays = [m for m in k.mbarriers if (m.name == "turn") == (name == "TEAMS")]
        if not arrays:
            continue
        out.append(f"    for (int s = 0; s < {name}; ++s) {{")
        out += [f"        mbarrier_init(&{m.name}[s], {_arrivals(k, m.arrivals)});" for m in arrays]
        out.append("    }")
    out += [
        "    mbarrier_init_fence();",
        "}",
        "__syncthreads();  // the barriers are initialised before any role uses them",
    ]
    if k.persistent:
        out.append("const int blocks = gridDim.x;  // persistent: the launch's SM count")
    return out


def _consumers(k: KernelIR) -> str:
    """The consumer warpgroups, in the constants' names: the producer's warpgroup index."""
    return "WARPS_M * WARPS_N" + (" * TEAMS" if k.teams > 1 else "")


def _arrivals(k: KernelIR, n: int) -> str:
    return "WARPS_M * WARPS_N" if n == k.warp_count and n > 1 else str(n)


def statement(emitter, k: KernelIR, s) -> list[str] | None:
    match s:
        case Let():
            return [f"const int {s.var} = {emitter.expr(s.value)};"]
        case Roles():
            producer, consumer = s.producer, s.consumer
            return [
                f"if (warp == {_consumers(k)}) {{  // the producer warpgroup: one thread "
                "issues the TMA copies",
                "    setmaxnreg_dec<PRODUCER_REGISTERS>();  // registers back to the consumers",
                "    if (lane == 0) {",
                *("        " + x for x in emitter.stmts(k, producer.body)),
                "    }",
                "} else {  // the consumer warpgroups: wgmmas on the stages the producer fills",
                "    setmaxnreg_inc<CONSUMER_REGISTERS>();",
                *("    " + x for x in emitter.stmts(k, consumer.body)),
                "}",
            ]
        case TmaLoad():
            return _tma_load(emitter, k, s)
        case ExpectTx():
            note = f"  // {s.reason}" if s.reason else ""
            return [f"mbarrier_expect_tx(&{_bar(emitter, s.bar)}, STAGE_BYTES);{note}"]
        case Arrive():
            return [f"if (lane == 0) mbarrier_arrive(&{_bar(emitter, s.bar)});  // {s.reason}"]
        case Wait():
            return [
                f"mbarrier_wait(&{_bar(emitter, s.bar)}, {emitter.expr(s.parity)});  // {s.reason}"
            ]
        case TmaStore():
            return _tma_store(emitter, k, s)
        case TmaStoreWait():
            return [f"if (lane == 0) tma_store_wait_read();  // {s.reason}"]
        case ProxyFence():
            return [f"fence_proxy_async();  // {s.reason}"]
    return None


def _bar(emitter, ref) -> str:
    return f"{ref.name}[{emitter.expr(ref.slot)}]"


def _tma_store(emitter, k: KernelIR, s: TmaStore) -> list[str]:
    """One box per 64-element panel of the staged piece, by the warpgroup's thread 0."""
    b = k.buffer(s.src.buffer)
    operand = k.gemm.operand(s.dst.operand)
    y = emitter.expr(s.dst.origin[0] + s.dst.offset[0])
    x = emitter.expr(s.dst.origin[1] + s.dst.offset[1])
    slot = emitter.expr(s.src.slot)
    panels = s.src.cols // b.panel
    out = [
        f"if (lane == 0) {{  // {s.src.rows}x{s.src.cols} {b.name}[{slot}] -> "
        f"{operand.name} by TMA: {panels} box(es) of {b.panel} x {b.lines}, one bulk group",
    ]
    for p in range(panels):
        along = f"{x} + {p * b.panel}" if p else x
        out.append(
            f"    tma_store_2d(&map_{operand.name}, &{b.name}[{slot}][{p}][0][0], {along}, {y});"
        )
    return out + ["    tma_store_commit();", "}"]


def _tma_load(emitter, k: KernelIR, s: TmaLoad) -> list[str]:
    """One box per 64-element panel: x along the operand's contiguous dimension."""
    b = k.buffer(s.dst.buffer)
    operand = k.gemm.operand(s.src.operand)
    r = f"{emitter.expr(s.src.origin[0] + s.src.offset[0])}"
    c = f"{emitter.expr(s.src.origin[1] + s.src.offset[1])}"
    x, y = (c, r) if operand.layout == "row" else (r, c)
    out = [
        f"// {s.src.rows}x{s.src.cols} {emitter.tile_name(s.src)} -> {emitter.tile_name(s.dst)}"
        f" by TMA: {b.line_length // b.panel} box(es) of {b.panel} x {b.lines}, on "
        f"{_bar(emitter, s.bar)}"
    ]
    slot = emitter.expr(s.dst.slot)
    for p in range(b.line_length // b.panel):
        start = f"{b.name}[{slot}][{p}][0][0]"  # panel p, line 0
        along = f"{x} + {p * b.panel}" if p else x
        out.append(
            f"tma_load_2d(&{start}, &map_{operand.name}, {along}, {y}, &{_bar(emitter, s.bar)});"
        )
    return out
