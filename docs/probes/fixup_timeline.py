# ruff: noqa: E501  (the embedded CUDA and the printed table keep their own line lengths)
"""Probe (not part of tiledsl): where a stream-K kernel's time goes, block by block, and what
its hand-over of partial sums costs.

Issue 17's one shape below cuBLAS, 2048 x 4096 x 11008 (0.995x), idles 3 % of the SMs in its
last round of whole tiles; stream-K over that round lost (docs/performance.md, "stream-k
unbounded", 2026-12-02), and `stream_k_aligned` (2026-12-05, third session) is built to keep
its loads where whole tiles keep them. If it loses too, the question is which part of a
piece costs what: the loads (the K loop of a piece, against a whole tile's K step), the
contributor's store of its partial sum (128 KB from the registers, then a barrier and the
flag), the owner's wait for the flag, or its adds. This probe answers that from one launch:

- `%globaltimer` at up to 28 points of every block (the first consumer thread; the
  producer's one thread for its last load), written to a `__device__` array of the module:
  entry, the end of the whole tiles, for each of a block's first four stream-K pieces its
  first stage landed, its K loop's end, its partial sum stored, its flag signalled (or the
  owner's last flag acquired), its fix-up done and its C handed to the TMA unit, the
  consumers' end and the producer's;
- each kernel (default: examples/hopper/cluster.tile, stream_k.tile, stream_k_aligned.tile),
  stamped, is checked by both oracles, then timed by `tiledsl bench`'s loop beside cuBLAS
  (rounds in rotated order), then launched `--launches` times alone for its timeline;
- `--no-hand-over`: also each stream-K kernel with its hand-over cut out (no partial sum
  stored, no flag, no adds; **wrong on purpose**, so it is timed without the oracles): the
  time stream-K would take if its fix-up were free, and so how much of what it lost is the
  fix-up and how much the loads.

    python3 docs/probes/fixup_timeline.py [--tile FILE ...] [--rounds 3] [--launches 5]
                                          [--no-hand-over] [--quicker] [SIZE ...]   (default 2048x4096x11008)
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import cupy as cp
import numpy as np

import tiledsl.driver as driver
from tiledsl.commands.run import Report, check_size, gpu_checks, kernel_calls
from tiledsl.gpu import runtime
from tiledsl.gpu.baselines import cublas
from tiledsl.gpu.timing import CudaClock, rotated_sets, time_calls

TILES = [
    "examples/hopper/cluster.tile",
    "examples/hopper/stream_k.tile",
    "examples/hopper/stream_k_aligned.tile",
]
SLOTS, PIECES, PIECE_POINTS = 32, 4, 6
ENTRY, WHOLE_DONE, CONSUMERS_DONE, PRODUCER_DONE = (
    0,
    1,
    2 + PIECES * PIECE_POINTS,
    3 + PIECES * PIECE_POINTS,
)
PIECE_NAMES = [
    "first stage landed",
    "K loop end",
    "partial sum stored",
    "flag signalled / acquired",
    "fix-up done",
    "C handed to TMA",
]

STAMP_HELPER = f"""
// probe: %globaltimer at {SLOTS} points of every block (fixup_timeline.py)
__device__ unsigned long long probe_stamps[1024 * {SLOTS}];
__device__ __forceinline__ void probe_stamp(int slot) {{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    probe_stamps[blockIdx.x * {SLOTS} + slot] = t;
}}
"""

CONSUMER = "} else {  // the consumer warpgroups"
SHARE = "        // this block's share of the K steps of the tiles left (stream-K)\n"
LANDED = (
    "mbarrier_wait(&full[step % STAGES], step / STAGES % 2);  // this step's tiles have landed\n"
)
LOOP_END = "wgmma_wait<0>();  // every wgmma has read its tiles and written its accumulators\n"
STORED = "named_barrier(CONSUMERS_BARRIER, CONSUMER_THREADS);  // every consumer thread's partial sum is written before the flag\n"
SIGNAL = re.compile(r"( *)if \(threadIdx\.x == 0\) signal_flag\([^;]*\);[^\n]*\n")
WAIT = re.compile(r"( *)if \(threadIdx\.x == 0\) wait_flag\([^;]*\);[^\n]*\n")
OWNER_STORE = "// C leaves by TMA"
DRAIN = (
    "if (lane == 0) tma_store_wait_read();  // the TMA stores have read Cs before the block exits\n"
)


def must_count(src: str, text: str, count: int = 1) -> None:
    assert src.count(text) == count, f"expected {count} of {text!r}, found {src.count(text)}"


def after_line(src: str, text: str, addition: str, start: int = 0) -> str:
    """`addition` on a line of its own after the one that holds `text` (searched from `start`)."""
    i = src.index(text, start)
    end = src.index("\n", i) + 1
    indent = re.match(r" *", src[src.rindex("\n", 0, i) + 1 :]).group(0)
    return src[:end] + indent + addition + "\n" + src[end:]


def stamped(src: str) -> str:
    """The emitted source with the probe's stamps (first consumer thread, producer thread)."""
    must_count(src, CONSUMER)
    producer_end = src.index("    " + CONSUMER)
    src = (
        src[:producer_end]
        + f"        if (lane == 0) probe_stamp({PRODUCER_DONE});  // probe: the producer's last load issued\n"
        + src[producer_end:]
    )
    consumer = src.index(CONSUMER)
    head, body = src[:consumer], src[consumer:]
    body = after_line(
        body,
        "setmaxnreg_inc<CONSUMER_REGISTERS>();",
        f"if (threadIdx.x == 0) probe_stamp({ENTRY});",
    )
    if SHARE in body:  # stream-K: the pieces after the whole tiles
        share = body.index(SHARE)
        whole, pieces = body[:share], body[share:]
        whole += f"        if (threadIdx.x == 0) probe_stamp({WHOLE_DONE});\n"
        pieces = after_line(
            pieces,
            "for (int u = ",
            f"    const int probe_piece = 2 + min(u - sk_first / k_steps, {PIECES - 1}) * {PIECE_POINTS};",
        )
        pieces = after_line(
            pieces, LANDED, "if (threadIdx.x == 0 && kt == k_lo) probe_stamp(probe_piece + 0);"
        )
        pieces = after_line(pieces, LOOP_END, "if (threadIdx.x == 0) probe_stamp(probe_piece + 1);")
        pieces = pieces.replace(
            STORED, "if (threadIdx.x == 0) probe_stamp(probe_piece + 2);\n                " + STORED
        )
        pieces = SIGNAL.sub(
            lambda m: (
                m.group(0)
                + m.group(1)
                + "if (threadIdx.x == 0) { probe_stamp(probe_piece + 3); probe_stamp(probe_piece + 4); }\n"
            ),
            pieces,
        )
        pieces = WAIT.sub(
            lambda m: (
                m.group(0) + m.group(1) + "if (threadIdx.x == 0) probe_stamp(probe_piece + 3);\n"
            ),
            pieces,
        )
        owner = pieces.index(OWNER_STORE)
        pieces = (
            pieces[:owner]
            + "if (threadIdx.x == 0) probe_stamp(probe_piece + 4);\n                "
            + pieces[owner:]
        )
        must_count(pieces, "        }\n        " + DRAIN)
        pieces = pieces.replace(
            "        }\n        " + DRAIN,
            "            if (threadIdx.x == 0) probe_stamp(probe_piece + 5);\n        }\n        "
            + DRAIN,
        )
        body = whole + pieces
    body = after_line(body, DRAIN, f"if (threadIdx.x == 0) probe_stamp({CONSUMERS_DONE});")
    return head.replace('extern "C" __global__', STAMP_HELPER + 'extern "C" __global__', 1) + body


#: The owner's producer's acquire before its fetch (`stream_k_aligned` with the fetch): it
#: must go with the signals, or the producer waits for a flag no block sets (a hang; the
#: 2026-12-06 probe of the deferred flag lost its call's device time to it).
PRODUCER_WAIT = re.compile(r"\n *wait_flag\(&flags\[c_first \* CLUSTER_SIZE \+ rank\]\);[^\n]*")
DEFERRED_STORED = (
    "named_barrier(CONSUMERS_BARRIER, CONSUMER_THREADS);  // every consumer thread's part of "
    "the first piece's partial sum is written before the flag\n"
)


def without_hand_over(src: str) -> str:
    """Wrong on purpose: stream-K's pieces with no partial sum stored, no flag, no adds. A
    fetched kernel keeps its producer's copies (of whatever the workspace holds) and its
    consumers' adds of them: only the acquire goes."""
    src = re.sub(r"__stcg\(&partial\[[^;]*;", ";", src)
    src = src.replace(STORED, "\n").replace(DEFERRED_STORED, "\n")
    src = SIGNAL.sub("", src)
    src = PRODUCER_WAIT.sub("", src)
    assert "wait_flag(&flags[c_first" not in src and "signal_flag(&" not in src
    src, n = re.subn(
        r"for \(int c = [^;]*; c < [^;]*; \+\+c\) \{", "for (int c = 0; c < 0; ++c) {", src
    )
    assert n == 1, "expected one loop over the contributors"
    return src


# --- the quicker fix-up, as a source variant (checked by both oracles) --------------------
# Three changes to the aligned kernel's hand-over, each aimed at one part of its 8.4 µs:
#   1. (`defer`) the contributor's barrier and flag come two K steps into its next piece
#      (its stores drain under the wgmmas), not right after its stores (0.9 µs);
#   2. the owner acquires its contributors' flags three K steps before its piece ends, not
#      after its last wgmmas (0.5 µs);
#   3. the owner's consumer threads copy their first contributor's partial sum with cp.async
#      (16 bytes at a time, no registers) into the stage slots of its last K steps as each
#      one frees for good (the slot of step last - 3 once step last - 2's wait retires it,
#      and so on: 48, 48 and 32 KB), and add it from shared memory after their last
#      wgmmas (3.1 µs of adds from L2, the loads two or three batches deep).
# The owner's piece is its block's last (aligned order), so the producer loads nothing more
# into those slots; in a cluster the partner's multicasts into them have all landed (the
# owner waited on every `full` before).
PENDING_DECL = "        bool flag_pending = false;  // probe: the contributor's barrier and flag, not yet done\n"
DEFERRED = (
    "if (flag_pending) {{  // probe: the deferred barrier and flag of the piece before\n"
    "{i}    named_barrier(CONSUMERS_BARRIER, CONSUMER_THREADS);  // every consumer thread's partial sum is written before the flag\n"
    "{i}    if (threadIdx.x == 0) signal_flag(&flags[pid * CLUSTER_SIZE + rank]);  // the partial sum is in the workspace (release)\n"
    "{i}    flag_pending = false;\n"
    "{i}}}"
)
CP_ASYNC_HELPERS = """
// probe: the owner's prefetch of a partial sum into free stage slots
__device__ __forceinline__ void probe_cp_async16(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\\n"
                 :: "r"(static_cast<unsigned>(__cvta_generic_to_shared(dst))), "l"(src) : "memory");
}
__device__ __forceinline__ void probe_cp_async_wait_all() {
    asm volatile("cp.async.commit_group;\\ncp.async.wait_group 0;\\n" ::: "memory");
}
// 16 KB piece p of 8 of a partial sum: pieces 0-1 in B's slot of step last - 3 (== last + 1
// mod STAGES), 2-3 in step last - 2's, 4-5 in last - 1's; 6 and 7 in A's slots of the first two
#define PROBE_PIECE(p) (reinterpret_cast<float4*>((p) < 6 ? (unsigned char*)&Bs[(probe_last + 1 + (p) / 2) % STAGES][0][0][0] + (p) % 2 * 16384 : (unsigned char*)&As[(probe_last + 1 + (p) - 6) % STAGES][0][0][0]))
#define PROBE_GROUP(p) ((p) < 6 ? (p) / 2 : (p) - 6)
"""
OWNER_WAITS = (
    "{i}for (int c = c_first; c < pid; ++c) {{\n"
    "{i}    if (threadIdx.x == 0) wait_flag(&flags[c * CLUSTER_SIZE + rank]);  // block c's partial sum of this tile is in the workspace (acquire)\n"
    "{i}}}\n"
    "{i}named_barrier(CONSUMERS_BARRIER, CONSUMER_THREADS);  // the first thread's acquires, before every thread's reads\n"
)
FETCH = (
    "{i}#pragma unroll\n"
    "{i}for (int v = 0; v < 32; ++v) {{\n"
    "{i}    if ({cond}) probe_cp_async16(&PROBE_PIECE(v / 4)[v % 4 * CONSUMER_THREADS + threadIdx.x], &first_partial[v * CONSUMER_THREADS + threadIdx.x]);\n"
    "{i}}}\n"
)


# The emitted owner and contributor code both variants rewrite.
CONTRIBUTOR_SIGNAL = (
    "                named_barrier(CONSUMERS_BARRIER, CONSUMER_THREADS);  // every consumer thread's partial sum is written before the flag\n"
    "                if (threadIdx.x == 0) signal_flag(&flags[pid * CLUSTER_SIZE + rank]);  // the partial sum is in the workspace (release)\n"
)
OWNER_WAIT = re.compile(
    r" *if \(threadIdx\.x == 0\) wait_flag\(&flags\[c \* CLUSTER_SIZE \+ rank\]\);[^\n]*\n *named_barrier[^\n]*\n"
)
OWNER_READ = re.compile(
    r"const float4 sum = __ldcg\(&partial\[\(\(i \* 1 \+ j\) \* 32 \+ v\) \* CONSUMER_THREADS \+ threadIdx\.x\]\);"
)
OWNER_LOOP = re.compile(r"( *)for \(int c = c_first; c < pid; \+\+c\) \{\n")


def _owner_names(pieces: str) -> tuple[str, str]:
    """The owner's `c_base` and `c_first` lines, and its piece's last step (an expression)."""
    c_lines = re.search(
        r"( *const int c_base = [^\n]*\n *const int c_first = [^\n]*\n)", pieces
    ).group(1)
    last = re.search(
        r"mbarrier_arrive_remote\(&empty\[\((dp_rounds \* k_steps [^\]]*)\) % STAGES\]", pieces
    ).group(1)
    return c_lines, last


def _owner_without_waits(pieces: str, first_sum: str) -> str:
    """The owner's loop over its contributors without its waits (done earlier), the first
    contributor's partial sum read as `first_sum` (a C++ float4 expression)."""
    pieces, n = OWNER_WAIT.subn("", pieces)
    assert n == 1, n
    pieces, n = OWNER_READ.subn(
        f"const float4 sum = c == c_first ? {first_sum} : __ldcg(&partial[((i * 1 + j) * 32 + v) * CONSUMER_THREADS + threadIdx.x]);",
        pieces,
    )
    assert n == 1
    return pieces


def _before_owner_loop(pieces: str, lines: str) -> str:
    """`lines` (each ending in a newline) just before the owner's loop, at its indent."""
    loop = OWNER_LOOP.search(pieces)
    text = "".join(loop.group(1) + line + "\n" for line in lines.rstrip("\n").split("\n"))
    return pieces[: loop.start()] + text + pieces[loop.start() :]


def _flag_deferred(pieces: str) -> str:
    """The contributor's barrier and flag left pending (DEFERRED signals them later)."""
    must_count(pieces, CONTRIBUTOR_SIGNAL)
    return pieces.replace(
        CONTRIBUTOR_SIGNAL,
        "                flag_pending = true;  // probe: barrier and flag two K steps into the next piece\n",
    )


def _indent_of(src: str, text: str) -> str:
    i = src.index(text)
    return re.match(r" *", src[src.rindex("\n", 0, i) + 1 :]).group(0)


def _at_share_end(pieces: str) -> str:
    """A share of one piece: its deferred barrier and flag after its last piece (written so
    that stamped() leaves it alone: no piece's stamps out there)."""
    must_count(pieces, "        " + DRAIN)
    at_end = (
        DEFERRED.format(i="        ")
        .replace("written before the flag", "written before the flag (the share's end)")
        .replace("if (threadIdx.x == 0) signal_flag", "if (threadIdx.x == 0) { signal_flag")
        .replace("rank]);  // the partial sum", "rank]); }  // the partial sum")
    )
    return pieces.replace("        " + DRAIN, "        " + DRAIN + "        " + at_end + "\n")


def quicker_fix_up(src: str, defer: bool = True) -> str:
    """The aligned kernel's hand-over with the three changes above (a correct kernel); with
    `defer` off, the owner's two only (the contributor's barrier and flag where they were)."""
    must_count(src, "const int c_first")  # the aligned kernel's owner branch
    consumer = src.index(CONSUMER)
    head, body = src[:consumer], src[consumer:]
    share = body.index(SHARE)
    whole, pieces = body[:share], body[share:]
    pieces = PENDING_DECL + pieces
    # 1. the contributor: its barrier and flag deferred
    must_count(pieces, CONTRIBUTOR_SIGNAL)
    if defer:
        pieces = _flag_deferred(pieces)
    c_lines, last = _owner_names(pieces)
    # the owner's loop: no waits (done before); the first contributor's sum from shared memory
    pieces, n = re.subn(
        r"\n *const int c_base = [^\n]*\n *const int c_first = [^\n]*\n", "\n", pieces
    )
    assert n == 1
    pieces = _owner_without_waits(
        pieces, "PROBE_PIECE(v / 4)[v % 4 * CONSUMER_THREADS + threadIdx.x]"
    )
    pieces = _before_owner_loop(
        pieces,
        "if (c_first < pid) probe_cp_async_wait_all();  // probe: this thread's copies have landed",
    )
    # before the piece's K loop: who its contributors are, where its last step's slot is
    fill = "for (int q = 0; q < 128; ++q) acc[0][0][q] = 0.0f;\n"
    must_count(pieces, fill)
    i = _indent_of(pieces, fill)
    pieces = pieces.replace(
        fill,
        fill
        + "".join(i + line.strip() + "\n" for line in c_lines.strip("\n").split("\n"))
        + f"{i}const int probe_last = {last};  // the piece's last step\n"
        + f"{i}const bool probe_owner = k_hi == k_steps && c_first < pid;  // it adds partial sums\n"
        + f"{i}const float4* first_partial = reinterpret_cast<const float4*>(workspace) + (c_first * CLUSTER_SIZE + rank) * (PARTIAL_FLOATS / 4);\n",
        1,
    )
    # in the K loop, after the previous step's release: 1 (deferred flag), 2 and 3
    release_end = "                    }\n                }\n            }\n            " + LOOP_END
    must_count(pieces, release_end)
    i = " " * 16
    in_loop = (
        f"{i}if (kt == k_lo + 2) " + DEFERRED.format(i=i) + "\n"
        f"{i}if (probe_owner && k_hi - k_lo >= 4 && kt >= k_hi - 3) {{  // probe: steps last - 2 .. last: the slot of the step before is free for good\n"
        f"{i}    if (kt == k_hi - 3) {{\n"
        f"{i}        "
        + DEFERRED.format(i=i + "        ")
        + "\n"
        + OWNER_WAITS.format(i=i + "        ")
        + f"{i}    }}\n"
        + FETCH.format(i=i + "    ", cond="PROBE_GROUP(v / 4) == kt - (k_hi - 3)")
        + f"{i}}}\n"
    )
    pieces = pieces.replace(
        release_end,
        "                    }\n                }\n"
        + in_loop
        + "            }\n            "
        + LOOP_END,
    )
    # a piece too short for that: everything before its last wgmmas retire
    i = " " * 12
    early = (
        f"{i}" + DEFERRED.format(i=i) + "\n"
        f"{i}if (probe_owner && k_hi - k_lo < 4) {{  // probe: a short piece: every copy now\n"
        + OWNER_WAITS.format(i=i + "    ")
        + FETCH.format(i=i + "    ", cond="true")
        + f"{i}}}\n"
    )
    pieces = pieces.replace("            " + LOOP_END, early + "            " + LOOP_END, 1)
    pieces = _at_share_end(pieces)
    head = head.replace('extern "C" __global__', CP_ASYNC_HELPERS + 'extern "C" __global__', 1)
    return head + whole + pieces


PRODUCER_FETCH_HELPERS = """
// probe: the producer's fetch of an owner's partial sum (cp.async.bulk, 1-D, on an mbarrier)
__device__ __forceinline__ void probe_bulk_load(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\\n"
                 :: "r"(static_cast<unsigned>(__cvta_generic_to_shared(dst))), "l"(src), "r"(bytes),
                    "r"(static_cast<unsigned>(__cvta_generic_to_shared(bar))) : "memory");
}
// v-th float4 of this thread's partial sum as fetched: part v / 12 (48 KB: B's slot, then A's)
// in the slot of step last + 1 + part
#define PROBE_FETCHED(v) (reinterpret_cast<const float4*>((v) % 12 < 8 ? (const unsigned char*)&Bs[(probe_last + 1 + (v) / 12) % STAGES][0][0][0] + (v) % 12 * 4096 : (const unsigned char*)&As[(probe_last + 1 + (v) / 12) % STAGES][0][0][0] + ((v) % 12 - 8) * 4096)[threadIdx.x])
"""


def producer_fetch(src: str, defer: bool = True) -> str:
    """The aligned kernel with the owner's partial sum fetched by its producer: after its last
    load, the producer's thread acquires the contributors' flags and copies the first one's
    partial sum (three parts, as three more steps of its pipeline: claim the slot on
    `empty`, expect the bytes on `full`, cp.async.bulk) into the slots of the steps after its
    last; the consumers wait on those `full` barriers after their last wgmmas and add from
    shared memory. With `defer`, the contributor's barrier and flag as in quicker_fix_up."""
    must_count(src, "const int c_first")
    assert "STAGES = 4, STAGE_BYTES = 49152" in src and "PARTIAL_FLOATS = BM * BN" in src
    consumer = src.index(CONSUMER)
    producer, body = src[:consumer], src[consumer:]
    share = body.index(SHARE)
    whole, pieces = body[:share], body[share:]
    c_lines, last = _owner_names(pieces)
    # the producer: after the share's K loops
    i = " " * 16
    fetch = (
        f"{i}{{  // probe: the owner's first contributor's partial sum, into the slots after its last step\n"
        + "".join(f"{i}    " + line.strip() + "\n" for line in c_lines.strip("\n").split("\n"))
        + f"{i}    if (k_hi == k_steps && c_first < pid) {{\n"
        f"{i}        for (int c = c_first; c < pid; ++c) wait_flag(&flags[c * CLUSTER_SIZE + rank]);  // acquire\n"
        f'{i}        asm volatile("fence.proxy.async.global;\\n" ::: "memory");  // what the acquire saw, to the TMA unit\n'
        f"{i}        const int probe_last = {last};\n"
        f"{i}        const float4* first_partial = reinterpret_cast<const float4*>(workspace) + (c_first * CLUSTER_SIZE + rank) * (PARTIAL_FLOATS / 4);\n"
        f"{i}        for (int p = 0; p < 3; ++p) {{\n"
        f"{i}            const int step = probe_last + 1 + p;\n"
        f"{i}            mbarrier_wait(&empty[step % STAGES], (step / STAGES + 1) % 2);\n"
        f"{i}            mbarrier_expect_tx(&full[step % STAGES], p < 2 ? 49152 : 32768);\n"
        f"{i}            probe_bulk_load(&Bs[step % STAGES][0][0][0], first_partial + p * 3072, 32768, &full[step % STAGES]);\n"
        f"{i}            if (p < 2) probe_bulk_load(&As[step % STAGES][0][0][0], first_partial + p * 3072 + 2048, 16384, &full[step % STAGES]);\n"
        f"{i}        }}\n"
        f"{i}    }}\n"
        f"{i}}}\n"
    )
    p_share = producer.index(SHARE)
    tail = producer[p_share:]
    j = tail.index("                }\n            }\n        }\n    ")
    tail = tail[: j + len("                }\n")] + fetch + tail[j + len("                }\n") :]
    producer = producer[:p_share] + tail
    # the consumers: no waits; the first contributor's sum from the fetched slots
    pieces = _owner_without_waits(pieces, "PROBE_FETCHED(v)")
    pieces = _before_owner_loop(
        pieces,
        f"const int probe_last = {last};\n"
        "if (c_first < pid) for (int p = 0; p < 3; ++p) mbarrier_wait(&full[(probe_last + 1 + p) % STAGES], (probe_last + 1 + p) / STAGES % 2);  // probe: the fetched parts have landed",
    )
    if defer:
        pieces = PENDING_DECL + _flag_deferred(pieces)
        release_end = (
            "                    }\n                }\n            }\n            " + LOOP_END
        )
        must_count(pieces, release_end)
        i = " " * 16
        pieces = pieces.replace(
            release_end,
            "                    }\n                }\n"
            + f"{i}if (kt == k_lo + 2) "
            + DEFERRED.format(i=i)
            + "\n            }\n            "
            + f"{i[4:]}"
            + DEFERRED.format(i=" " * 12)
            + "\n            "
            + LOOP_END,
        )
        pieces = _at_share_end(pieces)
    head = producer.replace(
        'extern "C" __global__', PRODUCER_FETCH_HELPERS + 'extern "C" __global__', 1
    )
    return head + whole + pieces


def first_kernel(tile: str):
    compiled = driver.compile_file(Path(tile))
    k = compiled.kernels[0]
    return k, compiled.launches[0], compiled.source_for((k,))


def timeline(stamps: np.ndarray) -> dict:
    """Per point: (min, median, max) µs after the first block's entry, and how many blocks."""
    base = stamps[:, ENTRY][stamps[:, ENTRY] > 0].min()
    out = {}
    for slot in range(SLOTS):
        col = stamps[:, slot][stamps[:, slot] > 0]
        if len(col):
            us = (col - base) / 1e3
            out[slot] = (float(us.min()), float(np.median(us)), float(us.max()), len(col))
    return out


def durations(stamps: np.ndarray) -> dict[str, list[float]]:
    """Per block and piece, the µs of each part of a piece, by role."""
    parts: dict[str, list[float]] = {}

    def add(name, a, b):
        ok = (a > 0) & (b > 0)
        parts.setdefault(name, []).extend(((b[ok] - a[ok]) / 1e3).tolist())

    for p in range(PIECES):
        s = 2 + p * PIECE_POINTS
        landed, loop_end, stored, flag, fixed, issued = (
            stamps[:, s + i] for i in range(PIECE_POINTS)
        )
        contributor = stored > 0
        add("piece's K loop (first stage landed -> last wgmma retired)", landed, loop_end)
        add(
            "contributor: partial sum stored (128 KB from registers)",
            np.where(contributor, loop_end, 0),
            stored,
        )
        add("contributor: barrier + flag signalled", np.where(contributor, stored, 0), flag)
        add("owner: waited for the last flag", np.where(~contributor, loop_end, 0), flag)
        add("owner: adds after the last flag", np.where(~contributor, flag, 0), fixed)
        add("C handed to the TMA unit", fixed, issued)
    add("whole tiles (entry -> done)", stamps[:, ENTRY], stamps[:, WHOLE_DONE])
    return parts


def check_by_oracles(k, run, sizes, size, label: str) -> None:
    """Both oracles on one launch of `run` at `size`; prints PASS or stops the probe."""
    report = Report(k.name, size, "probe")
    gpu_checks(k, run, sizes, size, np.random.default_rng(1), report, Path("/tmp"))
    bad = [c for c in report.checks if not c.ok]
    print(f"{label}: {'PASS' if not bad else 'FAIL ' + str(bad)}", flush=True)
    assert not bad


def variants(
    tiles, no_hand_over: bool, arch: str, size, quicker: bool = False, base: str | None = None
) -> dict:
    """name: (kernel IR, its launcher, its size parameters, its module), each stamped; every
    one but the wrong-on-purpose ones checked by both oracles first. `base`: the aligned
    kernel's source as an earlier tiledsl emitted it (same parameters), the one the
    variants are made from; the kernel as emitted now is timed beside it."""
    label = "x".join(map(str, size))
    kernels = {}
    for tile in tiles:
        k, launch, source = first_kernel(tile)
        sources = {Path(tile).stem: (stamped(source), True)}
        if base is not None and "const int c_first" in source:
            sources = {
                Path(tile).stem: (stamped(base), True),
                Path(tile).stem + " (as emitted now)": (stamped(source), True),
            }
            source = base
        if quicker and "const int c_first" in source:
            early = quicker_fix_up(source, defer=False)
            sources[Path(tile).stem + " (owner's early prefetch)"] = (stamped(early), True)
            sources[Path(tile).stem + " (quicker fix-up)"] = (stamped(quicker_fix_up(source)), True)
            sources[Path(tile).stem + " (producer's fetch)"] = (
                stamped(producer_fetch(source, defer=False)),
                True,
            )
            sources[Path(tile).stem + " (producer's fetch, flag deferred)"] = (
                stamped(producer_fetch(source)),
                True,
            )
        if no_hand_over and "signal_flag(" in source:
            sources[Path(tile).stem + " (no hand-over)"] = (
                stamped(without_hand_over(source)),
                False,
            )
        for name, (src, checked) in sources.items():
            module = runtime.load_module(src, arch, name=f"fixup_{len(kernels)}.cu")
            run = runtime.launcher(module, launch)
            sizes = check_size(k, size)
            if checked:
                check_by_oracles(k, run, sizes, size, f"{label} {name}")
            kernels[name] = (k, run, sizes, module)
    return kernels


def timed(work: dict, clock, rounds: int, repeat: int, set_bytes: int, label: str) -> None:
    """Every call list (and cuBLAS) in `rounds` rounds in rotated order: each one's median."""
    times: dict[str, list[float]] = {name: [] for name in work}
    order = list(work)
    for round_ in range(rounds):
        shift = round_ % len(order)
        for name in order[shift:] + order[:shift]:
            t = time_calls(work[name], clock, warmup=10, repeat=repeat, set_bytes=set_bytes)
            times[name].append(t.median_ms * 1e3)
    best = min(times["cuBLAS"])
    print(
        f"\n{label}: the launch loop's median over {rounds} rounds, µs (x the fastest cuBLAS round)"
    )
    for name, v in times.items():
        print(f"  {name:36s} {np.median(v):8.2f}  ({best / np.median(v):.3f})")


POINT_NAMES = {
    ENTRY: "entry",
    WHOLE_DONE: "whole tiles done",
    CONSUMERS_DONE: "consumers done",
    PRODUCER_DONE: "producer's last load issued",
    **{
        2 + p * PIECE_POINTS + i: f"piece {p}: {point}"
        for p in range(PIECES)
        for i, point in enumerate(PIECE_NAMES)
    },
}


def launched_alone(calls: list, module, launches: int, title: str) -> None:
    """`launches` single launches: each point's spread over the blocks, and each part's."""
    stamps = cp.ndarray((1024, SLOTS), cp.uint64, module.get_global("probe_stamps"))
    lines, parts = [], {}
    for launch in range(launches):
        stamps.fill(0)
        calls[launch % len(calls)]()
        cp.cuda.Device().synchronize()
        host = stamps.get().astype(np.int64)
        lines.append(timeline(host))
        for part, v in durations(host).items():
            parts.setdefault(part, []).extend(v)
    print(
        f"\n{title}: one launch alone, µs after the first block's entry (each statistic's median over {launches} launches)"
    )
    for slot in sorted({s for line in lines for s in line}):
        rows = [line[slot] for line in lines if slot in line]
        mn, md, mx = (float(np.median([r[i] for r in rows])) for i in range(3))
        print(
            f"  {POINT_NAMES[slot]:40s} min {mn:8.2f} median {md:8.2f} max {mx:8.2f}  ({rows[0][3]} blocks)"
        )
    print("  parts, µs over every block and launch: median (max)")
    for part, v in parts.items():
        if v:
            print(f"  {part:58s} {np.median(v):7.2f} ({max(v):7.2f})  n={len(v)}")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("sizes", nargs="*", default=["2048x4096x11008"])
    ap.add_argument("--tile", nargs="+", default=TILES)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--launches", type=int, default=5)
    ap.add_argument("--no-hand-over", action="store_true")
    ap.add_argument(
        "--quicker", action="store_true", help="also the aligned kernel with quicker_fix_up()"
    )
    ap.add_argument(
        "--base-source",
        help="the aligned kernel's CUDA as an earlier tiledsl emitted it, for the variants",
    )
    ap.add_argument("--show", help="print this tile's stamped source and stop")
    args = ap.parse_args()
    if args.show:
        print(stamped(first_kernel(args.show)[2]))
        return
    arch = runtime.device_arch()
    arch = arch + "a" if arch == "sm_90" else arch
    clock, base = CudaClock(arch), cublas()
    for size in [tuple(int(v) for v in s.split("x")) for s in args.sizes]:
        label = "x".join(map(str, size))
        base_source = Path(args.base_source).read_text() if args.base_source else None
        kernels = variants(args.tile, args.no_hand_over, arch, size, args.quicker, base_source)
        sets, set_bytes = rotated_sets(size, 0, "ints")
        work = {
            name: kernel_calls(k, run, sizes, size, sets)
            for name, (k, run, sizes, _) in kernels.items()
        }
        work["cuBLAS"] = base.calls(next(iter(kernels.values()))[0].gemm, size, sets)
        timed(work, clock, args.rounds, args.repeat, set_bytes, label)
        for name, (_, _, _, module) in kernels.items():
            launched_alone(work[name], module, args.launches, f"{label} {name}")


if __name__ == "__main__":
    main()
