"""What an instruction path's lowering gives the shared emitter (one object per path).

    lowering = lowering_for(kernel)        # tiledsl.emit.paths
    lowering.declarations(emitter, kernel) # the fragment registers
    lowering.statement(emitter, kernel, s) # the path's spelling of s, or None: the emitter's

The shared CUDA emitter (tiledsl.emit.cuda) writes everything the paths have in common
(constants, shared buffers, copies, loops, barriers, the epilogue) and asks the kernel's
lowering for the rest; the path's facts are its description (tiledsl.ir.paths).
"""

from __future__ import annotations

from ..ir.nodes import KernelIR
from ..ir.paths import InstructionPath


class PathLowering:
    """The defaults: no helpers, no constants, nothing to say beyond the description."""

    path: InstructionPath
    #: its helpers follow the module's XOR-swizzle helper (the order files have always had)
    helpers_after_swizzle = False

    def helpers(self, kernels: tuple[KernelIR, ...]) -> list[str]:
        """Device functions for `kernels` (the module's kernels on this path)."""
        return []

    def mma_note(self, k: KernelIR) -> str:
        """What one fragment of the `mma` directive is, for its comment."""
        raise NotImplementedError

    def swizzle_note(self) -> str:
        """What `pad xor` does to the tiles on this path, for the pad directive's comment."""
        return (
            "no padding; each line's 16-byte chunks are XOR-permuted so that ldmatrix's "
            "8 row reads hit 8 bank groups"
        )

    def target_note(self) -> str:
        """What the target directive's comment adds on this path."""
        return ""

    def constants(self, k: KernelIR) -> list[str]:
        """Named constants beyond the shared ones (in the kernel's namespace)."""
        return []

    def shared_memory(self, k: KernelIR) -> list[str]:
        """The declaration of the dynamic shared memory `smem`, aligned as the path needs."""
        return [f"extern __shared__ __align__({self.path.smem_align}) unsigned char smem[];"]

    def prologue(self, k: KernelIR) -> list[str]:
        """Statements after the shared buffers and the block's place (the path's own)."""
        return []

    def declarations(self, emitter, k: KernelIR) -> list[str]:
        """The fragment arrays."""
        raise NotImplementedError

    def loop(self, emitter, k: KernelIR, s) -> list[str] | None:
        """A path's own spelling of a loop (mma.sync's paired B loads), or None."""
        return None

    def statement(self, emitter, k: KernelIR, s) -> list[str] | None:
        """The path's spelling of a fragment or group statement, or None."""
        return None

    def statement_list(self, k: KernelIR, lines: list[str]) -> list[str]:
        """The lines of a statement list, as the path would have them read (the wgmma path
        joins one thread's consecutive TMA statements under one `if`)."""
        return lines
