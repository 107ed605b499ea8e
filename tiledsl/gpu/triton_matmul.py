"""A standard Triton f16 matmul (f32 accumulation, f16 C): the `tiledsl bench` baseline.

Imported only where `import triton` works (see `tiledsl.gpu.baselines`). The form is
the usual one: one program per BM x BN tile, grouped tile order for L2 reuse,
a K loop of `tl.dot`, masks at the edges, a small autotuned set of shapes.
"""

# No `from __future__ import annotations` here: Triton reads `tl.constexpr` annotations.
import triton
import triton.language as tl

CONFIGS = [
    triton.Config({"BM": 128, "BN": 256, "BK": 64, "GROUP": 8}, num_stages=3, num_warps=8),
    triton.Config({"BM": 128, "BN": 128, "BK": 64, "GROUP": 8}, num_stages=4, num_warps=4),
    triton.Config({"BM": 256, "BN": 128, "BK": 64, "GROUP": 8}, num_stages=3, num_warps=8),
    triton.Config({"BM": 128, "BN": 128, "BK": 32, "GROUP": 8}, num_stages=4, num_warps=4),
]


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.jit
def _matmul_kernel(
    a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    in_group = GROUP * tiles_n
    first_m = (pid // in_group) * GROUP
    rows = tl.minimum(tiles_m - first_m, GROUP)
    pid_m = first_m + (pid % in_group) % rows
    pid_n = (pid % in_group) // rows
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a + (rm[:, None] % M) * sam + rk[None, :] * sak
    b_ptrs = b + rk[:, None] * sbk + (rn[None, :] % N) * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        in_k = rk < K - k0
        x = tl.load(a_ptrs, mask=in_k[None, :], other=0.0)
        y = tl.load(b_ptrs, mask=in_k[:, None], other=0.0)
        acc += tl.dot(x, y)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    c_ptrs = c + rm[:, None] * scm + rn[None, :] * scn
    tl.store(c_ptrs, acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a, b, out) -> None:
    """out[:] = a @ b for torch f16 tensors (any strides), on torch's current stream."""
    M, K = a.shape
    N = b.shape[1]

    def grid(meta):
        return (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)

    _matmul_kernel[grid](
        a, b, out, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
    )  # fmt: skip
