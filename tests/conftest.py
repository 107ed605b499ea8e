"""Shared pytest fixtures: `golden` compares text against tests/golden/ (Exo's fixture).

Run `pytest --update-golden` to rewrite the files after an intended change, then
read the diff before committing it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"


# The slow tier: tests that build with nvcc or clang, run the interpreter over every
# example and stage, or search (fuzz, property tests). `pytest -m "not slow"` leaves
# them out for a quick edit-test loop; CI runs everything.
SLOW_TESTS = {
    "test_cli.py::test_run_cpu_passes_every_check",
    "test_edges.py::test_any_shape_any_layout_is_exact",
    "test_edges.py::test_check_says_which_kernel_runs_a_size",
    "test_edges.py::test_every_example_with_shared_tiles_runs_odd_sizes",
    "test_examples.py::test_every_stage_emits_and_runs_correctly",
    "test_examples.py::test_interpreter_at_the_default_size",
    "test_fragment_buffering.py::test_musa_runs_in_the_interpreter_and_type_checks",
    "test_fuzz.py::test_fuzz_the_command_line",
    "test_mma_sync.py::test_interpreter_multiple_and_odd_size",
    "test_musa.py::test_s4000_is_exact_with_128_thread_warps",
    "test_passes_property.py::test_random_valid_schedules_are_exact_and_race_free",
    "test_tune.py::test_the_hgemm_space_prunes_to_72_points_that_compile",
    "test_wgmma.py::test_interpreter_multiple_and_odd_size",
    "test_wgmma.py::test_every_stage_runs_in_the_interpreter",
    "test_fragment_buffering.py::test_interpreter_multiple_and_odd_size",
    "test_layouts.py::test_every_layout_is_exact_in_the_interpreter",
    "test_batched.py::test_batched_products_are_exact",
    "test_mma_sync.py::test_nvcc_compiles",
}


#: Tests of minutes, started first: pytest-xdist hands out tests in collection order, and
#: the fuzz test (4-5 minutes on one core under CI's budget) collected in the middle
#: otherwise runs alone on one worker after the others have finished.
LONGEST_FIRST = (
    "test_fuzz.py::test_fuzz_the_command_line",
    "test_passes_property.py::test_random_valid_schedules_are_exact_and_race_free",
)


def pytest_collection_modifyitems(config, items):
    """Mark the slow tier (every test that needs nvcc or clang, and SLOW_TESTS), and move
    LONGEST_FIRST to the front."""
    for item in items:
        if _name(item) in SLOW_TESTS or item.get_closest_marker("nvcc"):
            item.add_marker(pytest.mark.slow)
    first = {name: rank for rank, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: first.get(_name(item), len(first)))


def _name(item) -> str:
    """`test_file.py::test_function`, the names SLOW_TESTS and LONGEST_FIRST hold."""
    return f"{Path(str(item.fspath)).name}::{item.originalname}"


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
