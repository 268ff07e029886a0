"""neuron_conformance.conformance.results.atomic: the project's one atomic writer (run.json, reports, proposed manifests, the codemod)."""

from __future__ import annotations

import json
import os
import stat

import pytest

import neuron_conformance.migrate.files
import neuron_conformance.reports._io
from neuron_conformance.conformance.results import atomic, records
from neuron_conformance.conformance.results.atomic import write_bytes_atomic, write_json_atomic, write_text_atomic
from neuron_conformance.conformance.results.manifest import Manifest
from neuron_conformance.conformance.results.manifest_update import write_proposed


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask():
    """Run the test under umask 022 (and restore the previous one)."""
    old = os.umask(0o022)
    try:
        yield 0o022
    finally:
        os.umask(old)


@pytest.mark.parametrize(
    "write",
    [
        lambda p: write_text_atomic(p, "x"),
        lambda p: write_json_atomic(p, {"a": 1}),
        lambda p: write_bytes_atomic(p, b"x"),
    ],
)
def test_new_file_gets_the_umask_mode_not_0600(tmp_path, umask, write):
    p = tmp_path / "sub" / "f"
    write(p)
    assert _mode(p) == 0o666 & ~umask == 0o644
    assert os.listdir(p.parent) == ["f"]


def test_replacing_a_file_gives_the_umask_mode_by_default(tmp_path, umask):
    p = tmp_path / "run.json"
    p.write_text("{}")
    os.chmod(p, 0o600)  # a run.json of an older harness
    write_json_atomic(p, {"complete": True})
    assert _mode(p) == 0o644 and json.loads(p.read_text()) == {"complete": True}


def test_explicit_mode(tmp_path, umask):
    p = tmp_path / "f"
    write_text_atomic(p, "x", mode=0o640)
    assert _mode(p) == 0o640


def test_keep_mode_keeps_the_replaced_files_bits(tmp_path, umask):
    p = tmp_path / "tool.py"
    p.write_text("old")
    os.chmod(p, 0o750)
    write_text_atomic(p, "new", keep_mode=True)
    assert p.read_text() == "new" and _mode(p) == 0o750
    q = tmp_path / "new.py"
    write_text_atomic(q, "x", keep_mode=True)  # nothing to keep: the umask mode
    assert _mode(q) == 0o644


def test_follow_symlinks_rewrites_the_target_and_keeps_the_link(tmp_path):
    target = tmp_path / "real.py"
    target.write_text("old")
    link = tmp_path / "link.py"
    link.symlink_to(target)
    assert write_text_atomic(link, "new", follow_symlinks=True) == target
    assert link.is_symlink() and target.read_text() == "new"
    write_text_atomic(link, "plain")  # default: the link itself is replaced
    assert not link.is_symlink() and target.read_text() == "new"


def test_line_endings_and_encoding_are_written_as_given(tmp_path):
    p = tmp_path / "f.txt"
    write_text_atomic(p, "a\r\nb\n", encoding="latin-1")
    assert p.read_bytes() == b"a\r\nb\n"


@pytest.mark.parametrize("exc", [RuntimeError("bug"), KeyboardInterrupt()])
def test_failure_mid_write_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch, exc):
    p = tmp_path / "summary.json"
    p.write_text("old")

    def boom(fd):
        raise exc

    monkeypatch.setattr(atomic.os, "fsync", boom)  # after the data is written, before the rename
    with pytest.raises(type(exc)):
        write_text_atomic(p, "new")
    assert p.read_text() == "old"
    assert os.listdir(tmp_path) == ["summary.json"]


def test_disk_full_mid_write_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch):
    p = tmp_path / "index.html"
    p.write_text("old")
    real_fdopen = os.fdopen

    class HalfWriter:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def write(self, data):
            self.fh.write(data[: len(data) // 2])
            self.fh.flush()
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fdopen", lambda fd, *a, **k: HalfWriter(real_fdopen(fd, *a, **k)))
    with pytest.raises(OSError, match="No space"):
        write_text_atomic(p, "new content")
    assert p.read_text() == "old"
    assert os.listdir(tmp_path) == ["index.html"]


def test_failure_to_rename_leaves_no_temp_file(tmp_path, monkeypatch):
    p = tmp_path / "a.json"

    def refuse(src, dst):
        raise PermissionError("no")

    monkeypatch.setattr(atomic.os, "replace", refuse)
    with pytest.raises(PermissionError):
        write_json_atomic(p, [1])
    assert os.listdir(tmp_path) == []


def test_unserialisable_data_leaves_nothing(tmp_path):
    p = tmp_path / "a.json"
    with pytest.raises(ValueError):
        write_json_atomic(p, _Circular())
    assert os.listdir(tmp_path) == []


class _Circular(list):
    def __init__(self):
        super().__init__()
        self.append(self)


def test_old_writer_names_are_the_one_writer():
    assert records.write_json_atomic is write_json_atomic
    assert neuron_conformance.reports._io.write_text_atomic is write_text_atomic
    assert (
        neuron_conformance.migrate.files.write_atomic.__module__ == "neuron_conformance.migrate.files"
    )  # a thin wrapper (encoding, BOM)


def test_codemod_writer_keeps_the_user_files_mode_and_bom(tmp_path, umask):
    write_atomic = neuron_conformance.migrate.files.write_atomic
    p = tmp_path / "train.py"
    p.write_bytes(b"\xef\xbb\xbfx = 1\r\n")
    os.chmod(p, 0o755)
    write_atomic(p, "x = 2\r\n", "utf-8-sig")
    assert p.read_bytes() == b"\xef\xbb\xbfx = 2\r\n" and _mode(p) == 0o755
    assert os.listdir(tmp_path) == ["train.py"]
    with pytest.raises(FileNotFoundError):  # as before: a file deleted meanwhile is not recreated
        write_atomic(tmp_path / "gone.py", "x", "utf-8")
    assert not (tmp_path / "gone.py").exists()


def test_proposed_manifest_gets_the_umask_mode(tmp_path, umask):
    path, _, _ = write_proposed(tmp_path, Manifest([]))
    assert _mode(path) == 0o644 and os.listdir(tmp_path) == [path.name]
