"""write_atomically replaces the file in one step: whoever holds the old file (a reader,
another hard link, a crash halfway) sees the old bytes or the new ones, never a mix.
Checked through what stays observable, not through timing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reducer.session import write_atomically


def test_a_reader_of_the_old_file_still_reads_it_whole(tmp_path: Path):
    out = tmp_path / "out.mlir"
    out.write_bytes(b"old program\n" * 1000)
    with open(out, "rb") as reader:
        write_atomically(str(out), b"new\n")
        assert reader.read() == b"old program\n" * 1000  # a write in place truncates under it
    assert out.read_bytes() == b"new\n"


def test_a_hard_link_to_the_old_file_keeps_the_old_bytes(tmp_path: Path):
    out = tmp_path / "out.mlir"
    out.write_bytes(b"old\n")
    os.link(out, tmp_path / "kept.mlir")
    write_atomically(str(out), b"new\n")
    assert (tmp_path / "kept.mlir").read_bytes() == b"old\n"
    assert out.read_bytes() == b"new\n"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch):
    out = tmp_path / "out.mlir"
    out.write_bytes(b"old\n")

    def full_disk(*_args, **_kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError) as info:
        write_atomically(str(out), b"new\n")
    assert info.value.filename == str(out)  # the error names the user's file
    assert out.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mlir"]
