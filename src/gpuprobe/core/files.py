"""Output files written whole or not at all, private, and never through a link or a folder
someone else made.

Every file gpuprobe writes as a result (a summary, a report page, a chart) goes through
:func:`atomic_open` / :func:`write_atomic`: the bytes go to a temporary file in the same folder
(a random name, opened ``O_CREAT|O_EXCL|O_NOFOLLOW``: a link planted there is never followed),
which is synced and then renamed over the target (``os.replace``, atomic on POSIX; it replaces a
link at the target's name, never what the link points to). A write that fails half-way (a full
disk, a quota, ``RLIMIT_FSIZE``, an exception in the code producing the bytes) removes the
temporary file and leaves the target as it was: never a 0-byte or a cut ``summary.json`` or
``report.png``.

One permission policy for a run's folder (``gpuprobe run``, ``profile``, ``record()``): every
file in it is created 0600 (:data:`PRIVATE_FILE_MODE`: they hold the command line, which may
carry a token, or a trace of the job) and every folder gpuprobe makes 0700
(:data:`PRIVATE_DIR_MODE`). :func:`private_dir` makes the folder, or accepts an existing one only
when it is the user's own and no other user can write in it (:func:`check_own_dir`, OpenSSH's
``StrictModes`` rule, with Debian's allowance for a group-writable folder whose group is the
user's alone); any other is refused in one line, so no one else can plant a link in it, read
what is written there or delete it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from gpuprobe.core.errors import InputError

__all__ = [
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "atomic_open",
    "check_own_dir",
    "private_dir",
    "private_subdir",
    "read_own_file",
    "user_name",
    "write_atomic",
]

PRIVATE_FILE_MODE = 0o600  # owner read/write: files that hold the command line (ssh's own keys)
PRIVATE_DIR_MODE = 0o700  # owner only: the folder of a run's files
PUBLIC_FILE_MODE = 0o666  # what open() asks for; the umask takes its bits off, as for any file
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _temp_name(target: Path) -> Path:
    # hidden, in the same folder (os.replace cannot cross file systems), never an existing name
    return target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], *, private: bool = False) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into; on leaving the block without an
    exception it is synced and renamed over ``path``. On any exception the temporary file is
    removed, ``path`` is left as it was, and the exception goes on (an ``OSError`` keeps its
    ``errno`` and names ``path`` as its ``filename``)."""
    target = Path(path)
    mode = PRIVATE_FILE_MODE if private else PUBLIC_FILE_MODE
    tmp = _temp_name(target)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | _NOFOLLOW
    try:
        fd = os.open(tmp, flags, mode)
    except OSError as exc:
        exc.filename = str(target)
        raise
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError) and exc.filename in (None, str(tmp), tmp):
            exc.filename = str(target)  # the user knows the target, not our temporary name
        raise


def write_atomic(path: str | os.PathLike[str], data: bytes | str, *, private: bool = False) -> Path:
    """Write ``data`` (str as UTF-8) to ``path`` whole or not at all (:func:`atomic_open`);
    return the path."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_open(path, private=private) as f:
        f.write(raw)
    return Path(path)


def user_name(uid: int) -> str:
    """``name (uid N)``, or ``uid N`` for a uid without a name."""
    import pwd

    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _group_is_mine_alone(gid: int, uid: int) -> bool:
    """The group has exactly one member, ``uid`` (a user private group: Debian's umask 002);
    Debian's OpenSSH patch ``user-group-modes`` accepts a group-writable file on that rule."""
    import grp
    import pwd

    try:
        group = grp.getgrgid(gid)
        me = pwd.getpwuid(uid).pw_name
    except KeyError:
        return False
    primary = [p.pw_uid for p in pwd.getpwall() if p.pw_gid == gid]
    if any(u != uid for u in primary):
        return False
    if group.gr_mem and group.gr_mem != [me]:
        return False
    return bool(primary or group.gr_mem)


def check_own_dir(path: str | os.PathLike[str], what: str = "--out") -> None:
    """Refuse (:class:`~gpuprobe.core.errors.InputError`, one line, exit 2) a folder that is
    not this user's own or that another user can write in, and a link someone else made; a
    link of the user's own to a folder of theirs is followed."""
    p = Path(path)
    me = os.geteuid()
    try:
        link = os.lstat(p)
        st = os.stat(p)
    except OSError as exc:
        raise InputError(
            f"{what} {p}: {exc.strerror or exc}; give a directory of your own"
        ) from None
    if stat.S_ISLNK(link.st_mode) and link.st_uid not in (me, 0):
        raise InputError(
            f"{what} {p} is a link made by {user_name(link.st_uid)}, not you; give a folder of "
            "your own (gpuprobe makes a new one 0700)"
        )
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(f"{what} {p} is a file, not a directory; give a directory")
    if st.st_uid != me:
        raise InputError(
            f"{what} {p} belongs to {user_name(st.st_uid)}, not you; give a folder of your own "
            "(gpuprobe makes a new one 0700)"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o002 or (mode & 0o020 and not _group_is_mine_alone(st.st_gid, me)):
        raise InputError(
            f"{what} {p} can be written by other users (mode {mode:04o}); give a folder only "
            f"you can write in, or run: chmod go-w {p}"
        )


def private_dir(path: str | os.PathLike[str], what: str = "--out") -> Path:
    """Make ``path`` (and its parents) if missing, the folder itself 0700; accept an existing
    folder only when it is the user's own and no one else can write in it
    (:func:`check_own_dir`; it keeps its mode). Raises ``OSError`` when it cannot be made and
    :class:`~gpuprobe.core.errors.InputError` for a folder that is not safe to write in."""
    out = Path(path)
    if not os.path.lexists(out):
        out.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    check_own_dir(out, what)  # also a folder someone else made meanwhile
    return out


def private_subdir(path: str | os.PathLike[str]) -> Path:
    """A folder gpuprobe makes inside a checked one (``traces/``, ``now-ID/``): made 0700, or, when
    it is there already, accepted only as a real folder (not a link) of the user's own, and set
    to 0700. Raises ``OSError`` (``EPERM`` for a link or a folder of someone else's)."""
    import errno

    p = Path(path)
    with contextlib.suppress(FileExistsError):
        os.mkdir(p, PRIVATE_DIR_MODE)
    st = os.lstat(p)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise OSError(errno.EPERM, "a link or a folder that is not yours is in the way", str(p))
    if stat.S_IMODE(st.st_mode) != PRIVATE_DIR_MODE:
        os.chmod(p, PRIVATE_DIR_MODE, follow_symlinks=False)
    return p


def read_own_file(path: str | os.PathLike[str], *, dir_fd: int | None = None) -> bytes:
    """The bytes of a regular file of the user's own, never through a link; a file of someone
    else's raises ``PermissionError`` (``EPERM``), a link ``OSError`` (``ELOOP``)."""
    import errno

    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | _NOFOLLOW, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if st.st_uid != os.geteuid():
            raise PermissionError(
                errno.EPERM, f"written by {user_name(st.st_uid)}, not you", str(path)
            )
        return f.read()
