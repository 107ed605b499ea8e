"""launch-scalars (tiledsl.passes.launch_scalars): a persistent kernel's grid-wide values
computed by the host once per launch, and the divisions by them as a multiply and a shift
(tiledsl.ir.divisors). On the CPU: the divisor's constants against Python's floor
division, what the pass moves and keeps, the launcher's values against the Lets the pass
removed, the interpreter at odd sizes and grids; through nvcc: the Divisor's C; on a GPU
(skipped cleanly without one): the C's divisions against numpy."""

from __future__ import annotations

import random
import shutil
import subprocess

import numpy as np
import pytest
from helpers import ROOT, interpret_exact

from tiledsl.driver import compile_file, compile_source
from tiledsl.emit.hopper import DIVISOR_HELPERS
from tiledsl.gpu.runtime import gpu_available
from tiledsl.ir.divisors import NUMERATOR_LIMIT, divide, divisor_bytes, divisor_constants
from tiledsl.ir.expr import evaluate
from tiledsl.ir.grid import grid_vars
from tiledsl.ir.nodes import Let, walk
from tiledsl.ir.printer import print_ir

SMALL_M = ROOT / "examples" / "tuned" / "small_m.tuned.tile"
PERSISTENT = [
    ROOT / "examples" / "hopper" / name
    for name in ("persistent.tile", "stream_k.tile", "cluster.tile", "pingpong.tile")
]


# ---------------------------------------------------------------- the divisor's constants


def _numerators(d: int, rng: random.Random) -> list[int]:
    top = NUMERATOR_LIMIT - 1
    edges = [
        0,
        1,
        d - 1,
        d,
        d + 1,
        2 * d - 1,
        2 * d,
        top,
        top - 1,
        top - top % d,
        top - top % d - 1,
    ]
    return [n for n in edges if 0 <= n <= top] + [rng.randrange(NUMERATOR_LIMIT) for _ in range(40)]


def test_every_small_divisor_divides_exactly() -> None:
    """d = 1 ... 4096 (every tile count, grid and share a kernel sees), and numerators at
    the edges of each multiple and of the 31-bit range."""
    rng = random.Random(0)
    for d in range(1, 4097):
        multiplier, shift = divisor_constants(d)
        assert 0 < multiplier < 2**32 and 0 <= shift < 32
        for n in _numerators(d, rng):
            assert divide(n, multiplier, shift) == n // d, (n, d)
            # the kernel's 32-bit sum of umulhi and n does not wrap
            assert (n * multiplier >> 32) + n < 2**32


def test_large_divisors_divide_exactly() -> None:
    rng = random.Random(1)
    for d in (
        [2**k for k in range(31)]
        + [2**k + 1 for k in range(1, 31)]
        + [rng.randrange(1, NUMERATOR_LIMIT) for _ in range(2000)]
        + [NUMERATOR_LIMIT - 1]
    ):
        multiplier, shift = divisor_constants(d)
        for n in _numerators(d, rng):
            assert divide(n, multiplier, shift) == n // d, (n, d)


def test_a_zero_divisor_is_passed_but_never_divided_by() -> None:
    assert divisor_constants(0) == (0, 0)
    with pytest.raises(ValueError, match="outside"):
        divisor_constants(NUMERATOR_LIMIT)
    with pytest.raises(ValueError, match="outside"):
        divisor_constants(-3)


def test_the_divisor_is_the_structs_twelve_bytes() -> None:
    raw = np.frombuffer(divisor_bytes(7), dtype=np.uint32)
    assert raw.tolist() == [7, *divisor_constants(7)]


# ---------------------------------------------------------------- the pass


def stages(path):
    compiled = compile_file(path)
    return {stage: kernel for stage, kernel, _ in compiled.snapshots}, compiled


def test_the_grid_wide_lets_move_and_the_per_block_ones_stay() -> None:
    source = SMALL_M.read_text()
    one = source[source.index("kernel small_m_2") :]
    one = one[: one.index("\n}\n") + 3]
    compiled = compile_source(one, "small_m_2.tile")
    k = compiled.kernels[0]
    passed = {v.var: v.passed for v in k.launch_scalars}
    assert passed == {
        "blocks": "divisor",
        "tiles": "host",
        "k_steps": "divisor",
        "last_wave": "host",
        "slices": "host",
        "sk_tiles": "divisor",
        "dp_tiles": "int",
        "sk_steps": "host",
        "workers": "int",
        "sk_blocks": "divisor",
        "sk_quotient": "int",
        "sk_remainder": "int",
        "width": "divisor",
    }
    left = {s.var for s in walk(k.body) if isinstance(s, Let)}
    # what depends on the block (pid) or the tile stays in the kernel
    assert {"dp_rounds", "sk_first", "sk_last", "tile", "group", "bm", "bn", "k_lo"} <= left
    assert not left & passed.keys()
    assert "launch-scalars" in k.passes
    text = print_ir(k)
    assert (
        "  scalar   sk_blocks = max(workers, 1)  # host, per launch; passed as a Divisor "
        "(n / d: a multiply-high and a shift)" in text
    )
    assert "  scalar   blocks = the launch's grid  # host, per launch;" in text
    source = compiled.source
    assert "int K, const Divisor blocks, const Divisor k_steps, const Divisor sk_tiles," in source
    assert "const int tiles_m = (M + BM - 1) / BM;\n" in source  # tiles_n: the host's only
    assert "const int blocks = gridDim.x" not in source
    assert "struct Divisor {" in source


def test_a_kernel_that_is_not_persistent_keeps_its_arithmetic() -> None:
    k = compile_file(ROOT / "examples" / "hopper" / "ws.tile").kernels[0]
    assert not k.persistent and k.launch_scalars == ()
    assert "Divisor" not in compile_file(ROOT / "examples" / "hopper" / "ws.tile").source


@pytest.mark.parametrize("path", PERSISTENT, ids=lambda p: p.name)
def test_the_launcher_computes_what_the_kernel_computed(path) -> None:
    """The launch's values at several sizes and grids are the values the removed Lets had
    (the IR before the pass, evaluated as the kernel did)."""
    snapshots, compiled = stages(path)
    before, after = snapshots["warp-specialization"], snapshots["launch-scalars"]
    launch = compiled.launches[0]
    removed = [s for s in walk(before.body) if isinstance(s, Let)]
    for m, n, kk, grid_x in [(4096, 4096, 4096, 132), (1, 1, 1, 132), (4095, 4097, 4099, 66),
                             (64, 4096, 11008, 130), (8192, 22016, 4096, 132)]:  # fmt: skip
        sizes = before.gemm.size_env(m, n, kk)
        env = launch.scalar_values(sizes, grid_x)
        kernel_env = {**sizes, "blocks": grid_x // launch.cluster_size, "pid": 0, "bz": 0}
        for name, e in grid_vars(before).items():
            kernel_env[name] = evaluate(e, kernel_env)
        for s in removed:  # the head's Lets, and those a tile loop re-binds the same
            if s.var in {v.var for v in after.launch_scalars}:
                kernel_env[s.var] = evaluate(s.value, kernel_env)
                assert env[s.var] == kernel_env[s.var], (s.var, m, n, kk, grid_x)


@pytest.mark.parametrize("path", PERSISTENT, ids=lambda p: p.name)
@pytest.mark.parametrize("blocks", [1, 2, 5])
def test_the_interpreter_runs_the_hoisted_kernel_exactly(path, blocks) -> None:
    k = compile_file(path).kernels[0]
    bm, bn, bk = k.schedule.block
    cm, cn = k.cluster
    check, _ = interpret_exact(
        k, 2 * bm * cm + 3, bn * cn + 5, 3 * bk + 7, 0, blocks=blocks * cm * cn
    )
    assert check.ok, check.detail


def test_the_launch_description_says_how_to_compute_each_scalar() -> None:
    launch = compile_file(PERSISTENT[1]).launches[0].to_json()
    scalars = {v["name"]: v for v in launch["launch_scalars"]}
    assert scalars["tiles_m"] == {"name": "tiles_m", "value": "(M + 127) / 128", "passed": "host"}
    assert scalars["blocks"]["value"] == "blocks: grid_x / cluster x"
    assert list(scalars).index("tiles_n") < list(scalars).index("width")
    assert "umulhi(n, multiplier)" in launch["divisor"]
    passed = [name for name, ctype in launch["args"] if ctype in ("int", "const Divisor")]
    assert passed[:3] == ["M", "N", "K"]
    assert set(passed[3:]) == {n for n, v in scalars.items() if v["passed"] != "host"}


# ---------------------------------------------------------------- the C, through nvcc and on a GPU

PROBE = (
    DIVISOR_HELPERS
    + """
extern "C" __global__ void divide_all(const int* n, const Divisor* d, int* quotient,
                                      int* remainder, int count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) {
        quotient[i] = n[i] / d[i];
        remainder[i] = n[i] % d[i];
    }
}
"""
)


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_the_divisor_helpers_build_with_nvcc(tmp_path) -> None:
    source = tmp_path / "divisor.cu"
    source.write_text(PROBE)
    proc = subprocess.run(
        ["nvcc", "-arch=sm_90", "-ptx", "-o", str(tmp_path / "d.ptx"), str(source)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    ptx = (tmp_path / "d.ptx").read_text()
    assert "mul.hi.u32" in ptx and "div." not in ptx and "rem." not in ptx


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
def test_the_divisions_are_exact_on_the_gpu() -> None:
    import cupy

    rng = random.Random(2)
    pairs = []
    for d in list(range(1, 1025)) + [rng.randrange(1, NUMERATOR_LIMIT) for _ in range(1000)]:
        pairs += [(n, d) for n in _numerators(d, rng)]
    n = np.array([p[0] for p in pairs], dtype=np.int32)
    d = np.frombuffer(b"".join(divisor_bytes(p[1]) for p in pairs), dtype=np.int32)
    fn = cupy.RawModule(code=PROBE).get_function("divide_all")
    q, r = cupy.zeros(len(pairs), cupy.int32), cupy.zeros(len(pairs), cupy.int32)
    count = len(pairs)
    fn((-(-count // 256),), (256,), (cupy.asarray(n), cupy.asarray(d), q, r, np.int32(count)))
    want = np.array([p[0] // p[1] for p in pairs]), np.array([p[0] % p[1] for p in pairs])
    assert (q.get() == want[0]).all() and (r.get() == want[1]).all()
