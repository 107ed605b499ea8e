"""The launch description written beside generated source: how to call the kernel.

{"kernel": "hgemm", "grid": {"x": "(M + 63) / 64 * ((N + 63) / 64)", "y": 1, "z": 1},
 "block": {"x": 512, "y": 1, "z": 1}, "dynamic_shared_memory_bytes": 8192,
 "args": [["A", "const half*"], ..., ["M", "int"], ...]}
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import Expr, evaluate, to_c
from ..ir.grid import grid_size
from ..ir.nodes import C_TYPES, KernelIR


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: Expr  # number of blocks, over the size parameters
    threads: int
    smem_bytes: int
    args: tuple[tuple[str, str], ...]  # (name, C type) in call order
    block_tile: tuple[int, int, int]
    # The guarded twin's launch (tiledsl.lowering.edges), for sizes not multiples of the tile.
    edge: Launch | None = None
    batch: Expr | None = None  # batched GEMM: one grid row (blockIdx.y) per product

    def blocks(self, sizes: dict[str, int]) -> int:
        return int(evaluate(self.grid, sizes))

    def grid_dims(self, sizes: dict[str, int]) -> tuple[int, int]:
        """(x, y) of the grid: the tiles of one product, and the products of a batch."""
        return self.blocks(sizes), int(evaluate(self.batch, sizes)) if self.batch else 1

    def to_json(self) -> dict:
        return {
            "kernel": self.kernel,
            "grid": {
                "x": to_c(self.grid, named=False),
                "y": to_c(self.batch, named=False) if self.batch is not None else 1,
                "z": 1,
            },
            "block": {"x": self.threads, "y": 1, "z": 1},
            "dynamic_shared_memory_bytes": self.smem_bytes,
            "args": [list(a) for a in self.args],
            "block_tile": list(self.block_tile),
            **(
                {
                    "edge": {
                        "when": "M, N or K is not a multiple of the block tile",
                        **self.edge.to_json(),
                    }
                }
                if self.edge
                else {}
            ),
        }


def launch_of(kernel: KernelIR) -> Launch:
    g = kernel.gemm
    args = (
        (g.a.name, f"const {C_TYPES[g.a.dtype]}*"),
        (g.b.name, f"const {C_TYPES[g.b.dtype]}*"),
        (g.c.name, f"{C_TYPES[g.c.dtype]}*"),
        *((op.name, f"const {C_TYPES[op.dtype]}*") for op in g.extras),
        *((name, "int") for name in g.size_args),
    )
    return Launch(
        kernel.name,
        grid_size(kernel),
        kernel.threads,
        kernel.smem_bytes,
        args,
        kernel.schedule.block,
        launch_of(kernel.edge) if kernel.edge is not None else None,
        g.batch,
    )
