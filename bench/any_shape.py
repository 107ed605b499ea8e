"""Any shape, layout, type, epilogue and batch on this GPU: a seeded sweep of small kernels.

    python3 bench/any_shape.py [--count 60] [--seed 7] [--json PATH.json]

Each case compiles a small fully optimized schedule (every pass runs) for one
combination of A/B/C layouts, transposes, element types, epilogue and batching
(a batch of 1 to 3 products for one case in four), picks a size (primes, 1, K below
BK, K around stages x BK, large odd sizes; random ones after the fixed list), and
checks the kernel with both oracles on the GPU (no timing: this is a correctness
sweep). Prints a table, one row per case, and a summary; writes every case as JSON
(default bench/results/any-shape-GPU-DATE.json). Exit status 1 if any case failed.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import sys
from pathlib import Path

import numpy as np

from tiledsl import __version__
from tiledsl.commands import bench
from tiledsl.commands.run import run_gpu
from tiledsl.driver import compile_source
from tiledsl.gpu.runtime import device_info

ROOT = Path(__file__).resolve().parent.parent

TEMPLATE = """kernel sweep {{
    A: {t_in}[{lb}{a_dims}] {a_layout}
    B: {t_in}[{lb}{b_dims}] {b_layout}
    C: {t_out}[{lb}M, N] {c_layout}
{bias}    C[{li}m, n] {op} A[{li}{a_index}] * B[{li}{b_index}]
    block {block}
    mma 16 x 16 x 16
    coarsen 2 x 2
    stages {stages}
    copy {copy}
    pad auto
    swizzle grouped 4
    sync minimal
    accumulate {acc}
{epilogue}}}"""

EPILOGUES = ["", "relu", "alpha 0.5, beta 0.25", "bias D, relu", "alpha 1.5, bias D"]

TYPES = [  # (inputs, output, accumulator)
    ("f16", "f32", "f32"),
    ("f16", "f16", "f32"),
    ("f16", "f16", "f16"),
    ("bf16", "bf16", "f32"),
    ("bf16", "f32", "f32"),
]
SIZES = [
    (1, 1, 1),
    (127, 61, 37),
    (1, 4096, 4096),
    (4096, 1, 333),
    (31, 33, 15),
    (95, 97, 95),
    (97, 95, 97),
    (4095, 4097, 4099),
    (3000, 5000, 1000),
    (2048, 2047, 2049),
    (63, 65, 2000),
]


def case_text(rng: np.random.Generator) -> tuple[str, dict]:
    a_l, b_l, c_l = (str(rng.choice(["row", "col"])) for _ in range(3))
    a_t, b_t = (bool(rng.integers(2)) for _ in range(2))
    t_in, t_out, acc = TYPES[int(rng.integers(len(TYPES)))]
    stages = int(rng.choice([1, 2, 3, 4]))
    block = str(rng.choice(["64 x 64 x 32", "128 x 64 x 32", "64 x 128 x 64"]))
    params = dict(
        t_in=t_in,
        t_out=t_out,
        acc=acc,
        a_layout=a_l,
        b_layout=b_l,
        c_layout=c_l,
        a_dims="K, M" if a_t else "M, K",
        a_index="k, m" if a_t else "m, k",
        b_dims="N, K" if b_t else "K, N",
        b_index="n, k" if b_t else "k, n",
        op="+=" if rng.integers(2) else "=",
        stages=stages,
        block=block,
        copy="async 16" if stages > 1 else "sync 16",
    )
    epilogue = str(rng.choice(EPILOGUES))
    batched = bool(rng.integers(4) == 0)
    params.update(
        epilogue=f"    epilogue {epilogue}\n" if epilogue else "",
        bias="    D: f32[N] row\n" if "bias" in epilogue else "",
        lb="L, " if batched else "",
        li="l, " if batched else "",
    )
    return TEMPLATE.format(**params), params


def _str(item):
    return item[0], str(item[1])


def default_out(name: str) -> Path:
    """bench/results/NAME-GPU-DATE.json: the name a canonical result keeps."""
    gpu = device_info()["name"].removeprefix("NVIDIA ").lower().replace(" ", "-")
    return ROOT / "bench" / "results" / f"{name}-{gpu}-{datetime.date.today()}.json"


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--count", type=int, default=60, help="cases to run (default 60)")
    p.add_argument("--seed", type=int, default=7, help="the sweep's random seed (default 7)")
    p.add_argument("--json", help="JSON path (default bench/results/any-shape-GPU-DATE)")
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    sizes = itertools.cycle(SIZES)
    results, failed = [], 0
    print(f"{'check':<5} {'M x N x K':>16} {'kernel':<11} case")
    for i in range(args.count):
        text, params = case_text(rng)
        size = next(sizes) if i < len(SIZES) else tuple(int(x) for x in rng.integers(1, 700, 3))
        compiled = compile_source(text, f"sweep{i}.tile")
        kernel, launch = compiled.kernels[0], compiled.launches[0]
        batch = int(rng.integers(1, 4)) if kernel.gemm.batch is not None else 1
        report = run_gpu(kernel, compiled.source, launch, size, seed=i, timed=False, batch=batch)
        params["batch"] = batch
        ok = report.ok
        failed += not ok
        skip = ("a_dims", "b_dims", "lb", "li", "bias")
        what = " ".join(f"{k}={v.strip()}" for k, v in map(_str, params.items()) if k not in skip)
        check = "PASS" if ok else "FAIL"
        print(f"{check:<5} {'x'.join(map(str, size)):>16} {report.kernel:<11} {what}")
        if not ok:
            print(report.render())
        results.append({"size": size, "kernel": report.kernel, "ok": ok, **params})
    print(f"{args.count - failed} of {args.count} cases exact on the GPU")
    out = Path(args.json) if args.json else default_out("any-shape")
    document = {
        "tool": "bench/any_shape.py",
        "tiledsl": __version__,
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "device": device_info(),
        "seed": args.seed,
        "count": args.count,
        "failed": failed,
        "cases": results,
    }
    bench.save_json(document, out)
    print(f"wrote {out}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
