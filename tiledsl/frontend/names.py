"""The names a `.tile` file gives (kernels, operands, sizes) become C++ names: each one
must be one the generated code can declare, and none may meet a name it declares itself.

    check_kernel_names(kernel, gemm, errs)     # one kernel's operands and sizes
    check_program_names(kernels, errs)         # kernel names across the file

A user name is an ASCII identifier (a letter, then letters, digits and '_'; no '__',
which C++ reserves), not a C++ keyword, and not a name the generated code itself
spells: its helpers, locals and constants (`GENERATED`, `GENERATED_FAMILIES`), the
names derived from the user's own (`derived_names`: A's shared tile `As` and its
constants `AS_ROWS`..., a kernel's twin `k_edge`, its namespace `k_schedule`, MUSA's
`k_launch`), and, for what lands at file scope (kernel names and their derived names),
the names the CUDA headers declare there (`header_names.txt`: `sqrt`, `printf`,
`dim3`, ...). tests/test_names.py scans the output of every example on every path and
fails when the emitters spell an identifier that is not accounted for here.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from ..errors import Collector, Loc
from . import syntax as S

IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")

CXX_KEYWORDS = frozenset(
    """alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t
    char16_t char32_t class compl concept const consteval constexpr constinit const_cast
    continue co_await co_return co_yield decltype default delete do double dynamic_cast else
    enum explicit export extern false final float for friend goto if import inline int long
    module mutable namespace new noexcept not not_eq nullptr operator or or_eq override private
    protected public register reinterpret_cast requires restrict return short signed sizeof
    static static_assert static_cast struct switch template this thread_local throw true try
    typedef typeid typename union unsigned using virtual void volatile wchar_t while xor
    xor_eq main""".split()
)

#: Identifiers the emitters write at file scope or into every kernel's namespace (which
#: the kernel body opens with `using namespace`): no user name may be one of them.
GENERATED = frozenset(
    # CUDA and MUSA built-ins, types and API the kernels use
    """threadIdx blockIdx blockDim gridDim warpSize half uint2 uint4 float2 make_float2 dim3
    min fmaxf nvcuda wmma mtmusa musaDeviceSynchronize musaFuncSetAttribute
    musaFuncAttributeMaxDynamicSharedMemorySize"""
    # helpers at file scope
    """ cp_async cp_async_commit cp_async_wait xor_swizzle fence_proxy_async
    warpgroup_barrier smem_address"""
    # the Hopper pipeline's helpers and the tensor map's type (tiledsl.emit.hopper)
    """ TensorMap shared_address mbarrier_init mbarrier_init_fence mbarrier_expect_tx
    mbarrier_arrive mbarrier_wait tma_load_2d setmaxnreg_dec setmaxnreg_inc tma_store_2d
    tma_store_commit tma_store_wait_read stmatrix_x4 pack_f16x2 pack_bf16x2 __nv_bfloat162
    cluster_sync tma_load_2d_multicast mbarrier_arrive_remote signal_flag wait_flag
    take_ticket fence_proxy_async_global bulk_load direct_vector direct_vector_inside direct_word
    named_barrier __stcg __ldcg make_float4 float4
    __floats2bfloat162_rn __half2 __floats2half2_rn Divisor __umulhi
    mbarrier_arrive_cluster mbarrier_wait_cluster peer_load_float4"""
    # the fma path's helpers (tiledsl.emit.fma)
    """ fma_dot8 warp_total pair_to_float2"""
    # the kernel's constants (its `NAME_schedule` namespace)
    """ BM BN BK MMA_M MMA_N MMA_K WARPS_M WARPS_N WARP_SIZE THREADS GROUP_M PANEL_N ALPHA
    BETA Cs CS_ROWS CS_COLS CS_PITCH STAGES STAGE_BYTES STORE_COLUMNS PRODUCER_REGISTERS
    CONSUMER_REGISTERS TEAMS CLUSTER_M CLUSTER_N CLUSTER_SIZE SK_PARTS SK_MAX_FILL SPLIT_K
    CONSUMER_THREADS CONSUMERS_BARRIER PARTIAL_FLOATS FLAG_DEFER_STEPS WARPS_K Ks KS_ROWS
    KS_PITCH BLOCKS_PER_SM K_RUNS RUN_TEAMS TEAM_THREADS SLICE_MULTIPLE Ps PS_ROWS PS_PITCH"""
    # MUSA's host launcher calls the kernel beside this local
    """ blocks""".split()
)

#: Locals of the kernels, of the helpers and of MUSA's host launcher, and template
#: parameters: an operand or a size (a parameter there) may not be one; a kernel may.
GENERATED_LOCALS = frozenset(
    """BYTES PENDING CHUNK GROUPS REPEAT TRANS_A TRANS_B address dst gmem line pos id wq
    lbo sbo tile smem smem_base warp lane wm wn tiles_m tiles_n pid bz width group first_m
    group_m panel idx first_n row bm bn kt kk s it v r c e gr gc x a b acc p q d f g i j
    t n8 REGISTERS arrivals bar bytes done parity map y full empty step tiles tl src r0 r1 r2
    r3 lo hi pair sr sc h er ec team turn rank crow ccol ctiles_m ctiles_n cbm cbn row_mask
    column_mask mask remote workspace flags flag set threads k_steps last_wave sk_tiles dp_tiles
    dp_rounds sk_steps workers slices sk_first sk_last u k_lo k_hi partial sum sk_blocks sk_quotient
    sk_remainder u_tile c_base c_first value multiplier shift tickets ticket ticket_box counter
    drawn slice last_step fetched at part from flag_at handed kteam kr kt_sum vec0 vec1 a_vec b_vec
    extent inside k_run slice_steps word bf16 BF16 aw bw total sums taken""".split()
)

#: Locals declared `extern` (the dynamic shared memory): they have linkage, so they may not
#: share a name with anything at file scope either, a kernel included.
EXTERN_LOCALS = frozenset({"smem", "smem_base"})

#: Helpers named per instruction shape or variant: `wgmma_m64n128k16_f16_f32`,
#: `mma_m16n8k16_f16_f32`, `ldmatrix_x4_trans`, `cp_async_wait`, `wgmma_desc`, ...
GENERATED_FAMILIES = re.compile(
    r"((wgmma|mma)_m\d+n\d+k\d+_\w+|ldmatrix_x\d(_trans)?|cp_async(_\w+)?"
    r"|wgmma_(desc|fence|commit|wait))\Z"
)

#: The suffixes of the names derived from a kernel's, and of its shared tiles' constants.
KERNEL_SUFFIXES = ("_edge", "_schedule", "_edge_schedule", "_launch")
TILE_CONSTANTS = (
    "ROWS",
    "COLS",
    "PITCH",
    "PANELS",
    "PANEL",
    "XOR_CHUNK",
    "XOR_GROUPS",
    "XOR_REPEAT",
    "LBO",
    "SBO",
)


_ARTICLE = {"kernel": "the kernel", "operand": "an operand", "size": "a size"}
_EXAMPLES = {"kernel": ", e.g. `gemm`", "operand": ", e.g. `A`", "size": ", e.g. `M`"}


@cache
def header_names() -> frozenset[str]:
    """What the CUDA headers declare at file scope (see the module's text)."""
    text = (Path(__file__).parent / "header_names.txt").read_text(encoding="utf-8")
    return frozenset(line for line in text.splitlines() if line and not line.startswith("#"))


def kernel_derived(name: str) -> tuple[str, ...]:
    """The file-scope names the emitters derive from kernel `name`."""
    return tuple(name + suffix for suffix in KERNEL_SUFFIXES)


def tile_derived(operand: str) -> tuple[str, ...]:
    """The names of an input operand's shared-memory tile (`As`) and of its constants."""
    buffer = operand + "s"
    # map_A: the operand's TMA tensor map, a parameter of `copy tma` kernels
    return (buffer, f"map_{operand}", *(f"{buffer.upper()}_{c}" for c in TILE_CONSTANTS))


def name_problem(name: str, file_scope: bool) -> str | None:
    """Why `name` cannot name something in the generated C++, or None."""
    if not IDENTIFIER.match(name):
        return "is not a C++ identifier: use ASCII letters, digits and '_', starting with a letter"
    if "__" in name:
        return "contains '__', which C++ reserves for the compiler and its libraries"
    if name in CXX_KEYWORDS:
        return "is a C++ keyword" if name != "main" else "is the program's entry point in C++"
    if name in GENERATED or GENERATED_FAMILIES.match(name):
        return "is a name the generated code uses itself"
    if not file_scope and name in GENERATED_LOCALS:
        return "is the name of a variable in the generated kernel"
    if file_scope and name in EXTERN_LOCALS:
        # an `extern __shared__` array has linkage: the kernel's own name may not be one
        return "is the name of the generated kernel's shared-memory array"
    if file_scope and name in header_names():
        return "is declared by the CUDA headers the generated code includes"
    return None


def check_kernel_names(kernel: S.Kernel, gemm, errs: Collector) -> None:
    """The kernel's own name, its operands' and its sizes' names, and what they derive."""
    seen: dict[str, str] = {}

    def claim(name: str, what: str, loc: Loc, file_scope: bool = False) -> bool:
        problem = name_problem(name, file_scope)
        if problem:
            example = _EXAMPLES.get(what, "")
            errs.add(loc, f"{what} '{name}' {problem}", f"rename it{example}")
        elif seen.get(name, what) != what:
            errs.add(
                loc,
                f"{what} '{name}' is also the name of {_ARTICLE.get(seen[name], seen[name])} "
                "in the generated code",
                "give each its own name",
            )
        seen.setdefault(name, what)
        return problem is None

    if claim(kernel.name, "kernel", kernel.loc, file_scope=True):
        for derived in kernel_derived(kernel.name):
            claim(derived, f"the part of kernel '{kernel.name}' named", kernel.loc, True)
    for op in kernel.operands:
        claim(op.name, "operand", op.loc)
        for dim in op.dims:
            if isinstance(dim, S.Word):
                claim(dim.text, "size", dim.loc)
    if gemm is not None:
        for op in (gemm.a, gemm.b):
            for derived in tile_derived(op.name):
                claim(derived, f"the shared-memory tile of {op.name} (or its constant)", op.loc)


def check_program_names(kernels: tuple[S.Kernel, ...], errs: Collector) -> None:
    """No kernel's name is another's derived name (`k` and `k_edge`: k's twin is `k_edge`)."""
    derived = {d: k for k in kernels for d in kernel_derived(k.name)}
    for k in kernels:
        if k.name in derived and derived[k.name] is not k:
            owner = derived[k.name]
            errs.add(
                k.loc,
                f"kernel '{k.name}' has the name tiledsl gives to a part of kernel "
                f"'{owner.name}' (line {owner.loc.line})",
                f"rename one of them: '{owner.name}' derives "
                + ", ".join(f"'{d}'" for d in kernel_derived(owner.name)),
            )
