"""The package's layers: each subpackage imports only from the layers below it, and no
module imports itself back through others (issue 16). Lazy imports inside functions
count too: they are the same dependency, only later; imports for the type checker alone
(`if TYPE_CHECKING:`) do not.

    0  errors, limits, files, progress     what every layer may use
    1  ir                                  the IR and the kernel's description
    2  models                              analyses of the IR (banks, hazards, registers, ...)
    3  frontend                            text -> checked description
    4  lowering                            description -> naive IR
    5  passes                              IR -> IR
    6  emit, interp                        IR -> source; IR -> numbers
    7  driver                              the pipeline, end to end
    8  gpu                                 toolchain, runtime, cache, timing, baselines
    9  commands, tune, viz                 the command line's work
    10 api, torch                          tiledsl.load and the torch operators
    11 cli, __main__                       the front door
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tiledsl"
LAYERS = (
    {"errors", "limits", "files", "progress"},
    {"ir"},
    {"models"},
    {"frontend"},
    {"lowering"},
    {"passes"},
    {"emit", "interp"},
    {"driver"},
    {"gpu"},
    {"commands", "tune", "viz"},
    {"api", "torch"},
    {"cli", "__main__"},
)
LAYER = {part: number for number, parts in enumerate(LAYERS) for part in parts}


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The tiledsl modules `name` imports (relative to the package; '' is the root)."""
    is_package = path.name == "__init__.py"
    found = set()
    tree = ast.parse(path.read_text())
    typing_only = {  # `if TYPE_CHECKING:` imports are for the type checker, not a dependency
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if not (node.module or "").startswith("tiledsl"):
                    continue
                base = (node.module or "").removeprefix("tiledsl").lstrip(".")
            else:
                here = name.split(".") if name else []
                if not is_package:
                    here = here[:-1]
                here = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                base = ".".join([*here, *([node.module] if node.module else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}" if base else alias.name
                if full in known:
                    found.add(full)
                elif base or alias.name != "__version__":  # the version is no dependency
                    found.add(base)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tiledsl."):
                    found.add(alias.name.removeprefix("tiledsl."))
    return {m for m in found if m != name}


def layer(module: str) -> int | None:
    return LAYER.get(module.split(".")[0]) if module else None


GRAPH = {name: imports(name, path, modules()) for name, path in modules().items()}


def test_every_module_has_a_layer():
    assert sorted(m for m in GRAPH if m and layer(m) is None) == []


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if m))
def test_imports_go_down_the_layers(module):
    wrong = [
        f"{module} (layer {layer(module)}) imports {target} (layer {layer(target)})"
        for target in sorted(GRAPH[module])
        if target and layer(target) is not None and layer(target) > layer(module)
    ]
    assert wrong == []


def test_the_ir_does_not_import_the_front_end():
    assert not {t for m, ts in GRAPH.items() if m.startswith("ir") for t in ts if "frontend" in t}


def test_no_import_circles():
    """Tarjan's strongly connected components of the module graph: each of one module."""
    index, low, on_stack, stack, circles = {}, {}, set(), [], []
    counter = [0]
    edges = defaultdict(set, {m: {t for t in ts if t in GRAPH and t} for m, ts in GRAPH.items()})

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in [m for m in GRAPH if m]:
        if v not in index:
            visit(v)
    assert circles == []
