# ruff: noqa: E501  (the embedded CUDA keeps its own line lengths)
"""Probe (not part of tiledsl): where do the global copies' cycles go in the tuned WMMA
kernel, and does spreading a block step's cp.async copies over its fragment steps (as
CUTLASS's multistage mainloop does) beat issuing them all at kk == 0?

    python3 docs/probes/spread_probe.py [--size 4096 --size 8192]

Takes examples/tuned/wmma_f16acc.tile as tiledsl emits it (128 x 256 x 64, 16 warps,
4 stages, fragment_buffers 2: A's copy is 2 vectors per thread, B's 4) and rewrites the
`if (kk == 0)` issue block by hand into variants; each is checked bit-exact against
cupy's f32 matmul and timed beside the original and cuBLAS, inputs rotated past the L2.
Diagnostic variants (results wrong on purpose, marked "diag"): every step copies the
same K tile through L1 (`.ca`: no L2 or DRAM traffic, same instructions and shared
stores), and the copies without their wait (no stall on landing).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import cupy as cp
import numpy as np

TILE = "examples/tuned/wmma_f16acc.tile"
A_COPY = (
    "cp_async<16>(&As[(kt + 3) % 4][r][c], &A[(long long)(bm * BM + r) * K + ((kt + 3) * BK + c)]);"
)
B_COPY = (
    "cp_async<16>(&Bs[(kt + 3) % 4][r][c], &B[(long long)((kt + 3) * BK + r) * N + (bn * BN + c)]);"
)


def a_vec(it):
    return f"{{ const int v = threadIdx.x + {it} * THREADS; const int r = v / 8, c = v % 8 * 8; {A_COPY} }}"


def b_vec(it):
    return f"{{ const int v = threadIdx.x + {it} * THREADS; const int r = v / 32, c = v % 32 * 8; {B_COPY} }}"


def issue_block(plan, commit_at):
    """plan: {kk: [vectors]}; the group is committed at fragment step commit_at."""
    out = []
    for kk in range(4):
        vecs = plan.get(kk, [])
        if not vecs and kk != commit_at:
            continue
        out.append(f"            if (kk == {kk}) {{")
        if vecs:
            out.append("                if (kt + 3 < (K + BK - 1) / BK) {")
            out += [f"                    {v}" for v in vecs]
            out.append("                }")
        if kk == commit_at:
            out.append("                cp_async_commit();")
        out.append("            }")
    return "\n".join(out)


VARIANTS = {
    "spread kk0-2": (
        {0: [a_vec(0), a_vec(1)], 1: [b_vec(0), b_vec(1)], 2: [b_vec(2), b_vec(3)]},
        2,
    ),
    "spread kk0-3": (
        {0: [a_vec(0), b_vec(0)], 1: [a_vec(1), b_vec(1)], 2: [b_vec(2)], 3: [b_vec(3)]},
        3,
    ),
    "spread kk0-1": ({0: [a_vec(0), a_vec(1), b_vec(0)], 1: [b_vec(1), b_vec(2), b_vec(3)]}, 1),
    "all at kk1": ({1: [a_vec(0), a_vec(1), b_vec(0), b_vec(1), b_vec(2), b_vec(3)]}, 1),
}


def same_tile_through_l1(source):
    """Diagnostic: every step's copies read K tile 0 with cp.async.ca (L1-resident)."""
    main = source.index("for (int kt = 0;")
    head, tail = source[:main], source[main:]
    tail = tail.replace("((kt + 3) * BK + c)", "(c)", 1).replace("((kt + 3) * BK + r)", "(r)", 1)
    head = head.replace(
        "cp.async.cg.shared.global [%0], [%1], 16;", "cp.async.ca.shared.global [%0], [%1], 16;"
    )
    return head + tail


def without_waits(source):
    """Diagnostic: the main loop's cp.async.wait_group removed (the barrier stays)."""
    main = source.index("for (int kt = 0;")
    head, tail = source[:main], source[main:]
    return head + tail.replace("cp_async_wait<2>();", "", 1)


BULK_HELPERS = r"""
// --- probe: cp.async.bulk (the TMA unit's plain copy) completing on an mbarrier
__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(smem_u32(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
    asm volatile("{\n .reg .pred p;\n WAIT_%=:\n"
                 " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 " @!p bra WAIT_%=;\n}\n" :: "r"(smem_u32(bar)), "r"(parity) : "memory");
}
__device__ __forceinline__ void bulk_copy(void* smem, const void* gmem, unsigned bytes, unsigned long long* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 :: "r"(smem_u32(smem)), "l"(gmem), "r"(bytes), "r"(smem_u32(bar)) : "memory");
}
"""

BULK_ISSUE = r"""
    __shared__ __align__(8) unsigned long long full[4];
    if (threadIdx.x == 0) {
        for (int s = 0; s < 4; ++s) mbar_init(&full[s], 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    const int KT = (K + BK - 1) / BK;
    // one row per thread: threads 0..127 copy A's 128 rows (128 bytes), 128..191 B's 64 rows (512 bytes)
    auto issue = [&](int step) {
        const int slot = step % 4;
        if (threadIdx.x == 0) mbar_expect_tx(&full[slot], (BM * BK + BK * BN) * 2);
        if (threadIdx.x < BM) {
            const int r = threadIdx.x;
            bulk_copy(&As[slot][r][0], &A[(long long)(bm * BM + r) * K + step * BK], BK * 2, &full[slot]);
        } else if (threadIdx.x < BM + BK) {
            const int r = threadIdx.x - BM;
            bulk_copy(&Bs[slot][r][0], &B[(long long)(step * BK + r) * N + bn * BN], BN * 2, &full[slot]);
        }
    };
    for (int s = 0; s < 3; ++s) if (s < KT) issue(s);
    mbar_wait(&full[0], 0);
"""


def bulk_copies(source):
    """cp.async.bulk rows + one mbarrier per slot instead of cp.async vectors and groups."""
    main = source.index("for (int kt = 0;")
    first = source.index("    // pipeline prologue")
    wait = source.index("cp_async_wait<2>();", first)
    wait_end = source.index("\n", wait) + 1
    head = source[:first].replace(
        "// ---- kernel tuned_wmma_f16acc:", BULK_HELPERS + "// ---- kernel tuned_wmma_f16acc:", 1
    )
    body = source[main:]
    body = body.replace(
        original_block(source), "            if (kk == 0 && kt + 3 < KT) issue(kt + 3);\n", 1
    )
    body = body.replace(
        "cp_async_wait<2>();",
        "if (kt + 1 < KT) mbar_wait(&full[(kt + 1) % 4], (kt + 1) / 4 % 2);",
        1,
    )
    return head + BULK_ISSUE + source[wait_end:main] + body


def register_staged(source):
    """Global -> registers at kk == 0, registers -> shared (st.shared.v4) at the last
    fragment step, before its barrier: plain vector stores in place of cp.async's."""
    block = original_block(source)
    copy = re.compile(r"cp_async<16>\(&(\w+)(\[.+?\]\[r\]\[c\]), &(\w+\[.+?\])\);")

    def loads(m):
        dst, src = m.group(1), m.group(3)
        return f"stage_{dst}[it] = *reinterpret_cast<const uint4*>(&{src});"

    def stores(m):
        dst = m.group(1)
        return f"*reinterpret_cast<uint4*>(&{dst}{m.group(2)}) = stage_{dst}[it];"

    load_block = copy.sub(loads, block).replace("cp_async_commit();", "")
    store_block = copy.sub(stores, block).replace("cp_async_commit();", "")
    store_block = store_block.replace("if (kk == 0) {", "if (kk == 3) {", 1)
    sizes = dict(
        re.findall(
            r"for \(int it = 0; it < (\d+); \+\+it\) \{\n[^\n]*\n[^\n]*\n\s*cp_async<16>\(&(\w+)",
            block,
        )
    )
    sizes = {dst: n for n, dst in sizes.items()}
    decl = "".join(
        f"    uint4 stage_{dst}[{n}];  // probe: one step's copies, staged in registers\n"
        for dst, n in sizes.items()
    )
    main = source.index("    // block steps along K")
    out = source[:main] + decl + source[main:]
    out = out.replace(block, load_block + store_block, 1)
    tail = out.index("for (int kt = 0;")
    return out[:tail] + out[tail:].replace("cp_async_wait<2>();", "cp_async_wait<0>();", 1)


DIAGNOSTICS = {"diag same tile via L1": same_tile_through_l1, "diag no wait": without_waits}


def original_block(source):
    start = source.index("            if (kk == 0) {\n                if (kt + 3")
    end = source.index("cp_async_commit();", start)
    end = source.index("}\n", end) + 2
    return source[start:end]


def build(source, name):
    tmp = tempfile.mkdtemp()
    cu, cubin = os.path.join(tmp, "k.cu"), os.path.join(tmp, "k.cubin")
    open(cu, "w").write(source)
    r = subprocess.run(
        ["nvcc", "-cubin", "-arch=sm_90", "-O3", "-std=c++17", "-Xptxas", "-v", "-o", cubin, cu],
        capture_output=True,
        text=True,
    )
    if r.returncode:
        sys.exit(r.stderr[-3000:])
    return cp.RawModule(path=cubin).get_function(name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, action="append")
    ap.add_argument("--json")
    ap.add_argument(
        "--tile", default=TILE, help="another schedule: only the register-staged variant"
    )
    ap.add_argument("--only", action="append", help="variants to time (default: all)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    cu = os.path.join(tmp, "k.cu")
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from tiledsl.cli import main; sys.exit(main())",
            "compile",
            args.tile,
            "-o",
            cu,
        ],
        check=True,
    )
    source = open(cu).read()
    launch = json.load(open(cu + ".launch.json"))[0]
    name = launch["kernel"]
    block = original_block(source)
    sources = {"as emitted": source, "register-staged": register_staged(source)}
    if args.tile == TILE:  # the hand-written variants know this schedule's copies
        for label, (plan, commit_at) in VARIANTS.items():
            sources[label] = source.replace(block, issue_block(plan, commit_at) + "\n", 1)
        sources["bulk rows + mbarrier"] = bulk_copies(source)
        for label, edit in DIAGNOSTICS.items():
            sources[label] = edit(source)
            assert sources[label] != source, label
    if args.only:
        sources = {k: v for k, v in sources.items() if k in args.only or k == "as emitted"}
    fns = {label: build(src, name) for label, src in sources.items()}
    rows = []
    smem = launch["dynamic_shared_memory_bytes"]
    for fn in fns.values():
        fn.max_dynamic_shared_size_bytes = smem
    for size in args.size or [4096]:
        M = N = K = size
        rng = np.random.default_rng(1)
        sets = []
        for _ in range(3 if size <= 4096 else 1):
            A = cp.asarray(rng.integers(-2, 3, (M, K)).astype(np.float16))
            B = cp.asarray(rng.integers(-2, 3, (K, N)).astype(np.float16))
            sets.append((A, B, cp.zeros((M, N), cp.float16)))
        ref = (sets[0][0].astype(cp.float32) @ sets[0][1].astype(cp.float32)).astype(cp.float16)
        flops = 2.0 * M * N * K
        bm, bn, _ = launch["block_tile"]
        grid = (M // bm) * (N // bn)
        results = {}
        for rnd in range(2):  # two interleaved rounds: clocks drift, so each variant twice
            for label, fn in list(fns.items()) + [("cuBLAS", None)]:
                times = []
                start, stop = cp.cuda.Event(), cp.cuda.Event()
                for rep in range(40):
                    A, B, C = sets[rep % len(sets)]
                    start.record()
                    if fn is None:
                        cp.matmul(A, B)
                    else:
                        fn(
                            (grid,),
                            (launch["block"]["x"],),
                            (A, B, C, np.int32(M), np.int32(N), np.int32(K)),
                            shared_mem=smem,
                        )
                    stop.record()
                    stop.synchronize()
                    times.append(cp.cuda.get_elapsed_time(start, stop))
                ok = True
                if fn is not None:
                    A, B, C = sets[0]
                    fn(
                        (grid,),
                        (launch["block"]["x"],),
                        (A, B, C, np.int32(M), np.int32(N), np.int32(K)),
                        shared_mem=smem,
                    )
                    ok = bool(cp.array_equal(C, ref))
                tf = flops / float(np.median(times[5:])) / 1e9
                results.setdefault(label, []).append(tf)
                print(
                    f"size {size} round {rnd}: {label:22s} {tf:7.1f} TFLOP/s {'' if ok else 'WRONG'}",
                    flush=True,
                )
                rows.append(dict(size=size, round=rnd, variant=label, tflops=tf, ok=ok))
        for label, tfs in results.items():
            print(f"size {size}: {label:22s} best of rounds {max(tfs):7.1f} TFLOP/s", flush=True)
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
