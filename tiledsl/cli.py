"""The `tiledsl` command line: compile and run (check, viz and tune come later).

Exit status: 0 on success, 1 for an error in the .tile file or a failed check,
2 for a command-line mistake. No Python traceback unless --debug.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .errors import TileError, ToolchainError, UsageError
from .passes import STAGE_NAMES

NOT_BUILT = ("viz", "tune")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return args.handler(args)
    except TileError as err:
        print(err.render(), file=sys.stderr)
        return 1
    except UsageError as err:
        print(f"tiledsl {args.command}: error: {err}", file=sys.stderr)
        return 2
    except ToolchainError as err:
        print(f"tiledsl {args.command}: toolchain error: {err}", file=sys.stderr)
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


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tiledsl", description="Compile a .tile GEMM schedule to a tensor-core kernel."
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    c = sub.add_parser("compile", help="emit CUDA source and a launch description")
    _common(c)
    c.add_argument(
        "-o",
        "--output",
        metavar="OUT",
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

    r = sub.add_parser("run", help="run on the GPU (or the numpy interpreter) and check the result")
    _common(r)
    r.add_argument(
        "--size",
        action="append",
        metavar="MxNxK",
        help="problem size; repeatable (default: 4096x4096x4096 on a GPU, a small "
        "size in the interpreter)",
    )
    r.add_argument("--cpu", action="store_true", help="use the numpy interpreter even with a GPU")
    r.add_argument("--kernel", metavar="NAME", help="which kernel of the file (default: each)")
    r.add_argument("--seed", type=int, help="seed for the random inputs (default: fresh)")
    r.set_defaults(handler=_run)

    k = sub.add_parser(
        "check",
        help="feasibility report: threads, registers, shared memory, occupancy, bank conflicts",
    )
    _common(k)
    k.add_argument("--kernel", metavar="NAME", help="which kernel of the file (default: each)")
    k.add_argument(
        "--sweep",
        action="store_true",
        help="add the S4000 seed's feasibility table over blocks per multiprocessor",
    )
    k.add_argument(
        "--reserve",
        type=int,
        default=0,
        metavar="R",
        help="with --sweep: registers per thread set aside for addresses and counters "
        "(default 0, the seed's count)",
    )
    k.set_defaults(handler=_check)

    for name in NOT_BUILT:
        x = sub.add_parser(name, help="not built yet")
        x.add_argument("rest", nargs="*")
        x.set_defaults(handler=_not_built)
    return p


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="a .tile file")
    p.add_argument("--target", metavar="T", help="override the file's target (e.g. cuda sm_90)")
    p.add_argument("--debug", action="store_true", help="show Python tracebacks")


def _read(path: str) -> tuple[str, str]:
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"no such file: {path}")
    return file.read_text(), str(file)


def _compile(args) -> int:
    from .driver import compile_source
    from .printer import print_ir

    text, name = _read(args.file)
    compiled = compile_source(text, name, args.target, args.stop_after)
    if args.print_ir_after_all:
        for stage, kernel, ran in compiled.snapshots:
            state = "" if ran else "  (not enabled by this schedule: IR unchanged)"
            print(f"// ----- IR after {stage}{state}")
            print(print_ir(kernel))
    if args.explain_sync:
        from .explain import explain_sync

        print(explain_sync(compiled.kernels, text))
    if args.output:
        out = Path(args.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(compiled.source)
        launch = Path(str(out) + ".launch.json")
        launch.write_text(json.dumps([x.to_json() for x in compiled.launches], indent=2) + "\n")
        print(f"wrote {out} and {launch}")
    elif not (args.print_ir_after_all or args.explain_sync):
        print(compiled.source, end="")
    if args.ptxas:
        from .toolchain import compile_cubin

        arch = compiled.kernels[0].target.arch
        for report in compile_cubin(compiled.source, arch, Path(name).stem).values():
            print(f"ptxas ({arch}): {report}")
    return 0


def _run(args) -> int:
    from .driver import compile_source
    from .run import SizeError, default_cpu_size, parse_size, run_cpu, run_gpu
    from .runtime import gpu_available

    text, name = _read(args.file)
    try:
        sizes = [parse_size(s) for s in args.size or ()]
    except ValueError as err:
        raise UsageError(str(err)) from None
    compiled = compile_source(text, name, args.target)
    names = [k.name for k in compiled.kernels]
    if args.kernel is not None and args.kernel not in names:
        raise UsageError(f"no kernel '{args.kernel}' in {name}; it has: {', '.join(names)}")
    kernels = compiled.kernels if args.kernel is None else (compiled.kernel(args.kernel),)
    use_gpu = not args.cpu and gpu_available()
    if not use_gpu and not args.cpu:
        print(
            "no GPU found (CuPy cannot see a device): running the numpy interpreter instead",
            file=sys.stderr,
        )
    ok = True
    for kernel in kernels:
        launch = compiled.launches[compiled.kernels.index(kernel)]
        ran = [stage for stage, k, did in compiled.snapshots if did and k.name == kernel.name]
        for size in sizes or [(4096, 4096, 4096) if use_gpu else default_cpu_size(kernel)]:
            if not args.size and not use_gpu:
                print(
                    f"{kernel.name}: interpreter default size {'x'.join(map(str, size))} "
                    "(choose with --size MxNxK)",
                    file=sys.stderr,
                )
            try:
                if use_gpu:
                    report = run_gpu(kernel, compiled.source, launch, size, args.seed, Path.cwd())
                else:
                    report = run_cpu(kernel, size, args.seed, Path.cwd())
            except SizeError as err:
                raise UsageError(f"{kernel.name}: {err}") from None
            report.lines.insert(0, "pipeline: " + " -> ".join(ran))
            print(report.render())
            ok &= report.ok
    return 0 if ok else 1


def _check(args) -> int:
    from .check import check_source

    text, name = _read(args.file)
    if args.reserve < 0:
        raise UsageError("--reserve must be 0 or more registers per thread")
    report = check_source(
        text, name, args.target, args.kernel, sweep=args.sweep, reserve=args.reserve
    )
    print(report, end="")
    return 0


def _not_built(args) -> int:
    raise UsageError(f"'tiledsl {args.command}' is not built yet; available now: compile, run")


if __name__ == "__main__":
    sys.exit(main())
