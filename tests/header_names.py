"""The names the CUDA headers declare at file scope, read from nvcc's preprocessed output.

    python3 tests/header_names.py          # rewrites tiledsl/frontend/header_names.txt (needs nvcc)

tiledsl refuses a kernel named after one of them (`kernel sqrt` would not compile). The
list is what `nvcc -E` of the headers the generated code includes declares outside any
namespace, class or function: function names, typedefs, tags and variables, found by a
small scan of the tokens that tracks braces (`extern "C" {` opens no scope) and skips
template parameter lists. Names that start with `_` are left out (C++ reserves them and
tiledsl refuses '__'; a leading '_' is not a letter).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HEADERS = ("cuda_fp16.h", "cuda_bf16.h", "mma.h")
LIST = Path(__file__).resolve().parent.parent / "tiledsl" / "frontend" / "header_names.txt"
_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|[A-Za-z_]\w*|\d[\w.]*|::|->|\S')
_NAME = re.compile(r"[A-Za-z_]\w*\Z")


def preprocessed() -> str:
    """`nvcc -E` of a file that includes what generated code includes."""
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "headers.cu"
        source.write_text("".join(f"#include <{h}>\n" for h in HEADERS))
        out = Path(folder) / "headers.ii"
        subprocess.run(
            ["nvcc", "-E", "-arch=sm_90", str(source), "-o", str(out)],
            check=True,
            capture_output=True,
        )
        return out.read_text(errors="replace")


def file_scope_names(text: str) -> set[str]:
    """Identifiers declared at file scope in preprocessed C++ (see the module's text)."""
    text = re.sub(r"^#.*$", "", text, flags=re.M)
    tokens = _TOKEN.findall(text)
    names: set[str] = set()
    scopes: list[bool] = []  # True: transparent (extern "C" { ... })
    depth = 0  # parentheses
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t == "template" and i + 1 < len(tokens) and tokens[i + 1] == "<":
            i = _past_template_parameters(tokens, i + 1)
            continue
        if t == "{":
            scopes.append(i >= 2 and tokens[i - 2] == "extern" and tokens[i - 1].startswith('"'))
        elif t == "}":
            if scopes:
                scopes.pop()
        elif t == "(":
            depth += 1
        elif t == ")":
            depth -= 1
        elif all(scopes) and depth == 0 and _NAME.match(t) and i + 1 < len(tokens):
            before, after = tokens[i - 1] if i else "", tokens[i + 1]
            if after == "(" and before not in ("::", ".", "->", "__attribute__"):
                names.add(t)
            elif before in ("struct", "class", "union", "enum", "namespace"):
                names.add(t)
            elif after in (";", "=", "[", ",") and before != "::":
                names.add(t)
        i += 1
    return {n for n in names if not n.startswith("_")}


def _past_template_parameters(tokens: list[str], i: int) -> int:
    depth = 0
    while i < len(tokens):
        depth += {"<": 1, ">": -1}.get(tokens[i], 0)
        if depth <= 0:
            return i + 1
        i += 1
    return i


def stored() -> set[str]:
    return {
        line
        for line in LIST.read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    }


def main() -> int:
    if shutil.which("nvcc") is None:
        print("nvcc is not on PATH", file=sys.stderr)
        return 1
    head = [line for line in LIST.read_text(encoding="utf-8").splitlines() if line.startswith("#")]
    names = sorted(file_scope_names(preprocessed()))
    LIST.write_text("\n".join([*head, *names]) + "\n", encoding="utf-8")
    print(f"wrote {len(names)} names to {LIST}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
