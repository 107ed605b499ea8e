"""User names in the generated C++: the emitters spell no identifier that
tiledsl.frontend.names does not know of, so that its refusals are complete (issue 15, item 5).

The scan reads every example's generated source on each path (WMMA, mma.sync, wgmma, MUSA;
the guarded twins are in the same source) and sorts its identifiers: the file's own names
and those derived from them, C++ keywords, what the emitters write (`GENERATED`,
`GENERATED_LOCALS`, the helper families), names reserved to the implementation (`__x`),
and names the headers declare. Anything else is an identifier a user name could collide
with, unchecked: the test names it and where to add it.
"""

from __future__ import annotations

import re
import shutil

import pytest
from header_names import file_scope_names, preprocessed, stored
from helpers import EXAMPLES, example_id

from tiledsl.driver import compile_source
from tiledsl.frontend import names
from tiledsl.frontend.parser import parse
from tiledsl.frontend.syntax import Word

_STRIP = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\])*"|^\s*#[^\n]*', re.S | re.M)
_TOKEN = re.compile(r"\d[\w.]*|::|->|\.|[A-Za-z_]\w*|\S")


def identifiers(source: str) -> set[str]:
    """Unqualified identifiers outside comments, strings and preprocessor lines."""
    tokens = _TOKEN.findall(_STRIP.sub(" ", source))
    return {
        t
        for i, t in enumerate(tokens)
        if re.match(r"[A-Za-z_]\w*\Z", t) and (i == 0 or tokens[i - 1] not in ("::", "->", "."))
    }


def user_names(text: str) -> set[str]:
    program = parse(text, "x.tile")
    found = set()
    for k in program.kernels:
        found |= {k.name, *names.kernel_derived(k.name)}
        for op in k.operands:
            found |= {op.name, *names.tile_derived(op.name)}
            found |= {d.text for d in op.dims if isinstance(d, Word)}
        attributes = k.directive("attributes")
        found |= {str(getattr(a, "name", a)) for a in (attributes.args if attributes else ())}
        # `epilogue alpha runtime`: the kernel's parameter `alpha`, named by the file
        epilogue = k.directive("epilogue")
        for group in epilogue.groups if epilogue else ():
            if len(group) == 2 and getattr(group[1], "text", "") == "runtime":
                found.add(group[0].text)
    return found


def unaccounted(source: str, text: str) -> set[str]:
    known = user_names(text) | names.CXX_KEYWORDS | names.GENERATED | names.GENERATED_LOCALS
    return {
        n
        for n in identifiers(source) - known
        if not names.GENERATED_FAMILIES.match(n)
        and not n.startswith("__")
        and n not in names.header_names()
    }


@pytest.mark.parametrize("path", EXAMPLES, ids=example_id)
def test_every_identifier_of_the_generated_code_is_accounted_for(path):
    text = path.read_text()
    source = compile_source(text, str(path)).source
    assert unaccounted(source, text) == set(), (
        "the emitters write identifiers that tiledsl/names.py does not know of: add them to "
        "GENERATED (file scope, or a kernel's namespace) or GENERATED_LOCALS"
    )


def test_the_scan_sees_a_name_that_is_not_accounted_for():
    text = (EXAMPLES[0]).read_text()
    source = compile_source(text, "x.tile").source
    assert (
        unaccounted(source.replace("const int lane", "const int lane_id"), text) == {"lane_id"}
        or "lane" not in source
    )


def test_header_names_are_loaded_without_their_comment():
    loaded = names.header_names()
    assert {"sqrt", "printf", "dim3", "size_t", "rand"} <= loaded
    assert not {"of", "one", "the", "#"} & loaded


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_header_names_cover_the_installed_toolkit():
    missing = file_scope_names(preprocessed()) - stored()
    assert not missing, (
        f"{len(missing)} names the headers declare are not in tiledsl/frontend/header_names.txt "
        f"(e.g. {sorted(missing)[:5]}): run `python3 tests/header_names.py`"
    )
