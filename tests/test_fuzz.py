"""A seeded fuzz test of the whole command line (tests/fuzz.py has the generator, the runner
and the invariants).

Every command (check, check --size, compile to stdout and with -o, --stop-after each pass,
run --cpu, viz, tune --dry-run) on every example, every examples/spaces space and generated
kernels of every instruction path, mutated token by token, line by line and byte by byte,
and with bad command-line values. The default budget is quick; CI sets TILEDSL_FUZZ_CASES
(500) for a longer run and TILEDSL_FUZZ_SEED picks another seed. A failure lists each
distinct kind of failure once, with a reproduction; `python tests/fuzz.py --seed S --case N
--show` prints one case again.
"""

from __future__ import annotations

import fuzz
import pytest

from tiledsl.errors import Loc, TileError, error


def test_fuzz_the_command_line(tmp_path, monkeypatch):
    seed = fuzz.env_int("TILEDSL_FUZZ_SEED", fuzz.DEFAULT_SEED)
    cases = fuzz.env_int("TILEDSL_FUZZ_CASES", fuzz.DEFAULT_CASES)
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path / "cache"))
    report = fuzz.fuzz(seed, cases, work=tmp_path / "work", save_dir=tmp_path / "failures")
    print(report.summary())
    if report.failures:
        pytest.fail(report.render(), pytrace=False)


# The fuzzer's own parts: the cases are reproducible and the checks catch what they should.


def test_cases_are_deterministic_and_independent():
    pool = fuzz.seeds()
    assert any(s.name.startswith("examples/spaces/") for s in pool)
    seeds = {"gen/wmma.tile", "gen/mma.tile", "gen/wgmma.tile", "gen/fma.tile", "gen/musa.tile"}
    assert seeds <= {s.name for s in pool}
    first = [fuzz.make_case(7, i, pool) for i in range(40)]
    assert first == [fuzz.make_case(7, i, pool) for i in range(40)]
    assert fuzz.make_case(7, 33, pool) == first[33]  # case 33 alone is case 33 of the run
    assert first != [fuzz.make_case(8, i, pool) for i in range(40)]
    commands = {c.command for c in (fuzz.make_case(1, i, pool) for i in range(300))}
    assert {"check", "compile", "run", "viz", "tune"} <= commands


def _case(data: bytes, *argv: str) -> fuzz.Case:
    return fuzz.Case("#t", "test", argv or ("check", "in.tile"), data)


def _outcome(code, out="", err="", data=b"x") -> fuzz.Outcome:
    listing = {"in.tile": ("file", len(data), "h")}
    return fuzz.Outcome(code, out, err, 0.0, before=listing, after=dict(listing), input_after=data)


def test_checks_accept_a_located_error():
    text = "kernel k {\n\tblock 128 x\n}\n"
    err = error(Loc("in.tile", 2, 12, 2, 13), "expected a number after 'x'")
    rendered = TileError(err.diagnostics, text).render()
    case = _case(text.encode())
    assert fuzz.check_outcome(case, _outcome(1, err=rendered + "\n", data=text.encode())) == []


@pytest.mark.parametrize(
    "err, kind",
    [
        ("tiledsl check: internal error: KeyError: 'f64'\n", "internal error"),
        ("Traceback (most recent call last):\n  ...\nValueError: no\n", "Python traceback"),
        ("in.tile: error: somewhere\n", "does not open with"),
        ("in.tile:2:1: error: x\n    kernel k {\n    ^\n", "quoted line is not"),
        ("in.tile:1:3: error: x\n    kernel k {\n    ^\n", "caret is not under"),
        ("in.tile:1:1: error: x\n", "no quoted source line"),
    ],
)
def test_checks_catch_bad_output(err, kind):
    data = b"kernel k {\n    block\n}\n"
    problems = fuzz.check_outcome(_case(data), _outcome(1, err=err, data=data))
    assert any(kind in p.kind for p in problems), problems


def test_checks_catch_written_files_and_odd_statuses():
    data = b"kernel k {}\n"
    case = _case(data, "compile", "in.tile", "-o", "out.cu")
    o = _outcome(1, err="in.tile:1:1: error: x\n    kernel k {}\n    ^\n", data=data)
    o.after["out.cu"] = ("file", 3, "h")
    assert any("left files after exit 1" in p.kind for p in fuzz.check_outcome(case, o))
    o = _outcome(0, data=data)
    o.input_after = b"overwritten"
    assert any("rewritten the input" in p.kind for p in fuzz.check_outcome(case, o))
    assert any("exit status 3" in p.kind for p in fuzz.check_outcome(case, _outcome(3, data=data)))
    timed = _outcome(None, data=data)
    timed.timed_out = True
    assert any("time limit" in p.kind for p in fuzz.check_outcome(case, timed))
    run = _case(data, "run", "in.tile", "--cpu")
    assert any("without PASS" in p.kind for p in fuzz.check_outcome(run, _outcome(0, data=data)))


def test_the_runner_limits_time(tmp_path, monkeypatch):
    """A case that runs over its limit is stopped and reported, and the next one runs."""
    import tiledsl.cli

    def slow(argv):
        while True:
            pass

    monkeypatch.setattr(tiledsl.cli, "main", slow)
    case = fuzz.Case("#t", "test", ("check", "in.tile"), b"", limit_s=0.2)
    o = fuzz.run_case(case, tmp_path)
    assert o.timed_out and o.code is None
    assert any("time limit" in p.kind for p in fuzz.check_outcome(case, o))
