"""`tiledsl.torch.register`: a loaded kernel as a torch custom operator, eager, inside
`torch.compile(fullgraph=True)` (no graph break: the fake implementation gives C's shape,
type and layout) and captured in a CUDA graph. Needs torch and a GPU: skipped without."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tiledsl
from tiledsl.api import ArgumentError
from tiledsl.gpu.runtime import gpu_available

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy"),
]

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def ints(seed, shape):
    """Integers in [-2, 2] as f16 on the GPU: every product and sum exact."""
    rng = np.random.default_rng(seed)
    return torch.from_numpy(rng.integers(-2, 3, shape).astype(np.float16)).cuda()


def exact(a, b):
    return a.double() @ b.double()


@pytest.fixture(scope="module")
def hgemm_op():
    return tiledsl.torch.register(EXAMPLES / "hgemm.tile", "test_hgemm")


def test_the_op_runs_eagerly(hgemm_op) -> None:
    a, b = ints(1, (200, 96)), ints(2, (96, 136))
    c = hgemm_op(a, b)
    assert c.dtype == torch.float32 and c.shape == (200, 136)
    assert torch.equal(c.double(), exact(a, b))
    assert torch.ops.tiledsl.test_hgemm(a, b).shape == (200, 136)


def test_the_op_compiles_into_one_graph(hgemm_op) -> None:
    """fullgraph=True fails on any graph break; the compiled module equals eager torch."""

    class Block(torch.nn.Module):
        def forward(self, x, w):
            return torch.relu(hgemm_op(x, w)) * 2 + 1

    compiled = torch.compile(Block(), fullgraph=True)
    for m in (128, 96):  # a second shape: a recompile, still one graph
        x, w = ints(3 + m, (m, 64)), ints(4, (64, 256))
        y = compiled(x, w)
        assert torch.equal(y.double(), torch.relu(exact(x, w)) * 2 + 1)


def test_the_op_is_captured_by_a_cuda_graph(hgemm_op) -> None:
    x, w = ints(5, (256, 128)), ints(6, (128, 256))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up: the module, the launcher, the plan
        hgemm_op(x, w)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = hgemm_op(x, w)
    x.copy_(ints(7, (256, 128)))  # new values in the captured input
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(y.double(), exact(x, w))


def test_a_c_plus_equals_op_adds_in_place() -> None:
    text = (EXAMPLES / "hgemm.tile").read_text()
    text = text.replace("kernel hgemm", "kernel hgemm_acc").replace(
        "C[m, n] = A[m, k] * B[k, n]", "C[m, n] += A[m, k] * B[k, n]"
    )
    op = tiledsl.torch.register(text, "test_hgemm_acc")
    a, b = ints(8, (128, 64)), ints(9, (64, 128))
    c = torch.ones((128, 128), dtype=torch.float32, device="cuda")
    assert op(a, b, c) is None
    assert torch.equal(c.double(), exact(a, b) + 1)

    @torch.compile(fullgraph=True)
    def twice(a, b, c):
        op(a, b, c)
        op(a, b, c)
        return c

    c = torch.zeros((128, 128), dtype=torch.float32, device="cuda")
    assert torch.equal(twice(a, b, c).double(), 2 * exact(a, b))


def test_the_hopper_kernel_as_an_op_under_compile() -> None:
    """examples/main.tile on this GPU (the Hopper kernel on an H200), f16 C, off the block
    tile (the guarded twin) and on it."""
    op = tiledsl.torch.register(EXAMPLES / "main.tile", "test_main")
    f = torch.compile(lambda a, b: op(a, b).float().sum(dim=1), fullgraph=True)
    for m, n, k in ((256, 512, 128), (300, 520, 136)):
        a, b = ints(10, (m, k)), ints(11, (k, n))
        expected = exact(a, b).half().float().sum(dim=1)
        assert torch.equal(f(a, b), expected)


def test_the_swapped_few_token_kernels_take_a_linear_weight_as_it_is() -> None:
    """The tuned swapped file (`swap_operands`) as torch calls a Linear layer: y = x W^T with
    W as nn.Linear keeps it (N x K rows), W.t() passed as B, no copy; one and 16 tokens,
    and a ragged width, under torch.compile."""
    op = tiledsl.torch.register(EXAMPLES / "tuned" / "few_tokens_swapped.tuned.tile", "swapped")
    f = torch.compile(lambda x, w: op(x, w.t()), fullgraph=True)
    for tokens, n, k in ((1, 4096, 512), (16, 4096, 512), (5, 1000, 264)):
        x, w = ints(12, (tokens, k)), ints(13, (n, k))  # |sum| <= 4 K: exact in f16
        assert torch.equal(f(x, w).double(), exact(x, w.t()))


def test_one_file_runs_a_linear_layer_at_every_token_count() -> None:
    """examples/tuned/llama2_7b.tuned.tile (every shape's winner in one file, B as torch's
    Linear weight): one op for 1 to 8192 tokens, each call the kernel its table picks
    (the swapped few-token kernels, the 64-row tiles, the many-token rungs), checked bit
    for bit against the exact sums rounded to f16 (C's type)."""
    op = tiledsl.torch.register(EXAMPLES / "tuned" / "llama2_7b.tuned.tile", "llama")
    f = torch.compile(lambda x, w: op(x, w.t()), fullgraph=True)
    shapes = ((1, 4096, 4096), (16, 4096, 11008), (64, 12288, 4096), (128, 22016, 4096))
    shapes += ((300, 4096, 4096), (1000, 4096, 11008), (2048, 12288, 4096), (8192, 4096, 4096))
    for number, (tokens, n, k) in enumerate(shapes):
        x, w = ints(20 + number, (tokens, k)), ints(40 + number, (n, k))
        assert torch.equal(f(x, w), exact(x, w.t()).half()), (tokens, n, k)


def test_the_split_k_kernel_as_an_op_takes_its_workspace_from_the_launcher() -> None:
    """examples/hopper/split_k.tile (`split_k 2`: a block per slice, the last ticket adds)
    under torch.compile: the workspace and the tickets are the launcher's, grown for a
    larger grid; the same bits on every call."""
    op = tiledsl.torch.register(EXAMPLES / "hopper" / "split_k.tile", "split")
    f = torch.compile(lambda x, w: op(x, w.t()), fullgraph=True)
    for tokens, n, k in ((1, 256, 512), (16, 4096, 1024), (5, 1000, 264)):
        x, w = ints(14, (tokens, k)), ints(15, (n, k))
        first = f(x, w)
        assert torch.equal(first.double(), exact(x, w.t()))
        assert torch.equal(f(x, w), first)


def test_the_direct_split_kernels_take_a_linear_weight_and_their_workspace() -> None:
    """The direct path's split tuned file (`split_k` with `warps_k`: K team 0 hands each
    slice's sum over) as torch calls a Linear layer, under torch.compile: the dispatch
    table's kernel at one and 16 tokens and a ragged width, the same bits on every call."""
    tuned = EXAMPLES / "tuned" / "few_tokens_direct_split.tuned.tile"
    op = tiledsl.torch.register(tuned, "direct_split")
    f = torch.compile(lambda x, w: op(x, w.t()), fullgraph=True)
    for tokens, n, k in ((1, 4096, 512), (16, 4096, 512), (5, 1000, 264)):
        x, w = ints(16, (tokens, k)), ints(17, (n, k))  # |sum| <= 4 K: exact in f16
        first = f(x, w)
        assert torch.equal(first.double(), exact(x, w.t()))
        assert torch.equal(f(x, w), first)


def test_a_name_is_bound_to_one_kernel(hgemm_op) -> None:
    assert tiledsl.torch.register(hgemm_op_kernel(), "test_hgemm_again") is not None
    with pytest.raises(ArgumentError) as err:
        tiledsl.torch.register(EXAMPLES / "hgemm.tile", "test_hgemm")
    assert str(err.value).startswith("torch.ops.tiledsl.test_hgemm is another kernel already")


def hgemm_op_kernel():
    return tiledsl.load(EXAMPLES / "hgemm.tile")


def test_the_mlp_example_checks_itself(tmp_path) -> None:
    """examples/python/mlp.py at a small size: its check against float64 passes (it exits 1
    otherwise) and its numbers are written."""
    import json
    import subprocess
    import sys

    out = tmp_path / "mlp.json"
    script = EXAMPLES / "python" / "mlp.py"
    small = ["--tokens", "200", "--hidden", "512", "--intermediate", "1024", "--iterations", "2"]
    subprocess.run([sys.executable, str(script), *small, "--json", str(out)], check=True)
    assert json.loads(out.read_text())["check"] == "PASS"


def test_runtime_alpha_and_beta_are_the_ops_float_arguments() -> None:
    """`epilogue alpha runtime, beta runtime`: the op takes C in place and alpha, beta as
    floats (defaults 1 and 0), eager and under compile."""
    text = (EXAMPLES / "hgemm.tile").read_text()
    text = text.replace("kernel hgemm", "kernel hgemm_scaled").replace(
        "    target  cuda sm_90", "    epilogue alpha runtime, beta runtime\n    target  cuda sm_90"
    )
    op = tiledsl.torch.register(text, "test_hgemm_scaled")
    a, b = ints(12, (128, 64)), ints(13, (64, 128))
    c = torch.ones((128, 128), dtype=torch.float32, device="cuda")
    op(a, b, c, 0.5, 2.0)
    assert torch.equal(c.double(), 0.5 * exact(a, b) + 2)
    c.fill_(float("nan"))
    op(a, b, c)  # alpha 1, beta 0: C is not read
    assert torch.equal(c.double(), exact(a, b))

    @torch.compile(fullgraph=True)
    def scaled(a, b, c):
        op(a, b, c, -1.0, 1.0)
        return c

    c = torch.ones((128, 128), dtype=torch.float32, device="cuda")
    assert torch.equal(scaled(a, b, c).double(), 1 - exact(a, b))
