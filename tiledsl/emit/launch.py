"""The launch description written beside generated source: how to call the kernel.

{"kernel": "hgemm", "grid": {"x": "(M + 63) / 64 * ((N + 63) / 64)", "y": 1, "z": 1},
 "block": {"x": 512, "y": 1, "z": 1}, "dynamic_shared_memory_bytes": 8192,
 "args": [["A", "const half*"], ..., ["M", "int"], ...]}

A kernel that loads its tiles with TMA (`copy tma`) takes one 128-byte CUtensorMap per
TMA-loaded operand first among its parameters (`TENSOR_MAP_CTYPE`), and its description
says how to build each (`TensorMapSpec`, "tensor_maps"); a persistent kernel
(`KernelIR.persistent`) is launched on min(multiprocessor count, tiles) blocks, each looping
over tiles ("persistent"), and takes after its sizes the grid-wide values the host
computes per launch ("launch_scalars", tiledsl.passes.launch_scalars: each an int, or a
`Divisor` with the constants that make dividing by it a multiply and a shift, "divisor").
None of these keys is written for a kernel without them, so the description of every
other kernel reads as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.epilogue import Epilogue
from ..ir.expr import Expr, Var, evaluate, to_c
from ..ir.grid import grid_size, grid_vars
from ..ir.nodes import (
    C_TYPES,
    DTYPE_BYTES,
    KernelIR,
    LaunchScalar,
    TmaLoad,
    TmaStore,
    swizzle_panel,
    walk,
)

#: The C type of a tensor-map parameter: `struct alignas(64) TensorMap { unsigned long long
#: bytes[16]; };` (the CUtensorMap), passed by value in the kernel's parameter space.
TENSOR_MAP_CTYPE = "const __grid_constant__ TensorMap"
#: The C type of a launch scalar the kernel divides by (tiledsl.passes.launch_scalars):
#: `struct Divisor { int value; unsigned multiplier, shift; }`, 12 bytes by value.
DIVISOR_CTYPE = "const Divisor"

#: How a C++ caller fills a Divisor (tiledsl.ir.divisors).
DIVISOR_RECIPE = (
    "value d; shift = ceil(log2 d); multiplier = floor(2^32 * (2^shift - d) / d) + 1 "
    "(d = 0: multiplier = shift = 0); the kernel computes n / d as "
    "(umulhi(n, multiplier) + n) >> shift"
)


@dataclass(frozen=True)
class TensorMapSpec:
    """How to encode the tensor map of one TMA-loaded operand (cuTensorMapEncodeTiled).

    Dimensions are innermost (contiguous) first, as the driver takes them: a row-major
    A[M, K] is (K, M), a column-major one (M, K). One box is one 64-element panel of the
    shared tile: 64 elements along the contiguous dimension by the tile's `lines`.

        >>> from tiledsl.ir.expr import Var
        >>> spec = TensorMapSpec("map_A", "A", "f16", "row", (Var("K"), Var("M")), (64, 128))
        >>> [str(s) for s in spec.strides_bytes]
        ['K * 2']
    """

    param: str  # the kernel parameter, e.g. map_A
    operand: str  # the global operand it describes, e.g. A
    dtype: str  # f16 or bf16
    layout: str  # the operand's layout, row or col (what made global_dims' order)
    global_dims: tuple[Expr, Expr]  # over the size parameters, innermost first
    box: tuple[int, int]  # elements per TMA copy, innermost first
    swizzle: str = "128B"
    oob_fill: str = "zero"  # elements outside the operand arrive as zeros
    stored: bool = False  # C written by TMA stores (`epilogue_via tma`), not an operand read

    def __post_init__(self) -> None:
        # What no size can fix is a compiler mistake: refused here, once, not per launch.
        if self.dtype not in ("f16", "bf16", "f32"):
            raise ValueError(f"{self.param}: TMA tensor maps of {self.dtype} are not built")
        if len(self.global_dims) != 2 or len(self.box) != 2:
            raise ValueError(f"{self.param}: a tensor map here has rank 2")
        if not all(1 <= b <= 256 for b in self.box):
            raise ValueError(f"{self.param}: box {self.box}: each side must be 1 to 256")
        inner = self.box[0] * self.element_bytes
        if inner % 16:
            raise ValueError(f"{self.param}: box rows of {inner} bytes, not a multiple of 16")
        span = SWIZZLE_BYTES.get(self.swizzle)
        if span is None:
            raise ValueError(f"{self.param}: unknown swizzle {self.swizzle!r}")
        if span and inner > span:
            raise ValueError(
                f"{self.param}: box rows of {inner} bytes exceed the {self.swizzle} swizzle"
            )
        if self.oob_fill not in ("zero", "nan"):
            raise ValueError(f"{self.param}: unknown out-of-bounds fill {self.oob_fill!r}")

    @property
    def element_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def strides_bytes(self) -> tuple[Expr]:
        """Bytes between consecutive elements of dimension 1 (the leading dimension's
        elements times their size); dimension 0 is contiguous, so the driver takes none."""
        return (self.global_dims[0] * self.element_bytes,)

    @property
    def element_strides(self) -> tuple[int, int]:
        return (1, 1)

    def to_json(self) -> dict:
        return {
            "param": self.param,
            "operand": self.operand,
            "dtype": self.dtype,
            "global_dims": [to_c(d, named=False) for d in self.global_dims],
            "global_strides_bytes": [to_c(s, named=False) for s in self.strides_bytes],
            "box": list(self.box),
            "swizzle": self.swizzle,
            "oob_fill": self.oob_fill,
            "element_strides": list(self.element_strides),
            "stored": self.stored,  # written by TMA stores (C), not read
        }


#: Bytes of one swizzle span (0: none), the widest box row each allows.
SWIZZLE_BYTES = {"none": 0, "32B": 32, "64B": 64, "128B": 128}


#: What a launcher does where a tensor map cannot address an operand as it lies
#: (tiledsl.gpu.staging does it for tiledsl's own launches).
STAGING = (
    "an operand whose lines (global_strides_bytes) are not a multiple of 16 bytes is first "
    "copied into lines padded to the next multiple of 128 bytes (16 would do; 128 keeps "
    "each box row on whole 128-byte lines), and its map encoded over "
    "that copy with the padded stride (global_dims unchanged); C, when it has a map (a TMA "
    "store), is written into such a copy and copied back after the kernel"
)


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: Expr  # number of tiles, over the size parameters (blocks, unless persistent)
    threads: int
    smem_bytes: int
    args: tuple[tuple[str, str], ...]  # (name, C type) in call order
    block_tile: tuple[int, int, int]
    # The guarded twin's launch (tiledsl.lowering.edges), for sizes not multiples of the tile.
    edge: Launch | None = None
    batch: Expr | None = None  # batched GEMM: one grid row (blockIdx.y) per product
    # One per TMA-loaded operand, in the order of their parameters (the first in `args`).
    tensor_maps: tuple[TensorMapSpec, ...] = ()
    persistent: bool = False  # min(multiprocessor count, tiles) blocks, each looping over tiles
    cluster_size: int = 1  # blocks per cluster along x (`cluster`: __cluster_dims__ fixes it)
    # `persistent stream_k`: every multiprocessor's block (even with fewer tiles), and the
    # `workspace` (PARTIAL_FLOATS f32 per block) and `flags` (one per block, zero) arguments
    stream_k: bool = False
    partial_floats: int = 0
    # `split_k S`: a block per slice of every tile (the grid), the `workspace` (PARTIAL_FLOATS
    # f32 per block) and `tickets` (one per tile, zero) arguments
    grid_split: int = 0
    # grid-wide values computed per launch, in order (tiledsl.passes.launch_scalars): the
    # tile counts first, then the kernel's; those passed are parameters after the sizes
    scalars: tuple[LaunchScalar, ...] = ()

    def scalar_values(self, sizes: dict[str, int], grid_x: int) -> dict[str, int]:
        """The launch scalars at these sizes on a grid of `grid_x` blocks (the env they were
        computed in included: the sizes and `blocks`)."""
        env = {**sizes, "blocks": grid_x // self.cluster_size}
        for v in self.scalars:
            env[v.var] = int(evaluate(v.value, env, int32=True))
        return env

    def blocks(self, sizes: dict[str, int]) -> int:
        """The tiles of one product: the blocks along x, unless the launch is persistent."""
        return int(evaluate(self.grid, sizes))

    def grid_dims(self, sizes: dict[str, int], sms: int | None = None) -> tuple[int, int]:
        """(x, y) of the grid: the tiles of one product (for a persistent launch, at most
        `sms` blocks, the device's multiprocessor count), and the products of a batch:
        4096 x 4096 in 128 x 256 tiles is (512, 1), and persistent on an H200 (132, 1).
        """
        x = self.blocks(sizes)
        if self.persistent:
            if sms is None:
                raise ValueError(
                    f"{self.kernel} is persistent: its grid needs the multiprocessor count (sms)"
                )
            # whole clusters: a cluster per `cluster_size` SMs (x is a multiple already);
            # stream-K shares the tiles' K steps among all of them, however few the tiles
            resident = sms // self.cluster_size * self.cluster_size
            x = resident if self.stream_k else min(resident, x)
        return x, int(evaluate(self.batch, sizes)) if self.batch else 1

    def _persistent(self, tiles: str) -> dict:
        sms = "multiprocessor count"
        if self.cluster_size == 1:
            return {"grid_x": sms if self.stream_k else f"min({sms}, {tiles})"}
        c = self.cluster_size
        whole = f"{sms} / {c} * {c}"
        return {
            "grid_x": whole if self.stream_k else f"min({whole}, {tiles})",
            # what the launcher takes when fewer clusters fit at once (tiledsl.gpu.runtime)
            "at_most": f"cuOccupancyMaxActiveClusters * {c}: the clusters the device keeps "
            "resident",
        }

    def tensor_map(self, param: str) -> TensorMapSpec:
        return next(t for t in self.tensor_maps if t.param == param)

    def to_json(self) -> dict:
        tiles = to_c(self.grid, named=False)
        return {
            "kernel": self.kernel,
            "grid": {
                "x": tiles,
                "y": to_c(self.batch, named=False) if self.batch is not None else 1,
                "z": 1,
            },
            **({"persistent": self._persistent(tiles)} if self.persistent else {}),
            **(
                {
                    "stream_k": {
                        "workspace": f"grid_x * {self.partial_floats} floats (f32, any "
                        "contents): each block's partial sum of a tile it shares",
                        "flags": "grid_x unsigned ints, zero before the first launch; each "
                        "launch leaves them zero",
                    }
                }
                if self.stream_k
                else {}
            ),
            **(
                {
                    "split_k": {
                        "slices": self.grid_split,
                        "workspace": f"grid_x * {self.partial_floats} floats (f32, any "
                        "contents): each slice's partial sum",
                        "tickets": f"grid_x / {self.grid_split} unsigned ints, zero before "
                        "the first launch; each launch leaves them zero",
                    }
                }
                if self.grid_split
                else {}
            ),
            **(
                {"cluster": {"x": self.cluster_size, "y": 1, "z": 1}}
                if self.cluster_size > 1
                else {}
            ),
            "block": {"x": self.threads, "y": 1, "z": 1},
            "dynamic_shared_memory_bytes": self.smem_bytes,
            "args": [list(a) for a in self.args],
            **(
                {
                    "launch_scalars": [
                        {
                            "name": v.var,
                            "value": "blocks: grid_x / cluster x"
                            if v.value == Var(v.var)
                            else to_c(v.value, named=False),
                            "passed": v.passed,
                        }
                        for v in self.scalars
                    ],
                    "divisor": DIVISOR_RECIPE,
                }
                if self.scalars
                else {}
            ),
            **(
                {"tensor_maps": [t.to_json() for t in self.tensor_maps], "staging": STAGING}
                if self.tensor_maps
                else {}
            ),
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


def tensor_maps_of(kernel: KernelIR) -> tuple[TensorMapSpec, ...]:
    """One spec per operand the kernel loads (or stores: C, `epilogue_via tma`) with TMA,
    in the order of its first TMA copy."""
    specs: dict[str, TensorMapSpec] = {}
    for stmt in walk(kernel.body):
        if not isinstance(stmt, (TmaLoad, TmaStore)):
            continue
        glob, tile = (stmt.src, stmt.dst) if isinstance(stmt, TmaLoad) else (stmt.dst, stmt.src)
        name = glob.operand
        op = kernel.gemm.operand(name)
        buffer = kernel.buffer(tile.buffer)  # type: ignore[union-attr]
        if op.batch is not None:
            raise ValueError(f"{kernel.name}: {name} is batched; its TMA map would need rank 3")
        panel = swizzle_panel(buffer.dtype)
        if buffer.panel != panel:
            raise ValueError(
                f"{kernel.name}: {buffer.name} is not cut into {panel}-element panels, the TMA box"
            )
        rows, cols = op.dims[-2], op.dims[-1]
        spec = TensorMapSpec(
            stored=isinstance(stmt, TmaStore),
            param=f"map_{name}",
            operand=name,
            dtype=op.dtype,
            layout=op.layout,
            global_dims=(cols, rows) if op.layout == "row" else (rows, cols),
            # a multicast part of the tile is a box of its lines only
            box=(panel, tile.rows if buffer.layout == "row" else tile.cols),
        )
        if specs.setdefault(name, spec) != spec:
            raise ValueError(f"{kernel.name}: {name} is loaded with TMA in two box shapes")
    return tuple(specs.values())


def runtime_scalars(kernel: KernelIR) -> tuple[str, ...]:
    """The epilogue's values passed at launch (`alpha runtime`, `beta runtime`)."""
    ep = Epilogue.of(kernel.schedule, kernel.gemm)
    return ep.runtime if ep is not None else ()


def launch_of(kernel: KernelIR) -> Launch:
    g = kernel.gemm
    written = g.as_written  # the parameters in the file's order, whatever the kernel swaps
    maps = tensor_maps_of(kernel)
    args = (
        *((t.param, TENSOR_MAP_CTYPE) for t in maps),
        (written.a.name, f"const {C_TYPES[written.a.dtype]}*"),
        (written.b.name, f"const {C_TYPES[written.b.dtype]}*"),
        (g.c.name, f"{C_TYPES[g.c.dtype]}*"),
        *((op.name, f"const {C_TYPES[op.dtype]}*") for op in g.extras),
        # persistent stream_k: the partial sums and the flags that hand them over
        *((("workspace", "float*"), ("flags", "unsigned*")) if kernel.stream_k else ()),
        # split_k: the partial sums and the tickets that say which slice adds them
        *((("workspace", "float*"), ("tickets", "unsigned*")) if kernel.tickets else ()),
        *((name, "int") for name in written.size_args),
        # launch-scalars: what the host computes per launch and the kernel reads
        *(
            (v.var, DIVISOR_CTYPE if v.passed == "divisor" else "int")
            for v in kernel.launch_scalars
            if v.passed != "host"
        ),
        # `epilogue alpha runtime`, `beta runtime`: the values each launch passes
        *((name, "float") for name in runtime_scalars(kernel)),
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
        maps,
        kernel.persistent,
        kernel.blocks_per_cluster,  # split_k via cluster: a tile's slices
        stream_k=kernel.stream_k,
        partial_floats=kernel.schedule.block[0] * kernel.schedule.block[1]
        if kernel.hands_over
        else 0,
        grid_split=kernel.grid_split if kernel.tickets else 0,  # the workspace's split
        scalars=_scalars(kernel),
    )


def _scalars(kernel: KernelIR) -> tuple[LaunchScalar, ...]:
    """The kernel's launch scalars after the tile counts they may read (each a host step
    unless the kernel takes it)."""
    if not kernel.launch_scalars:
        return ()
    own = {v.var for v in kernel.launch_scalars}
    counts = tuple(
        LaunchScalar(name, e, "host") for name, e in grid_vars(kernel).items() if name not in own
    )
    return counts + kernel.launch_scalars
