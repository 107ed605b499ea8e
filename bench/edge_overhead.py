"""Does the edge-tile twin cost the fast path anything? Time the old and new hgemm module.

    python bench/edge_overhead.py OLD.cu [--size 4096x4096x4096]

OLD.cu is `tiledsl compile examples/hgemm.tile` from before edge tiles (the fast kernel's
text is the same; the new module adds the guarded twin). Both modules' `hgemm` run on the
same inputs with the same checks and timing (`tiledsl.commands.bench`), cuBLAS beside them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tiledsl.commands import bench
from tiledsl.commands.run import parse_size
from tiledsl.driver import compile_file
from tiledsl.gpu import runtime
from tiledsl.gpu.baselines import BASELINES
from tiledsl.progress import Progress


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old")
    p.add_argument("--size", action="append", default=None)
    args = p.parse_args()
    sizes = [parse_size(s) for s in args.size or ["4096x4096x4096"]]
    compiled = compile_file("examples/hgemm.tile")
    kernel, launch = compiled.kernels[0], compiled.launches[0]
    settings = bench.Settings(repeat=50, baselines=("cublas",), use_cache=False)
    arch = runtime.device_arch()
    rows = []
    with Progress(0, "edge", enabled=False) as bar:
        for label, source in (
            ("before (no twin)", Path(args.old).read_text()),
            ("after (with twin)", compiled.source),
            ("before, again", Path(args.old).read_text()),
            ("after, again", compiled.source),
        ):
            loaded = runtime.load(
                source,
                arch,
                pipeline=kernel.passes,
                target=kernel.target.name,
                use_cache=False,
                name="hgemm.cu",
            )
            for size in sizes:
                mine = bench.Row(
                    label, "tiledsl", kernel.name, "examples/hgemm.tile", size, kernel.gemm.c.dtype
                )
                rows += bench._measure_one(
                    mine, kernel, launch, loaded.module, [BASELINES["cublas"]()], settings, bar
                )
    print(bench.table(rows))


if __name__ == "__main__":
    main()
