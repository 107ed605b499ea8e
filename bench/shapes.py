"""Every shape a Llama-2-7B layer multiplies at, from one token to 8192, against cuBLAS and
Triton, and against the memory bound where few rows make the product a read of the weights.

    python3 bench/shapes.py [FILE.tile ...] [--m 1 16 ...]
                            [--sizes SUITE] [--repeat N] [--rounds R] [--data ints|normal]
                            [--out PATH.json] [--plot PATH.png]
    python3 bench/shapes.py --from-json RUN.json ... [--out PATH.json] [--plot PATH.png]
                            (where runs share a shape, the last run given counts there)
    ... [--dispatch OUT.tile [--layout B=col]]

The shapes: M x N x K for M in 1, 16, 64, 128, 256, 512, 1000, 2048, 8192 tokens (`--m`)
and the projections N x K = 12288 x 4096 (q, k, v), 4096 x 4096 (o), 22016 x 4096 (gate,
up) and 4096 x 11008 (down): 36 shapes, f16 A and B, f32 accumulation, f16 C. `--sizes`
takes a suite file instead (one MxNxK a line, as `tiledsl tune --sizes` does).

Each FILE is timed at every shape (with no FILE: `default_plan()` below, each group of
files at the tokens where it may win) with `tiledsl bench`'s code (tiledsl.commands.bench):
a file of several kernels with a dispatch table beside it (`tiledsl tune --sizes`) times
the kernel its table picks, as `tiledsl.load` would call it. Every row is checked by the
exact and the statistical oracle before its time counts; cuBLAS (cupy.matmul) and Triton
(tl.dot) are timed in the same process on the same inputs, and each shape is judged
against their fastest time of the run. A kernel that swaps the operands' roles
(`swap_operands`: it computes C^T = B^T A^T) is written, called and timed at M x N x K like
any other; runs before 2026-12-05 (fourth session) timed its own-terms form at N x M x K and
labelled its rows `(C^T)`.

The memory bound of a shape is the bytes of A, B and C over the device-to-device copy
bandwidth measured in the same run (a copy of COPY_BYTES, read and written: 2 x COPY_BYTES
per copy, the median of its timed runs). Its `of bound` is the bound's time over the
kernel's: 1.0 is a kernel that moves its operands as fast as a copy does.

Targets (issue 19), per shape: >= 0.9x the fastest cuBLAS, >= 1.0x the fastest Triton,
and for M <= MEMORY_BOUND_M at least MEMORY_TARGET of the memory bound; over all shapes,
a geometric mean >= 1.0x cuBLAS. Prints the table and the verdicts, writes them as JSON
(default bench/results/shapes-GPU-DATE.json) and, with --plot, TFLOP/s and memory
throughput against M for tiledsl, cuBLAS and Triton. Exits 1 when a row fails its check;
a target missed is reported, not an error.

`--layout B=col` times every file with B declared as torch's Linear weight (N x K rows),
the few-token files' layout, where the many-token files declare `row` (each such file is
written again under build/layouts/, its dispatch table beside it, and timed from there;
its rows keep the path from `examples/` on). `--dispatch OUT.tile` writes the run's (or
the saved runs') winner at every shape as one file of kernels with its dispatch table
(tiledsl.tune.merge), so that one `tiledsl.load(OUT.tile)` runs, at each shape, the
kernel that was fastest there; one file holds one product, so with `--layout` the merged
kernels are declared in it too. The one-file flow:

    python3 bench/shapes.py --layout B=col --m 1 16 64 128 256 --out a.json
    python3 bench/shapes.py --layout B=col --m 512 1000 2048 8192 --out b.json
    python3 bench/shapes.py --from-json a.json b.json --layout B=col \
        --dispatch examples/tuned/llama2_7b.tuned.tile
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sys
from pathlib import Path

from best import ROOT, TUNED, best_at, default_out, timing_arguments

from tiledsl.commands import bench
from tiledsl.gpu.timing import DATA_KINDS

#: Tokens per call: decoding (1), small and large batches, prefill.
TOKENS = (1, 16, 64, 128, 256, 512, 1000, 2048, 8192)
#: Llama-2-7B's projections, N x K: q/k/v fused, o, gate/up fused, down.
PROJECTIONS = ((12288, 4096), (4096, 4096), (22016, 4096), (4096, 11008))
#: The files timed when none is given: the Hopper rungs for many tokens, and the few-token
#: tiles tuned per shape where `tiledsl tune examples/spaces/small_m_space.tile --sizes
#: bench/suites/llama2_7b_few_tokens.txt -o FEW_TOKENS` has written them.
MANY_TOKENS = (
    ROOT / "examples" / "hopper" / "stream_k.tile",
    ROOT / "examples" / "hopper" / "stream_k_aligned.tile",
    TUNED / "hopper_tuned_192.tile",
)
FEW_TOKENS = TUNED / "small_m.tuned.tile"
#: The 64- and 128-row tiles tuned at 256 to 1000 tokens on N = 4096, where neither group
#: above comes near cuBLAS (`tiledsl tune examples/spaces/mid_m_space.tile --sizes
#: bench/suites/llama2_7b_mid_tokens.txt -o MID_TOKENS`).
MID_TOKENS = TUNED / "mid_m.tuned.tile"
#: The kernel that swaps the operands' roles (`swap_operands`, C^T = B^T A^T: the weights
#: fill the wgmma's 64 rows, the tokens its N), tuned per shape where `tiledsl tune
#: examples/spaces/few_tokens_swapped_space.tile --sizes
#: bench/suites/llama2_7b_few_tokens_swapped.txt` has written it. Its B is torch's Linear
#: weight W (N x K rows) seen as W^T: from torch, k(x, W.t())
#: (examples/hopper/few_tokens_swapped.tile).
SWAPPED = TUNED / "few_tokens_swapped.tuned.tile"
SWAPPED_UNTUNED = ROOT / "examples" / "hopper" / "few_tokens_swapped.tile"
#: Which tokens each default group is timed at: the 64-row tiles up to FEW_MAX_M, the
#: swapped kernel up to SWAPPED_MAX_M, the many-token rungs from MANY_MIN_M on (the
#: groups overlap where either may win).
FEW_MAX_M, SWAPPED_MAX_M, MANY_MIN_M = 256, 16, 128
MID_M = (256, 1000)  # mid_m.tuned.tile, at N = 4096 (the shapes it was tuned at)
SUITES = ROOT / "bench" / "suites"
#: Where files redeclared in another layout (--layout) are written to be timed, and the
#: folders that say so in a run's paths.
RELAYOUT_DIR = ("build", "layouts")
RELAYOUT_ROOT = ROOT.joinpath(*RELAYOUT_DIR)
#: Files tuned over a suite of their own (the clustered forms cuBLAS runs where the groups
#: above trail it, docs/performance.md "What cuBLAS runs where tiledsl trails it"), each
#: timed at the shapes of its suite among those asked, once written: (file, suite, and at
#: fewer tokens too — the asked shapes on a suite shape's weights with fewer tokens than it,
#: which the dispatch table's nearest-shape rule hands the same kernels). Their winners on the H200
#: were all `cluster 1 x 1` (2026-12-04): small_m_cluster's are 64-row tiles without a split
#: of K and deeper than small_m.tuned's, which is why they are timed at fewer tokens too
#: (at 16 x 12288 x 4096 small_m.tuned's pick took 36.9 µs on 2026-12-03, more than its
#: 32.2 at 64 tokens). The swapped kernel tuned at 64 tokens (tokens64_swapped_space.tile)
#: lost to the 64-row tiles at every shape and is not kept. one_round's widths make the
#: tiles of 12288 and 22016 weight columns one round of the SMs (one_round_space.tile).
#: few_tokens_direct's are the direct path's (mma.sync, stages 0: the weights straight from
#: global memory into the registers, examples/direct/few_tokens_direct.tile), tuned on an
#: H100 on 2026-12-06 at 1 and 16 tokens; few_tokens_direct_split's the same with each tile's K
#: cut into slices, a block each (`split_k`, examples/spaces/few_tokens_direct_split_space.tile).
#: few_tokens_fma's are the fma path's (`mma fma`: a warp a weight row, the CUDA cores'
#: fused multiply-adds, examples/direct/few_tokens_fma.tile), tuned on an H100 on 2026-12-06
#: at one token (with more, the CUDA cores cannot keep up with the read).
SUITE_TUNED = (
    (TUNED / "small_m_cluster.tuned.tile", SUITES / "llama2_7b_cluster_tokens.txt", True),
    (TUNED / "mid_m_cluster.tuned.tile", SUITES / "llama2_7b_mid_cluster.txt", False),
    (TUNED / "hopper_cluster_192.tuned.tile", SUITES / "llama2_7b_mid_cluster.txt", False),
    (TUNED / "one_round.tuned.tile", SUITES / "llama2_7b_one_round.txt", False),
    (
        TUNED / "few_tokens_direct.tuned.tile",
        SUITES / "llama2_7b_few_tokens_swapped.txt",
        False,
    ),
    (
        TUNED / "few_tokens_direct_split.tuned.tile",
        SUITES / "llama2_7b_few_tokens_swapped.txt",
        False,
    ),
    (TUNED / "few_tokens_fma.tuned.tile", SUITES / "llama2_7b_one_token.txt", False),
)


def suite_groups(sizes) -> list[tuple[list[Path], list[tuple[int, int, int]]]]:
    """SUITE_TUNED's written files, each with the asked sizes its suite holds (and, where
    the entry says so, those with fewer tokens on the same weights)."""
    from tiledsl.tune.dispatch import read_suite

    groups = []
    for file, suite, fewer_tokens in SUITE_TUNED:
        if not file.exists():
            continue
        tuned_at = set(read_suite(suite))
        at = [s for s in sizes if s in tuned_at or fewer_tokens and _fewer_tokens(s, tuned_at)]
        groups.append(([file], at))
    return groups


def _fewer_tokens(size, tuned_at) -> bool:
    """Whether `size` has the weights (N x K) of a shape in `tuned_at` and fewer tokens."""
    m, n, k = size
    return any((n, k) == (tn, tk) and m < tm for tm, tn, tk in tuned_at)


def default_plan(sizes) -> list[tuple[list[Path], list[tuple[int, int, int]]]]:
    """(files, the sizes they are timed at) when no file is given."""
    few = [FEW_TOKENS] if FEW_TOKENS.exists() else [MANY_TOKENS[0]]
    if not FEW_TOKENS.exists():
        print(
            f"shapes: {FEW_TOKENS.relative_to(ROOT)} is not written yet (tune the few-token "
            f"space with --sizes first); timing {few[0].name} at few tokens instead",
            file=sys.stderr,
        )
    swapped = SWAPPED if SWAPPED.exists() else SWAPPED_UNTUNED
    mid = [s for s in sizes if MID_M[0] <= s[0] <= MID_M[1] and s[1] == 4096]
    groups = [
        (few, [s for s in sizes if s[0] <= FEW_MAX_M]),
        *([([MID_TOKENS], mid)] if MID_TOKENS.exists() else []),
        ([swapped], [s for s in sizes if s[0] <= SWAPPED_MAX_M]),
        (list(MANY_TOKENS), [s for s in sizes if s[0] >= MANY_MIN_M]),
        *suite_groups(sizes),
    ]
    return [g for g in groups if g[1]]


#: One copy's bytes: far past the H200's 50 MiB L2, so the copy runs at memory speed.
COPY_BYTES = 1 << 30
#: Up to this M the product is a read of B (the weights): judged against memory too.
MEMORY_BOUND_M = 64
MEMORY_TARGET = 0.85
CUBLAS_TARGET, TRITON_TARGET, MEAN_TARGET = 0.9, 1.0, 1.0
F16_BYTES = 2


def llama_shapes(tokens=TOKENS) -> list[tuple[int, int, int]]:
    return [(m, n, k) for n, k in PROJECTIONS for m in tokens]


def operand_bytes(size) -> int:
    """A, B and C in f16: what the product must move at least once."""
    m, n, k = size
    return F16_BYTES * (m * k + k * n + m * n)


def copy_bandwidth(repeat: int = 20) -> float:
    """Bytes per second of a device-to-device copy (read + written), on the current GPU."""
    import cupy

    from tiledsl.gpu.runtime import device_arch
    from tiledsl.gpu.timing import CudaClock, time_calls

    src = cupy.ones(COPY_BYTES, dtype=cupy.uint8)
    dst = cupy.empty_like(src)
    timing = time_calls(
        [lambda: dst.data.copy_from_device_async(src.data, COPY_BYTES)],
        CudaClock(device_arch()),
        warmup=3,
        repeat=repeat,
    )
    return 2 * COPY_BYTES / (timing.median_ms * 1e-3)


def verdicts(rows: list[dict], bandwidth: float | None) -> list[dict]:
    """Per shape: the best checked tiledsl row against the fastest cuBLAS and Triton of the
    run and against the memory bound."""
    out = []
    for size in sorted({tuple(r["size"]) for r in rows}, key=lambda s: (s[1], s[2], s[0])):
        best, cublas, triton = best_at(rows, size)
        ms = best["time_ms"] if best else None
        bound_ms = operand_bytes(size) / bandwidth * 1e3 if bandwidth else None
        v = {
            "size": list(size),
            "best": best["label"] if best else None,
            "kernel": best["kernel"] if best else None,
            "time_ms": ms,
            "tflops": best["tflops"] if best else None,
            "cublas_ms": cublas,
            "triton_ms": triton,
            "ratio_to_cublas": cublas / ms if ms and cublas else None,
            "ratio_to_triton": triton / ms if ms and triton else None,
            "bound_ms": bound_ms,
            "of_bound": bound_ms / ms if ms and bound_ms else None,
            "cublas_of_bound": bound_ms / cublas if cublas and bound_ms else None,
        }
        v["memory_judged"] = size[0] <= MEMORY_BOUND_M
        v["met"] = bool(
            v["ratio_to_cublas"]
            and v["ratio_to_cublas"] >= CUBLAS_TARGET
            and (v["ratio_to_triton"] is None or v["ratio_to_triton"] >= TRITON_TARGET)
            and (not v["memory_judged"] or (v["of_bound"] or 0) >= MEMORY_TARGET)
        )
        out.append(v)
    return out


def latest_runs(documents: list[dict]) -> dict[tuple[int, ...], int]:
    """Each shape's last run (its index, in the order given) among several runs."""
    return {tuple(r["size"]): i for i, d in enumerate(documents) for r in d["rows"]}


def latest_rows(documents: list[dict]) -> list[dict]:
    """The rows of several runs, each shape's from the last run (in the order given) that
    timed it: a shape's kernels are judged against the cuBLAS and Triton of their own run,
    and a run that times a shape again replaces the earlier one there."""
    last = latest_runs(documents)
    return [r for i, d in enumerate(documents) for r in d["rows"] if last[tuple(r["size"])] == i]


def geomean(values) -> float | None:
    values = [v for v in values if v]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def summary(found: list[dict]) -> dict:
    mean = geomean(v["ratio_to_cublas"] for v in found)
    return {
        "shapes": len(found),
        "met": sum(v["met"] for v in found),
        "geomean_cublas": mean,
        "geomean_triton": geomean(v["ratio_to_triton"] for v in found),
        "mean_met": bool(mean and mean >= MEAN_TARGET),
    }


def render(found: list[dict], totals: dict, bandwidth: float | None) -> str:
    def cell(value, width: int, digits: int) -> str:
        return f"{value:{width}.{digits}f}" if value else " " * (width - 1) + "-"

    lines = [
        f"{'size':<16} {'best':<28} {'µs':>7} {'TFLOP/s':>8} {'x cuBLAS':>9} {'x Triton':>9} "
        f"{'of bound':>9} {'cuBLAS':>7}  verdict"
    ]
    for v in found:
        bound = cell(v["of_bound"], 9, 3) if v["memory_judged"] else " " * 8 + "·"
        lines.append(
            f"{bench.size_label(tuple(v['size'])):<16} {v['best'] or '-':<28} "
            f"{cell(v['time_ms'] and v['time_ms'] * 1e3, 7, 1)} {cell(v['tflops'], 8, 1)} "
            f"{cell(v['ratio_to_cublas'], 9, 3)} {cell(v['ratio_to_triton'], 9, 3)} {bound} "
            f"{cell(v['cublas_of_bound'], 7, 3)}  {'MET' if v['met'] else 'MISSED'}"
        )
    if bandwidth:
        lines.append(f"copy bandwidth: {bandwidth / 1e12:.2f} TB/s (read + written)")
    lines.append(
        f"shapes meeting >= {CUBLAS_TARGET}x cuBLAS, >= {TRITON_TARGET}x Triton (and >= "
        f"{MEMORY_TARGET} of the memory bound at M <= {MEMORY_BOUND_M}): "
        f"{totals['met']} of {totals['shapes']}"
    )
    for key in ("cublas", "triton"):
        mean = totals[f"geomean_{key}"]
        lines.append(f"geometric mean x {key}: " + (f"{mean:.3f}" if mean else "-"))
    lines.append(
        f"geometric mean >= {MEAN_TARGET}x cuBLAS: {'MET' if totals['mean_met'] else 'MISSED'}"
    )
    return "\n".join(lines)


def plot(found: list[dict], path: Path, title: str = "") -> None:
    """Per projection: TFLOP/s against M (tiledsl's best, cuBLAS, Triton) and, below, the
    memory throughput (operand bytes over the time) with the copy bandwidth."""
    from matplotlib.figure import Figure

    from tiledsl.files import write_outputs

    shapes = sorted({(v["size"][1], v["size"][2]) for v in found})
    fig = Figure(figsize=(4.2 * len(shapes), 7.0), layout="constrained")
    axes = fig.subplots(2, len(shapes), squeeze=False)
    series = (("tiledsl", "time_ms"), ("cuBLAS", "cublas_ms"), ("Triton", "triton_ms"))
    for column, (n, k) in enumerate(shapes):
        at = sorted(
            (v for v in found if (v["size"][1], v["size"][2]) == (n, k)),
            key=lambda v: v["size"][0],
        )
        ms = [v["size"][0] for v in at]
        for label, key in series:
            points = [(v["size"], v[key]) for v in at if v[key]]
            flops = [2 * m * nn * kk / (t * 1e9) for (m, nn, kk), t in points]
            rate = [operand_bytes(s) / (t * 1e-3) / 1e12 for s, t in points]
            xs = [s[0] for s, _ in points]
            axes[0][column].plot(xs, flops, marker="o", label=label)
            axes[1][column].plot(xs, rate, marker="o", label=label)
        bounds = [v["bound_ms"] for v in at if v["bound_ms"]]
        if bounds:
            copy = operand_bytes(at[0]["size"]) / (at[0]["bound_ms"] * 1e-3) / 1e12
            axes[1][column].axhline(copy, color="gray", linestyle="--", label="copy bandwidth")
        for row, unit in ((0, "TFLOP/s"), (1, "memory throughput (TB/s)")):
            ax = axes[row][column]
            ax.set_xscale("log")
            ax.set_xticks(ms, [str(m) for m in ms], rotation=45)
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            ax.set_ylabel(unit)
            ax.set_xlabel("M (tokens)")
        axes[0][column].set_title(f"N x K = {n} x {k}")
    axes[0][0].legend()
    axes[1][0].legend()
    if title:
        fig.suptitle(title)
    picture = io.BytesIO()
    fig.savefig(picture, dpi=110, format=path.suffix.lstrip(".").lower() or "png")
    write_outputs({path: picture.getvalue()})


def from_examples(path) -> Path | None:
    """The part of `path` from its last `examples/` on, which names a file in any
    checkout (None when it has none)."""
    parts = Path(path).parts
    if "examples" not in parts:
        return None
    return Path(*parts[len(parts) - 1 - parts[::-1].index("examples") :])


def relaid(path: str) -> bool:
    """Whether a run's file was a copy redeclared in other layouts (`relayout`)."""
    parts = Path(path).parts
    return any(parts[i : i + 2] == RELAYOUT_DIR for i in range(len(parts) - 1))


def local_file(path: str) -> Path:
    """A run's file in this checkout: the run's paths are those of the machine that ran it
    (its checkout's root may differ), so the part from `examples/` on is what names it."""
    tail = from_examples(path)
    return ROOT / tail if tail is not None else Path(path)


def write_dispatch(rows: list[dict], out: Path, layouts: dict[str, str], origin: str, device):
    """OUT.tile and its table from the fastest checked tiledsl row at each shape of `rows`
    (tiledsl.tune.merge); nothing written when the merged file does not compile."""
    from tiledsl.driver import compile_source
    from tiledsl.files import write_outputs
    from tiledsl.tune.dispatch import table_path
    from tiledsl.tune.merge import Winner, merge

    winners = []
    for size in sorted({tuple(r["size"]) for r in rows}, key=lambda s: (s[1], s[2], s[0])):
        best, _, _ = best_at(rows, size)
        if best is not None:
            file = best["file"]
            winners.append(
                Winner(size, local_file(file), best["kernel"], best["time_ms"], relaid(file))
            )
    compiler = f"nvrtc {device['nvrtc']}" if device.get("nvrtc") else ""
    text, table = merge(
        winners,
        out,
        layouts=layouts,
        origin=origin,
        device=device.get("name", ""),
        compiler=compiler,
    )
    compile_source(text, str(out))  # TileError, located, before anything is written
    sources = {w.file.resolve() for w in winners}
    regenerated = sources == {out.resolve()}  # from a run of OUT.tile itself
    write_outputs(
        {out: text, table_path(out): table.to_text()},
        inputs=[] if regenerated else sorted(sources),
    )
    print(f"wrote {out} ({len({e.kernel for e in table.entries})} kernel(s)) and {table_path(out)}")


def relayout(file: Path, layouts: dict[str, str]) -> Path:
    """`file` with the operands of `layouts` redeclared (tiledsl.tune.merge.relayout_text),
    written under RELAYOUT_ROOT at its path from `examples/` on (so that a run's rows name
    the file they came from) with its dispatch table beside it; `file` itself when it
    declares them so already."""
    from tiledsl.tune.dispatch import table_path
    from tiledsl.tune.merge import relayout_text

    text = relayout_text(file.read_text(), str(file), layouts)
    if text is None:
        return file
    tag = "-".join(f"{name}={layout}" for name, layout in sorted(layouts.items()))
    copy = RELAYOUT_ROOT / tag / (from_examples(file.resolve()) or Path(file.name))
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(text)
    if table_path(file).exists():
        table_path(copy).write_text(table_path(file).read_text())
    elif table_path(copy).exists():
        table_path(copy).unlink()
    return copy


def layout_argument(text: str) -> tuple[str, str]:
    from tiledsl.tune.merge import LAYOUTS

    name, _, layout = text.partition("=")
    if not name or layout not in LAYOUTS:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not NAME=LAYOUT with a layout of {', '.join(LAYOUTS)} (e.g. B=col)"
        )
    return name, layout


def merged_runs(paths: list[str], documents: list[dict]) -> list[dict]:
    """Where each shape of a merged result was timed: a run per document given, with the
    shapes it still counts at; a document that is itself a merge gives its own runs (each
    with those of its shapes that still count), so that a result merged again keeps every
    run's date and settings."""
    last = latest_runs(documents)
    runs = []
    for i, (path, d) in enumerate(zip(paths, documents)):
        counted = {bench.size_label(s) for s, j in last.items() if j == i}
        inner = d.get("runs") or [
            {"run": Path(path).name, "date": d.get("date"), "settings": d.get("settings")}
        ]
        for run in inner:
            shapes = counted & set(run.get("shapes", counted))
            if shapes:
                runs.append({**run, "shapes": sorted(shapes)})
    return runs


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("files", nargs="*", help=".tile files to time (default: default_plan())")
    p.add_argument("--m", type=int, nargs="+", metavar="M", help=f"tokens (default {TOKENS})")
    p.add_argument("--sizes", metavar="SUITE", help="a file of shapes, one MxNxK a line")
    timing_arguments(p)
    p.add_argument("--data", choices=DATA_KINDS, default="ints", help="the timed operands")
    p.add_argument("--out", default=None, help="JSON path (default bench/results/shapes-GPU-DATE)")
    p.add_argument("--plot", default=None, help="draw TFLOP/s and memory throughput against M")
    p.add_argument(
        "--from-json",
        nargs="+",
        metavar="RUN",
        help="judge saved runs again, together (no GPU; where runs share a shape, the last "
        "one given counts there); with --out, write them as one",
    )
    p.add_argument(
        "--dispatch",
        metavar="OUT.tile",
        help="write each shape's fastest kernel into one file with a dispatch table",
    )
    p.add_argument(
        "--layout",
        type=layout_argument,
        action="append",
        default=[],
        metavar="NAME=LAYOUT",
        help="declare operand NAME in LAYOUT (row or col) in every kernel: each file is timed "
        "so (a copy under build/layouts/), and --dispatch writes its kernels so",
    )
    args = p.parse_args()
    if args.layout and args.from_json and not args.dispatch:
        p.error(
            "--layout with --from-json redeclares the kernels of --dispatch's file: add --dispatch"
        )
    if args.from_json:
        documents = [json.loads(Path(run).read_text()) for run in args.from_json]
        # several runs (e.g. one per range of M): the highest copy bandwidth among them
        # makes the strictest memory bound
        bandwidths = [d["copy_bandwidth"] for d in documents if d.get("copy_bandwidth")]
        bandwidth = max(bandwidths, default=None)
        rows = latest_rows(documents)
        found = verdicts(rows, bandwidth)
        totals = summary(found)
        print(render(found, totals, bandwidth))
        if args.out:
            merged = {**documents[-1], "rows": rows}
            merged.update(copy_bandwidth=bandwidth, targets=found, summary=totals)
            merged["runs"] = merged_runs(args.from_json, documents)
            bench.save_json(merged, Path(args.out))
            print(f"wrote {args.out}")
        if args.plot:
            plot(found, Path(args.plot), documents[0].get("device", {}).get("name", ""))
        if args.dispatch:
            origin = " + ".join(Path(run).name for run in args.from_json)
            device = documents[-1].get("device", {})
            write_dispatch(rows, Path(args.dispatch), dict(args.layout), origin, device)
        return
    from tiledsl.gpu.runtime import device_info
    from tiledsl.tune.dispatch import read_suite

    if args.sizes:
        sizes = read_suite(Path(args.sizes))
    else:
        sizes = llama_shapes(tuple(args.m) if args.m else TOKENS)
    if args.files:
        plan = [([Path(f) for f in args.files], sizes)]
    else:
        plan = default_plan(sizes)
    if args.layout:
        plan = [([relayout(f, dict(args.layout)) for f in files], at) for files, at in plan]
    settings = bench.Settings(repeat=args.repeat, warmup=5, data=args.data, rounds=args.rounds)
    bandwidth = copy_bandwidth()
    rows = []
    for files, at in plan:
        rows += bench.measure([(f.stem, str(f)) for f in files], at, settings)
    print(bench.table(rows))
    found = verdicts([r.to_json() for r in rows], bandwidth)
    totals = summary(found)
    print()
    print(render(found, totals, bandwidth))
    device = device_info()
    document = bench.record(rows, settings, device)
    document.update(copy_bandwidth=bandwidth, targets=found, summary=totals)
    out = Path(args.out) if args.out else default_out("shapes")
    bench.save_json(document, out)
    print(f"wrote {out}")
    if args.plot:
        plot(found, Path(args.plot), device.get("name", ""))
        print(f"wrote {args.plot}")
    if args.dispatch:
        rows_json = [r.to_json() for r in rows]
        write_dispatch(rows_json, Path(args.dispatch), dict(args.layout), out.name, device)
    if not all(r.ok or r.skipped for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    from tiledsl.errors import TileError, UsageError

    try:
        main()
    except (UsageError, TileError) as err:  # a merge that cannot be written: said, exit 2
        print(f"shapes.py: error: {err}", file=sys.stderr)
        sys.exit(2)
