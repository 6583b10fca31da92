"""Output files written whole or not at all, and private where they hold a command line.

Every file gpuprobe writes as a result (a summary, a report page, a chart) goes through
:func:`atomic_open` / :func:`write_atomic`: the bytes go to a temporary file in the same folder,
which is synced and then renamed over the target (``os.replace``, atomic on POSIX). A write that
fails half-way (a full disk, a quota, ``RLIMIT_FSIZE``, an exception in the code producing the
bytes) removes the temporary file and leaves the target as it was: never a 0-byte or a cut
``summary.json`` or ``report.png``.

``private=True`` creates the file 0600 (:data:`PRIVATE_FILE_MODE`), for files that hold the
recorded command line, which may carry a token; :func:`private_dir` makes an output folder 0700
(:data:`PRIVATE_DIR_MODE`) when it creates it (a folder that already exists keeps its mode: the
user chose it).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "atomic_open",
    "private_dir",
    "write_atomic",
]

PRIVATE_FILE_MODE = 0o600  # owner read/write: files that hold the command line (ssh's own keys)
PRIVATE_DIR_MODE = 0o700  # owner only: the folder of a run's files
PUBLIC_FILE_MODE = 0o666  # what open() asks for; the umask takes its bits off, as for any file


def _temp_name(target: Path) -> Path:
    # hidden, in the same folder (os.replace cannot cross file systems), never an existing name
    return target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], *, private: bool = False) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into; on leaving the block without an
    exception it is synced and renamed over ``path``. On any exception the temporary file is
    removed, ``path`` is left as it was, and the exception goes on (an ``OSError`` keeps its
    ``errno`` and names ``path`` as its ``filename``)."""
    target = Path(path)
    mode = PRIVATE_FILE_MODE if private else PUBLIC_FILE_MODE
    tmp = _temp_name(target)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
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


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Make ``path`` (and its parents) if missing, the folder itself 0700; an existing folder is
    left as it is. Raises ``OSError`` (``FileExistsError`` for a file in the way)."""
    out = Path(path)
    if not out.is_dir():
        out.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    return out
