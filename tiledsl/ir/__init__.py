"""The IR: the kernel's description (schedule, GEMM, target, instruction path) and the
frozen tree of tiles, fragments, loops and barriers that passes transform.

    nodes      KernelIR and its statements (the node grammar is at the top of the module)
    expr       integer index expressions
    schedule   the resolved schedule; gemm, the product's operands; targets, device models
    printer    IR text; verify, the invariants checked after every pass; grid, the raster
"""
