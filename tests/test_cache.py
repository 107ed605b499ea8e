"""The kernel cache without a GPU: where it lives, what its key covers, atomic writes,
hits and misses, --no-cache, and `runtime.load` with a fake compiler and loader."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from helpers import cli

from tiledsl.gpu import cache, runtime
from tiledsl.gpu.cache import cache_dir, cache_key, fetch, key_fields, write_atomic

FIELDS = dict(
    pipeline=("smem-tiling", "multi-buffering"),
    target="cuda sm_90",
    arch="sm_90",
    compiler="nvrtc",
    compiler_version="13.0",
    options=("-lineinfo",),
    name="hgemm.cu",
)
SOURCE = 'extern "C" __global__ void k() {}\n'


def test_cache_dir_precedence(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TILEDSL_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "tiledsl"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "tiledsl"
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"


def test_key_is_stable_and_covers_every_field() -> None:
    base = cache_key(SOURCE, **FIELDS)
    assert base == cache_key(SOURCE, **FIELDS)
    assert len(base) == 64
    changed = {
        "pipeline": ("smem-tiling",),
        "target": "cuda sm_80",
        "arch": "sm_80",
        "compiler": "nvcc",
        "compiler_version": "13.1",
        "options": ("-lineinfo", "-G"),
        "name": "/tmp/hgemm-0123.cu",
    }
    keys = {base}
    for field, value in changed.items():
        keys.add(cache_key(SOURCE, **{**FIELDS, field: value}))
    keys.add(cache_key(SOURCE + "// edited\n", **FIELDS))
    assert len(keys) == len(changed) + 2  # every change is a new key


def test_key_records_the_source_digest_and_version() -> None:
    fields = key_fields(SOURCE, **FIELDS)
    assert fields["tiledsl"]
    assert len(fields["source_sha256"]) == 64
    assert SOURCE not in json.dumps(fields)  # the digest, not the text


def test_miss_then_hit(tmp_path: Path) -> None:
    calls = []

    def build() -> bytes:
        calls.append(1)
        return b"\x7fELF cubin"

    fields = key_fields(SOURCE, **FIELDS)
    first = fetch(fields, build, directory=tmp_path)
    assert not first.hit and calls == [1]
    assert first.path.read_bytes() == b"\x7fELF cubin"
    assert first.path.parent == tmp_path
    assert "miss, saved to" in first.note
    sidecar = json.loads(first.path.with_suffix(".json").read_text())
    assert sidecar["pipeline"] == list(FIELDS["pipeline"])
    assert sidecar["bytes"] == len(b"\x7fELF cubin")
    second = fetch(fields, build, directory=tmp_path)
    assert second.hit and calls == [1]
    assert second.path == first.path
    assert second.note == f"kernel cache: hit {first.path}"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [first.path.name, first.path.with_suffix(".json").name]
    )  # no temporary files left behind


def test_no_cache_neither_reads_nor_writes(tmp_path: Path) -> None:
    fields = key_fields(SOURCE, **FIELDS)
    fetch(fields, lambda: b"old", directory=tmp_path)
    before = sorted(tmp_path.iterdir())
    entry = fetch(fields, lambda: b"new", directory=tmp_path, use_cache=False)
    assert not entry.hit and entry.scratch
    assert entry.path.read_bytes() == b"new"
    assert entry.path.parent != tmp_path
    assert sorted(tmp_path.iterdir()) == before
    assert entry.note == "kernel cache: off (--no-cache)"


@pytest.mark.parametrize("damage", ["cubin", "sidecar", "no sidecar"])
def test_a_damaged_entry_is_a_miss_and_is_rebuilt(tmp_path: Path, damage: str) -> None:
    fields = key_fields(SOURCE, **FIELDS)
    entry = fetch(fields, lambda: b"good", directory=tmp_path)
    sidecar = entry.path.with_suffix(".json")
    if damage == "cubin":
        entry.path.write_bytes(b"goo")  # truncated
    elif damage == "sidecar":
        sidecar.write_text("{not json")
    else:
        sidecar.unlink()
    again = fetch(fields, lambda: b"good", directory=tmp_path)
    assert not again.hit
    assert again.path.read_bytes() == b"good"
    assert fetch(fields, lambda: b"unused", directory=tmp_path).hit


def test_write_atomic_replaces_whole_and_cleans_up_on_failure(tmp_path, monkeypatch) -> None:
    target = tmp_path / "x.cubin"
    write_atomic(target, b"one")
    write_atomic(target, b"two")
    assert target.read_bytes() == b"two"

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(cache.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, b"three")
    assert target.read_bytes() == b"two"  # the old file, whole
    assert [p.name for p in tmp_path.iterdir()] == ["x.cubin"]  # the temporary file is gone


def test_concurrent_writers_leave_a_valid_entry(tmp_path: Path) -> None:
    fields = key_fields(SOURCE, **FIELDS)
    data = bytes(range(256)) * 4096

    def writer() -> None:
        fetch(fields, lambda: data, directory=tmp_path)

    threads = [threading.Thread(target=writer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    entry = fetch(fields, lambda: b"unused", directory=tmp_path)
    assert entry.hit and entry.path.read_bytes() == data
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]


def test_an_unwritable_cache_costs_the_cache_not_the_run(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should be")
    entry = fetch(key_fields(SOURCE, **FIELDS), lambda: b"bin", directory=blocker / "cache")
    assert not entry.hit and entry.scratch
    assert entry.path.read_bytes() == b"bin"
    assert "not saved" in entry.note


class FakeCompiler:
    name = "fake-nvrtc"

    def __init__(self, version: str = "1.0"):
        self.compiled: list[str] = []
        self._version = version

    def version(self) -> str:
        return self._version

    def options(self, arch: str) -> tuple[str, ...]:
        return ("-lineinfo", f"--gpu-architecture={arch}")

    def compile(self, source: str, arch: str, name: str, options) -> bytes:
        self.compiled.append(name)
        return f"cubin of {name} for {arch}".encode()


@pytest.fixture
def fresh_memory(monkeypatch):
    monkeypatch.setattr(runtime, "_MODULES", {})


def test_load_compiles_once_then_hits_memory_then_disk(tmp_path: Path, fresh_memory) -> None:
    compiler = FakeCompiler()
    loaded_paths = []

    def loader(path: Path):
        loaded_paths.append(path)
        return ("module", path.read_bytes())

    def load(**kw):
        return runtime.load(
            SOURCE,
            "sm_90",
            pipeline=("smem-tiling",),
            target="cuda sm_90",
            name="k.cu",
            compiler=compiler,
            loader=loader,
            directory=tmp_path,
            **kw,
        )

    first = load()
    assert not first.hit and compiler.compiled == ["k.cu"]
    assert first.module == ("module", b"cubin of k.cu for sm_90")
    assert "miss, saved to" in first.note and "compiled by fake-nvrtc 1.0" in first.note
    second = load()
    assert second.hit and second.module is first.module
    assert "earlier in this process" in second.note
    runtime._MODULES.clear()  # a new process
    third = load()
    assert third.hit and compiler.compiled == ["k.cu"]
    assert third.note.startswith("kernel cache: hit ")
    off = load(use_cache=False)
    assert not off.hit and compiler.compiled == ["k.cu", "k.cu"]
    assert off.note.startswith("kernel cache: off (--no-cache)")
    assert len(loaded_paths) == 3


def test_load_recompiles_for_a_new_compiler_version(tmp_path: Path, fresh_memory) -> None:
    old, new = FakeCompiler("12.8"), FakeCompiler("13.0")
    for compiler in (old, new, new):
        runtime._MODULES.clear()
        runtime.load(
            SOURCE, "sm_90", compiler=compiler, loader=lambda p: p, directory=tmp_path, name="k.cu"
        )
    assert len(old.compiled) == 1 and len(new.compiled) == 1
    assert len(list(tmp_path.glob("*.cubin"))) == 2


def test_env_var_moves_the_cache(tmp_path: Path, monkeypatch, fresh_memory) -> None:
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path / "env"))
    runtime.load(SOURCE, "sm_90", compiler=FakeCompiler(), loader=lambda p: p)
    assert len(cache.entries(tmp_path / "env")) == 1
    assert cache.entries() == cache.entries(tmp_path / "env")


def test_compile_failure_is_not_cached(tmp_path: Path, fresh_memory) -> None:
    class Broken(FakeCompiler):
        def compile(self, *args):
            raise runtime.ToolchainError("NVRTC failed on the generated source")

    with pytest.raises(runtime.ToolchainError):
        runtime.load(SOURCE, "sm_90", compiler=Broken(), loader=lambda p: p, directory=tmp_path)
    assert not list(tmp_path.iterdir())


def test_no_cache_flag_is_accepted_by_run(capsys, examples_dir) -> None:
    # The interpreter compiles nothing; the flag is accepted and changes nothing there.
    size = "128x128x64"
    r = cli(["run", examples_dir / "hgemm.tile", "--cpu", "--no-cache", "--size", size], capsys)
    assert r.code == 0, r.err
