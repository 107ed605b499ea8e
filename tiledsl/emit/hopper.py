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
    cluster    TmaLoad multicast: cp.async.bulk.tensor...multicast::cluster into every block
               of the mask; Arrive to the sharers: mapa + mbarrier.arrive.shared::cluster
               on each sharing block's barrier; Barrier(cluster): barrier.cluster arrive +
               wait (also after the barriers' initialisation, for every block's)
    Roles      one if/else on the warpgroup: the producer gives registers back
               (setmaxnreg.dec), the consumers take them (setmaxnreg.inc); ptxas honours
               that only with a register cap at entry (`__launch_bounds__(THREADS, 1)`)
               and each role one branch of a single if/else (else it warns C7508)
"""

from __future__ import annotations

from ..ir.fetch import pieces_of_part, stage_buffers, stage_bytes
from ..ir.grid import FLAG_DEFER_STEPS, SK_MAX_FILL, SK_PARTS
from ..ir.nodes import (
    BLOCK_ELECTED,
    Arrive,
    Barrier,
    ExpectTx,
    FlagSignal,
    FlagWait,
    KernelIR,
    Let,
    PartialAdd,
    PartialFetch,
    PartialFromPeer,
    PartialStore,
    PartialToShared,
    ProxyFence,
    Roles,
    Ticket,
    TmaLoad,
    TmaStore,
    TmaStoreWait,
    Wait,
    walk,
)
from .partials import accumulator_quads, partial_element, partial_row, partial_sum

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


CLUSTER_HELPERS = """\
// cluster: thread-block clusters; the tiles the blocks share are multicast by TMA.
// Every thread of every block of the cluster, here: what each did before is visible to all.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\\n"
                 "barrier.cluster.wait.acquire.aligned;\\n" ::: "memory");
}
// A box of the tensor map into `dst` of every block of the cluster in `mask` (bit r: the
// block of rank r), at the same shared-memory offsets; its bytes complete a transaction
// on each block's mbarrier at `bar`'s offset.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const TensorMap* map, int x,
                                                      int y, unsigned long long* bar,
                                                      unsigned short mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\\n"
                 :: "r"(shared_address(dst)), "l"(map), "r"(x), "r"(y),
                    "r"(shared_address(bar)), "h"(mask) : "memory");
}
// One arrival on the mbarrier at `bar`'s offset in the block of rank `rank` (mapa: its
// address in the cluster's shared window). What it hands over is a slot whose reads (the
// wgmmas') have retired, not data this thread wrote, so the default release (.cta) does:
// `.release.cluster` would fence every earlier access at cluster scope and measured half
// the speed on the H200 (2026-12-01: 0.298 ms against 0.159 ms at 4096^3).
__device__ __forceinline__ void mbarrier_arrive_remote(unsigned long long* bar, unsigned rank) {
    asm volatile("{\\n .reg .b32 remote;\\n"
                 " mapa.shared::cluster.u32 remote, %0, %1;\\n"
                 " mbarrier.arrive.shared::cluster.b64 _, [remote];\\n}\\n"
                 :: "r"(shared_address(bar)), "r"(rank) : "memory");
}"""


FLAG_HELPERS = """\
// Stream-K's fix-up between blocks (persistent stream_k): the first consumer thread
// releases a flag once every consumer thread's partial sum is in the workspace (after a
// named barrier of the consumers), and the owner's first consumer thread acquires it, then
// clears it, so that every launch finds the flags as it leaves them: zero.
__device__ __forceinline__ void signal_flag(unsigned* flag) {
    asm volatile("fence.acq_rel.gpu;\\n st.relaxed.gpu.global.u32 [%0], 1;\\n" :: "l"(flag)
                 : "memory");
}
__device__ __forceinline__ void wait_flag(unsigned* flag) {
    unsigned set;
    do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\\n" : "=r"(set) : "l"(flag) : "memory");
    } while (!set);
    asm volatile("st.relaxed.gpu.global.u32 [%0], 0;\\n" :: "l"(flag) : "memory");
}
"""

# `stream_k_aligned`'s fetched hand-over (tiledsl.ir.fetch): the producer's thread copies
# an owner's first contributor's partial sum into the stage slots its last steps free.
FETCH_HELPERS = """\
// The owner's producer thread, after its acquire of the contributor's flag: what the acquire
// made visible to this thread, visible to its TMA copies too (the async proxy reads it).
__device__ __forceinline__ void fence_proxy_async_global() {
    asm volatile("fence.proxy.async.global;\\n" ::: "memory");
}
// cp.async.bulk (1-D, no tensor map): `bytes` (a multiple of 16) from global `src` to
// shared `dst`, counted on the mbarrier at `bar`.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned bytes,
                                          unsigned long long* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1], %2, [%3];\\n"
                 :: "r"(shared_address(dst)), "l"(src), "r"(bytes), "r"(shared_address(bar))
                 : "memory");
}
"""

# `split_k S via cluster`: the slices of a tile hand partial sums over in shared memory.
SPLIT_CLUSTER_HELPERS = """\
// An arrival on the mbarrier at `bar`'s offset in the block of rank `rank` of the cluster,
// a release at cluster scope: what this warpgroup wrote to (or read from) shared memory
// before it, after the warpgroup's barrier, is ordered before the phase it completes.
__device__ __forceinline__ void mbarrier_arrive_cluster(unsigned long long* bar, unsigned rank) {
    asm volatile("{\\n .reg .b32 remote;\\n"
                 " mapa.shared::cluster.u32 remote, %0, %1;\\n"
                 " mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\\n}\\n"
                 :: "r"(shared_address(bar)), "r"(rank) : "memory");
}
// mbarrier_wait with an acquire at cluster scope: what the other blocks of the cluster wrote
// before their arrivals is visible to this thread's reads of their shared memory.
__device__ __forceinline__ void mbarrier_wait_cluster(unsigned long long* bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile("{\\n .reg .pred p;\\n"
                     " mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\\n"
                     " selp.u32 %0, 1, 0, p;\\n}\\n"
                     : "=r"(done) : "r"(shared_address(bar)), "r"(parity) : "memory");
    } while (!done);
}
// 16 bytes at `p`'s offset in the shared memory of the cluster's block of rank `rank`.
__device__ __forceinline__ float4 peer_load_float4(const float4* p, unsigned rank) {
    unsigned remote;
    float4 v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote)
                 : "r"(shared_address(p)), "r"(rank));
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(remote) : "memory");
    return v;
}
"""

# Both fix-ups' (the flags' and the tickets'): the consumer threads meet before a hand-over.
NAMED_BARRIER_HELPER = """\
// Until `threads` threads (whole warps) have reached named barrier `id`.
__device__ __forceinline__ void named_barrier(unsigned id, unsigned threads) {
    asm volatile("bar.sync %0, %1;\\n" :: "r"(id), "r"(threads) : "memory");
}
"""

DIVISOR_HELPERS = """\
// A value the host computed for this launch (tiledsl.passes.launch_scalars) with the two
// constants that divide by it without a divide instruction (tiledsl.ir.divisors):
// x / d = (umulhi(x, multiplier) + x) >> shift, exact for 0 <= x < 2^31. `/` and `%` by a
// Divisor are that; anywhere else it reads as its int.
struct Divisor {
    int value;
    unsigned multiplier, shift;
    __device__ __forceinline__ operator int() const { return value; }
};
__device__ __forceinline__ int operator/(int x, Divisor d) {
    const unsigned u = static_cast<unsigned>(x);
    return static_cast<int>((__umulhi(u, d.multiplier) + u) >> d.shift);
}
__device__ __forceinline__ int operator%(int x, Divisor d) {
    return x - x / d * d.value;
}
"""

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


def clustered(k: KernelIR) -> bool:
    """`cluster CM x CN`: clusters on neighbouring tiles, sharing their loads."""
    return k.cluster_size > 1


def in_clusters(k: KernelIR) -> bool:
    """Any thread-block cluster: `cluster CM x CN`'s, or a tile's slices (`split_k S via
    cluster`); the barriers are initialised for the whole cluster before any use."""
    return k.blocks_per_cluster > 1


def stores_by_tma(k: KernelIR) -> bool:
    return any(isinstance(s, TmaStore) for s in walk(k.body))


def constants(k: KernelIR) -> list[str]:
    if not specialized(k):
        return []
    roles = k.specialization  # None: `copy tma` alone, every warp computing
    stage = next(s for s in walk(k.body) if isinstance(s, ExpectTx))
    store = (
        [
            f"constexpr int STORE_COLUMNS = {k.schedule.store_columns};  // epilogue_via tma: "
            "the columns of C a consumer warpgroup stages in Cs per TMA store"
        ]
        if stores_by_tma(k)
        else []
    )
    cm, cn = k.cluster
    cluster = (
        [
            f"constexpr int CLUSTER_M = {cm}, CLUSTER_N = {cn}, CLUSTER_SIZE = {cm * cn};  "
            f"// cluster: blocks along M (sharing {k.gemm.b.name}'s tiles) by blocks along N "
            f"(sharing {k.gemm.a.name}'s)"
        ]
        if clustered(k)
        else []
    )
    split = (
        f"constexpr int SPLIT_K = {k.grid_split};  // split_k: a block per slice of every "
        "tile's K steps (tiles x SPLIT_K blocks); the last slice to finish adds them"
        if k.grid_split
        else f"constexpr int SPLIT_K = {k.split_k};  // persistent split_k: a last round's tiles "
        "are cut into SPLIT_K slices of their K steps when a block per slice fits the grid"
        if k.split_k
        else f"constexpr int SK_PARTS = {SK_PARTS}, FLAG_DEFER_STEPS = {FLAG_DEFER_STEPS};  "
        "// persistent stream_k_aligned: a block's share is at least 1/SK_PARTS of a tile's "
        "K steps; every last round is shared; a first piece's flag comes FLAG_DEFER_STEPS "
        "steps into the next"
        if k.aligned
        else f"constexpr int SK_PARTS = {SK_PARTS}, SK_MAX_FILL = {SK_MAX_FILL};  // persistent "
        "stream_k: a block's share is at least 1/SK_PARTS of a tile's K steps; the last "
        "round's tiles are shared when they fill at most SK_MAX_FILL % of the grid"
    )
    stream_k = (
        [
            split,
            "constexpr int CONSUMER_THREADS = WARPS_M * WARPS_N * WARP_SIZE, CONSUMERS_BARRIER = "
            "WARPS_M * WARPS_N + 1;  // the fix-up's named barrier of the consumer warpgroups "
            "(1 + warp is each warpgroup's own)",
            "constexpr int PARTIAL_FLOATS = BM * BN;  // a block's partial sum in the workspace: "
            "every consumer thread's accumulators",
        ]
        if k.hands_over
        else []
    )
    by_cluster = (
        [
            f"constexpr int SPLIT_K = {k.grid_split};  // split_k via cluster: a block per "
            "slice of every tile's K steps, the tile's slices one cluster; slice 0 adds the "
            "others' partial sums from their shared memory",
            "constexpr int CONSUMER_THREADS = WARPS_M * WARPS_N * WARP_SIZE;  // a partial sum "
            "in Ps: 16 bytes of every consumer thread at a time",
        ]
        if k.split_cluster
        else []
    )
    return (
        cluster
        + store
        + stream_k
        + by_cluster
        + [
            f"constexpr int STAGES = {k.schedule.stages}, STAGE_BYTES = {stage.bytes};  // "
            f"mbarrier stages: {k.gemm.a.name}'s and {k.gemm.b.name}'s tiles of one K step, "
            "by TMA",
            *(
                [
                    f"constexpr int PRODUCER_REGISTERS = {roles.producer.registers}, "
                    f"CONSUMER_REGISTERS = {roles.consumer.registers};  // setmaxnreg per role "
                    "(tiledsl.models.registers)"
                ]
                if roles is not None
                else []
            ),
        ]
    )


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
    if k.tickets:
        out.append(
            f"unsigned* ticket_box = reinterpret_cast<unsigned*>(smem + {k.ticket_box_offset()});"
            "  // split_k: the tile's ticket, from the first consumer thread to the others"
        )
    out.append("if (threadIdx.x == 0) {")
    # one loop per array length: the stages' barriers, then (pingpong) the teams' turns
    for name in ("STAGES", "TEAMS"):
        arrays = [m for m in k.mbarriers if (m.name == "turn") == (name == "TEAMS")]
        arrays = [m for m in arrays if m.name not in SPLIT_BARRIERS]
        if not arrays:
            continue
        out.append(f"    for (int s = 0; s < {name}; ++s) {{")
        out += [f"        mbarrier_init(&{m.name}[s], {_arrivals(k, m.arrivals)});" for m in arrays]
        out.append("    }")
    for m in k.mbarriers:
        if m.name in SPLIT_BARRIERS:  # split_k via cluster: one barrier each
            out.append(f"    mbarrier_init(&{m.name}[0], {_split_arrivals(k, m)});")
    out += ["    mbarrier_init_fence();", "}"]
    if clustered(k):
        out += [
            "cluster_sync();  // every block's barriers are initialised before any block's "
            "roles use them (the other blocks arrive on them and multicast into its stages)",
            *_multicast_masks(k),
        ]
    elif in_clusters(k):
        out.append(
            "cluster_sync();  // every slice's barriers are initialised before another slice "
            "of the tile arrives on them"
        )
    else:
        who = "role" if k.specialization is not None else "thread"
        out.append(f"__syncthreads();  // the barriers are initialised before any {who} uses them")
    if any(v.var == "blocks" for v in k.launch_scalars):
        out.append(
            "// blocks: the launch's "
            + ("clusters" if clustered(k) else "SM count")
            + ", a Divisor parameter (tiledsl.passes.launch_scalars)"
        )
    elif k.persistent and clustered(k):
        out.append(
            "const int blocks = gridDim.x / CLUSTER_SIZE;  // persistent: the clusters the "
            "launch holds (a cluster per CLUSTER_SIZE SMs)"
        )
    elif k.persistent:
        out.append("const int blocks = gridDim.x;  // persistent: the launch's SM count")
    return out


def _multicast_masks(k: KernelIR) -> list[str]:
    """The multicast masks the loads use: the ranks of this block's cluster row (same bm,
    sharing A's tile) and column (same bn, sharing B's), rank = crow + CLUSTER_M * ccol."""
    casts = {s.multicast for s in walk(k.body) if isinstance(s, TmaLoad) and s.multicast}
    out = []
    if "row" in casts:
        out.append(
            "unsigned short row_mask = 0;  // the blocks of this block's cluster row "
            f"({k.gemm.a.name}'s tile)"
        )
        out.append("for (int j = 0; j < CLUSTER_N; ++j) row_mask |= 1u << (crow + CLUSTER_M * j);")
    if "column" in casts:
        out.append(
            "const unsigned short column_mask = ((1u << CLUSTER_M) - 1) << (CLUSTER_M * ccol);"
            f"  // the blocks of this block's cluster column ({k.gemm.b.name}'s tile)"
        )
    return out


def _consumers(k: KernelIR) -> str:
    """The consumer warpgroups, in the constants' names: the producer's warpgroup index."""
    return "WARPS_M * WARPS_N" + (" * TEAMS" if k.teams > 1 else "")


def _arrivals(k: KernelIR, n: int) -> str:
    return "WARPS_M * WARPS_N" if n == k.warp_count and n > 1 else str(n)


#: `split_k S via cluster`'s barriers (tiledsl.passes.warp_specialization._split_barriers).
SPLIT_BARRIERS = ("sums", "taken")


def _split_arrivals(k: KernelIR, m) -> str:
    """`sums`: a consumer warpgroup's arrival from each other slice; `taken`: one from each
    of slice 0's consumer warpgroups."""
    return "WARPS_M * WARPS_N * (SPLIT_K - 1)" if m.name == "sums" else "WARPS_M * WARPS_N"


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
        case _ if isinstance(s, BLOCK_ELECTED) and k.specialization is None:
            # no producer: one thread of the block issues them
            inner = (
                _tma_load(emitter, k, s) if isinstance(s, TmaLoad) else _expect_tx(emitter, k, s)
            )
            return [THREAD_0, *("    " + x for x in inner), "}"]
        case TmaLoad():
            return _tma_load(emitter, k, s)
        case ExpectTx():
            return _expect_tx(emitter, k, s)
        case Arrive() if s.sharers:
            return [
                f"if (lane == 0) {{  // {s.reason}: in every block of this one's cluster row "
                "and column (their loads reach this block's slot, this block's reach theirs)",
                "    for (int r = 0; r < CLUSTER_SIZE; ++r) {",
                "        if (r % CLUSTER_M == crow || r / CLUSTER_M == ccol) "
                f"mbarrier_arrive_remote(&{_bar(emitter, s.bar)}, r);",
                "    }",
                "}",
            ]
        case Arrive() if s.rank is not None:
            return [
                f"if (lane == 0) mbarrier_arrive_cluster(&{_bar(emitter, s.bar)}, "
                f"{emitter.expr(s.rank)});  // {s.reason}"
            ]
        case Arrive():
            return [f"if (lane == 0) mbarrier_arrive(&{_bar(emitter, s.bar)});  // {s.reason}"]
        case PartialToShared() | PartialFromPeer():
            return _shared_partial(emitter, k, s)
        case Barrier(scope="cluster"):
            return [f"cluster_sync();  // {s.reason}"]
        case Barrier(scope="consumers"):
            return [f"named_barrier(CONSUMERS_BARRIER, CONSUMER_THREADS);  // {s.reason}"]
        case PartialStore() | PartialAdd():
            return _partial(emitter, k, s)
        case Ticket():
            return [
                f"if (threadIdx.x == 0) *ticket_box = take_ticket(&tickets[{emitter.expr(s.slot)}]"
                f", SPLIT_K);  // {s.reason}",
                "named_barrier(CONSUMERS_BARRIER, CONSUMER_THREADS);  // every consumer thread "
                "reads the ticket after its acquire",
                f"const int {s.var} = *ticket_box;",
            ]
        case FlagWait(by_producer=True):  # its thread runs alone (`if (lane == 0)`)
            return [
                f"wait_flag(&flags[{emitter.expr(s.slot)}]);  // {s.reason}",
                "fence_proxy_async_global();  // ... and for its TMA copies",
            ]
        case PartialFetch():
            return _partial_fetch(emitter, k, s)
        case FlagSignal() | FlagWait():
            call = "signal_flag" if isinstance(s, FlagSignal) else "wait_flag"
            return [f"if (threadIdx.x == 0) {call}(&flags[{emitter.expr(s.slot)}]);  // {s.reason}"]
        case Wait():
            wait = "mbarrier_wait_cluster" if s.cluster else "mbarrier_wait"
            return [f"{wait}(&{_bar(emitter, s.bar)}, {emitter.expr(s.parity)});  // {s.reason}"]
        case TmaStore():
            return _tma_store(emitter, k, s)
        case TmaStoreWait():
            return [f"if (lane == 0) tma_store_wait_read();  // {s.reason}"]
        case ProxyFence():
            return [f"fence_proxy_async();  // {s.reason}"]
    return None


#: The guard of what thread 0 issues in a kernel without roles (BLOCK_ELECTED).
THREAD_0 = "if (threadIdx.x == 0) {"


def join_elected(lines: list[str]) -> list[str]:
    """One `if (threadIdx.x == 0)` around thread 0's consecutive statements (the expect_tx
    and the copies of a step), not one each."""
    out: list[str] = []
    for line in lines:
        if line == THREAD_0 and out and out[-1] == "}" and _opened_by(out) == THREAD_0:
            out.pop()  # thread 0's block just before: go on inside it
            continue
        out.append(line)
    return out


def _opened_by(lines: list[str]) -> str:
    """The line that opened the block the last line ("}") closes: the last line before it
    at the list's own depth (the block's body is indented)."""
    return next((x for x in reversed(lines[:-1]) if not x.startswith(" ")), "")


def _expect_tx(emitter, k: KernelIR, s: ExpectTx) -> list[str]:
    """A stage's bytes (STAGE_BYTES), or a fetched part's (tiledsl.ir.fetch), announced."""
    note = f"  // {s.reason}" if s.reason else ""
    nbytes = "STAGE_BYTES" if s.bytes == stage_bytes(k) else str(s.bytes)
    return [f"mbarrier_expect_tx(&{_bar(emitter, s.bar)}, {nbytes});{note}"]


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
    # a box holds the copied tile's lines: a multicast part's, not the whole slot's
    lines = s.src.rows if b.layout == "row" else s.src.cols
    out = [
        f"// {s.src.rows}x{s.src.cols} {emitter.tile_name(s.src)} -> {emitter.tile_name(s.dst)}"
        f" by TMA: {b.line_length // b.panel} box(es) of {b.panel} x {lines}, on "
        f"{_bar(emitter, s.bar)}"
    ]
    slot = emitter.expr(s.dst.slot)
    # a multicast part starts some lines in (its block's share of the tile)
    line = emitter.expr(s.dst.offset[0] if b.layout == "row" else s.dst.offset[1])
    for p in range(b.line_length // b.panel):
        start = f"{b.name}[{slot}][{p}][{line}][0]"  # panel p, the part's first line
        along = f"{x} + {p * b.panel}" if p else x
        bar = _bar(emitter, s.bar)
        if s.multicast:
            out.append(
                f"tma_load_2d_multicast(&{start}, &map_{operand.name}, {along}, {y}, &{bar}, "
                f"{s.multicast}_mask);"
            )
        else:
            out.append(f"tma_load_2d(&{start}, &map_{operand.name}, {along}, {y}, &{bar});")
    return out


def _slot_bytes(name: str, slot: str) -> str:
    """The first byte of stage buffer `name`'s slot `slot` (a C++ expression)."""
    return f"reinterpret_cast<unsigned char*>({name}[{slot}])"


def _partial_fetch(emitter, k: KernelIR, s: PartialFetch) -> list[str]:
    """The producer's bulk copies of part `s.part` of a partial sum into the stage slot of
    step `s.step` (tiledsl.ir.fetch): one per stage buffer the part reaches."""
    slot = f"({emitter.expr(s.step)}) % STAGES"
    out = [
        f"{{  // {s.reason}: the stage slot of step {emitter.expr(s.step)}",
        "    const unsigned char* fetched = reinterpret_cast<const unsigned char*>(workspace) + "
        f"static_cast<size_t>({emitter.expr(s.slot)}) * (PARTIAL_FLOATS * 4);",
    ]
    for name, offset, nbytes in pieces_of_part(k, s.part):
        out.append(
            f"    bulk_load({_slot_bytes(name, slot)}, fetched + {offset}, {nbytes}, "
            f"&{_bar(emitter, s.bar)});  // {nbytes} bytes to {name}'s slot"
        )
    return [*out, "}"]


def _fetched_row(k: KernelIR, staged: str) -> list[str]:
    """`from`: where workspace row `row` of a fetched partial sum is, in the stage slots of
    steps `staged` on (tiledsl.ir.fetch; the branches fold away in the unrolled loop)."""
    starts, start = [], 0
    for name, size in stage_buffers(k):
        starts.append((name, start, size))
        start += size

    def at(name: str, first: int) -> str:
        base = _slot_bytes(name, f"({staged} + part) % STAGES")
        return f"{base} + (at - {first})" if first else f"{base} + at"

    name, first, _ = starts[-1]
    where = at(name, first)
    for name, first, size in reversed(starts[:-1]):
        where = f"at < {first + size} ? {at(name, first)} : {where}"
    return [
        "const int at = row * (CONSUMER_THREADS * 16) % STAGE_BYTES, "
        "part = row * (CONSUMER_THREADS * 16) / STAGE_BYTES;",
        f"const unsigned char* from = {where};",
    ]


def _shared_partial(emitter, k: KernelIR, s: PartialToShared | PartialFromPeer) -> list[str]:
    """`split_k S via cluster`: the thread's accumulators to its block's Ps, or plus the
    peer's (distributed shared memory), 16 bytes at a time in the workspace's layout."""
    index, values = partial_element(k, "CONSUMER_THREADS")
    if isinstance(s, PartialToShared):
        head = ["float4* partial = reinterpret_cast<float4*>(Ps[0]);"]
        body = [f"partial[{index}] = make_float4({', '.join(values)});"]
    else:
        head = [
            f"const float4* partial = reinterpret_cast<const float4*>(Ps[0]);  // of block "
            f"{emitter.expr(s.rank)} of the cluster"
        ]
        body = [
            f"const float4 sum = peer_load_float4(&partial[{index}], {emitter.expr(s.rank)});",
            *(f"{x} += sum.{c};" for x, c in zip(values, "xyzw", strict=True)),
        ]
    return accumulator_quads(k, s.reason, head, body)


def _partial(emitter, k: KernelIR, s: PartialStore | PartialAdd) -> list[str]:
    """Every consumer thread's accumulators to (or plus) slot `s.slot` of the workspace
    (tiledsl.emit.partials); a fetched one from the stage slots its producer copied it to."""
    if not (isinstance(s, PartialAdd) and s.staged is not None):
        return partial_sum(emitter, k, s, "CONSUMER_THREADS")
    _, values = partial_element(k, "CONSUMER_THREADS")
    body = [
        f"const int row = {partial_row(k)};",
        *_fetched_row(k, f"({emitter.expr(s.staged)})"),
        "const float4 sum = reinterpret_cast<const float4*>(from)[threadIdx.x];",
        *(f"{x} += sum.{c};" for x, c in zip(values, "xyzw", strict=True)),
    ]
    return accumulator_quads(k, s.reason, [], body)
