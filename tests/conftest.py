"""Shared pytest fixtures: `golden` compares text against tests/golden/ (Exo's fixture).

Run `pytest --update-golden` to rewrite the files after an intended change, then
read the diff before committing it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden/ files")


@pytest.fixture
def golden(request):
    update = request.config.getoption("--update-golden")

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        assert path.exists(), f"no golden file {path}; run pytest --update-golden"
        assert text == path.read_text(), f"{name} differs from its golden file (--update-golden)"

    return check


@pytest.fixture
def examples_dir() -> Path:
    return ROOT / "examples"
