"""Directive reading: the directives of one `syntax.Kernel` -> a `Schedule`.

`read_directives` checks each value on its own (ranges, known words, duplicates, tuning
sets) and remembers where each was written, so that later errors can point at the
directive that asked. Checks that need the operands too are tiledsl.frontend.analysis's.
"""

from __future__ import annotations

import re

from ..errors import Collector
from ..ir.paths import FMA, FMA_SHAPE, ptx_path
from ..ir.schedule import Schedule
from ..ir.targets import TARGETS, UNMODELLED, parse_target_name
from ..limits import INT_MAX, INT_TEXT_DIGITS, MAX_STAGES, MAX_SWIZZLE
from . import syntax as S


def read_directives(
    kernel: S.Kernel, target_override: str | None, errs: Collector
) -> tuple[Schedule, dict]:
    seen: dict[str, S.Directive] = {}
    values: dict = {}
    invalid: set[str] = set()
    for d in kernel.directives:
        if d.name in seen:
            first = seen[d.name].loc
            errs.add(
                d.loc,
                f"directive '{d.name}' given twice in kernel '{kernel.name}'",
                f"the first '{d.name}' is at line {first.line}; keep one",
            )
            continue
        seen[d.name] = d
        for arg in d.args:
            if isinstance(arg, S.TuningSet):
                errs.add(
                    arg.loc,
                    "a tuning set {…} makes this file a tuning space, "
                    "which compile and run cannot take",
                    "search it with `tiledsl tune FILE` (which writes the best point as a plain "
                    f"file), or write one value, e.g. {arg.options[0]}",
                )
        reader = _READERS.get(d.name)
        if reader is not None:
            before = len(errs.diagnostics)
            values.update(reader(d, errs))
            if len(errs.diagnostics) > before:
                invalid.add(d.name)
    pads = values.pop("_pads", {})
    if values.get("grid_split") and values.get("persistent"):
        _persistent_split(values, seen, errs)
    stages = values.get("stages", 2)
    defaults = {"copy_mode": "async" if stages >= 2 else "sync"}
    written = frozenset(seen)
    locs = tuple((name, d.loc) for name, d in seen.items())
    if target_override is not None:
        # The command line's --target wins over the file's; errors about it point at the
        # kernel, since no line of the file asked for it.
        values["target"] = target_override
        values["target_from_command_line"] = True
        written |= {"target"}
        locs = tuple((name, loc) for name, loc in locs if name != "target")
    if "block" not in seen:
        errs.add(
            kernel.loc,
            f"kernel '{kernel.name}' has no 'block' directive",
            "every kernel needs its block tile, e.g. `block 128 x 128 x 32`",
        )
    sched = Schedule(
        **{**defaults, **values},
        written=written,
        invalid=frozenset(invalid),
        locs=locs,
        kernel_loc=kernel.loc,
    )
    return sched, pads


def _ints(
    d: S.Directive, count: int, errs: Collector, minimum: int = 1, maximum: int = INT_MAX
) -> tuple[int, ...] | None:
    nums = [a for a in d.args if isinstance(a, S.Num)]
    if len(nums) != count or any(isinstance(a, S.TuningSet) for a in d.args):
        return None
    out = []
    for num in nums:
        if isinstance(num.value, float) or num.value < minimum:
            errs.add(
                num.loc,
                f"'{d.name}' takes integers ≥ {minimum}, found {num.text}",
                _HINTS.get(d.name, ""),
            )
            return None
        if num.value > maximum:
            errs.add(
                num.loc,
                f"'{d.name}' takes integers ≤ {maximum}, found {num.text}",
                _LIMITS.get(d.name, "the generated code holds it in a 32-bit int"),
                _HINTS.get(d.name, ""),
            )
            return None
        out.append(num.value)
    return tuple(out)


def _word(d: S.Directive, index: int = 0) -> str:
    words = [a.text for a in d.args if isinstance(a, S.Word)]
    return words[index] if index < len(words) else ""


def _read_block(d, errs):
    v = _ints(d, 3, errs)
    return {"block": v} if v else {}


_PTX_SHAPE = re.compile(r"m(\d+)n(\d+)k(\d+)")


def _read_mma(d, errs):
    word = _word(d)
    if word == FMA.name:  # the CUDA cores: one warp shape (tiledsl.ir.paths.FMA)
        return {"mma": FMA_SHAPE, "instruction": FMA.name}
    if word:
        match = _PTX_SHAPE.fullmatch(word)
        if match is None:
            errs.add(
                d.args[0].loc,
                f"'{word}' is not an instruction shape",
                "write the mma.sync shape as mMnNkK, e.g. `mma m16n8k16`, "
                "a WMMA fragment as `mma 16 x 16 x 16`, or `mma fma` (the CUDA cores)",
            )
            return {}
        if any(len(x) > INT_TEXT_DIGITS for x in match.groups()):
            # int() refuses that many digits (a ValueError, not a diagnostic); a shorter
            # dimension, however absurd, is read and refused by the analysis as any shape
            # no instruction has, without the defaults' follow-on errors
            errs.add(
                d.args[0].loc,
                f"'{word[:24]}…' is not an instruction shape: a dimension of more than "
                f"{INT_TEXT_DIGITS} digits",
                "write the mma.sync shape as mMnNkK, e.g. `mma m16n8k16`, or wgmma's as "
                "`mma m64n256k16`",
            )
            return {}
        shape = tuple(int(x) for x in match.groups())
        # m64: the warpgroup's instruction (wgmma); the analysis checks the rest of the shape
        return {"mma": shape, "instruction": ptx_path(shape).name}
    v = _ints(d, 3, errs)
    return {"mma": v} if v else {}


#: `persistent split_k S`: at most this many slices of a tile's K steps.
MAX_SPLIT_K = 64


def _read_persistent(d, errs):
    kind = _word(d)
    if kind == "stream_k_aligned":  # stream-K's shares, taken last tile first
        return {"persistent": True, "stream_k": True, "aligned": True}
    if kind != "split_k":
        return {"persistent": True, "stream_k": kind == "stream_k"}
    v = _ints(d, 1, errs, minimum=2, maximum=MAX_SPLIT_K)
    if v is None:
        return {}
    if _word(d, 2) == "cluster":  # `persistent split_k S via cluster`, on one line or two
        errs.add(d.loc, *_persistent_cluster_split(v[0]))
        return {}
    # split-K runs on the stream-K fix-up: slices are pieces, their first block the owner
    return {"persistent": True, "stream_k": True, "split_k": v[0]}


def _read_split_k(d, errs):
    """`split_k S` (no `persistent`): a block per slice of each tile's K steps, the last
    slice to finish adding them (tiledsl.ir.grid.grid_split_steps). 1: no split, so that a
    space may write `split_k {1, 2}`. `split_k S via cluster`: a tile's S slices are one
    thread-block cluster, and slice 0 adds the others' partial sums from their shared
    memory (`via workspace`, the default: through the global workspace and a ticket)."""
    v = _ints(d, 1, errs, minimum=1, maximum=MAX_SPLIT_K)
    if v is None or v[0] == 1:
        return {}
    return {"grid_split": v[0], "split_via": _word(d, 1) or "workspace"}


def _persistent_cluster_split(slices: int) -> tuple[str, str]:
    """The refusal of `persistent` with `split_k S via cluster`: (message, fix)."""
    return (
        f"split_k {slices} via cluster beside persistent: a persistent block takes many "
        "tiles, and a cluster's blocks would have to take the slices of each together",
        f"drop `persistent` (a block per slice), or write `persistent split_k {slices}` "
        "(through the workspace)",
    )


def _persistent_split(values: dict, seen: dict, errs: Collector) -> None:
    """`split_k S` beside `persistent`: the persistent kernel's split of its last round,
    `persistent split_k S` (which `persistent` followed by `split_k S` on the next line
    also reads as: a newline separates words like a space), whichever comes first."""
    slices = values.pop("grid_split")
    if values.pop("split_via", "workspace") == "cluster":
        errs.add(seen["split_k"].loc, *_persistent_cluster_split(slices))
        return
    if values.get("stream_k"):
        kind = "stream_k_aligned" if values.get("aligned") else "stream_k"
        errs.add(
            seen["split_k"].loc,
            f"split_k {slices} and persistent {kind} each cut the tiles along K, in two "
            "different ways",
            f"keep `persistent {kind}`, or write `persistent split_k {slices}` alone",
        )
        return
    values.update(stream_k=True, split_k=slices)


def _read_coarsen(d, errs):
    v = _ints(d, 2, errs)
    return {"coarsen": v} if v else {}


def _read_cluster(d, errs):
    v = _ints(d, 2, errs)
    return {"cluster": v} if v else {}


def _read_stages(d, errs):
    v = _ints(d, 1, errs, minimum=0, maximum=MAX_STAGES)
    return {"stages": v[0]} if v else {}


def _read_fragment_buffers(d, errs):
    v = _ints(d, 1, errs)
    if v is None:
        return {}
    if v[0] not in (1, 2):
        errs.add(
            d.args[0].loc,
            f"fragment_buffers is 1 or 2, found {v[0]}",
            "write `fragment_buffers 2` to double-buffer fragments, or drop the line",
        )
        return {}
    return {"fragment_buffers": v[0]}


#: `warps_k W`: at most this many K teams (W copies of the block's warps).
MAX_WARPS_K = 16


def _read_warps_k(d, errs):
    """`warps_k W`: W teams of the block's warps, team t on the block's K steps t, t + W,
    ...; the teams' sums added in team order (tiledsl.passes.k_teams). 1: one team, so
    that a space may write `warps_k {1, 4, 8}`. `warps_k W runs R`: the teams in R groups,
    each on a contiguous run of the K steps (R divides W)."""
    runs = _word(d) == "runs"
    v = _ints(d, 2 if runs else 1, errs, minimum=1, maximum=MAX_WARPS_K)
    if not v:
        return {}
    if runs and v[0] % v[1]:
        num = [a for a in d.args if isinstance(a, S.Num)][1]
        divisors = ", ".join(str(r) for r in range(1, v[0] + 1) if v[0] % r == 0)
        errs.add(
            num.loc,
            f"warps_k {v[0]} runs {v[1]}: the runs share the {v[0]} K teams equally, so "
            f"{v[1]} must divide {v[0]}",
            f"runs takes a divisor of {v[0]}: {divisors}",
        )
        return {}
    return {"warps_k": v[0], "k_runs": v[1] if runs else 1}


#: `blocks_per_sm N`: at most this many (an NVIDIA multiprocessor holds 32 blocks).
MAX_BLOCKS_PER_SM = 32


def _read_blocks_per_sm(d, errs):
    """`blocks_per_sm N`: the resident blocks per multiprocessor the registers are capped
    for (`__launch_bounds__(THREADS, N)`); whether N blocks fit the threads and shared
    memory is checked against the target (tiledsl.frontend.analysis)."""
    v = _ints(d, 1, errs, minimum=1, maximum=MAX_BLOCKS_PER_SM)
    return {"blocks_per_sm": v[0]} if v else {}


def _read_copy(d, errs):
    mode = _word(d)
    if mode == "tma":  # the TMA unit moves whole boxes: no vector width
        return {"copy_mode": mode}
    v = _ints(d, 1, errs)
    if v is None:
        return {"copy_mode": mode}
    if v[0] not in (4, 8, 16):
        errs.add(
            d.args[-1].loc,
            f"copy vector width must be 4, 8 or 16 bytes, found {v[0]}",
            "16-byte vectors are the fastest: `copy sync 16`",
        )
        return {"copy_mode": mode}
    return {"copy_mode": mode, "copy_bytes": v[0]}


def _read_pad(d, errs):
    first = _word(d)
    if first in ("auto", "none", "xor") and len(d.args) == 1:
        return {"pad": first}
    pads = {}
    for group in d.groups:
        name, num = group[0], group[-1]
        if str(name) in pads:
            errs.add(
                name.loc,
                f"'{name}' is padded twice in one pad directive",
                f"keep one pad for {name}, e.g. `pad {name} 8`",
            )
            continue
        if not isinstance(num, S.Num) or isinstance(num.value, float) or num.value < 0:
            errs.add(
                num.loc,
                f"a pad is a whole number of elements ≥ 0, found {num}",
                "e.g. `pad A 8, B 8`",
            )
            continue
        if num.value > INT_MAX:
            errs.add(num.loc, f"a pad is at most {INT_MAX} elements, found {num}", "e.g. `pad A 8`")
            continue
        pads[str(name)] = (num.value, name.loc, num.loc)
    return {"pad": "explicit", "_pads": pads}


def _read_swizzle(d, errs):
    kind = _word(d)
    if kind == "none":
        return {"swizzle": "none", "swizzle_param": 0}
    v = _ints(d, 1, errs, maximum=MAX_SWIZZLE)
    return {"swizzle": kind, "swizzle_param": v[0]} if v else {"swizzle": kind}


F32_MAX = 3.4028234663852886e38
F32_TINY = 1.1754943508222875e-38  # the smallest normal f32


def f32_problem(value: float) -> str | None:
    """What keeps `value` from being an epilogue's f32 alpha or beta: "not finite" (past
    f32's range), "subnormal" (the GPU flushes it to zero), or None."""
    # f32 rounds values a little past F32_MAX down to it: the bound is half an ulp up
    if not abs(value) < F32_MAX * (1 + 2**-25):
        return "not finite"
    if value != 0 and abs(value) < F32_TINY:
        return "subnormal"
    return None


def _read_epilogue(d, errs):
    """The steps as written; alpha and beta must be f32 values the kernel can hold (it
    multiplies in f32, compiled with subnormals flushed to zero)."""
    for group in d.groups:
        if group[0].text in ("alpha", "beta") and isinstance(group[-1], S.Num):
            num = group[-1]
            problem = f32_problem(num.value)
            if problem == "not finite":
                errs.add(
                    num.loc,
                    f"{group[0].text} {num.text} is not a finite f32 number "
                    f"(at most {F32_MAX:.7g})",
                    "the epilogue computes in f32: write a value within its range",
                )
            elif problem == "subnormal":
                errs.add(
                    num.loc,
                    f"{group[0].text} {num.text} is below f32's smallest normal number "
                    f"({F32_TINY:.7g}), which the GPU flushes to zero",
                    f"write 0, or a value of at least {F32_TINY:.7g}",
                )
    return {"epilogue": tuple(tuple(str(a) for a in g) for g in d.groups)}


def _read_target(d, errs):
    text = " ".join(str(a) for a in d.args)
    key = parse_target_name(text)
    if key is None and " ".join(text.split()) in UNMODELLED:
        errs.add(
            d.loc,
            f"target {text} is not modelled: {UNMODELLED[' '.join(text.split())]}",
            "use `target musa mp_22` (the S4000) or a CUDA target",
        )
        return {}
    if key is None:
        errs.add(
            d.loc,
            f"unknown target '{text}'",
            "targets are: " + ", ".join(TARGETS) + (", musa mp_31 (not modelled yet)"),
        )
        return {}
    return {"target": key}


#: The MUSA kernel attributes the S4000 write-up documents: flags, and those taking a number.
MUSA_FLAGS = (
    "mtgpu_tiny_offset",
    "mtgpu_enable_ldma_index",
    "mtgpu_enable_ldlms_opt",
    "mtgpu_workgroup_atomic",
)
MUSA_VALUED = ("mtgpu_num_usreg", "mtgpu_unroll_threshold")


def _read_attributes(d, errs):
    """Attribute names the write-up documents, passed through as `__attribute__((...))`."""
    for arg in d.args:
        name = arg.name if isinstance(arg, S.Call) else arg
        known = MUSA_VALUED if isinstance(arg, S.Call) else MUSA_FLAGS
        if str(name) not in known:
            errs.add(
                name.loc,
                f"unknown kernel attribute '{arg}'",
                "the attributes are " + ", ".join((*MUSA_FLAGS, *(f"{v}(N)" for v in MUSA_VALUED))),
            )
        elif isinstance(arg, S.Call) and not 1 <= arg.arg.value <= INT_MAX:
            errs.add(arg.arg.loc, f"{name} takes a number from 1 to {INT_MAX}", f"e.g. {name}(256)")
    return {"attributes": tuple(str(a) for a in d.args)}


def _simple(attr: str):
    return lambda d, errs: {attr: _word(d)}


_READERS = {
    "block": _read_block,
    "mma": _read_mma,
    "coarsen": _read_coarsen,
    "stages": _read_stages,
    "fragment_buffers": _read_fragment_buffers,
    "warps_k": _read_warps_k,
    "blocks_per_sm": _read_blocks_per_sm,
    "copy": _read_copy,
    "pad": _read_pad,
    "swizzle": _read_swizzle,
    "warp_specialize": lambda d, errs: {
        "warp_specialize": True,
        "pingpong": _word(d) == "pingpong",
    },
    "persistent": lambda d, errs: _read_persistent(d, errs),
    "split_k": _read_split_k,
    "cluster": _read_cluster,
    "swap_operands": lambda d, errs: {"swap_operands": True},
    "sync": _simple("sync"),
    "load_order": _simple("load_order"),
    "accumulate": _simple("accumulate"),
    "epilogue": _read_epilogue,
    "epilogue_via": _simple("epilogue_via"),
    "target": _read_target,
    "attributes": _read_attributes,
}

#: Why `persistent split_k S` and `split_k S` stop at MAX_SPLIT_K slices.
_SLICES_LIMIT = (
    f"more than {MAX_SPLIT_K} slices of one tile's K steps never pay (each slice's partial "
    "sum is BM x BN floats through global memory)"
)

_LIMITS = {
    "stages": f"a pipeline of more than {MAX_STAGES} stages never pays (each stage is a "
    "shared-memory slot, and the prologue is unrolled and analysed once per stage)",
    "persistent": _SLICES_LIMIT,
    "split_k": _SLICES_LIMIT,
    "warps_k": f"more than {MAX_WARPS_K} K teams never pay (each is a copy of the block's "
    "warps, and 1024 threads is a block's limit)",
    "blocks_per_sm": f"a multiprocessor holds at most {MAX_BLOCKS_PER_SM} blocks",
    "swizzle": f"a group or panel of more than {MAX_SWIZZLE} block tiles never pays (and "
    "its products with the tile counts must fit the kernel's 32-bit int)",
}

_HINTS = {
    "block": "a block tile is written BM x BN x BK, e.g. 128 x 128 x 32",
    "mma": "a fragment shape is written M x N x K, e.g. 16 x 16 x 16",
    "coarsen": "warp coarsening is written CM x CN, e.g. 2 x 2",
    "cluster": "a cluster is written CM x CN blocks, e.g. 2 x 1",
    "stages": "stages is 0 (no shared memory), 1 (one tile), or ≥ 2 (a pipeline)",
    "persistent": "split_k takes the slices of a tile's K steps, 2 or more, e.g. "
    "`persistent split_k 2`",
    "split_k": "split_k takes the slices of each tile's K steps, e.g. `split_k 2` (1: no split)",
    "warps_k": "warps_k takes the K teams of the block's warps, e.g. `warps_k 8` (1: one team), "
    "and optionally their runs along K, `warps_k 8 runs 2`",
    "blocks_per_sm": "blocks_per_sm takes the blocks a multiprocessor should hold at once, e.g. "
    "`blocks_per_sm 2` (1: registers capped for one block only)",
    "swizzle": "e.g. `swizzle grouped 8`, `swizzle snake 8`, `swizzle zigzag 2` or `swizzle none`",
}
