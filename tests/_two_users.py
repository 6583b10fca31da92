"""A second local user for the tests that play an attacker on a shared machine.

As root, files are given to another uid (``os.chown``) and the attacker's steps run in a child
Python that drops to that uid first (``setgroups([])``, ``setgid``, ``setuid`` in
``preexec_fn``): the kernel checks them as it would another user's, and no system user is added.
Where the tests do not run as root there is no second uid to become: :func:`other_uid` skips
with that reason.
"""

from __future__ import annotations

import functools
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

# a uid and gid no account has (so messages read "uid 54321"); the first free one from here
_FIRST = 54321


def _free_uid() -> int:
    used = {p.pw_uid for p in pwd.getpwall()}
    uid = _FIRST
    while uid in used:
        uid += 1
    return uid


OTHER = _free_uid()


def other_uid() -> int:
    """The attacker's uid, or a skip saying why there is none."""
    if os.geteuid() != 0:
        pytest.skip(
            "a second user needs root here (chown to another uid, setuid in a child); these "
            "tests run as root in CI"
        )
    return OTHER


def drop() -> None:
    """``preexec_fn``: become the other user, with no groups of root's."""
    os.setgroups([])
    os.setgid(OTHER)
    os.setuid(OTHER)


def give(path: Path, *, mode: int | None = None) -> None:
    """``path`` (not followed when a link) owned by the other user, with ``mode``."""
    os.chown(path, OTHER, OTHER, follow_symlinks=False)
    if mode is not None:
        os.chmod(path, mode)


_ATTACK = r"""
import errno, json, os, sys
done = []
for step in json.loads(sys.argv[1]):
    op, args = step[0], step[1:]
    try:
        if op == "mkdir":
            os.mkdir(args[0]); os.chmod(args[0], args[1])
        elif op == "symlink":
            os.symlink(args[0], args[1])
        elif op == "write":
            with open(args[0], "w") as f:
                f.write(args[1])
        elif op == "read":
            with open(args[0], "rb") as f:
                f.read()
        elif op == "list":
            os.listdir(args[0])
        elif op == "unlink":
            os.unlink(args[0])
        done.append("ok")
    except OSError as e:
        done.append(errno.errorcode.get(e.errno, str(e.errno)))
print(json.dumps(done))
"""


@functools.cache
def _their_python() -> str:
    """An interpreter the other user may run (this one may sit in root's 0700 home)."""
    for exe in (sys.executable, getattr(sys, "_base_executable", ""), "/usr/bin/python3"):
        if not exe:
            continue
        try:
            ran = subprocess.run([exe, "-I", "-S", "-c", "pass"], preexec_fn=drop, timeout=30)
        except OSError:
            continue
        if ran.returncode == 0:
            return exe
    pytest.skip("no Python interpreter here that another user may run")


def as_other(*steps: tuple[Any, ...]) -> list[str]:
    """Run ``steps`` as the other user, in order: ``("mkdir", path, mode)``, ``("symlink",
    target, path)``, ``("write", path, text)``, ``("read", path)``, ``("list", path)``,
    ``("unlink", path)``; return each one's outcome: ``"ok"`` or the errno's name
    (``"EACCES"``)."""
    other_uid()
    doc = json.dumps([[str(a) if isinstance(a, Path) else a for a in s] for s in steps])
    done = subprocess.run(
        [_their_python(), "-I", "-S", "-c", _ATTACK, doc],
        preexec_fn=drop,
        capture_output=True,
        text=True,
        timeout=30,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


@contextmanager
def shared_dir() -> Iterator[Path]:
    """A fresh folder every user can write in (mode 1777, like ``/tmp``), in a place the other
    user can reach (pytest's own folders are 0700)."""
    path = Path(tempfile.mkdtemp(prefix="gpuprobe-shared-", dir="/tmp"))
    os.chmod(path, 0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
