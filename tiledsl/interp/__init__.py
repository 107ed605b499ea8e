"""IR -> numbers: the numpy interpreter and the oracles that judge a kernel's results.

    interpreter   `interpret`: the executor, statement by statement, block by block
    tiles         where a tile's elements are: the block's shared arena or a global array
    contracts     the pointer contracts each instruction's addresses must meet
    races         the race log: shared-memory accesses per barrier phase, happens-before
    mbarriers     one block's mbarriers: arrivals, transaction bytes, phases and their clocks
    clocks        happens-before across a warp-specialized block's roles: vector clocks
    roles         the seeded scheduler that interleaves the roles and the TMA copies
    errors        InterpreterError, RaceError, DeadlockError: what the modules above raise
    oracle        the exact and statistical oracles (the GPU runner uses them too)

Each module's docstring says what it holds and why it is a module of its own.
"""
