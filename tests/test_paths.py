"""Instruction paths (issue 16): one description per path (tiledsl.ir.paths) and one
lowering object (tiledsl.emit.*), and nothing else in the package tells the paths apart
by the instruction's name."""

from __future__ import annotations

import re
from pathlib import Path

from tiledsl.emit.paths import LOWERINGS
from tiledsl.ir.paths import PATHS, ptx_path

PACKAGE = Path(__file__).resolve().parent.parent / "tiledsl"
#: The table and the path objects: the only modules that may spell a path's name.
PATH_MODULES = {"ir/paths.py", "emit/paths.py", "emit/wmma.py", "emit/mma_sync.py", "emit/wgmma.py"}
NAMES = "|".join(re.escape(n) for n in PATHS)
COMPARISON = re.compile(
    rf"\binstruction\s*(==|!=|\bin\b|\bnot in\b)"
    rf"|(==|!=)\s*[\"']({NAMES})[\"']"
    rf"|[\"']({NAMES})[\"']\s*(==|!=|\bin\b)"
)


def test_no_module_outside_the_paths_compares_the_instruction():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name in PATH_MODULES:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if COMPARISON.search(code):
                found.append(f"{name}:{number}: {line.strip()}")
    assert found == [], "ask the schedule's path (tiledsl.ir.paths) instead:\n" + "\n".join(found)


def test_the_grep_sees_a_comparison():
    assert COMPARISON.search('if s.instruction == "wgmma":')
    assert COMPARISON.search("x = 'mma.sync' != y")
    assert not COMPARISON.search("path = schedule.path")


def test_every_path_has_one_lowering():
    assert set(LOWERINGS) == set(PATHS)
    assert all(lowering.path is PATHS[name] for name, lowering in LOWERINGS.items())


def test_paths_in_words():
    assert ptx_path((64, 128, 16)).name == "wgmma" and ptx_path((16, 8, 16)).name == "mma.sync"
    wgmma = PATHS["wgmma"]
    assert wgmma.shape_text((64, 128, 16)) == "m64n128k16"
    assert PATHS["wmma"].shape_text((16, 16, 16)) == "16 x 16 x 16"
    assert wgmma.build_arch("sm_90") == "sm_90a" and wgmma.build_arch("sm_90a") == "sm_90a"
    assert [wgmma.async_depth(s) for s in (2, 3, 4)] == [0, 1, 1]
    assert PATHS["mma.sync"].async_depth(4) == 0
