"""IR -> MUSA C++ (Moore Threads, mtmusa::wmma), differing from CUDA only where MUSA does.

The form follows the S4000 write-up's final kernel: `musa_runtime.h` and `musa_fp16.h`,
`crt/mma.h` through `__MUSA_INCLUDE_COMPILER_INTERNAL_HEADERS__`, the `attributes`
directive's `mtgpu_*` names as `__attribute__((…))`, `__launch_bounds__`, `__restrict__`
pointers, and an `extern "C"` host launcher that sets up the grid and calls
`musaDeviceSynchronize`. Warps are 128 threads wide (the target's warp width, which
the whole IR already carries). MUSA output is checked by the interpreter and by a C++
front end against a declaration-only header; it is not run here (no MUSA hardware).
"""

from __future__ import annotations

from ..ir.expr import to_c
from ..ir.nodes import KernelIR
from .cuda import CudaEmitter
from .launch import launch_of


class MusaEmitter(CudaEmitter):
    headers = (
        "#include <musa_runtime.h>",
        "#include <musa_fp16.h>",
        "#define __MUSA_INCLUDE_COMPILER_INTERNAL_HEADERS__",
        "#include <crt/mma.h>",
        "#undef __MUSA_INCLUDE_COMPILER_INTERNAL_HEADERS__",
        "",
        "namespace wmma = mtmusa::wmma;",
    )
    # MUSA documents no __syncwarp; a block barrier also orders one warp's lanes, and
    # every tiledsl warp barrier sits where all warps of the block reach it.
    warp_barrier = "__syncthreads();  /* MUSA: no __syncwarp */"

    def _kernel_attributes(self, k: KernelIR) -> list[str]:
        return [f"__attribute__(({name}))" for name in k.schedule.attributes]

    def _host_launcher(self, k: KernelIR) -> list[str]:
        launch = launch_of(k)
        host_params = list(launch.args)
        if launch.batch is not None and to_c(launch.batch, named=False).isidentifier():
            host_params.append((to_c(launch.batch, named=False), "int"))  # the batch count
        params = ", ".join(f"{ctype} {name}" for name, ctype in host_params)
        args = ", ".join(name for name, _ in launch.args)
        out = [
            "",
            f"// Host launcher: grid, block and shared memory of {k.name}, then a sync.",
            f'extern "C" void {k.name}_launch({params})',
            "{",
            f"    const int blocks = {to_c(launch.grid, named=False)};"
            if launch.batch is None
            else f"    const dim3 blocks({to_c(launch.grid, named=False)}, "
            f"{to_c(launch.batch, named=False)});  // y: one grid row per product",
        ]
        launches = [(k, launch)]
        if launch.edge is not None:
            assert k.edge is not None  # launch_of gives the twin, and only it, an edge launch
            launches.append((k.edge, launch.edge))
        for kernel, each in launches:
            if each.smem_bytes > 48 * 1024:
                out.append(
                    f"    musaFuncSetAttribute({kernel.name}, "
                    f"musaFuncAttributeMaxDynamicSharedMemorySize, {each.smem_bytes});"
                )
        call = f"{k.name}<<<blocks, {k.threads}, {launch.smem_bytes}>>>({args});"
        if launch.edge is None:
            out.append(f"    {call}")
        else:
            assert k.edge is not None  # as above
            (bm, bn, bk), g = k.schedule.block, k.gemm
            fits = " && ".join(
                f"{to_c(dim, named=False)} % {tile} == 0"
                for dim, tile in ((g.m, bm), (g.n, bn), (g.k, bk))
            )
            edge = f"{k.edge.name}<<<blocks, {k.edge.threads}, {launch.edge.smem_bytes}>>>({args});"
            out += [
                f"    if ({fits}) {{  // multiples of the block tile: the unguarded kernel",
                f"        {call}",
                "    } else {  // edge tiles: the guarded twin",
                f"        {edge}",
                "    }",
            ]
        out += ["    musaDeviceSynchronize();", "}"]
        return out
