"""A loaded kernel's launch on CuPy arrays or torch tensors: the module built once (through
the kernel cache), the launcher of each kernel once, the operands passed by address (the
same memory: no CuPy view is made of a torch tensor), on the caller's current stream
(torch's for torch tensors, else CuPy's)."""

from __future__ import annotations

from .operands import ALIGNMENT, ArgumentError, misaligned_message

#: CuPy's handle of each torch stream seen, by its address (made once: a call costs a
#: dictionary lookup, not a new object).
_STREAMS: dict[int, object] = {}


def _torch_stream(device: int) -> object:
    """torch's current stream on `device`, as an object CuPy's launch takes (its `ptr`)."""
    import torch

    get_raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # no Stream object made
    handle = get_raw(device) if get_raw else torch.cuda.current_stream(device).cuda_stream
    stream = _STREAMS.get(handle)
    if stream is None:
        stream = _STREAMS[handle] = _Handle(handle)
    return stream


class _Handle:
    """A stream by its address: all that CuPy's launch reads of a stream."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int):
        self.ptr = ptr


def run_on_gpu(owner, plan, pointers: dict[str, int], values) -> None:
    """Launch `plan`'s kernel (tiledsl.api.kernel.Plan) on the operands and C at these
    addresses (C's under its declared name), with `values` (the size parameters and any
    runtime alpha and beta), on the stream of the caller: torch's current one for torch
    tensors, CuPy's for CuPy arrays. `owner` (the Kernel) keeps the module and the
    launchers."""
    for name, pointer in pointers.items():
        if pointer % ALIGNMENT:
            raise ArgumentError(misaligned_message(name, pointer))
    choice = plan.choice
    assert choice is not None  # an empty C never launches (Kernel.__call__)
    launcher = owner._gpu.get(choice.kernel.name)
    if launcher is None:
        launcher = owner._gpu[choice.kernel.name] = _launcher(owner, choice)
    stream = _torch_stream(plan.device) if plan.library == "torch" else None
    launcher.at(pointers, values, stream)


def _launcher(owner, choice):
    """The launcher of `choice`'s kernel; the file's module is built (through the kernel
    cache) at the first."""
    from ..gpu import runtime

    module = owner._gpu.get(".module")
    if module is None:
        from ..ir.targets import build_arch

        compiled = owner.compiled
        arch = build_arch(runtime.device_arch(), compiled.kernels)
        first = compiled.kernels[0]  # the module's key: the same whichever size came first
        module = owner._gpu[".module"] = runtime.load(
            compiled.source,
            arch,
            pipeline=first.passes,
            target=first.target.name,
            name=f"{first.name}.cu",
        ).module
    return runtime.launcher(module, choice.launch)
