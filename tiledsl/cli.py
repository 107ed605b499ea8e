"""The `tiledsl` command line: compile, run, check, viz, bench, doctor and tune.

Exit status: 0 on success, 1 for an error in the .tile file or a failed check,
2 for a command-line mistake. No Python traceback unless --debug.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .errors import TileError, ToolchainError, UsageError
from .files import OutputError, check_outputs, read_source, write_outputs
from .gpu.timing import DATA_KINDS
from .limits import GRID_Y_MAX
from .passes import STAGE_NAMES
from .tune.space import MAX_POINTS

SANITIZER_TOOLS = ("racecheck", "memcheck", "synccheck")  # tiledsl.commands.sanitize.TOOLS


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        code = args.handler(args)
        sys.stdout.flush()  # here, so that a full disk is reported, not lost at exit
        return code
    except TileError as err:
        print(err.render(), file=sys.stderr)
        return 1
    except UsageError as err:
        print(f"tiledsl {args.command}: error: {err}", file=sys.stderr)
        return 2
    except (ToolchainError, OutputError) as err:
        kind = "toolchain error" if isinstance(err, ToolchainError) else "error"
        print(f"tiledsl {args.command}: {kind}: {err}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `tiledsl compile … | head`: the reader left; not our error
        _silence_stdout()
        return 0
    except OSError as err:  # standard output could not be written (a full device, ...)
        _silence_stdout()
        print(
            f"tiledsl {args.command}: error: cannot write to standard output: "
            f"{err.strerror or err}",
            file=sys.stderr,
        )
        return 1
    except Exception as err:  # a bug in tiledsl: say so plainly, trace only on --debug
        if getattr(args, "debug", False):
            raise
        print(
            f"tiledsl {args.command}: internal error: {type(err).__name__}: {err}\n"
            "(this is a tiledsl bug; run again with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that Python's flush at exit does not fail again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor behind sys.stdout (captured in tests)
        pass


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tiledsl", description="Compile a .tile GEMM schedule to a tensor-core kernel."
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    _compile_command(sub)
    _run_command(sub)
    _check_command(sub)
    _viz_command(sub)
    _gpu_commands(sub)
    _tune_command(sub)
    return p


def _compile_command(sub) -> None:
    c = sub.add_parser("compile", help="emit CUDA source and a launch description")
    _common(c)
    c.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        type=_path,
        help="write the source to OUT and the launch description to OUT.launch.json "
        "(default: print the source)",
    )
    c.add_argument(
        "--print-ir-after-all",
        action="store_true",
        help="print the IR after lowering and after every pass",
    )
    c.add_argument(
        "--stop-after",
        metavar="PASS",
        choices=STAGE_NAMES,
        help="emit code from the IR after PASS: " + ", ".join(STAGE_NAMES),
    )
    c.add_argument(
        "--explain-sync",
        action="store_true",
        help="say for every barrier why it stays or goes (the hazard analysis)",
    )
    c.add_argument(
        "--ptxas",
        action="store_true",
        help="compile the source with nvcc and print ptxas's resource report",
    )
    c.set_defaults(handler=_compile)


def _run_command(sub) -> None:
    r = sub.add_parser("run", help="run on the GPU (or the numpy interpreter) and check the result")
    _common(r)
    r.add_argument(
        "--size",
        action="append",
        type=_size,
        metavar="MxNxK",
        help="problem size; repeatable (default: 4096x4096x4096 on a GPU, a small "
        "size in the interpreter)",
    )
    r.add_argument("--cpu", action="store_true", help="use the numpy interpreter even with a GPU")
    r.add_argument("--kernel", metavar="NAME", help="which kernel of the file (default: each)")
    r.add_argument("--seed", type=_seed, help="seed for the random inputs (default: fresh)")
    r.add_argument(
        "--batch",
        type=_count(1, GRID_Y_MAX),
        metavar="L",
        help="products of a batched GEMM (default: 2 for a batched kernel, else 1)",
    )
    r.add_argument(
        "--sanitize",
        action="append",
        metavar="TOOL",
        choices=SANITIZER_TOOLS,
        help="run the GPU check under compute-sanitizer: racecheck, memcheck or synccheck "
        "(repeatable); fails on any hazard and when the tool did not run (default size: "
        "a small multiple of the block tile)",
    )
    _no_cache(r)
    r.set_defaults(handler=_run)


def _check_command(sub) -> None:
    k = sub.add_parser(
        "check",
        help="feasibility report: threads, registers, shared memory, occupancy, bank conflicts",
    )
    _common(k)
    k.add_argument("--kernel", metavar="NAME", help="which kernel of the file (default: each)")
    k.add_argument(
        "--sweep",
        action="store_true",
        help="add the S4000 write-up's feasibility table over blocks per multiprocessor",
    )
    k.add_argument(
        "--reserve",
        type=_count(0, 255),
        default=0,
        metavar="R",
        help="with --sweep: registers per thread set aside for addresses and counters "
        "(default 0, the write-up's count)",
    )
    k.add_argument(
        "--size",
        type=_size,
        metavar="MxNxK",
        help="also say which kernel runs this size and whether its copies keep their vectors",
    )
    k.set_defaults(handler=_check)


def _viz_command(sub) -> None:
    v = sub.add_parser(
        "viz",
        help="graphviz pictures of the IR after every pass, the tile decomposition and the "
        "shared-memory banks, with an index.html",
    )
    _common(v)
    v.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        type=_path,
        required=True,
        help="write DIR/<kernel>/*.dot (and rendered pictures) and DIR/index.html",
    )
    v.add_argument(
        "--format",
        choices=("svg", "png"),
        default="svg",
        help="what dot renders (default: svg)",
    )
    v.add_argument("--kernel", metavar="NAME", help="which kernel of the file (default: each)")
    v.set_defaults(handler=_viz)


def _gpu_commands(sub) -> None:
    b = sub.add_parser(
        "bench",
        help="time the kernels against cuBLAS (and Triton), checked, with a table, JSON, a plot",
    )
    _common(b)
    b.add_argument(
        "--size",
        action="append",
        type=_size,
        metavar="MxNxK",
        help="problem size; repeatable (default: 4096x4096x4096)",
    )
    b.add_argument("--kernel", metavar="NAME", help="which kernel of the file (default: each)")
    b.add_argument(
        "--json", metavar="PATH", type=_path, help="write the measurements as JSON to PATH"
    )
    b.add_argument(
        "--plot",
        metavar="PATH",
        type=_path,
        help="draw TFLOP/s against size to PATH (needs matplotlib)",
    )
    b.add_argument(
        "--repeat", type=_count(1, 100_000), default=50, help="timed runs per row (default: 50)"
    )
    b.add_argument(
        "--warmup", type=_count(0, 100_000), default=10, help="untimed runs first (default: 10)"
    )
    b.add_argument(
        "--rounds",
        type=_count(1, 100),
        default=1,
        help="time each row and its baselines this many times, taking turns; a row's time is "
        "the median of its rounds' medians (default: 1)",
    )
    b.add_argument("--seed", type=_seed, help="seed for the random inputs (default: fresh)")
    b.add_argument(
        "--data",
        choices=DATA_KINDS,
        default="ints",
        help="what the timed operands hold: integers in [-2, 2] (default) or standard "
        "normal values (a model's; the checks use both either way)",
    )
    b.add_argument("--no-triton", action="store_true", help="leave out the Triton baseline")
    _no_cache(b)
    b.set_defaults(handler=_bench)

    d = sub.add_parser(
        "doctor", help="what this machine offers tiledsl (GPU, CuPy, NVRTC, nvcc, ...) and fixes"
    )
    d.add_argument("--debug", action="store_true", help="show Python tracebacks")
    d.set_defaults(handler=_doctor)


def _tune_command(sub) -> None:
    t = sub.add_parser(
        "tune",
        help="search a file's tuning space ({64, 128} sets): prune, compile, check and time "
        "each point, record the results, write the best as a plain .tile",
    )
    t.add_argument("file", metavar="FILE", help="a .tile file with tuning sets")
    t.add_argument(
        "--size",
        type=_size,
        metavar="MxNxK",
        help="the problem size to time (default: 4096x4096x4096, or the declared sizes)",
    )
    t.add_argument(
        "--sizes",
        metavar="SUITE",
        type=_path,
        help="a file of shapes, one MxNxK a line: the space searched at each, the winners "
        "written as one .tile of kernels (-o, default ./STEM.tuned.tile) and a dispatch "
        "table beside it (STEM.tuned.dispatch.json) that run, bench, check and "
        "tiledsl.load follow",
    )
    t.add_argument(
        "--budget",
        type=_count(1, MAX_POINTS),
        metavar="N",
        help="time at most N points not yet in the record, a fixed sample spread over the "
        "space (a rerun times the next N; default: all)",
    )
    t.add_argument(
        "--time-limit",
        type=_count(1, 10**7),
        metavar="SECONDS",
        help="with --sizes: start no shape after SECONDS; the shapes searched by then are "
        "written (a rerun with the same record resumes and writes the whole suite)",
    )
    t.add_argument("--kernel", metavar="NAME", help="which kernel of the file (default: its one)")
    t.add_argument(
        "--record",
        metavar="PATH",
        type=_path,
        help="the JSON-lines record, read and appended to (default: ./tune-STEM.jsonl)",
    )
    t.add_argument(
        "-o",
        "--output",
        metavar="PATH",
        type=_path,
        help="where the best point goes, as a plain .tile (default: ./STEM.best.tile)",
    )
    t.add_argument(
        "--jobs",
        type=_count(1, 1024),
        metavar="N",
        help="worker processes for pruning and compiling (default: every CPU core)",
    )
    t.add_argument(
        "--dry-run",
        action="store_true",
        help="expand and prune, list the points that would be timed, and stop (no GPU needed)",
    )
    t.add_argument("--debug", action="store_true", help="show Python tracebacks")
    t.set_defaults(handler=_tune)


# ---------------------------------------------------------------- argument values
# Each value is checked where argparse reads it: a bad one is a usage error (exit 2) that
# names the option, before any file is read.


def _size(text: str) -> tuple[int, int, int]:
    from .commands.run import parse_size

    try:
        return parse_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _count(low: int, high: int):
    """An argparse type: a whole number from `low` to `high`."""

    def read(text: str) -> int:
        if not text.strip().lstrip("-").isascii() or not text.strip().lstrip("-").isdigit():
            raise argparse.ArgumentTypeError(f"expected a whole number, found '{text}'")
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected {low} to {high}, found {value}")
        return value

    read.__name__ = "number"
    return read


def _seed(text: str) -> int:
    return _count(0, 2**64 - 1)(text)


def _path(text: str) -> str:
    if text == "":
        raise argparse.ArgumentTypeError("the path is empty")
    return text


def _no_cache(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="compile again, neither reading nor writing the kernel cache (TILEDSL_CACHE_DIR)",
    )


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="a .tile file")
    p.add_argument("--target", metavar="T", help="override the file's target (e.g. cuda sm_90)")
    p.add_argument("--debug", action="store_true", help="show Python tracebacks")


def _read(path: str) -> tuple[str, str]:
    return read_source(path)


def _compile(args) -> int:
    from .driver import compile_source
    from .ir.printer import print_ir

    text, name = _read(args.file)
    compiled = compile_source(text, name, args.target, args.stop_after)
    if args.print_ir_after_all:
        for stage, kernel, ran in compiled.snapshots:
            state = "" if ran else "  (not enabled by this schedule: IR unchanged)"
            print(f"// ----- IR after {stage}{state}")
            print(print_ir(kernel))
        for kernel in compiled.kernels:
            if kernel.edge is not None:
                print(f"// ----- IR of {kernel.edge.name}: {kernel.name}'s guarded twin (edges)")
                print(print_ir(kernel.edge))
    if args.explain_sync:
        from .commands.explain import explain_sync

        print(explain_sync(compiled.kernels, text))
    reports = _ptxas_reports(compiled, name) if args.ptxas else []  # before anything is written
    if args.output is not None:
        out = Path(args.output)
        launch = Path(args.output + ".launch.json")
        launches = json.dumps([x.to_json() for x in compiled.launches], indent=2) + "\n"
        write_outputs({out: compiled.source, launch: launches}, inputs=[Path(name)])
        print(f"wrote {out} and {launch}")
    elif not (args.print_ir_after_all or args.explain_sync):
        print(compiled.source, end="")
    for line in reports:
        print(line)
    return 0


def _ptxas_reports(compiled, name: str) -> list[str]:
    from .gpu.toolchain import compile_cubin
    from .ir.targets import build_arch

    out = []
    for group in compiled.by_architecture().values():
        arch = build_arch(group[0].target.arch, group)
        reports = compile_cubin(compiled.source_for(group), arch, Path(name).stem).values()
        out += [f"ptxas ({arch}): {report}" for report in reports]
    return out


def _run(args) -> int:
    from .commands.run import SizeError, default_cpu_size, run_cpu, run_gpu
    from .driver import compile_source
    from .gpu.runtime import gpu_available

    text, name = _read(args.file)
    sizes = list(args.size or ())
    compiled = compile_source(text, name, args.target)
    names = [k.name for k in compiled.kernels]
    if args.kernel is not None and args.kernel not in names:
        raise UsageError(f"no kernel '{args.kernel}' in {name}; it has: {', '.join(names)}")
    kernels = compiled.kernels if args.kernel is None else (compiled.kernel(args.kernel),)
    if args.sanitize:
        return _sanitize(args, name, compiled, kernels, sizes)
    use_gpu = not args.cpu and gpu_available()
    source = compiled.source
    if use_gpu and args.kernel is None:
        from .gpu.runtime import device_arch

        kernels = compiled.for_device(device_arch())  # one kernel per architecture: this GPU's
        source = compiled.source_for(kernels)
    if not use_gpu and not args.cpu:
        print(
            "no GPU found (CuPy cannot see a device): running the numpy interpreter instead",
            file=sys.stderr,
        )
    ok = True
    assigned = _dispatched(name, compiled, kernels, sizes, args) if args.kernel is None else None
    for kernel in kernels:
        launch = compiled.launches[compiled.kernels.index(kernel)]
        ran = [stage for stage, k, did in compiled.snapshots if did and k.name == kernel.name]
        if assigned is not None:
            kernel_sizes = assigned.get(kernel.name, [])
        else:
            kernel_sizes = sizes or [(4096, 4096, 4096) if use_gpu else default_cpu_size(kernel)]
        for size in kernel_sizes:
            if not args.size and not use_gpu:
                print(
                    f"{kernel.name}: interpreter default size {'x'.join(map(str, size))} "
                    "(choose with --size MxNxK)",
                    file=sys.stderr,
                )
            batch = args.batch if args.batch is not None else 1
            if args.batch is None and kernel.gemm.batch is not None:
                fixed = getattr(kernel.gemm.batch, "value", None)  # a literal batch count
                batch = fixed or 2
                if fixed is None:
                    print(f"{kernel.name}: batch of 2 (choose with --batch L)", file=sys.stderr)
            try:
                if use_gpu:
                    report = run_gpu(
                        kernel,
                        source,
                        launch,
                        size,
                        args.seed,
                        Path.cwd(),
                        use_cache=not args.no_cache,
                        source_name=Path(name).with_suffix(".cu").name,
                        batch=batch,
                    )
                else:
                    report = run_cpu(kernel, size, args.seed, Path.cwd(), batch=batch)
            except SizeError as err:
                raise UsageError(f"{kernel.name}: {err}") from None
            report.lines.insert(0, "pipeline: " + " -> ".join(ran))
            print(report.render())
            ok &= report.ok
    return 0 if ok else 1


def _sanitize(args, name: str, compiled, kernels, sizes) -> int:
    from .commands.run import SizeError, check_size, default_cpu_size
    from .commands.sanitize import sanitize
    from .gpu.runtime import gpu_available

    if args.cpu:
        raise UsageError("--sanitize runs on the GPU; it cannot be combined with --cpu")
    if not gpu_available():
        print(
            "tiledsl run: error: --sanitize needs a CUDA GPU visible to CuPy, and none was found "
            "(`tiledsl doctor` says why)",
            file=sys.stderr,
        )
        return 1
    ok = True
    for kernel in kernels:
        for size in sizes or [default_cpu_size(kernel)]:
            try:
                check_size(kernel, size)
            except SizeError as err:
                raise UsageError(f"{kernel.name}: {err}") from None
            for tool in dict.fromkeys(args.sanitize):
                result = sanitize(name, kernel.name, size, tool, target=args.target, seed=args.seed)
                print(result.render(), flush=True)
                ok &= result.ok
    return 0 if ok else 1


def _bench(args) -> int:
    from .commands import bench
    from .commands.run import SizeError
    from .gpu.runtime import device_info, gpu_available

    text, name = _read(args.file)
    check_outputs([p for p in (args.json, args.plot) if p], inputs=[Path(name)])
    sizes = list(args.size or [(4096, 4096, 4096)])
    if not gpu_available():
        print(
            "tiledsl bench: error: bench times kernels on a CUDA GPU, and CuPy sees none "
            "(`tiledsl doctor` says why); `tiledsl run FILE` checks a schedule without one",
            file=sys.stderr,
        )
        return 1
    plot_path = Path(args.plot) if args.plot else None
    if plot_path and bench.matplotlib_missing():
        print(f"tiledsl bench: warning: {bench.matplotlib_missing()}; no plot", file=sys.stderr)
        plot_path = None
    settings = bench.Settings(
        warmup=args.warmup,
        repeat=args.repeat,
        seed=args.seed,
        use_cache=not args.no_cache,
        baselines=("cublas",) if args.no_triton else ("cublas", "triton"),
        data=args.data,
        rounds=args.rounds,
    )
    entries = [(Path(name).stem, name)]
    try:
        rows = bench.measure(entries, sizes, settings, args.target, kernel=args.kernel)
    except (SizeError, ValueError) as err:
        raise UsageError(str(err)) from None
    print(bench.table(rows))
    for note in bench.NOTES:
        print(f"note: {note}")
    if args.json:
        bench.save_json(bench.record(rows, settings, device_info()), Path(args.json))
        print(f"wrote {args.json}")
    if plot_path:
        bench.plot(rows, plot_path, title=device_info()["name"])
        print(f"wrote {plot_path}")
    return 0 if all(r.ok or r.skipped for r in rows) else 1


def _doctor(args) -> int:
    from .commands.doctor import doctor

    return doctor()


def _dispatched(name: str, compiled, kernels, sizes, args) -> dict[str, list] | None:
    """With a dispatch table beside the file (`tiledsl tune --sizes`) and sizes given: the
    sizes each kernel runs, as the table picks them (saying so); None otherwise (every
    kernel runs every size)."""
    from .commands.run import SizeError
    from .tune.dispatch import assign_sizes, table_beside

    table = table_beside(name, compiled.kernels)
    if table is None or not sizes or len(kernels) < 2:
        return None
    try:
        picks = assign_sizes(tuple(kernels), sizes, table, args.batch or 1)
    except SizeError as err:
        raise UsageError(f"no kernel of {name} runs {err}") from None
    assigned: dict[str, list] = {}
    for size, kernel, why in picks:
        print(f"{'x'.join(map(str, size))} takes {why}")
        assigned.setdefault(kernel.name, []).append(size)
    return assigned


def _check(args) -> int:
    from .commands.check import check_source

    if args.reserve and not args.sweep:  # it only changes the sweep: say so, not ignore it
        raise UsageError("--reserve sets aside registers in the --sweep table; add --sweep")
    text, name = _read(args.file)
    report = check_source(
        text, name, args.target, args.kernel, sweep=args.sweep, reserve=args.reserve, size=args.size
    )
    print(report, end="")
    return 0


def _viz(args) -> int:
    from .viz import viz_source

    text, name = _read(args.file)
    result = viz_source(text, name, args.output, args.format, args.target, args.kernel)
    rendered = f", .{args.format}" if result.rendered else ""
    for path in result.sources:
        print(f"wrote {path}{rendered}")
    print(f"wrote {result.index}: the pictures in pipeline order, beside the IR text")
    if result.note:
        print(f"tiledsl viz: note: {result.note}", file=sys.stderr)
    return 0


def _tune(args) -> int:
    from .tune import workers as tune_gpu
    from .tune.search import cpu_cores, tune_file

    text, name = _read(args.file)
    common = dict(
        budget=args.budget,
        kernel=args.kernel,
        record=Path(args.record) if args.record else None,
        output=Path(args.output) if args.output else None,
        jobs=args.jobs or cpu_cores(),
        timer_factory=tune_gpu.gpu_timer,
    )
    if args.sizes is not None:
        from .tune.dispatch import read_suite
        from .tune.suite import tune_suite

        if args.size is not None or args.dry_run:
            raise UsageError(
                "--sizes times the space at every shape of its suite: drop "
                + ("--size" if args.size is not None else "--dry-run")
                + " (or drop --sizes)"
            )
        suite = read_suite(Path(args.sizes))
        return tune_suite(text, name, suite, time_limit=args.time_limit, **common)
    if args.time_limit is not None:
        raise UsageError("--time-limit bounds a suite's search: it goes with --sizes")
    return tune_file(text, name, size=args.size, dry_run=args.dry_run, **common)


if __name__ == "__main__":
    sys.exit(main())
