"""Instruction paths: what differs between the tensor-core instructions the IR lowers to.

    path = schedule.path          # the description of the schedule's `mma` instruction
    path.lanes(target)            # threads one IR warp stands for (a warpgroup: 4 warps)
    path.smem_align               # where its shared buffers start

The same IR, passes and interpreter serve every path; each path is one frozen
description here (what the analysis, passes, models, interpreter, checks and pictures
ask) and one lowering object in tiledsl.emit (its declarations, statements and
helpers). Nothing else in tiledsl compares the instruction's name: a new path is one
entry in `PATHS` and one lowering in `tiledsl.emit.paths`.

    wmma      `mma 16 x 16 x 16`: nvcuda::wmma fragments, lane mapping unspecified
    mma.sync  `mma m16n8k16`: the PTX instruction, fragments in its register layout,
              loaded by ldmatrix with one row address per lane (so tiles may be swizzled)
    wgmma     `mma m64nNk16`: Hopper's warpgroup instruction, A and B read from 128-byte-
              swizzled shared memory by descriptor, asynchronously, in groups
    fma       `mma fma`: no tensor core: the CUDA cores' fused multiply-adds, a warp's
              fragment one line of A by one line of B over 256 K elements (each lane 8
              consecutive ones, a 16-byte vector of each, into an f32 partial sum; the
              warp's 32 partials added by shuffles when the sum leaves): a few-token
              product read a warp a weight row, 512 bytes of it an instruction
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .schedule import Schedule

InstructionName = Literal["wmma", "mma.sync", "wgmma", "fma"]
#: How a path's A and B fragments reach their data, and what the pointer must satisfy:
#: a WMMA base pointer (32-byte aligned, a leading dimension of whole 16 bytes), one
#: 16-byte row address per lane (ldmatrix), or a shared-memory descriptor.
OperandAccess = Literal["wmma_pointer", "lane_rows", "descriptor"]
#: How accumulators move to and from memory: through a WMMA base pointer, or lane by
#: lane in pairs of elements (aligned to two elements).
#: (`lane_total`: the fma path's warp total, one element moved by one lane.)
AccumulatorAccess = Literal["wmma_pointer", "lane_pairs", "lane_total"]


@dataclass(frozen=True)
class Requirement:
    """A directive value the path needs: `holds(schedule)`, or the error `message`."""

    directive: str
    holds: Callable[[Schedule], bool]
    message: str  # may name {stages}
    fix: str


@dataclass(frozen=True, kw_only=True)
class InstructionPath:
    """What an instruction path is, for every pass and emitter that differs by path. The
    defaults are a warp-level path's that reads its tiles from registers it loads itself
    (WMMA, mma.sync, fma): a description writes only where its path differs."""

    name: InstructionName
    shape_syntax: Literal["dims", "ptx", "word"]  # `mma 16 x 16 x 16`, `mma m16n8k16`, `mma fma`
    target_shapes: str  # the Target field listing its shapes per input type
    warps_per_ir_warp: int = 1  # 4: the IR's warp is a warpgroup
    ir_warp: str = "warp"  # what the IR's warp is called in reports: "warp" or "warpgroup"
    mma_call: str  # what `check` calls one mma
    operands: OperandAccess
    accumulators: AccumulatorAccess
    fragments_in_registers: bool = True  # A and B fragments live in registers (not descriptors)
    lane_addressed: bool  # each lane computes its own addresses: the kernel names `lane`
    # the warp's place in the block (wm, wn) is read from lane 0 (__shfl_sync), so nvcc knows
    # it is the same in every lane: what is computed from it (wgmma's descriptors) stays in
    # uniform registers, off the vector pipes
    uniform_warp_index: bool = False
    reads_tiles_async: bool = False  # the tensor cores read A and B after the issue (wgmma groups)
    reads_swizzled_lines: bool  # can read `pad xor` tiles
    # reads the 128-byte swizzle TMA writes: `copy tma` can feed it
    feeds_tma_pipeline: bool = False
    swizzle_panel_bytes: int = 0  # 0, or 128: lines cut in panels, the hardware's swizzle atom
    smem_align: int = 128  # bytes: where each shared buffer starts
    smem_slack: int = 0  # dynamic shared memory asked beyond the buffers, to reach smem_align
    default_pad: str | None = None  # `pad` when the file has none (else the language's `auto`)
    k_line_elements: int = 0  # K-contiguous tiles are read in lines of this many elements (0: any)
    # an N-contiguous B is read in panels of this many columns (0: any): the instruction's N
    # must be whole panels, where a K-contiguous B takes any N the target lists
    n_panel_elements: int = 0
    build_suffix: str = ""  # the build target is the device's arch + this (wgmma: sm_90a)
    # `stages 0`: each lane loads its fragments straight from global memory as 16-byte
    # vectors along K (K permuted within 32-column groups, the same way in A and B), guarded,
    # so that the kernel runs every size itself (tiledsl.emit.mma_sync); else WMMA's loads
    direct_vectors: bool
    devices: tuple[str, ...] = ()  # archs it runs on (empty: every one of the target's vendor)
    devices_text: str = ""  # the same, in words
    family: str  # how its `mma` shapes are written, in general
    requirements: tuple[Requirement, ...] = ()
    # the analysis's words when the target lacks the path, or the shape
    no_path: str
    no_path_fix: str
    no_shape: str
    shapes_note: str
    # the pictures' labels for a fragment load and an mma
    load_label: str
    mma_label: str

    def lanes(self, target) -> int:
        """Threads one IR warp stands for on `target`."""
        return self.warps_per_ir_warp * target.warp_width

    def shape_text(self, shape: tuple[int, int, int]) -> str:
        """The shape as the `mma` directive writes it on this path."""
        if self.shape_syntax == "dims":
            return " x ".join(map(str, shape))
        if self.shape_syntax == "word":
            return self.name
        return "m{}n{}k{}".format(*shape)

    def compact_shape(self, shape: tuple[int, int, int]) -> str:
        """The shape without spaces, as `check`'s schedule line prints it."""
        return "x".join(map(str, shape)) if self.shape_syntax == "dims" else self.shape_text(shape)

    def async_depth(self, stages: int) -> int:
        """Groups of mmas left in flight at the end of a K step: 1 from 3 stages on (a slot
        is then read for two steps) on a path that reads its tiles asynchronously."""
        return 1 if self.reads_tiles_async and stages >= 3 else 0

    def direct_loads(self, stages: int) -> bool:
        """Whether a kernel of `stages` loads its fragments as `direct_vectors`."""
        return self.direct_vectors and stages == 0

    def build_arch(self, arch: str) -> str:
        return arch + self.build_suffix if not arch.endswith(self.build_suffix) else arch


WMMA = InstructionPath(
    name="wmma",
    shape_syntax="dims",
    target_shapes="mma_shapes",
    mma_call="mma_sync",
    operands="wmma_pointer",
    accumulators="wmma_pointer",
    lane_addressed=False,
    reads_swizzled_lines=False,
    direct_vectors=False,
    family="M x N x K",
    no_path="{target} has no WMMA fragments",
    no_path_fix="",
    no_shape="{target} has no {shape} {dtype} fragment",
    shapes_note="fragment shapes here: {shapes}",
    load_label="load_matrix_sync",
    mma_label="mma_sync",
)

MMA_SYNC = InstructionPath(
    name="mma.sync",
    shape_syntax="ptx",
    target_shapes="ptx_mma_shapes",
    mma_call="mma_sync",
    operands="lane_rows",
    accumulators="lane_pairs",
    lane_addressed=True,
    reads_swizzled_lines=True,
    direct_vectors=True,
    family="m16n8k16",
    # stages 0 (fragments straight from global memory) is the analysis's to judge: it
    # needs K-contiguous operands (tiledsl.frontend.direct)
    requirements=(),
    no_path="{target} has no mma.sync PTX path",
    no_path_fix="use a WMMA fragment shape: {wmma_shapes}",
    no_shape="{target} has no {shape} mma.sync path for {dtype} here",
    shapes_note="instruction shapes here: {shapes}",
    load_label="load_matrix_sync",
    mma_label="mma_sync",
)

WGMMA = InstructionPath(
    name="wgmma",
    shape_syntax="ptx",
    target_shapes="wgmma_shapes",
    warps_per_ir_warp=4,
    ir_warp="warpgroup",
    mma_call="wgmma",
    operands="descriptor",
    accumulators="lane_pairs",
    fragments_in_registers=False,
    lane_addressed=True,
    uniform_warp_index=True,
    reads_tiles_async=True,
    feeds_tma_pipeline=True,
    reads_swizzled_lines=True,
    swizzle_panel_bytes=128,
    smem_align=1024,  # the 128-byte swizzle is a function of address bits 4-9
    smem_slack=1024,  # dynamic shared memory is not promised that alignment: round up
    default_pad="xor",
    k_line_elements=64,  # 128-byte lines of 16-bit elements
    n_panel_elements=64,  # an N-contiguous B tile: 128-byte panels, the swizzle's atom
    build_suffix="a",
    direct_vectors=False,
    devices=("sm_90", "sm_90a"),
    devices_text="sm_90 (Hopper)",
    family="m64nNk16",
    requirements=(
        Requirement(
            "stages",
            lambda s: s.stages >= 2,
            "wgmma reads its tiles asynchronously from shared memory, "
            "which needs the pipeline of stages 2 or more (stages {stages})",
            "write `stages 3` or more (from 3, one step of wgmmas stays in flight)",
        ),
        Requirement(
            "pad",
            lambda s: s.pad == "xor",
            "wgmma reads shared memory through descriptors of "
            "128-byte-swizzled tiles, which is `pad xor`'s layout on this path",
            "write `pad xor`",
        ),
        Requirement(
            "accumulate",
            lambda s: s.accumulate == "f32",
            "the wgmma path accumulates in f32 only (f16 accumulation is not built for it)",
            "write `accumulate f32`, or drop the line",
        ),
        Requirement(
            "fragment_buffers",
            lambda s: s.fragment_buffers != 2,
            "wgmma reads A and B from shared "
            "memory itself: there are no fragment registers to double-buffer",
            "drop `fragment_buffers 2` (a step of wgmmas already overlaps the next one's copies)",
        ),
    ),
    no_path="{target} has no wgmma (`mma {shape}` is Hopper's warpgroup instruction)",
    no_path_fix="use `target cuda sm_90`, or the mma.sync path here (`mma m16n8k16`)",
    no_shape="{target} has no {shape} wgmma for {dtype} here",
    shapes_note="wgmma shapes here: {shapes}",
    load_label="wgmma operand (descriptor)",
    mma_label="wgmma.mma_async (each warpgroup)",
)

#: The fma path's one warp shape: a line of A by a line of B over 32 lanes x 8 elements of K.
FMA_SHAPE = (1, 1, 256)

FMA = InstructionPath(
    name="fma",
    shape_syntax="word",
    target_shapes="fma_shapes",
    mma_call="fma",
    operands="lane_rows",
    accumulators="lane_total",
    lane_addressed=True,
    reads_swizzled_lines=False,
    direct_vectors=True,
    family="fma",
    requirements=(
        Requirement(
            "stages",
            lambda s: s.stages == 0,
            "mma fma loads each lane's vectors straight from global memory (the direct "
            "path): it has no shared-memory stages to read (stages {stages})",
            "write `stages 0`",
        ),
    ),
    no_path="{target} has no fma path",
    no_path_fix="use a WMMA fragment shape: {wmma_shapes}",
    no_shape="{target} has no fma path for {dtype} here",
    shapes_note="the fma path's warp shape: {shapes}",
    load_label="16-byte vectors, a lane's 8 K elements",
    mma_label="fma (CUDA cores), the warp's partials",
)

PATHS: dict[str, InstructionPath] = {p.name: p for p in (WMMA, MMA_SYNC, WGMMA, FMA)}


def ptx_path(shape: tuple[int, int, int]) -> InstructionPath:
    """The path an instruction shape `mma mMnNkK` names: m64 is the warpgroup's (wgmma)."""
    return WGMMA if shape[0] == 64 else MMA_SYNC
