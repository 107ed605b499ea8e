"""What the compiler can build today, and a located refusal for everything else.

The language is parsed and checked whole; this module is the one place that
says which directive values have a pass (or emitter) behind them. A value that
has none is refused with its `.tile` location — never silently ignored. Where
the value is a default the user did not write, the error points at the kernel
and says which directive to write instead.
"""

from __future__ import annotations

from ..errors import Collector
from .analysis import Analysis


def refuse_unbuilt(analysis: Analysis, errs: Collector) -> None:
    """Add one diagnostic per directive value that nothing implements yet."""
    g, s, t = analysis.gemm, analysis.schedule, analysis.target

    def refuse(directive: str, what: str, builds: str, fix: str) -> None:
        if directive in s.invalid:
            return  # its value was already refused; the default standing in is not the user's
        # s.loc falls back to the kernel's name for a default the user did not write.
        errs.add(s.loc(directive), f"{what} is not built yet: it needs {builds}", fix)

    if s.accumulate == "f16" and g.a.dtype == "bf16":
        refuse_value = "accumulate" in s.written
        errs.add(
            s.loc("accumulate"),
            "bf16 inputs accumulate in f32 only (WMMA has no bf16 x bf16 -> f16 product)",
            "write `accumulate f32`" if refuse_value else "declare A and B as f16",
        )
    if s.accumulate == "f16" and t.vendor == "musa":
        refuse(
            "accumulate",
            f"accumulate f16 on {t.name}",
            "the S4000's f16 accumulator fragments, which the write-up does not document",
            "write `accumulate f32`",
        )
    if s.copy_mode == "async" and s.stages < 2:
        errs.add(
            s.loc("copy"),
            f"copy async fills one buffer while another is computed, so it needs stages ≥ 2 "
            f"(this schedule has stages {s.stages})",
            "write `copy sync 16`, or `stages 2` or more",
        )
    if s.stages == 0 and "pad" in s.written and s.pad != "none":
        errs.add(
            s.loc("pad"),
            "pad changes shared-memory rows, and stages 0 has none",
            "drop the pad directive, or stage through shared memory with `stages 1`",
        )
    for op in (g.c, *g.extras):
        if op.dtype == "bf16" and t.vendor == "musa":
            errs.add(
                op.loc,
                f"{op.name}: bf16 on {t.name} is not built yet: it needs MUSA's bfloat16 type "
                "and conversions, which the S4000 write-up does not document",
                f"declare {op.name} f16 or f32",
            )
    if s.epilogue and t.vendor == "musa":
        refuse(
            "epilogue",
            "epilogue " + ", ".join(" ".join(g) for g in s.epilogue) + f" on {t.name}",
            "MUSA's round-to-nearest float intrinsics (the CUDA epilogue uses __fmul_rn and "
            "__fadd_rn so that it is exact), which the S4000 write-up does not document",
            "drop the epilogue directive for MUSA",
        )
    converts = s.warp_specialize or s.direct  # stores C lane by lane
    if s.epilogue_via == "direct" and g.c.dtype != s.accumulate and not converts:
        refuse(
            "epilogue_via",
            f"epilogue_via direct with {g.c.dtype} C and an {s.accumulate} accumulator",
            "a conversion, which a WMMA fragment store cannot do",
            "write `epilogue_via shared` (C is converted as it leaves shared memory)",
        )
    if s.attributes and t.vendor != "musa":
        errs.add(
            s.loc("attributes"),
            f"{t.name} takes no kernel attributes",
            "the `attributes` directive passes MUSA's mtgpu_* attributes; drop it for CUDA",
        )
    if s.copy_mode == "async" and not t.has_cp_async:
        errs.add(
            s.loc("copy"),
            f"{t.name} has no asynchronous global -> shared copy (cp.async)",
            "write `copy sync 8` (the S4000 write-up found MUSA's __pipeline_memcpy_async no "
            "faster than plain copies)",
        )
