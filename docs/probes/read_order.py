# ruff: noqa: E501  (the embedded CUDA keeps its own line lengths)
"""Probe (not part of tiledsl): does reading the weights in a few-token GEMM's order cost
stream rate, against reading the same bytes in long runs?

read_floor.py's TMA reader streams the weights as contiguous chunks, the blocks side by
side along memory (block b's n-th chunk at b + n x grid): it reached 0.89-0.91 of the memory
bound at 4096 x 11008 and 12288 x 4096 on the H200, where the few-token kernels reach
0.77-0.80, and few_token_timeline.py's "no wgmma" variant (the kernel's pipeline with no
multiply) was no faster than the kernel. What differs between the two is the order and
shape of the reads and the pipeline's hand-over, and this probe takes them apart. One
thread a block reads its share of the N x K weights (as torch keeps a Linear's, K
contiguous) into STAGES slots of shared memory, as the few-token kernels do:

- `tiles R x C`: 2-D TMA boxes of R weight rows by C elements of K
  (`cp.async.bulk.tensor.2d`, no swizzle), in stream-K's order: the boxes counted band by
  band (a band = R rows, its K steps in order), each block taking a contiguous share of
  that count, as `persistent stream_k` shares the tiles' K steps. Each box reads R pieces
  of 2C bytes, each piece in another DRAM row;
- `packed R x C`: the same boxes, the same order, as if the weights had been packed once
  so that each box is contiguous (a 1-D `cp.async.bulk` of 2RC bytes): the order without
  the short pieces;
- `hand-over`: either of them with a second thread that waits for each slot and releases
  it through an `empty` mbarrier, the producer refilling a slot only after that release
  (the kernels' full/empty round trip, with no multiply behind it); without it the
  producer refills a slot as soon as it has landed.

`--kernel-like` takes the boxes the kernels use a step nearer them: the weights also as
K x N rows (`B: f16[K, N] row`, the files the canonical run picks at 16 and 64 tokens: a
band is then 64 or 128 columns, a box 64 rows of 128 or 256 bytes), the tokens' K step
loaded beside each box (16 rows of A, from L2), 128 blocks (a `split_k 2` kernel's 64 tiles
x 2), a warpgroup of consumers (each waits, they meet at a named barrier, one releases),
and the 128-byte swizzle wgmma reads.

Each is timed as `tiledsl bench` times a kernel (`time_calls`: an event pair around each
call, behind the hold kernel), on copies of the weights rotated past 2 x L2, at 132 blocks,
beside read_floor.py's best bulk reader (`bulk 32 KB x 6`), and judged against
bench/shapes.py's memory bound at 16 tokens (A, B and C over the run's copy rate).

    python3 docs/probes/read_order.py [--rounds 2] [--inflight 131072 196608] [--kernel-like]
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import cupy as cp
import numpy as np

from tiledsl.gpu.runtime import device_arch, l2_bytes
from tiledsl.gpu.tensor_maps import driver
from tiledsl.gpu.timing import CudaClock, median, rotation_count, time_calls

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))  # the shapes benchmark's bound: its copy, its bytes
sys.path.insert(0, str(ROOT / "docs" / "probes"))
from read_floor import BULK_SOURCE, NEVER  # noqa: E402
from shapes import PROJECTIONS, copy_bandwidth, operand_bytes  # noqa: E402

TOKENS = 16
MAX_SHARED = 227 * 1024  # bytes of dynamic shared memory a block may have on sm_90
BLOCKS = 132
#: (rows, K elements) of a box: 8 to 32 KB, 128 to 512 bytes of each row.
BOXES = [(64, 64), (64, 128), (128, 64), (32, 256), (64, 256), (16, 256)]

READER_SOURCE = r"""
struct alignas(64) TensorMap { unsigned long long bytes[16]; };

__device__ __forceinline__ unsigned smem(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void wait_parity(unsigned bar, unsigned parity) {
    unsigned done = 0;
    while (!done) {
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;"
                     " selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    }
}

// One thread streams this block's share of the boxes (band by band, K steps in order)
// into STAGES slots; with HANDOFF a second thread waits for each slot and releases it.
// A box is BOX_INNER x BOX_OUTER elements of the weights' map (inner dimension first):
// with KN 0 the N x K weights (a band = BOX_OUTER rows, a K step = BOX_INNER elements),
// with KN 1 the K x N weights (a band = BOX_INNER columns, a K step = BOX_OUTER rows).
// With TOKENS, each K step also brings the 16 tokens' K step (the A box, from L2).
extern "C" __global__ void __launch_bounds__(192)
read_NAME(const __grid_constant__ TensorMap map, const __grid_constant__ TensorMap tokens,
          const char* __restrict__ w, long long ksteps, long long total, unsigned* sink) {
    extern __shared__ __align__(128) char slots[];  // STAGES x (BOX_BYTES + TOKEN_BYTES)
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    // the slots start on 1024 bytes: the 128-byte swizzle's pattern is a function of
    // address bits 4-9 (the launch gives 1024 bytes of slack)
    const unsigned full0 = smem(&full[0]), empty0 = smem(&empty[0]);
    const unsigned slot0 = (smem(slots) + 1023u) & ~1023u;
    const unsigned token0 = slot0 + STAGES * BOX_BYTES;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(full0 + 8 * s));
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(empty0 + 8 * s));
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();
    const long long lo = total * blockIdx.x / gridDim.x;
    const long long mine = total * (blockIdx.x + 1) / gridDim.x - lo;
    if (threadIdx.x == 0) {  // the producer
        for (long long n = 0; n < mine; ++n) {
            const int s = (int)(n % STAGES);
            const unsigned again = (unsigned)((n / STAGES + 1) & 1);  // the use before's phase
            if (n >= STAGES) wait_parity((HANDOFF ? empty0 : full0) + 8 * s, again);
            const long long box = lo + n;
            const int band = (int)(box / ksteps), kt = (int)(box % ksteps);
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                         :: "r"(full0 + 8 * s), "r"(BOX_BYTES + TOKEN_BYTES) : "memory");
            if (PACKED) {  // the box as one contiguous run: the weights packed box by box
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                             " [%0], [%1], %2, [%3];"
                             :: "r"(slot0 + s * BOX_BYTES), "l"(w + box * BOX_BYTES),
                                "r"(BOX_BYTES), "r"(full0 + 8 * s) : "memory");
            } else {  // the box of the weights' rows: BOX_OUTER pieces of 2 x BOX_INNER bytes
                const int x = KN ? band * BOX_INNER : kt * BOX_INNER;
                const int y = KN ? kt * BOX_OUTER : band * BOX_OUTER;
                asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                             " [%0], [%1, {%2, %3}], [%4];"
                             :: "r"(slot0 + s * BOX_BYTES), "l"(&map), "r"(x), "r"(y),
                                "r"(full0 + 8 * s) : "memory");
            }
            if (TOKEN_BYTES) {  // the tokens' K step: 16 rows of A, K_STEP elements each
                asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                             " [%0], [%1, {%2, %3}], [%4];"
                             :: "r"(token0 + s * TOKEN_BYTES), "l"(&tokens), "r"(kt * K_STEP), "r"(0),
                                "r"(full0 + 8 * s) : "memory");
            }
        }
        if (!HANDOFF) {  // the last slots have landed before the block ends
            for (long long n = mine > STAGES ? mine - STAGES : 0; n < mine; ++n)
                wait_parity(full0 + 8 * (int)(n % STAGES), (unsigned)((n / STAGES) & 1));
        }
    } else if (HANDOFF && (CONSUMERS == 1 ? threadIdx.x == 32 : threadIdx.x >= 64)) {
        // the consumer (one thread, or a warpgroup as the kernels' consumers are): wait,
        // read a word, release (the warpgroup meets at a named barrier, one thread arrives)
        unsigned fold = 0;
        for (long long n = 0; n < mine; ++n) {
            const int s = (int)(n % STAGES);
            wait_parity(full0 + 8 * s, (unsigned)((n / STAGES) & 1));
            fold ^= reinterpret_cast<const unsigned*>(slots + s * BOX_BYTES)[threadIdx.x % 32];
            if (CONSUMERS > 1) asm volatile("bar.sync 1, CONSUMERS;" ::: "memory");
            if (CONSUMERS == 1 || threadIdx.x == 64)
                asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(empty0 + 8 * s)
                             : "memory");
        }
        if (fold == NEVER) sink[0] = fold;
    }
}
"""


def tensor_map(
    pointer: int, inner: int, outer: int, box_inner: int, box_outer: int, swizzle: bool = False
) -> np.void:
    """The 128 bytes of a 2-D f16 tensor map over a row-major outer x inner matrix, boxes of
    box_outer x box_inner, no swizzle or the 128-byte one (tiledsl.gpu.tensor_maps.encode,
    the box chosen here)."""
    cu = driver()
    err, tmap = cu.cuTensorMapEncodeTiled(
        cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        2,
        pointer,
        [cu.cuuint64_t(inner), cu.cuuint64_t(outer)],
        [cu.cuuint64_t(2 * inner)],
        [cu.cuuint32_t(box_inner), cu.cuuint32_t(box_outer)],
        [cu.cuuint32_t(1), cu.cuuint32_t(1)],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B
        if swizzle
        else cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    )
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled: {err}")
    return np.frombuffer(ctypes.string_at(tmap.getPtr(), 128), dtype="V128")[0]


@dataclass(frozen=True)
class Variant:
    """One reader: the weights' layout, the box (its K step and its band's width), the
    slots, and what the pipeline carries besides the weights."""

    layout: str  # "nk": N x K rows (torch's Linear); "kn": K x N rows (`B: f16[K, N] row`)
    band: int  # weight rows (nk) or columns (kn) a box spans: the tile's width
    k_step: int  # elements of K a box spans
    stages: int
    packed: bool = False
    handoff: bool = False
    tokens: bool = False  # each K step also loads the 16 tokens' K step (A, from L2)
    token_rows: int = TOKENS  # the tokens' box rows: 64 as a 64-row tile's A box (zero-filled)
    blocks: int = BLOCKS
    warpgroup: bool = False  # the hand-over's consumer a warpgroup of 128 threads, not one
    swizzle: bool = False  # the weights' boxes in the 128-byte swizzle wgmma reads

    @property
    def box(self) -> tuple[int, int]:
        """(inner, outer) elements of the box, the inner dimension contiguous."""
        return (self.k_step, self.band) if self.layout == "nk" else (self.band, self.k_step)

    @property
    def box_bytes(self) -> int:
        return 2 * self.band * self.k_step

    @property
    def token_bytes(self) -> int:
        return 2 * self.token_rows * self.k_step if self.tokens else 0

    @property
    def shared(self) -> int:
        return self.stages * (self.box_bytes + self.token_bytes) + 1024  # + the alignment

    @property
    def label(self) -> str:
        form = "packed" if self.packed else f"tiles {self.layout}"
        extras = [
            text
            for on, text in (
                (self.handoff, "hand-over"),
                (
                    self.tokens,
                    "tokens"
                    + (f" in {self.token_rows}-row boxes" if self.token_rows != TOKENS else ""),
                ),
                (self.blocks != BLOCKS, f"{self.blocks} blocks"),
                (self.warpgroup, "warpgroup"),
                (self.swizzle, "swizzle 128B"),
            )
            if on
        ]
        return (
            f"{form} {self.band} x {self.k_step} ({self.box_bytes // 1024} KB) x {self.stages}"
            + "".join(f", {e}" for e in extras)
        )

    def kernel(self):
        name = (
            f"{self.layout}_{self.band}_{self.k_step}_{self.stages}_{int(self.packed)}"
            f"{int(self.handoff)}{int(self.tokens)}{int(self.warpgroup)}{int(self.swizzle)}"
            f"_{self.token_rows}_{self.blocks}"
        )
        source = READER_SOURCE.replace("NAME", name).replace("NEVER", f"{NEVER}u")
        inner, outer = self.box
        for word, value in (
            ("BOX_BYTES", self.box_bytes),
            ("TOKEN_BYTES", self.token_bytes),
            ("BOX_INNER", inner),
            ("BOX_OUTER", outer),
            ("K_STEP", self.k_step),
            ("KN", int(self.layout == "kn")),
            ("STAGES", self.stages),
            ("PACKED", int(self.packed)),
            ("HANDOFF", int(self.handoff)),
            ("CONSUMERS", 128 if self.warpgroup else 1),
        ):
            source = source.replace(word, str(value))
        kernel = cp.RawKernel(source, f"read_{name}", options=("-arch=sm_90a",))
        kernel.max_dynamic_shared_size_bytes = self.shared
        return kernel

    def calls(self, weights, tokens, n: int, k: int, sink) -> list:
        """A call a copy of the weights: the kernel, its maps, its share of the boxes."""
        kernel = self.kernel()
        inner, outer = self.box
        shape = (k, n) if self.layout == "nk" else (n, k)  # the weights' (inner, outer)
        token_map = tensor_map(tokens.data.ptr, k, TOKENS, self.k_step, self.token_rows)
        ksteps, bands = k // self.k_step, n // self.band
        arguments = (cp.int64(ksteps), cp.int64(ksteps * bands), sink)
        threads = (192 if self.warpgroup else 64) if self.handoff else 32
        return [
            partial(
                kernel,
                (self.blocks,),
                (threads,),
                (
                    tensor_map(w.data.ptr, *shape, inner, outer, self.swizzle),
                    token_map,
                    w,
                    *arguments,
                ),
                shared_mem=self.shared,
            )
            for w in weights
        ]


def first_variants(inflight: list[int]) -> list[Variant]:
    """The first run's set (2026-12-06): N x K weights, box shapes and depths, tiles or
    packed, with or without the hand-over; no tokens, 132 blocks."""
    return [
        Variant("nk", rows, box_k, amount // (2 * rows * box_k), packed, handoff)
        for rows, box_k in BOXES
        for amount in inflight
        for packed in (False, True)
        for handoff in (False, True)
    ]


def kernel_like_variants() -> list[Variant]:
    """Nearer the few-token kernels, a step at a time: both layouts at their boxes with the
    hand-over; then with the tokens' loads; then on 128 blocks (a split-2 kernel's 64 tiles
    x 2); then with a warpgroup of consumers; then in the 128-byte swizzle where the box is
    128 bytes wide; then with the tokens in 64-row boxes, 48 of them zero-filled, as a
    64-row tile loads them (`kn 64 x 64 x 8` with all of it: small_m_2's copies)."""
    out = []
    for layout, band, k_step, stages in (
        ("nk", 64, 64, 16),
        ("nk", 64, 128, 8),
        ("kn", 64, 64, 8),
        ("kn", 64, 64, 16),
        ("kn", 128, 64, 8),
    ):
        steps = [Variant(layout, band, k_step, stages, handoff=True)]
        steps.append(replace(steps[-1], tokens=True))
        steps.append(replace(steps[-1], blocks=128))
        steps.append(replace(steps[-1], warpgroup=True))
        if 2 * steps[-1].box[0] == 128:  # the 128-byte swizzle takes boxes 128 bytes wide
            steps.append(replace(steps[-1], swizzle=True))
        steps.append(replace(steps[-1], token_rows=64))
        out += steps
    return [v for v in out if v.shared <= MAX_SHARED]


def bulk_reader():
    """read_floor.py's best TMA reader on the H200: 32 KB chunks, 6 slots, 132 blocks."""
    chunk, stages = 32768, 6
    source = (
        BULK_SOURCE.replace("CHUNK_STAGES", f"{chunk}_{stages}")
        .replace("CHUNK", str(chunk))
        .replace("STAGES", str(stages))
        .replace("NEVER", f"{NEVER}u")
    )
    kernel = cp.RawKernel(source, f"read_bulk_{chunk}_{stages}", options=("-arch=sm_90a",))
    kernel.max_dynamic_shared_size_bytes = chunk * stages

    def launch(w, nbytes, sink):
        kernel((BLOCKS,), (32,), (w, cp.int64(nbytes // chunk), sink), shared_mem=chunk * stages)

    return "bulk 32 KB x 6 (read_floor.py, chunks side by side)", launch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--inflight", type=int, nargs="+", default=[131072, 196608])
    ap.add_argument(
        "--kernel-like",
        action="store_true",
        help="the readers nearer the kernels (both layouts, tokens, 128 blocks) instead",
    )
    args = ap.parse_args()
    clock = CudaClock(device_arch())
    rate = copy_bandwidth()
    sink = cp.zeros(1, cp.uint32)
    variants = kernel_like_variants() if args.kernel_like else first_variants(args.inflight)
    print(
        f"copy rate {rate / 1e12:.2f} TB/s; {BLOCKS} blocks unless said; µs a call as "
        f"tiledsl bench times it; `of bound` = the {TOKENS}-token product's memory bound / time"
    )
    rng = cp.random.RandomState(1)
    for n, k in PROJECTIONS:
        weight_bytes = 2 * n * k
        count = rotation_count(weight_bytes, l2_bytes())
        weights = [rng.randint(-2, 3, n * k).astype(cp.float16) for _ in range(count)]
        tokens = rng.randint(-2, 3, (TOKENS, k)).astype(cp.float16)
        bound_ms = operand_bytes((TOKENS, n, k)) / rate * 1e3
        name, launch = bulk_reader()
        rows_out = [(name, [partial(launch, w, weight_bytes, sink) for w in weights])]
        for v in variants:
            if n % v.band or k % v.k_step:
                continue  # the probe's shares count whole boxes
            rows_out.append((v.label, v.calls(weights, tokens, n, k, sink)))
        print(f"\n{n} x {k} (bound at {TOKENS} tokens {bound_ms * 1e3:.1f} µs)")
        for label, calls in rows_out:
            ms = median(
                [
                    time_calls(calls, clock, warmup=5, repeat=30).median_ms
                    for _ in range(args.rounds)
                ]
            )
            print(f"  {label:56} {ms * 1e3:7.1f} µs  {bound_ms / ms:6.3f} of bound", flush=True)
        del weights


if __name__ == "__main__":
    main()
