"""The parsed form of a `.tile` file, before any meaning is given to it.

    Program   = Kernel*
    Kernel    = name, Operand*, Computation*, Directive*
    Operand   = name ':' dtype '[' dim, ... ']' layout        A: f16[M, K] row
    Computation = Access ('=' | '+=') Access '*' Access        C[m, n] += A[m, k] * B[k, n]
    Directive = name, groups                                   pad A 8, B 8
    groups    = comma-separated groups of Args; within a group the words in order
                (the 'x' of shapes is dropped: block 128 x 64 x 32 -> ((128, 64, 32),))
    Arg       = Num | TuningSet | Word | Call
    Call      = word '(' Num ')'                               mtgpu_num_usreg(256)

Meaning (defaults, ranges, targets) is given later by `tiledsl.ir.schedule`; this
module only records what was written and where.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import Loc


@dataclass(frozen=True)
class Num:
    value: int | float
    text: str
    loc: Loc = field(compare=False, repr=False)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class TuningSet:
    """`{64, 128}`: a numeric value left open for `tiledsl tune` (or, after `mma`, a set of
    instruction shapes, `{m64n64k16, m64n128k16}`: Words)."""

    options: tuple[Num | Word | Phrase, ...]
    loc: Loc = field(compare=False, repr=False)

    def __str__(self) -> str:
        return "{" + ", ".join(str(o) for o in self.options) + "}"


@dataclass(frozen=True)
class Word:
    text: str
    loc: Loc = field(compare=False, repr=False)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Phrase:
    """`split_k 2` in `persistent {tiles, split_k 2}`: arguments a tuning set chooses
    together (a point has them in the set's place)."""

    args: tuple[Word | Num, ...]
    loc: Loc = field(compare=False, repr=False)

    def __str__(self) -> str:
        return " ".join(str(a) for a in self.args)


@dataclass(frozen=True)
class Call:
    """`name(arg)`, as target attributes take a value: `mtgpu_num_usreg(256)`."""

    name: Word
    arg: Num
    loc: Loc = field(compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.name}({self.arg})"


Arg = Num | TuningSet | Word | Call


@dataclass(frozen=True)
class Directive:
    name: str
    groups: tuple[tuple[Arg, ...], ...]
    loc: Loc = field(compare=False, repr=False)

    @property
    def args(self) -> tuple[Arg, ...]:
        """All arguments, flattened across comma groups."""
        return tuple(a for g in self.groups for a in g)

    def canonical(self) -> Directive:
        """The directive with a default word spelled out dropped (`persistent tiles` is
        `persistent`), so that both spellings are one directive and one canonical text."""
        if [str(a) for a in self.args] == [DEFAULT_WORDS.get(self.name)]:
            return Directive(self.name, ((),), self.loc)
        return self


#: Words that a directive takes and that mean what the directive alone means.
DEFAULT_WORDS = {"persistent": "tiles"}


@dataclass(frozen=True)
class Operand:
    name: str
    dtype: Word
    dims: tuple[Word | Num, ...]
    layout: Word
    loc: Loc = field(compare=False, repr=False)


@dataclass(frozen=True)
class Access:
    name: str
    indices: tuple[Word, ...]
    loc: Loc = field(compare=False, repr=False)


@dataclass(frozen=True)
class Computation:
    out: Access
    op: str  # "=" or "+="
    lhs: Access
    rhs: Access
    loc: Loc = field(compare=False, repr=False)


@dataclass(frozen=True)
class Kernel:
    name: str
    operands: tuple[Operand, ...]
    computations: tuple[Computation, ...]
    directives: tuple[Directive, ...]
    loc: Loc = field(compare=False, repr=False)

    def directive(self, name: str) -> Directive | None:
        for d in self.directives:
            if d.name == name:
                return d
        return None


@dataclass(frozen=True)
class Program:
    kernels: tuple[Kernel, ...]
    file: str = field(compare=False, default="<string>")
    source: str = field(compare=False, default="", repr=False)

    def kernel(self, name: str | None = None) -> Kernel:
        if name is None:
            return self.kernels[0]
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)


#: Directives written `A x B x C`; the formatter joins their numbers with ' x '.
SHAPE_DIRECTIVES = frozenset({"block", "mma", "coarsen", "cluster"})

#: Every directive of the language, in the order the formatter writes them.
DIRECTIVES = (
    "block",
    "mma",
    "coarsen",
    "stages",
    "fragment_buffers",
    "warps_k",
    "blocks_per_sm",
    "copy",
    "warp_specialize",
    # split_k before persistent: `persistent` followed by `split_k S` would read back as
    # the one directive `persistent split_k S`
    "split_k",
    "persistent",
    "cluster",
    "swap_operands",
    "pad",
    "swizzle",
    "sync",
    "load_order",
    "accumulate",
    "epilogue",
    "epilogue_via",
    "target",
    "attributes",
)
