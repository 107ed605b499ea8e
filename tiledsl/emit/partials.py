"""The workspace of partial sums, spelled once for every path that hands them over: the
warp-specialized kernels' stream-K and split-K (tiledsl.emit.hopper) and the direct path's
split-K (tiledsl.emit.mma_sync).

A partial sum is the accumulators of the threads that hold one copy of the block's sum
(`threads`: the consumer warpgroups', or K team 0's), stored as they are in the registers,
4 values at a time, thread after thread (each warp's 16-byte accesses side by side): the
same thread of the block that adds it reads it back, so no layout but the registers' own
is needed. L2 only (`.cg`): another block's SM wrote it, and L1 is not coherent.
"""

from __future__ import annotations

from ..ir.nodes import KernelIR, PartialAdd, PartialStore

TICKET_HELPERS = """\
// split_k's ticket of a tile (the block's first thread's): an atomic add at GPU scope whose
// release orders this block's partial sum (written before the barrier ahead of it) before
// the tickets drawn after it, and whose acquire orders the partial sums of the tickets drawn
// before it before this block's reads. The slice that draws the last ticket resets the
// counter, so that every launch finds the counters as it leaves them: zero.
__device__ __forceinline__ unsigned take_ticket(unsigned* counter, unsigned slices) {
    unsigned drawn;
    asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;\\n" : "=r"(drawn) : "l"(counter)
                 : "memory");
    if (drawn == slices - 1) {
        asm volatile("st.relaxed.gpu.global.u32 [%0], 0;\\n" :: "l"(counter) : "memory");
    }
    return drawn;
}
"""


def partial_row(k: KernelIR) -> str:
    """The row of the slot that holds every thread's 4 values `v` of fragment (i, j): a
    row is one float4 per thread, thread after thread."""
    acc = k.fragment_of("accumulator")
    quads = acc.rows * acc.cols // k.warp_width // 4  # each thread's values, by 4
    return f"(i * {acc.count[1]} + j) * {quads} + v"


def partial_element(k: KernelIR, threads: str) -> tuple[str, list[str]]:
    """(the index of the thread's 4 values `v` of fragment (i, j) among the slot's float4s,
    those 4 values in its registers)."""
    acc = k.fragment_of("accumulator")
    index = f"({partial_row(k)}) * {threads} + threadIdx.x"
    return index, [f"{acc.name}[i][j][4 * v + {e}]" for e in range(4)]


def accumulator_quads(k: KernelIR, reason: str, head: list[str], body: list[str]) -> list[str]:
    """`body` once per 4 values `v` of each fragment (i, j) of the thread's accumulators."""
    acc = k.fragment_of("accumulator")
    rows, cols = acc.count
    quads = acc.rows * acc.cols // k.warp_width // 4
    return [
        f"{{  // {reason}",
        *("    " + x for x in head),
        "    #pragma unroll",
        f"    for (int i = 0; i < {rows}; ++i) {{",
        "        #pragma unroll",
        f"        for (int j = 0; j < {cols}; ++j) {{",
        "            #pragma unroll",
        f"            for (int v = 0; v < {quads}; ++v) {{",
        *("                " + x for x in body),
        "            }",
        "        }",
        "    }",
        "}",
    ]


def partial_sum(emitter, k: KernelIR, s: PartialStore | PartialAdd, threads: str) -> list[str]:
    """The thread's accumulators to (PartialStore) or plus (PartialAdd) slot `s.slot` of
    the workspace, a slot being PARTIAL_FLOATS floats."""
    index, values = partial_element(k, threads)
    at = f"partial[{index}]"
    if isinstance(s, PartialStore):
        body = [f"__stcg(&{at}, make_float4({', '.join(values)}));"]
    else:
        body = [
            f"const float4 sum = __ldcg(&{at});",
            *(f"{x} += sum.{c};" for x, c in zip(values, "xyzw", strict=True)),
        ]
    const = "const " if isinstance(s, PartialAdd) else ""
    pointer = (
        f"{const}float4* partial = reinterpret_cast<{const}float4*>(workspace) + "
        f"({emitter.expr(s.slot)}) * (PARTIAL_FLOATS / 4);"
    )
    return accumulator_quads(k, s.reason, [pointer], body)
