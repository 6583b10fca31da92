"""A folder's trace files: those that can be read as one (``*.json``, ``*.json.gz``), each
file once (a link or a copy of another is the same trace). Below :mod:`.ranks` and
:mod:`.ranks_cluster` (whose workers list their files with it)."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from gpuprobe.core.errors import InputError
from gpuprobe.tools.diagnose.jsonstream import file_kind

__all__ = ["TRACE_SUFFIXES", "distinct_traces", "find_trace_files"]

TRACE_SUFFIXES = (".json", ".json.gz")  # what a folder's trace files end with (Kineto writes both)


def find_trace_files(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    skipped: list[tuple[str, str]] | None = None,
) -> list[str]:
    """A folder's trace files (``*.json``, ``*.json.gz``, sorted), or the given files. A
    folder's entries with those names that cannot be read as a file (a FIFO, a dangling link,
    no permission) are left out, each added to ``skipped`` as (path, why) when it is given."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    out: list[str] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found: list[str] = []
            left: list[tuple[str, str]] = []
            for f in sorted(p.iterdir()):
                if f.name.endswith(TRACE_SUFFIXES):
                    why = _unreadable(f)
                    if why is None:
                        found.append(str(f))
                    else:
                        left.append((str(f), why))
            if skipped is not None:
                skipped.extend(left)
            if not found:
                names = "; ".join(f"{os.path.basename(f)}: {why}" for f, why in left)
                raise InputError(
                    f"{p}: no readable trace files (*.json, *.json.gz) in this folder "
                    f"(skipped {names})"
                    if names
                    else f"{p}: no trace files (*.json, *.json.gz) in this folder"
                )
            out.extend(found)
        elif p.exists():
            out.append(str(p))
        else:
            raise InputError(f"{p}: no such file or folder")
    if not out:
        raise InputError("no trace files given: pass a folder or one trace file per rank")
    return distinct_traces(out, skipped)


_HASH_CHUNK = 1 << 20  # bytes read at a time when two files of one size are compared


def _digest(path: str) -> str:
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def distinct_traces(
    files: Sequence[str], skipped: list[tuple[str, str]] | None = None
) -> list[str]:
    """``files`` without repeats: a file given twice (by the same or another path, a link) or
    a copy of another's content is one trace, not two ranks. Each repeat left out is added to
    ``skipped`` as (path, "the same trace as NAME"). Only files of equal size are read to
    compare their content."""
    seen: dict[tuple[int, int], str] = {}
    by_size: dict[int, list[str]] = {}
    first: list[str] = []
    for f in files:
        st = os.stat(f)
        ident = (st.st_dev, st.st_ino)
        if ident in seen:
            if skipped is not None:
                skipped.append((f, f"the same file as {seen[ident]}"))
            continue
        seen[ident] = f
        first.append(f)
        by_size.setdefault(st.st_size, []).append(f)
    copies: dict[str, str] = {}
    for same in by_size.values():
        if len(same) < 2:
            continue
        digests: dict[str, str] = {}
        for f in same:
            d = _digest(f)
            if d in digests:
                copies[f] = digests[d]
            else:
                digests[d] = f
    if skipped is not None:
        skipped.extend((f, f"the same content as {copies[f]}") for f in first if f in copies)
    return [f for f in first if f not in copies]


def _unreadable(path: Path) -> str | None:
    """Why a folder entry cannot be read as a trace file (None when it can)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "a dangling link" if os.path.islink(path) else "gone"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not stat.S_ISREG(st.st_mode):
        return f"a {file_kind(st.st_mode)}"
    if not os.access(path, os.R_OK):
        return "cannot be read (permission denied)"
    return None
