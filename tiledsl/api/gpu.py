"""A loaded kernel's launch on CuPy arrays or torch tensors: the module built once (through
the kernel cache), the launcher of each kernel once, the arrays passed as they are (torch
through DLPack: the same memory), on the caller's current stream (torch's, or CuPy's)."""

from __future__ import annotations

from .operands import ArgumentError, describe

#: The kernels' vector copies and TMA boxes read and write 16-byte aligned addresses.
ALIGNMENT = 16


def _as_cupy(array):
    """A CuPy view of a CuPy array or a torch tensor (bf16 as 16-bit integers: CuPy has no
    bfloat16, and the kernel sees only the address)."""
    if describe(array).library == "cupy":
        return array
    import cupy
    import torch

    if array.dtype == torch.bfloat16:
        array = array.view(torch.int16)
    return cupy.from_dlpack(array)


def _stream(arrays):
    """The stream to launch on: torch's current one for torch tensors, else CuPy's."""
    import cupy

    if any(describe(a).library == "torch" for a in arrays):
        import torch

        return cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    return cupy.cuda.get_current_stream()


def run_on_gpu(owner, choice, arrays: dict, out) -> None:
    """Launch `choice` (tiledsl.api.kernel.Choice) on the operands and `out`, on the stream
    of the caller; `owner` (the Kernel) keeps the module and the launchers."""
    from ..gpu import runtime
    from ..ir.targets import build_arch

    kernel, launch = choice.kernel, choice.launch
    g = kernel.gemm
    every = {**arrays, g.c.name: out}
    for name, array in every.items():
        pointer = describe(array).pointer
        if pointer % ALIGNMENT:
            raise ArgumentError(
                f"{name}'s data starts at {pointer:#x}, not on a {ALIGNMENT}-byte boundary: "
                f"the kernel's copies move {ALIGNMENT} bytes at a time (a slice of a larger "
                "array does this; pass a copy of it)"
            )
    state = owner._gpu
    if "module" not in state:
        compiled = owner.compiled
        arch = build_arch(runtime.device_arch(), compiled.kernels)
        first = compiled.kernels[0]  # the module's key: the same whichever size came first
        state["module"] = runtime.load(
            compiled.source,
            arch,
            pipeline=first.passes,
            target=first.target.name,
            name=f"{compiled.kernels[0].name}.cu",
        ).module
        state["launchers"] = {}
    launchers = state["launchers"]
    if kernel.name not in launchers:
        launchers[kernel.name] = runtime.launcher(state["module"], launch)
    views = {name: _as_cupy(array) for name, array in every.items()}
    with _stream(every.values()):
        launchers[kernel.name](views, choice.sizes)
