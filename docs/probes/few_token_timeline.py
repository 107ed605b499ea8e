# ruff: noqa: E501  (the embedded CUDA and the printed table keep their own line lengths)
"""Probe (not part of tiledsl): where a swapped few-token kernel's time goes, against a read of
its weights alone.

At M <= 64 the tuned swapped kernels (examples/tuned/few_tokens_swapped.tuned.tile) run at
0.76-0.81 of the memory bound where a read of the weights alone, as `tiledsl bench` times
it, reaches 0.90-0.91 (docs/probes/read_floor.py, H200, 2026-12-05): 3-6 µs a call. Which
part of the kernel are they? This probe stamps `%globaltimer` at eight points of every block,
written to a `__device__` array of the module:

  entry (thread 0), barriers initialised (thread 0, after the block barrier), the
  producer's first copy issued and its last, the consumers' first stage landed and their
  last, the consumers' last K loop's end, and the consumers' end (C stored, fix-up done);

then, from one launch alone: each point's spread over the blocks, and the stream's rate
(the weights' bytes over the first block's first stage landed to the last block's last).

Variants, each timed by `tiledsl bench`'s loop beside cuBLAS (rounds in rotated order):
- `as emitted` (checked by both oracles first);
- `tensormap prefetch` (checked): thread 0 prefetches each tensor map first thing;
- `no wgmma` (**wrong on purpose**, timed without the oracles): the consumers wait for each
  stage and release it with no wgmma: the same kernel's loads, hand-overs and ends alone;
- with `--stages N` (repeatable), `N stages` (checked): the kernel with N stages;
- with `--hints`, `B evict_first` and `B evict_first, A evict_last` (checked): the
  weights' TMA loads carry an L2 evict_first policy (`.L2::cache_hint`), the tokens' an
  evict_last one in the second;
- with `--defer`, `flag deferred into the next piece` (checked; stream-K and `persistent
  split_k`, whose contributor is its block's first piece): the contributor's barrier and
  flag DEFER_STEPS K steps into its block's next piece, its stores draining meanwhile;
- with `--early`, `first stages' copies before the barrier` (checked; kernels without
  `persistent`): the thread that initialises the mbarriers issues the first STAGES steps'
  copies right after, before the block barrier and the roles' setmaxnreg;
- with `--rotate`, `K steps rotated per tile` (checked): tile bm takes its K steps from
  step 13 x bm of its range on, wrapping round, so that the blocks do not all read the
  same offset of their weight rows at once (the same sum in another order); and so each
  `--split` variant;
- with `--release-now`, `slot released at once` (checked): each K step's wgmmas waited for
  to the last (`wgmma_wait<0>`) and the step's own slot released right after, instead of
  one group left in flight and the slot before released (the emitted kernels hold a slot a
  step longer than its wgmmas read it: at a few tokens a step's wgmmas take far less time
  than a stage takes to land, so the loads have one slot fewer in flight than STAGES);
- with `--cluster-split STAGES` (repeatable), `2 slices in a cluster, STAGES stages`
  (checked): the same schedule without `persistent`, as 2 slices of each tile's K steps, one
  block a slice (`__launch_bounds__(THREADS, 1)`), the two slices of a tile a cluster of 2
  (`__cluster_dims__`); slice 1 leaves its partial sum in its own shared memory, a cluster
  barrier (release / acquire) hands it to slice 0, which adds it to its own (slice order,
  deterministic) over distributed shared memory (`mapa` + `ld.shared::cluster`) and stores
  C; a second cluster barrier keeps slice 1 alive until slice 0 has read. No workspace, no
  flag, no global round trip: what a split costs with the cheapest fix-up Hopper has;
- `no hand-over` (**wrong on purpose**), for a split: no partial sum stored, no flag, no
  adds (fixup_timeline.py's cut);
- with `--split S:B:STAGES` (repeatable), `S slices, B a SM` (**wrong on purpose**: no
  fix-up, every slice stores its partial sum into C): the same schedule without
  `persistent`, with STAGES stages, launched as tiles x S blocks, block b computing slice
  b % S of tile b / S, with `__launch_bounds__(THREADS, B)` and the consumers' registers cut
  to fit B blocks an SM. The hardware's block scheduler hands the blocks to the SMs as
  earlier ones finish: what a split that balances the SMs' work dynamically could reach,
  against the persistent split's fixed share per SM.
And an empty kernel of the same launch shape: what a call costs outside any kernel.

    python3 docs/probes/few_token_timeline.py [--kernel NAME ...] [--hints] [--early] [--defer] [--release-now] [--cluster-split STAGES] [--rounds 3] [SIZE ...]
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from pathlib import Path

import cupy as cp
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from fixup_timeline import (  # noqa: E402
    after_line,
    check_by_oracles,
    must_count,
    timed,
    without_hand_over,
)

import tiledsl.driver as driver  # noqa: E402
from tiledsl.commands.run import check_size, kernel_calls  # noqa: E402
from tiledsl.emit.hopper import CLUSTER_HELPERS  # noqa: E402
from tiledsl.gpu import runtime  # noqa: E402
from tiledsl.gpu.baselines import cublas  # noqa: E402
from tiledsl.gpu.timing import CudaClock, rotated_sets  # noqa: E402

TUNED = "examples/tuned/few_tokens_swapped.tuned.tile"
MAX_BLOCKS = 8192
SLOTS = 8
POINTS = [
    "entry",
    "barriers initialised",
    "producer: first copy issued",
    "producer: last copy issued",
    "consumers: first stage landed",
    "consumers: last stage landed",
    "consumers: last K loop's end",
    "consumers: done",
]
ENTRY, INIT, FIRST_COPY, LAST_COPY, FIRST_LANDED, LAST_LANDED, LOOP_END, DONE = range(SLOTS)

STAMP_HELPER = f"""
// probe: %globaltimer at {SLOTS} points of every block (few_token_timeline.py); blocks past
// the first {MAX_BLOCKS} are not stamped
__device__ unsigned long long probe_stamps[{MAX_BLOCKS} * {SLOTS}];
__device__ __forceinline__ void probe_stamp(int slot) {{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (blockIdx.x < {MAX_BLOCKS}) probe_stamps[blockIdx.x * {SLOTS} + slot] = t;
}}
"""
CONSUMER = "} else {  // the consumer warpgroups"
LANDED = (
    "mbarrier_wait(&full[step % STAGES], step / STAGES % 2);  // this step's tiles have landed\n"
)
LOOP_END_TEXT = "wgmma_wait<0>();  // every wgmma has read its tiles and written its accumulators\n"
COPY = re.compile(r"( *)(tma_load_2d\(&Bs\[[^\n]*\n)")


def stamped(src: str) -> str:
    """The emitted source with the probe's stamps (thread 0: a consumer; thread 128: the producer)."""
    src = after_line(
        src, "unsigned char* smem = smem_base", f"if (threadIdx.x == 0) probe_stamp({ENTRY});"
    )
    src = after_line(
        src,
        "__syncthreads();  // the barriers are initialised",
        f"if (threadIdx.x == 0) probe_stamp({INIT});",
    )
    src = after_line(src, "setmaxnreg_dec<PRODUCER_REGISTERS>();", "bool probe_first = true;")
    src, copies = COPY.subn(
        lambda m: (
            m.group(1)
            + f"if (probe_first) {{ probe_stamp({FIRST_COPY}); probe_first = false; }}\n"
            + m.group(1)
            + m.group(2)
            + m.group(1)
            + f"probe_stamp({LAST_COPY});\n"
        ),
        src,
    )
    assert copies >= 1, "no TMA copy of B found"
    consumer = src.index(CONSUMER)
    head, body = src[:consumer], src[consumer:]
    body = after_line(body, "setmaxnreg_inc<CONSUMER_REGISTERS>();", "bool probe_first = true;")
    stamp_landed = (
        f"if (threadIdx.x == 0) {{ if (probe_first) {{ probe_stamp({FIRST_LANDED}); probe_first = false; }} "
        f"probe_stamp({LAST_LANDED}); }}"
    )
    pieces = body.split(LANDED)
    body = pieces[0]
    for rest in pieces[1:]:
        indent = re.match(r" *", body[body.rindex("\n") + 1 :]).group(0)
        body += LANDED + indent + stamp_landed + "\n" + rest
    body = body.replace(
        LOOP_END_TEXT,
        LOOP_END_TEXT + f"            if (threadIdx.x == 0) probe_stamp({LOOP_END});\n",
    )
    must_count(body, "\n    }\n}")
    body = body.replace(
        "\n    }\n}", f"\n        if (threadIdx.x == 0) probe_stamp({DONE});\n    }}\n}}"
    )
    return head.replace('extern "C" __global__', STAMP_HELPER + 'extern "C" __global__', 1) + body


PREFETCH_HELPER = """
// probe: CUDA's prefetch of a __grid_constant__ tensor map into the TMA unit's cache
__device__ __forceinline__ void prefetch_tensormap(const TensorMap* map) {
    asm volatile("prefetch.tensormap [%0];\\n" :: "l"(map) : "memory");
}
"""


def with_prefetch(src: str) -> str:
    """Thread 0 prefetches every tensor map first thing, before the barriers' setup (what
    tiledsl emitted from 91f40ba until the A/B on the H100 of 2026-12-05 showed no gain)."""
    maps = re.findall(r"const __grid_constant__ TensorMap (\w+)", src)
    assert maps, "no tensor map in the source"
    lines = "".join(f"        prefetch_tensormap(&{m});  // probe\n" for m in maps)
    src = src.replace('extern "C" __global__', PREFETCH_HELPER + 'extern "C" __global__', 1)
    head = "    if (threadIdx.x == 0) {\n        for (int s = 0;"
    must_count(src, head)
    return src.replace(head, head.replace("{\n", "{\n" + lines, 1))


HINT_HELPERS = """
// probe: L2 cache policies (createpolicy) and a TMA load that carries one (.L2::cache_hint)
__device__ __forceinline__ unsigned long long probe_policy_evict_first() {
    unsigned long long policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}
__device__ __forceinline__ unsigned long long probe_policy_evict_last() {
    unsigned long long policy;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}
__device__ __forceinline__ void tma_load_2d_hint(void* dst, const TensorMap* map, int x, int y,
                                                 unsigned long long* bar,
                                                 unsigned long long policy) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5;\\n"
                 :: "r"(shared_address(dst)), "l"(map), "r"(x), "r"(y),
                    "r"(shared_address(bar)), "l"(policy) : "memory");
}
"""


def with_hints(src: str, tokens_last: bool) -> str:
    """The weights' (B's) TMA loads marked evict_first, so that a stream read once does not
    push out of L2 what is read again (the tokens, the split's partial sums); with
    `tokens_last` the tokens' (A's) loads marked evict_last too. The same loads, the same
    bytes: checked like the kernel as emitted."""
    src = src.replace('extern "C" __global__', HINT_HELPERS + 'extern "C" __global__', 1)
    plain = re.compile(r"tma_load_2d\((&Bs\[[^;]*)\);")
    src, n = plain.subn(r"tma_load_2d_hint(\1, probe_policy_evict_first());", src)
    assert n >= 1, "no TMA load of B"
    if tokens_last:
        src, n = re.subn(
            r"tma_load_2d\((&As\[[^;]*)\);",
            r"tma_load_2d_hint(\1, probe_policy_evict_last());",
            src,
        )
        assert n >= 1, "no TMA load of A"
    return src


HAND_OVER = (
    "named_barrier(CONSUMERS_BARRIER, CONSUMER_THREADS);  // every consumer thread's partial sum "
    "is written before the flag\n"
)
SIGNAL = "if (threadIdx.x == 0) signal_flag(&flags[pid]);  // the partial sum is in the workspace (release)\n"
SHARE = "// this block's share of the K steps of the tiles left (stream-K)\n"
PIECE_RELEASE = (
    "if (lane == 0) mbarrier_arrive(&empty[(step + STAGES - 1) % STAGES]);  // the previous "
    "step's wgmmas have retired: its slot is free\n"
)
PIECE_START = "if (k_lo < kt) {\n"
DEFER_STEPS = 2


def deferred_flag(src: str) -> str:
    """A stream-K or `persistent split_k` kernel (not stream_k_aligned, which defers its
    own) whose contributor, the piece that starts inside its tile (its block's first),
    stores its partial sum and goes on: the consumers' barrier and the flag come
    DEFER_STEPS K steps into the block's next piece (at once where none follows), so that
    the release's fence finds the stores drained instead of waiting for them. The same
    sums in the same order: checked like the kernel as emitted."""
    consumer = src.index(CONSUMER)
    head, body = src[:consumer], src[consumer:]
    signal = "named_barrier(CONSUMERS_BARRIER, CONSUMER_THREADS); if (threadIdx.x == 0) signal_flag(&flags[pid]); probe_owed = false;"
    must_count(body, HAND_OVER + " " * 16 + SIGNAL)
    body = body.replace(
        HAND_OVER + " " * 16 + SIGNAL,
        "probe_owed = true;  // probe: the flag comes in the next piece\n"
        + " " * 16
        + "if (u + 1 == (sk_last + k_steps - 1) / k_steps) { "
        + signal
        + " }  // probe: no next piece\n",
    )
    must_count(body, SHARE)
    body = body.replace(SHARE, SHARE + " " * 8 + "bool probe_owed = false;  // probe\n")
    must_count(body, PIECE_START)  # a piece's K loop (a whole tile's releases at 0 < kt)
    at = body.index(PIECE_RELEASE, body.index(PIECE_START)) + len(PIECE_RELEASE)
    at = body.index("\n", at) + 1  # the release's closing brace
    body = (
        body[:at]
        + " " * 16
        + f"if (probe_owed && kt == min(k_lo + {DEFER_STEPS}, k_hi - 1)) {{ {signal} }}  // probe\n"
        + body[at:]
    )
    return head + body


PRODUCER_LOOP = re.compile(
    r"( *)for \(int kt = 0; kt < \(K \+ BK - 1\) / BK; \+\+kt\) \{\n"
    r" *const int step = kt;\n"
    r" *mbarrier_wait\(&empty\[[^\n]*\n"
    r"((?: *mbarrier_expect_tx\([^\n]*\n)(?: *(?://|tma_load_2d)[^\n]*\n)+)"
    r"\1\}\n"
)
INIT_FENCE = "        mbarrier_init_fence();\n    }\n    __syncthreads();"


def early_loads(src: str) -> str:
    """The first STAGES steps' copies issued by the thread that initialises the barriers,
    right after it (what the block barrier, the roles' setmaxnreg and the producer's loop
    set-up cost the first copies); the producer's loop starts after them. Only a kernel
    without `persistent` (its one tile known at entry). The same loads into the same slots:
    checked like the kernel as emitted."""
    found = PRODUCER_LOOP.search(src)
    assert found, "no producer K loop of one tile (a persistent kernel?)"
    body = found.group(2)
    first = "(K + BK - 1) / BK < STAGES ? (K + BK - 1) / BK : STAGES"
    loop = found.group(0).replace("for (int kt = 0;", f"for (int kt = {first};", 1)
    src = src[: found.start()] + loop + src[found.end() :]
    # `tma_load_2d (`: not the stamps' pattern (COPY), which marks the producer loop's copies
    body = body.replace("tma_load_2d(", "tma_load_2d (")
    lines = "".join("    " + line.strip() + "\n" for line in body.splitlines())
    prologue = (
        "        fence_proxy_async();  // probe: the barriers' init before the TMA unit's use\n"
        f"        for (int kt = 0; kt < ({first}); ++kt) {{  // probe: the first steps' copies\n"
        "            const int step = kt;\n"
        + "".join("        " + line + "\n" for line in lines.splitlines())
        + "        }\n"
    )
    must_count(src, INIT_FENCE)
    return src.replace(INIT_FENCE, INIT_FENCE.replace("    }\n", prologue + "    }\n", 1))


K_LOOP = re.compile(r"( *)for \(int kt = (\w+); kt < ([^;]+); \+\+kt\) \{\n")


def rotated(src: str, spread: int = 13) -> str:
    """Each tile's K steps taken from a step of its own, wrapping round (tile bm starts
    `spread * bm` steps into its range): at any moment the blocks read the weights at many
    offsets within a row instead of all at the same one. The same sum in another order
    (exact on the oracles' integers), so it is checked like the kernel as emitted."""
    consumer = src.index(CONSUMER)
    head, body = src[:consumer], src[consumer:]
    head, loops = K_LOOP.subn(
        lambda m: (
            m.group(0)
            + f"{m.group(1)}    const int kr = {m.group(2)} + (kt - {m.group(2)} + bm * {spread}) % "
            f"(({m.group(3)}) - {m.group(2)});  // probe: this tile's steps, rotated\n"
        ),
        head,
    )
    assert loops >= 1, "no producer K loop"
    head, loads = re.subn(r"(tma_load_2d\([^;]*?, )kt \* BK", r"\1kr * BK", head)
    assert loads >= 2, "no TMA load at kt * BK"
    return head + body


RELEASE_LATE = re.compile(
    r"wgmma_wait<1>\(\);[^\n]*\n( *)if \(\w+ < kt\) \{\n *if \(lane == 0\) "
    r"mbarrier_arrive\(&empty\[\(step \+ STAGES - 1\) % STAGES\]\);[^\n]*\n *\}\n"
)
LAST_RELEASE = re.compile(
    r" *if \(0 < \(K \+ BK - 1\) / BK\) \{\n *if \(lane == 0\) mbarrier_arrive\(&empty\[[^\n]*\n *\}\n"
)


def released_at_once(src: str) -> str:
    """Each step's wgmmas retired (`wgmma_wait<0>`) and the step's own slot released at
    once, instead of the slot before it after `wgmma_wait<1>`; the release after the K loop
    (of the last step's slot) goes, since the loop has released it. The same loads and
    sums: checked like the kernel as emitted. Consumers without a cluster only."""
    assert "mbarrier_arrive_remote" not in src, "a cluster's releases: not rewritten"
    out, n = RELEASE_LATE.subn(
        lambda m: (
            "wgmma_wait<0>();  // probe: this step's wgmmas retired\n"
            f"{m.group(1)}if (lane == 0) mbarrier_arrive(&empty[step % STAGES]);"
            "  // probe: its slot released at once\n"
        ),
        src,
    )
    assert n >= 1, "no release of the slot before"
    out, last = LAST_RELEASE.subn("", out)
    assert last <= n, "more releases after a K loop than K loops"
    return out


def without_wgmma(src: str) -> str:
    """Wrong on purpose: the consumers wait for each stage and release it, with no wgmma."""
    out, n = re.subn(r"wgmma_m\d+n\d+k\d+_\w+<[^;]*;", ";", src)
    assert n >= 1, "no wgmma in the source"
    return out


def split_source(src: str, split: int, per_sm: int) -> str:
    """Wrong on purpose: the non-persistent kernel as `split` slices of each tile's K steps,
    one block a slice, no fix-up; `per_sm` blocks of it resident on an SM."""

    def sub(old: str, new: str, count: int = 1) -> None:
        nonlocal src
        must_count(src, old, count)
        src = src.replace(old, new)

    sub(
        "const int pid = blockIdx.x;  // one block per tile",
        f"const int pid = blockIdx.x / {split}, probe_slice = blockIdx.x % {split};\n"
        f"    const int probe_steps = (K + BK - 1) / BK, k_lo = probe_slice * probe_steps / {split}, "
        f"k_hi = (probe_slice + 1) * probe_steps / {split};  // probe: this block's slice\n    //",
    )
    sub(
        "for (int kt = 0; kt < (K + BK - 1) / BK; ++kt) {",
        "for (int kt = k_lo; kt < k_hi; ++kt) {",
        2,
    )
    sub("const int step = kt;", "const int step = kt - k_lo;", 2)
    sub("if (0 < kt) {", "if (k_lo < kt) {")
    src = re.sub(r"(__launch_bounds__\(\w+::THREADS), 1\)", rf"\1, {per_sm})", src)
    # the register file split B ways: a block starts with what __launch_bounds__ lets
    # ptxas give each thread; the producer keeps 40 and the consumers take the rest
    at_launch = 65536 // (per_sm * 256) // 8 * 8
    consumer = 2 * at_launch - 40
    src = re.sub(r"CONSUMER_REGISTERS = \d+", f"CONSUMER_REGISTERS = {min(consumer, 240)}", src)
    return src


# probe: a float of the block of rank `rank` at `p`'s offset in its shared memory (mapa:
# its address in the cluster's shared window); beside tiledsl's own cluster helpers
PEER_LOAD_HELPER = """
__device__ __forceinline__ float probe_peer_load(const float* p, unsigned rank) {
    unsigned remote;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(shared_address(p)), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
    return v;
}
"""
C_STORE = re.compile(
    r"( *)// acc\[0\]\[0\] -> C \(column-major\)[^\n]*\n *#pragma unroll\n"
    r"( *)for \(int n8 = 0;.*?\n\2\}\n",
    re.S,
)


def cluster_split_source(src: str) -> str:
    """The non-persistent kernel as 2 slices of each tile's K steps, the two blocks of a
    tile a cluster, slice 1's partial sum added by slice 0 over distributed shared memory.
    A correct split (checked by both oracles): slice 0 adds its own sum and slice 1's, in
    that order, and alone stores C."""
    src = split_source(src, 2, 1)
    must_count(src, "void __launch_bounds__(")
    src = src.replace(
        "void __launch_bounds__(", "__cluster_dims__(2, 1, 1)\nvoid __launch_bounds__("
    )
    must_count(src, LOOP_END_TEXT)
    store = C_STORE.search(src)
    assert store and store.start() > src.index(LOOP_END_TEXT), (
        "no register C store after the K loop"
    )
    indent = store.group(1)
    exchange = (
        f"{indent}// probe: every copy has landed and every wgmma has read its slot, so stage 0's\n"
        f"{indent}// shared memory holds slice 1's partial sum, each consumer thread's accumulators\n"
        f"{indent}float* probe_part = reinterpret_cast<float*>(smem);\n"
        f"{indent}constexpr int PROBE_ACC = sizeof(acc) / sizeof(float), PROBE_THREADS = WARPS_M * WARPS_N * WARP_SIZE;\n"
        f"{indent}if (probe_slice == 1) {{\n"
        f"{indent}    #pragma unroll\n"
        f"{indent}    for (int q = 0; q < PROBE_ACC; ++q) probe_part[q * PROBE_THREADS + threadIdx.x] = (&acc[0][0][0])[q];\n"
        f"{indent}}}\n"
        f"{indent}cluster_sync();  // probe: slice 1's stores released to slice 0\n"
        f"{indent}if (probe_slice == 0) {{\n"
        f"{indent}    #pragma unroll\n"
        f"{indent}    for (int q = 0; q < PROBE_ACC; ++q) (&acc[0][0][0])[q] += probe_peer_load(&probe_part[q * PROBE_THREADS + threadIdx.x], 1);\n"
        f"{indent}}}\n"
        f"{indent}cluster_sync();  // probe: slice 0 has read: slice 1 may exit\n"
        f"{indent}if (probe_slice == 0) {{  // probe: slice 0 alone stores C\n"
    )
    src = src[: store.start()] + exchange + store.group(0) + f"{indent}}}\n" + src[store.end() :]
    helpers = CLUSTER_HELPERS + "\n" + PEER_LOAD_HELPER
    return src.replace('extern "C" __global__', helpers + 'extern "C" __global__', 1)


@functools.cache  # a schedule is compiled once, however many variants take it
def rescheduled(tile: str, name: str, stages: int, persistent: bool = False):
    """The kernel `name` of `tile` with `stages` stages, and without its `persistent` line
    unless `persistent`."""
    text = Path(tile).read_text()
    block = re.search(rf"kernel {name} {{.*?\n}}", text, re.S)
    assert block, f"no kernel {name} in {tile}"
    schedule = block.group(0)
    if not persistent:
        schedule = re.sub(r"\n *persistent[^\n]*", "", schedule)
    new = f"{name}_{'p' if persistent else 'np'}{stages}"
    schedule = re.sub(r"stages \d+", f"stages {stages}", schedule).replace(
        f"kernel {name}", f"kernel {new}"
    )
    path = Path(f"/tmp/{new}.tile")
    path.write_text(schedule + "\n")
    compiled = driver.compile_file(path)
    k = compiled.kernels[0]
    return k, compiled.launches[0], compiled.source_for((k,))


@functools.cache  # the tuned file is compiled once, not once per size
def kernel_of(tile: str, name: str):
    compiled = driver.compile_file(Path(tile))
    for k, launch in zip(compiled.kernels, compiled.launches):
        if k.name == name:
            return k, launch, compiled.source_for((k,))
    raise SystemExit(f"no kernel {name} in {tile}")


def one_launch(call, module) -> np.ndarray:
    stamps = cp.ndarray((MAX_BLOCKS, SLOTS), cp.uint64, module.get_global("probe_stamps"))
    stamps.fill(0)
    call()
    cp.cuda.Device().synchronize()
    return stamps.get().astype(np.int64)


def report_launches(calls, module, launches: int, title: str, weight_bytes: int) -> None:
    per_point: dict[int, list[tuple[float, float, float]]] = {}
    rates, spans = [], []
    blocks = 0
    for i in range(launches):
        host = one_launch(calls[i % len(calls)], module)
        used = host[:, ENTRY] > 0
        host, blocks = host[used], int(used.sum())
        base = host[:, ENTRY].min()
        for slot in range(SLOTS):
            col = host[:, slot][host[:, slot] > 0]
            if len(col):
                us = (col - base) / 1e3
                per_point.setdefault(slot, []).append((us.min(), np.median(us), us.max()))
        landed = host[:, FIRST_LANDED][host[:, FIRST_LANDED] > 0]
        last = host[:, LAST_LANDED][host[:, LAST_LANDED] > 0]
        if len(landed) and len(last):
            span = (last.max() - landed.min()) / 1e3
            spans.append(span)
            rates.append(weight_bytes / (span * 1e-6) / 1e12)
    print(
        f"\n{title}: one launch alone ({blocks} blocks), µs after the first block's entry (medians over {launches} launches)"
    )
    for slot in sorted(per_point):
        rows = np.array(per_point[slot])
        mn, md, mx = np.median(rows, axis=0)
        print(f"  {POINTS[slot]:34s} min {mn:7.2f} median {md:7.2f} max {mx:7.2f}")
    if rates:
        print(
            f"  stream: first stage landed -> last stage landed {np.median(spans):.2f} µs, "
            f"the weights at {np.median(rates):.2f} TB/s"
        )


def empty_kernel_calls(launch) -> list:
    empty = cp.RawKernel('extern "C" __global__ void probe_empty() {}', "probe_empty")
    empty.max_dynamic_shared_size_bytes = launch.smem_bytes
    sms = runtime.multiprocessor_count()
    return [lambda: empty((sms,), (launch.threads,), (), shared_mem=launch.smem_bytes)]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("sizes", nargs="*", default=["1x4096x11008", "1x12288x4096"])
    ap.add_argument("--tile", default=TUNED)
    ap.add_argument(
        "--kernel",
        nargs="+",
        default=None,
        help="kernels of --tile (default: the one its dispatch table picks per size)",
    )
    ap.add_argument("--stages", type=int, action="append", default=[], metavar="N")
    ap.add_argument("--split", action="append", default=[], metavar="S:B:STAGES")
    ap.add_argument("--cluster-split", type=int, action="append", default=[], metavar="STAGES")
    ap.add_argument("--rotate", action="store_true", help="also each tile's K steps rotated")
    ap.add_argument(
        "--early",
        action="store_true",
        help="also the first stages' copies issued before the block barrier (no persistent)",
    )
    ap.add_argument(
        "--defer",
        action="store_true",
        help="also a stream-K or persistent split's flag deferred into the next piece",
    )
    ap.add_argument(
        "--release-now",
        action="store_true",
        help="also each step's slot released once its own wgmmas retire (wgmma_wait<0>)",
    )
    ap.add_argument(
        "--hints",
        action="store_true",
        help="also the weights' loads marked L2 evict_first (and the tokens' evict_last)",
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--launches", type=int, default=5)
    ap.add_argument("--show", action="store_true", help="print the stamped sources and stop")
    args = ap.parse_args()
    for text in args.sizes:
        size = tuple(int(v) for v in text.split("x"))
        for name in args.kernel or [picked(args.tile, size)]:
            k, launch, source = kernel_of(args.tile, name)
            variants = [
                ("as emitted", k, launch, stamped(source), True, 1),
                ("tensormap prefetch", k, launch, stamped(with_prefetch(source)), True, 1),
                (
                    "no wgmma (wrong on purpose)",
                    k,
                    launch,
                    stamped(without_wgmma(source)),
                    False,
                    1,
                ),
            ]
            if "signal_flag(" in source:  # a split: its fix-up cut out
                src = stamped(without_hand_over(source))
                variants.append(("no hand-over (wrong on purpose)", k, launch, src, False, 1))
            if args.rotate:
                src = stamped(rotated(source))
                variants.append(("K steps rotated per tile", k, launch, src, True, 1))
            if args.early and not k.schedule.persistent:
                src = stamped(early_loads(source))
                variants.append(
                    ("first stages' copies before the barrier", k, launch, src, True, 1)
                )
            handed_over = "signal_flag(&flags[pid]);  // the partial sum" in source
            if args.defer and handed_over and not k.schedule.aligned:  # aligned: its own
                src = stamped(deferred_flag(source))
                variants.append(("flag deferred into the next piece", k, launch, src, True, 1))
            if args.release_now:
                src = stamped(released_at_once(source))
                variants.append(("slot released at once", k, launch, src, True, 1))
            if args.hints:
                for label, tokens_last in (
                    ("B evict_first", False),
                    ("B evict_first, A evict_last", True),
                ):
                    src = with_hints(stamped(source), tokens_last)
                    variants.append((label, k, launch, src, True, 1))
            for stages in args.stages:
                k_s, launch_s, source_s = rescheduled(args.tile, name, stages, persistent=True)
                variants.append((f"{stages} stages", k_s, launch_s, stamped(source_s), True, 1))
            for spec in args.split:
                split, per_sm, stages = (int(v) for v in spec.split(":"))
                k_np, launch_np, source_np = rescheduled(args.tile, name, stages)
                label = f"{split} slices, {per_sm} a SM, {stages} stages (wrong on purpose)"
                sliced = split_source(source_np, split, per_sm)
                variants.append((label, k_np, launch_np, stamped(sliced), False, split))
                if args.rotate:
                    src = stamped(rotated(sliced))
                    variants.append((label + ", rotated", k_np, launch_np, src, False, split))
            for stages in args.cluster_split:
                k_np, launch_np, source_np = rescheduled(args.tile, name, stages)
                label = f"2 slices in a cluster, {stages} stages"
                src = stamped(cluster_split_source(source_np))
                variants.append((label, k_np, launch_np, src, True, 2))
            if args.show:
                for label, *_, src, _, _ in variants:
                    print(f"// ===== {name} {label}\n{src}")
                continue
            run_variants(variants, size, name, args)


def picked(tile: str, size) -> str:
    from tiledsl.tune.dispatch import read_table, table_path

    table = read_table(table_path(Path(tile)))
    assert table is not None, f"no dispatch table beside {tile}"
    return table.pick(size).kernel


def with_grid_times(run, factor: int):
    """The launcher `run` with its grid's x multiplied by `factor` (the probe's split)."""
    if factor == 1:
        return run
    built = run.arguments

    def arguments(pointers, sizes):
        grid, args, staged = built(pointers, sizes)
        return (grid[0] * factor, *grid[1:]), args, staged

    run.arguments = arguments
    return run


def run_variants(variants, size, name, args) -> None:
    arch = "sm_90a"
    label = "x".join(map(str, size))
    sets, set_bytes = rotated_sets(size, 0, "ints")
    work, modules = {}, {}
    for v, k, launch, src, checked, factor in variants:
        sizes = check_size(k, size)
        module = runtime.load_module(src, arch, name=f"few_token_{len(modules)}.cu")
        run = with_grid_times(runtime.launcher(module, launch), factor)
        if checked:
            check_by_oracles(k, run, sizes, size, f"{label} {name} {v}")
        work[v], modules[v] = kernel_calls(k, run, sizes, size, sets), module
    first = variants[0]
    work["empty kernel"] = empty_kernel_calls(first[2])
    work["cuBLAS"] = cublas().calls(first[1].gemm.as_written, size, sets)
    timed(work, CudaClock(arch), args.rounds, args.repeat, set_bytes, f"{label} {name}")
    weight_bytes = size[1] * size[2] * 2
    for v, module in modules.items():
        report_launches(work[v], module, args.launches, f"{label} {name} {v}", weight_bytes)


if __name__ == "__main__":
    main()
