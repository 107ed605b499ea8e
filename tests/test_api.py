"""`tiledsl.load`: a `.tile` file as a callable on numpy arrays (the interpreter), CuPy
arrays and torch tensors (the GPU; those tests skip without one).

Checked here, on numpy: exact products at the block tile and off it (the guarded twin),
row- and column-major operands, a batch, an epilogue's bias, `C +=` into `out`, an empty
product (an empty C, nothing run; K = 0: the epilogue of zero sums); a file
with several kernels of one product picks by shape; `repr` and `explain`; every wrong
input refused with its exact message, nothing computed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tiledsl
from tiledsl.api import ArgumentError
from tiledsl.gpu.runtime import gpu_available

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def ints(rng, shape, dtype=np.float16, order="C"):
    """Integers in [-2, 2]: every product and sum exact, as the exact oracle's."""
    return np.asarray(rng.integers(-2, 3, shape), dtype=dtype, order=order)


def exact(x) -> np.ndarray:
    return np.asarray(x, np.float64)


@pytest.fixture(scope="module")
def hgemm():
    return tiledsl.load(EXAMPLES / "hgemm.tile")


@pytest.mark.parametrize("size", [(128, 128, 64), (96, 160, 40), (1, 1, 1)])
def test_a_numpy_call_is_the_interpreters_exact_product(hgemm, size) -> None:
    m, n, k = size
    rng = np.random.default_rng(m + n + k)
    a, b = ints(rng, (m, k)), ints(rng, (k, n))
    c = hgemm(a, b)
    assert c.dtype == np.float32 and c.shape == (m, n) and c.flags.c_contiguous
    assert np.array_equal(exact(c), exact(a) @ exact(b))


def test_out_is_written_in_place(hgemm) -> None:
    rng = np.random.default_rng(1)
    a, b = ints(rng, (128, 64)), ints(rng, (64, 128))
    out = np.full((128, 128), np.nan, np.float32)
    assert hgemm(a, b, out=out) is out
    assert np.array_equal(exact(out), exact(a) @ exact(b))


def test_column_major_operands_and_a_transposed_b() -> None:
    """hgemm_nt: B declared [N, K] row (B[n, k]), C declared col-major."""
    k = tiledsl.load(EXAMPLES / "hgemm_nt.tile")
    rng = np.random.default_rng(2)
    a, bt = ints(rng, (96, 48)), ints(rng, (80, 48))
    c = k(a, bt)
    assert c.flags.f_contiguous and c.shape == (96, 80)
    assert np.array_equal(exact(c), exact(a) @ exact(bt).T)


def test_a_batch_of_products() -> None:
    k = tiledsl.load(EXAMPLES / "batched.tile", kernel="batched")
    rng = np.random.default_rng(3)
    a, b = ints(rng, (3, 40, 24)), ints(rng, (24, 56))
    c = k(a, b)
    assert c.shape == (3, 40, 56)
    assert np.array_equal(exact(c), exact(a) @ exact(b))


def test_an_epilogue_takes_its_bias_by_name() -> None:
    k = tiledsl.load(EXAMPLES / "epilogue.tile")
    rng = np.random.default_rng(4)
    a, b = ints(rng, (64, 32)), ints(rng, (32, 64))
    d = ints(rng, (64,), np.float32)
    c_in = ints(rng, (64, 64))
    out = c_in.copy()
    k(a, b, D=d, out=out)
    expected = np.maximum(0.5 * (exact(a) @ exact(b)) + 2 * exact(c_in) + exact(d), 0)
    assert np.array_equal(exact(out), expected.astype(np.float16).astype(np.float64))


def test_c_plus_equals_needs_out_and_adds_to_it() -> None:
    text = (EXAMPLES / "hgemm.tile").read_text().replace("C[m, n] = ", "C[m, n] += ")
    acc = tiledsl.load(text)
    rng = np.random.default_rng(5)
    a, b = ints(rng, (64, 32)), ints(rng, (32, 64))
    with pytest.raises(ArgumentError) as err:
        acc(a, b)
    assert str(err.value) == (
        "C[m, n] += A[m, k] * B[k, n] reads C: pass out=C (it is added to, in place)"
    )
    out = ints(rng, (64, 64), np.float32)
    before = exact(out).copy()
    acc(a, b, out=out)
    assert np.array_equal(exact(out), before + exact(a) @ exact(b))


@pytest.mark.parametrize("size", [(0, 64, 32), (64, 0, 32), (0, 0, 32)])
def test_an_empty_c_is_returned_without_running(hgemm, size) -> None:
    """M or N = 0 (a batch of no tokens): an empty C, as torch's `x @ w` gives, of the
    declared type and layout; with out=, out itself. Nothing runs (the interpreter would
    refuse a grid of no blocks)."""
    m, n, k = size
    rng = np.random.default_rng(11)
    a, b = ints(rng, (m, k)), ints(rng, (k, n))
    c = hgemm(a, b)
    assert c.shape == (m, n) and c.dtype == np.float32 and c.flags.c_contiguous
    out = np.zeros((m, n), np.float32)
    assert hgemm(a, b, out=out) is out
    # an epilogue's vector of N = 0 entries, `C +=` into an empty out, a batch of none
    epilogue = tiledsl.load(EXAMPLES / "epilogue.tile")
    d = np.zeros((n,), np.float32)
    empty = np.zeros((m, n), np.float16)
    assert epilogue(a, b, D=d, out=empty) is empty
    batched = tiledsl.load(EXAMPLES / "batched.tile", kernel="batched")
    assert batched(ints(rng, (0, 40, 24)), ints(rng, (24, 56))).shape == (0, 40, 56)


def test_k_0_gives_the_epilogue_of_zero_sums(hgemm) -> None:
    """K = 0 under a C of elements: each element is a sum over nothing, then the epilogue,
    as torch's addmm gives: zeros for a plain product (new or into out), C itself for
    `C +=`, and beta·C plus the bias, relu'd, with an epilogue; nothing launched."""
    a, b = np.zeros((4, 0), np.float16), np.zeros((0, 8), np.float16)
    out = np.full((4, 8), 7.0, np.float32)
    assert hgemm(a, b, out=out) is out
    assert (out == 0).all() and not np.signbit(out).any()
    new = hgemm(a, b)
    assert new.shape == (4, 8) and new.dtype == np.float32 and (new == 0).all()
    acc = tiledsl.load((EXAMPLES / "hgemm.tile").read_text().replace("C[m, n] = ", "C[m, n] += "))
    kept = np.arange(32, dtype=np.float32).reshape(4, 8)
    assert np.array_equal(acc(a, b, out=kept.copy()), kept)
    epilogue = tiledsl.load(EXAMPLES / "epilogue.tile")  # alpha 0.5, beta 2, bias D, relu
    rng = np.random.default_rng(12)
    c_in, d = ints(rng, (4, 8)), ints(rng, (8,), np.float32)
    out = c_in.copy()
    epilogue(a, b, D=d, out=out)
    expected = np.maximum(2 * exact(c_in) + exact(d), 0)
    assert np.array_equal(exact(out), expected)
    # a column-major C (hgemm_nt) and a batch: the same, in their layouts
    nt = tiledsl.load(EXAMPLES / "hgemm_nt.tile")
    c = nt(np.zeros((5, 0), np.float16), np.zeros((6, 0), np.float16))
    assert c.flags.f_contiguous and c.shape == (5, 6) and (c == 0).all()
    batched = tiledsl.load(EXAMPLES / "batched.tile", kernel="batched")
    c = batched(np.zeros((3, 4, 0), np.float16), np.zeros((0, 5), np.float16))
    assert c.shape == (3, 4, 5) and (c == 0).all()
    assert hgemm(np.zeros((0, 0), np.float16), np.zeros((0, 8), np.float16)).shape == (0, 8)


def test_k_0_with_kernels_of_different_epilogues_is_refused() -> None:
    """Two kernels of one product whose epilogues differ: a K = 0 call runs neither, so it
    cannot say whose epilogue C takes; refused with a message, nothing written."""
    text = (EXAMPLES / "epilogue.tile").read_text()
    bias_only = text.replace("gemm_bias_relu", "gemm_bias_only").replace(
        "alpha 0.5, beta 2, bias D, relu", "bias D"
    )
    both = tiledsl.load(text + bias_only)
    out = np.full((4, 8), 7.0, np.float16)
    d = np.zeros((8,), np.float32)
    with pytest.raises(ArgumentError) as err:
        both(np.zeros((4, 0), np.float16), np.zeros((0, 8), np.float16), D=d, out=out)
    assert str(err.value) == (
        "K = 0: C is what the epilogue makes of zero sums, and <string>'s kernels have "
        "different epilogues: load one with kernel=NAME (gemm_bias_relu, gemm_bias_only)"
    )
    assert (out == 7.0).all()


def test_one_callable_picks_a_kernel_by_shape() -> None:
    """Two schedules of one product: a size takes the first that covers it without its
    guarded twin, else the first."""
    text = (EXAMPLES / "hgemm.tile").read_text()
    wide = text.replace("kernel hgemm", "kernel hgemm_wide").replace(
        "block   128 x 128 x 64", "block   64 x 64 x 32"
    )
    assert wide != text.replace("kernel hgemm", "kernel hgemm_wide"), "the block line"
    k = tiledsl.load(text + "\n" + wide)
    assert k.explain(128, 128, 64).startswith(
        "128x128x64: hgemm: the first kernel of the file that covers 128x128x64 without its "
        "guarded twin"
    )
    assert k.explain(64, 64, 32).startswith("64x64x32: hgemm_wide: the first kernel")
    assert k.explain(100, 100, 30).startswith(
        "100x100x30: hgemm: the first kernel of the file that covers 100x100x30; its guarded "
        "twin hgemm_edge"
    )
    rng = np.random.default_rng(6)
    a, b = ints(rng, (64, 32)), ints(rng, (32, 64))
    assert np.array_equal(exact(k(a, b)), exact(a) @ exact(b))


def test_literal_dimensions_and_a_missing_file() -> None:
    text = (EXAMPLES / "hgemm.tile").read_text().replace("f16[M, K]", "f16[64, K]")
    k = tiledsl.load(text.replace("f32[M, N]", "f32[64, N]"))
    rng = np.random.default_rng(11)
    a, b = ints(rng, (64, 32)), ints(rng, (32, 96))
    assert np.array_equal(exact(k(a, b)), exact(a) @ exact(b))
    with pytest.raises(ArgumentError) as err:
        k(ints(rng, (63, 32)), b)
    assert str(err.value) == (
        "operand A is declared A: f16[64, K] row: dimension 0 (64) must be 64, found 63 "
        "(shape (63, 32))"
    )
    with pytest.raises(ArgumentError) as err:
        tiledsl.load("no/such.tile")
    assert str(err.value) == "no .tile file no/such.tile"


def test_repr_shows_the_schedule_and_the_paths(hgemm) -> None:
    text = repr(hgemm)
    assert text.startswith("<tiledsl kernel hgemm from ")
    assert "A: f16[M, K] row, B: f16[K, N] row, C: f32[M, N] row" in text
    assert "other sizes take hgemm_edge (guarded)" in text


# ---------------------------------------------------------------- wrong input


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda k, a, b: k(a.astype(np.float32), b),
            "operand A is declared A: f16[M, K] row: its elements must be f16, found float32",
        ),
        (
            lambda k, a, b: k(a[None], b),
            "operand A is declared A: f16[M, K] row: it takes 2 dimension(s), found an array "
            "of shape (1, 64, 32)",
        ),
        (
            lambda k, a, b: k(a, b[:16]),
            "operand B is declared B: f16[K, N] row: dimension 0 (K) must be 32 (the K of an "
            "earlier operand), found 16 (shape (16, 64))",
        ),
        (
            lambda k, a, b: k(np.asfortranarray(a), b),
            "operand A is declared row-major (A: f16[M, K] row), but its strides (1, 64) (in "
            "elements, shape (64, 32)) are not: tiledsl does not copy unless asked; pass "
            "np.ascontiguousarray(...) of it, call with copy=True, or declare A `col` if that "
            "is how it lies",
        ),
        (
            lambda k, a, b: k(a, b, out=np.zeros((64, 63), np.float32)),
            "out C is declared C: f32[M, N] row: dimension 1 (N) must be 64 (the N of an "
            "earlier operand), found 63 (shape (64, 63))",
        ),
        (
            lambda k, a, b: k(a.tolist(), b),
            "a list is not an array tiledsl takes: pass a numpy array (the interpreter), a "
            "CuPy array or a torch tensor (the GPU)",
        ),
        (
            lambda k, a, b: k(a),
            "hgemm takes A and B (and, by name, out=C), got 1 positional argument(s)",
        ),
        (
            lambda k, a, b: k(a, b, D=a),
            "hgemm has no operand 'D'; its extras are: none",
        ),
        (
            lambda k, a, b: k(a, b, alpha=2.0),
            "hgemm takes no alpha at run time: its epilogue's alpha and beta are constants of "
            "the schedule; write `epilogue alpha runtime` in the file to pass it at each call",
        ),
    ],
)
def test_wrong_input_is_refused_with_a_message(hgemm, call, message) -> None:
    rng = np.random.default_rng(7)
    a, b = ints(rng, (64, 32)), ints(rng, (32, 64))
    with pytest.raises(ArgumentError) as err:
        call(hgemm, a, b)
    assert str(err.value) == message


def test_a_missing_bias_and_a_file_of_several_products_are_refused() -> None:
    k = tiledsl.load(EXAMPLES / "epilogue.tile")
    rng = np.random.default_rng(8)
    with pytest.raises(ArgumentError) as err:
        k(ints(rng, (64, 32)), ints(rng, (32, 64)))
    assert str(err.value) == "gemm_bias_relu's epilogue reads D: pass D=..."
    with pytest.raises(ArgumentError) as err:
        tiledsl.load(EXAMPLES / "types.tile")
    assert str(err.value).startswith(
        f"{EXAMPLES / 'types.tile'} holds kernels of different products: load one with kernel=NAME"
    )
    with pytest.raises(ArgumentError) as err:
        tiledsl.load(EXAMPLES / "types.tile", kernel="nope")
    assert str(err.value).startswith(f"no kernel 'nope' in {EXAMPLES / 'types.tile'}; it has: ")


def test_a_size_the_interpreter_cannot_run_in_time_is_refused(hgemm) -> None:
    a = np.zeros((8192, 8192), np.float16)
    with pytest.raises(ArgumentError) as err:
        hgemm(a, a)
    assert str(err.value).startswith("hgemm in the numpy interpreter: ")


def test_a_file_that_does_not_compile_raises_its_diagnostics() -> None:
    from tiledsl.errors import TileError

    text = (
        (EXAMPLES / "hgemm.tile").read_text().replace("block   128 x 128 x 64", "block   128 x 128")
    )
    with pytest.raises(TileError) as err:
        tiledsl.load(text)
    assert "<string>:" in str(err.value)


def test_copy_true_copies_what_is_not_laid_out_as_declared(hgemm) -> None:
    """A column-major A (declared row) and an `out` that is a transposed view: refused
    without copy=True; with it, copied in, computed, and written back into `out`."""
    rng = np.random.default_rng(11)
    a, b = ints(rng, (96, 40), order="F"), ints(rng, (40, 72))
    out = np.full((72, 96), np.nan, np.float32).T  # shape (96, 72), columns contiguous
    with pytest.raises(ArgumentError):
        hgemm(a, b, out=out)
    assert hgemm(a, b, out=out, copy=True) is out
    assert np.array_equal(exact(out), exact(a) @ exact(b))
    assert np.array_equal(exact(hgemm(a, b, copy=True)), exact(a) @ exact(b))


def test_a_call_of_a_seen_signature_reuses_its_plan() -> None:
    """The checks and the choice of kernel run once per signature (library, shape, type,
    strides, device) of the arrays; a refused call leaves no plan behind."""
    k = tiledsl.load(EXAMPLES / "hgemm.tile")
    rng = np.random.default_rng(12)
    a, b = ints(rng, (64, 32)), ints(rng, (32, 64))
    k(a, b)
    k(a + 1, b)
    assert len(k._plans) == 1
    with pytest.raises(ArgumentError):
        k(a, b[:16])
    assert len(k._plans) == 1
    k(ints(rng, (32, 32)), b)
    assert len(k._plans) == 2


def test_a_gpu_call_takes_the_kernels_of_its_architecture() -> None:
    """examples/main.tile has a kernel for sm_80 and one for sm_90: the interpreter takes
    the first, a GPU the newest its architecture runs."""
    k = tiledsl.load(EXAMPLES / "main.tile")
    assert k.explain(4096, 4096, 4096).startswith("4096x4096x4096: main_ampere")
    assert k.explain(4096, 4096, 4096, arch="sm_90").startswith("4096x4096x4096: main_hopper")
    assert k.explain(4096, 4096, 4096, arch="sm_86").startswith("4096x4096x4096: main_ampere")


def test_the_torch_operators_output_shape_follows_the_declarations() -> None:
    from tiledsl.api.torch_ops import output_shape

    g = tiledsl.load(EXAMPLES / "batched.tile", kernel="batched").gemm
    assert output_shape(g, {"A": (3, 50, 20), "B": (20, 70)}) == (3, 50, 70)
    g = tiledsl.load(EXAMPLES / "batched.tile", kernel="batched_all").gemm
    assert output_shape(g, {"A": (3, 20, 50), "B": (3, 20, 70)}) == (3, 50, 70)


RUNTIME_LINE = "    epilogue alpha runtime, beta runtime\n"
RUNTIME_TEXT = (
    (EXAMPLES / "hgemm.tile")
    .read_text()
    .replace("kernel hgemm", "kernel scaled")
    .replace("    target  cuda sm_90", RUNTIME_LINE + "    target  cuda sm_90")
)


def test_runtime_alpha_and_beta_are_taken_at_each_call() -> None:
    """`epilogue alpha runtime, beta runtime`: alpha= and beta= at the call (alpha 1 and
    beta 0 when not given), the product exact against the kernel's f32 steps; a beta of 0
    reads nothing of C (an out full of NaN is overwritten)."""
    k = tiledsl.load(RUNTIME_TEXT)
    rng = np.random.default_rng(15)
    a, b = ints(rng, (128, 64)), ints(rng, (64, 128))
    product = (exact(a) @ exact(b)).astype(np.float32)
    c0 = ints(rng, (128, 128), np.float32)
    out = c0.copy()
    k(a, b, out=out, alpha=0.5, beta=2)
    expected = np.float32(0.5) * product + np.float32(2) * c0
    assert np.array_equal(out, expected)
    nan = np.full((128, 128), np.nan, np.float32)
    assert np.array_equal(k(a, b, out=nan), product)  # alpha 1, beta 0: C not read
    assert np.array_equal(k(a, b, alpha=-3), np.float32(-3) * product)
    with pytest.raises(ArgumentError) as err:
        k(a, b, beta=1.0)
    assert (
        str(err.value) == "C[m, n] = A[m, k] * B[k, n] reads C (beta = 1): pass out=C (it "
        "is added to, in place)"
    )
    with pytest.raises(ArgumentError) as err:
        k(a, b, alpha=1e-40)
    assert str(err.value).startswith("alpha = 1e-40 is below f32's smallest normal number")
    with pytest.raises(ArgumentError) as err:
        k(a, b, alpha="two")
    assert str(err.value) == "alpha must be a number, got 'two'"


# ---------------------------------------------------------------- on the GPU


@pytest.mark.parametrize("size", [(256, 256, 128), (200, 328, 104)])
@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
def test_cupy_arrays_run_on_the_gpu(hgemm, size) -> None:
    import cupy

    m, n, k = size
    rng = np.random.default_rng(9)
    a, b = ints(rng, (m, k)), ints(rng, (k, n))
    c = hgemm(cupy.asarray(a), cupy.asarray(b))
    assert isinstance(c, cupy.ndarray)
    assert np.array_equal(exact(c.get()), exact(a) @ exact(b))


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
def test_an_empty_product_on_the_gpu_launches_nothing() -> None:
    """No tokens: an empty C of CuPy or torch, on the device, as the declarations say."""
    import cupy

    k = tiledsl.load(EXAMPLES / "main.tile")
    a, b = cupy.zeros((0, 64), cupy.float16), cupy.zeros((64, 128), cupy.float16)
    c = k(a, b)
    assert isinstance(c, cupy.ndarray) and c.shape == (0, 128)
    torch = pytest.importorskip("torch")
    x = torch.zeros((0, 64), dtype=torch.float16, device="cuda")
    w = torch.zeros((64, 128), dtype=torch.float16, device="cuda")
    y = k(x, w)
    assert y.shape == (0, 128) and y.is_cuda
    op = tiledsl.torch.register(EXAMPLES / "main.tile", "empty_tokens")
    assert op(x, w).shape == (0, 128)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
def test_k_0_on_the_gpu_gives_the_epilogue_of_zero_sums() -> None:
    """K = 0 with CuPy arrays and torch tensors (f16 and bf16 C): zeros for a plain
    product, alpha·0 + beta·C with a runtime epilogue, on torch's current stream."""
    import cupy

    k = tiledsl.load(EXAMPLES / "main.tile")
    c = k(cupy.zeros((3, 0), cupy.float16), cupy.zeros((0, 40), cupy.float16))
    assert isinstance(c, cupy.ndarray) and c.shape == (3, 40) and not bool(c.any())
    scaled = tiledsl.load(EXAMPLES / "epilogue_runtime.tile")
    rng = np.random.default_rng(13)
    c_in = ints(rng, (4, 8))
    out = cupy.asarray(c_in)
    zero_a, zero_b = cupy.zeros((4, 0), cupy.float16), cupy.zeros((0, 8), cupy.float16)
    scaled(zero_a, zero_b, out=out, alpha=3.0, beta=0.5)
    assert np.array_equal(exact(out.get()), 0.5 * exact(c_in))
    torch = pytest.importorskip("torch")
    for dtype in (torch.float16, torch.bfloat16):
        bf16 = (EXAMPLES / "epilogue_runtime.tile").read_text().replace("f16[", "bf16[")
        kern = scaled if dtype == torch.float16 else tiledsl.load(bf16)
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            c = torch.from_numpy(c_in.astype(np.float32)).cuda().to(dtype) * 1
            x = torch.zeros((4, 0), dtype=dtype, device="cuda")
            w = torch.zeros((0, 8), dtype=dtype, device="cuda")
            kern(x, w, out=c, beta=-2.0)
            doubled = c * 1  # after the sums, on the same stream
        stream.synchronize()
        assert torch.equal(doubled.float().cpu(), torch.from_numpy(-2 * c_in.astype(np.float32)))


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
def test_torch_tensors_on_a_side_stream_are_ordered_with_torch(hgemm) -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(10)
    a, b = ints(rng, (256, 128)), ints(rng, (128, 256))
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        ta = torch.from_numpy(a).cuda() * 1  # queued on the side stream
        tb = torch.from_numpy(b).cuda()
        out = torch.empty((256, 256), dtype=torch.float32, device="cuda")
        hgemm(ta, tb, out=out)
        doubled = out * 2  # after the kernel, on the same stream
    stream.synchronize()
    assert torch.equal(doubled.cpu(), torch.from_numpy(2 * (exact(a) @ exact(b))).float())


def test_a_cpu_torch_tensor_is_refused(hgemm) -> None:
    torch = pytest.importorskip("torch")
    a = torch.zeros((64, 32), dtype=torch.float16)
    with pytest.raises(ArgumentError) as err:
        hgemm(a, a.t().contiguous())
    assert str(err.value) == (
        "A is a torch tensor on the CPU: the kernel runs on the GPU (move it with .cuda()), "
        "or pass numpy arrays to run it in the interpreter"
    )


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
def test_gpu_errors_misalignment_and_copy(hgemm) -> None:
    """A tensor whose data is not 16-byte aligned is refused by name; copy=True copies it
    (and a transposed tensor) into place."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(13)
    a, b = ints(rng, (128, 64)), ints(rng, (64, 128))
    flat = torch.from_numpy(np.concatenate([[0], a.ravel()]).astype(np.float16)).cuda()
    shifted = flat[1:].view(128, 64)  # 2 bytes past an aligned address
    tb = torch.from_numpy(b).cuda()
    with pytest.raises(ArgumentError) as err:
        hgemm(shifted, tb)
    assert str(err.value).startswith("A's data starts at 0x")
    assert "not on a 16-byte boundary" in str(err.value)
    c = hgemm(shifted, tb.t().contiguous().t(), copy=True)
    assert torch.equal(c.cpu().double(), torch.from_numpy(exact(a) @ exact(b)))


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
@pytest.mark.parametrize("size", [(4096, 4096, 4096), (1000, 4097, 1031), (1, 1, 1)])
def test_main_tile_on_torch_takes_this_gpus_kernel(size) -> None:
    """The README's main example on torch tensors: on an H200 the Hopper kernel (and its
    guarded twin off the block tile), exact against the product in f64."""
    torch = pytest.importorskip("torch")
    k = tiledsl.load(EXAMPLES / "main.tile")
    m, n, kk = size
    rng = np.random.default_rng(14)
    a, b = ints(rng, (m, kk)), ints(rng, (kk, n))
    c = k(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda())
    assert c.dtype == torch.float16 and c.shape == (m, n)
    expected = exact(a) @ exact(b)
    assert np.array_equal(exact(c.cpu().numpy()), expected.astype(np.float16).astype(np.float64))


# ---------------------------------------------------------------- the tuned files

TUNED_WITH_TABLES = sorted(
    p for p in (EXAMPLES / "tuned").glob("*.tile") if p.with_suffix(".dispatch.json").exists()
)


@pytest.mark.parametrize("path", TUNED_WITH_TABLES, ids=lambda p: p.name)
def test_every_tuned_shape_takes_the_kernel_its_table_names(path) -> None:
    import json

    k = tiledsl.load(path)
    entries = json.loads(path.with_suffix(".dispatch.json").read_text())["entries"]
    assert entries and k.table is not None
    for entry in entries:
        choice = k.choose(*entry["size"])
        assert choice.kernel.name == entry["kernel"], (entry, choice.why)


@pytest.mark.parametrize(
    "name, size, order",
    [
        ("small_m", (64, 4096, 512), "C"),  # a tuned N, its table's nearest shape
        ("small_m", (100, 1000, 264), "C"),  # partial tiles, run by the kernel itself
        ("few_tokens_swapped", (1, 4096, 512), "F"),  # one token; B = W^T, K-contiguous
        ("few_tokens_swapped", (16, 4096, 512), "F"),
    ],
)
@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
def test_the_tuned_few_token_kernels_called_as_a_user_calls_them(name, size, order) -> None:
    import cupy

    kernel = tiledsl.load(EXAMPLES / "tuned" / f"{name}.tuned.tile")
    m, n, k = size
    rng = np.random.default_rng(11)
    a, b = ints(rng, (m, k)), ints(rng, (k, n), order=order)
    out = cupy.zeros((m, n), dtype=cupy.float16)
    kernel(cupy.asarray(a), cupy.asarray(b, order=order), out=out)
    # |sum| <= 4 K = 2048 at K = 512: every integer exact in f16
    assert np.array_equal(exact(out.get()), exact(a) @ exact(b))
