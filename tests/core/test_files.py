"""Output files written whole or not at all (a failed write leaves neither a cut file nor its
temporary), private modes for files that hold a command line."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

import gpuprobe.core.files as files
from gpuprobe.core.errors import InputError
from gpuprobe.core.files import atomic_open, private_dir, write_atomic


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_a_write_that_fails_midway_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    with pytest.raises(OSError) as info, atomic_open(target) as f:
        f.write(b'{"half": ')
        raise OSError(errno.ENOSPC, "No space left on device")
    assert info.value.errno == errno.ENOSPC
    assert str(info.value.filename) == str(target)  # named as the user knows it
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    write_atomic(target, "old page")
    with pytest.raises(ValueError), atomic_open(target) as f:
        f.write(b"new pa")
        raise ValueError("the page could not be drawn")
    assert target.read_text() == "old page"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_a_failed_sync_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(OSError):
        write_atomic(tmp_path / "report.png", b"\x89PNG" + b"x" * 4096)
    assert list(tmp_path.iterdir()) == []


def test_private_files_are_0600_and_others_follow_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "secret.json", "{}", private=True)
        write_atomic(tmp_path / "chart.svg", "<svg/>")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "secret.json") == 0o600
    assert _mode(tmp_path / "chart.svg") == 0o644
    assert (tmp_path / "chart.svg").read_text() == "<svg/>"


def test_private_dir_is_0700_when_made_and_an_existing_one_is_left(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        made = private_dir(tmp_path / "a" / "run")
        mine = tmp_path / "mine"
        mine.mkdir(mode=0o755)
        private_dir(mine)
    finally:
        os.umask(old)
    assert made.is_dir() and _mode(made) == 0o700
    assert _mode(mine) == 0o755
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match="is a file, not a directory"):
        private_dir(tmp_path / "file")
