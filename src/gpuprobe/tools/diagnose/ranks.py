"""Several ranks of one distributed job: who is slow, and how much communication is exposed.

The traces are checked before they are called ranks (:mod:`.layout`): ranks are processes that
ran at the same time, with distinct ``distributedInfo`` ranks (or distinct pids or hosts);
one process's successive profiler cycles go to :mod:`.cycles`, and a mix is refused with a
one-line message.

:func:`diagnose_ranks` reads one Kineto trace per rank, one at a time, and keeps only a small
summary of each (a :class:`RankRow` and the rank's collective kernels), so memory does not grow
with the number of ranks. The rank comes from the header's ``distributedInfo.rank``, else from
the file name (``rank-3``, ``rank3``, ``worker3``, ``_3.``), else from the one GPU the trace
uses, else from the order of the files; HTA needs ``distributedInfo``.

Per rank, with HTA's definitions (``get_comm_comp_overlap``, ``get_temporal_breakdown``):
communication = the union of the NCCL/RCCL kernels, computation = the union of the other
kernels (not memcpy/memset), overlap = their intersection, as a share of communication; the
exposed communication is the rest. GPU busy is the trace summary's (HTA's temporal breakdown).

Across ranks, each collective kernel is matched by step, name and occurrence (the k-th
``ncclKernel_AllReduce…`` of step N on every rank), so ranks profiled over different steps
are compared only on the steps they share. A collective ends on all ranks at about the same time,
so a rank that reaches it early waits inside the kernel: its wait = its duration − the shortest
duration of that collective across ranks (clock-free; HTA's straggler analysis uses the start
times instead). The rank with the shortest kernels is the one the others wait for; the
**straggler** is the rank whose late arrivals cost the others the most waiting. Raw step time
would name the wrong rank: the ranks that wait have the longest steps.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpuprobe.core.errors import InputError
from gpuprobe.core.findings import worst_first
from gpuprobe.core.rules import apply_rules
from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.intervals import merge_intervals, overlaps
from gpuprobe.tools.diagnose.jsonstream import file_kind
from gpuprobe.tools.diagnose.kernels import (
    FAMILY_COMM,
    FAMILY_MEMORY,
    family_of_activities,
    kernel_breakdown,
)
from gpuprobe.tools.diagnose.kineto import ProgressCallback
from gpuprobe.tools.diagnose.layout import (
    TraceFacts,
    TraceIdentity,
    classify,
    identify,
    trace_facts,
)
from gpuprobe.tools.diagnose.ranks_model import CollectiveWait, MultiRankDiagnosis, RankRow
from gpuprobe.tools.diagnose.rules.ranks import RULES_RANKS, RanksContext, cold_ranks_apart

__all__ = [
    "COLLECTIVES_SHOWN",
    "TracePart",
    "diagnose_ranks",
    "distinct_traces",
    "find_trace_files",
    "folder_name",
    "interval_overlap",
    "rank_from_name",
    "ranks_result",
    "read_traces",
]

COLLECTIVES_SHOWN = 5  # collectives listed by the waiting they cause; gpuprobe's choice
TRACE_SUFFIXES = (".json", ".json.gz")  # what a folder's trace files end with (Kineto writes both)

# Rank in a file name, most specific first: rank-3 / rank_3 / rank3, worker3, then _3. (as in
# torch.profiler.tensorboard_trace_handler's "{worker_name}.{ts}.pt.trace.json" with a rank).
_RANK_IN_NAME = (
    re.compile(r"(?i)rank[-_]?(\d+)"),
    re.compile(r"(?i)worker[-_]?(\d+)"),
    re.compile(r"_(\d+)\."),
)


def rank_from_name(path: str) -> int | None:
    """The rank written in a trace's file name, or None."""
    base = os.path.basename(path)
    for rx in _RANK_IN_NAME:
        m = rx.search(base)
        if m:
            return int(m.group(1))
    return None


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


def interval_overlap(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """Length of the intersection of two unions of intervals (sorted, disjoint starts/ends)."""
    (as_, ae), (bs, be) = a, b
    if as_.size == 0 or bs.size == 0:
        return 0.0
    return float(np.sum(overlaps(bs, be, as_, ae)))


def _short(name: str) -> str:
    """A kernel name without its argument list and leading ``void``."""
    return name.split("(", 1)[0].removeprefix("void ").strip() or name


_Key = tuple[int | None, str, int]  # a collective: (step number, short name, occurrence in step)


@dataclass
class TracePart:
    """What is kept of one trace while the others are read: its rank's row and collectives,
    who recorded it and when, and what a cycle's row needs."""

    row: RankRow
    coll_key: list[_Key]
    coll_dur: np.ndarray
    first_rank_from_name: int | None
    device_rank: int | None
    identity: TraceIdentity
    facts: TraceFacts


def _read_rank(
    path: str, steps: tuple[int, int] | None, progress: ProgressCallback | None
) -> TracePart:
    from gpuprobe.tools.diagnose.engine import check_memory, out_of_memory
    from gpuprobe.tools.diagnose.kineto import read_trace

    t0 = time.perf_counter()
    raw = read_trace(path, progress=progress)
    check_memory(raw.events, path)
    try:
        return _rank_part(path, raw, steps, t0)
    except MemoryError:
        raise out_of_memory(path, raw.events) from None


def _rank_part(path: str, raw: Any, steps: tuple[int, int] | None, t0: float) -> TracePart:
    """The summary of one rank's trace, read into ``raw``."""
    from gpuprobe.tools.diagnose.analysis import TraceContext

    ctx = TraceContext(raw, steps)
    info = raw.header.get("distributedInfo")
    rank: int | None = None
    world: int | None = None
    if isinstance(info, dict):
        try:
            rank = int(info["rank"])
        except (KeyError, TypeError, ValueError):
            rank = None
        try:
            world = int(info["world_size"])
        except (KeyError, TypeError, ValueError):
            world = None
    summary = ctx.summary(read_seconds=0.0, analyse_seconds=0.0)
    sel = ctx.gpu_step >= 0
    fam = family_of_activities(ctx)
    kern = sel & (fam != FAMILY_MEMORY)
    comm_m = kern & (fam == FAMILY_COMM)
    comp_m = kern & (fam != FAMILY_COMM)
    comm = merge_intervals(ctx.gpu_ts[comm_m], ctx.gpu_end[comm_m])
    comp = merge_intervals(ctx.gpu_ts[comp_m], ctx.gpu_end[comp_m])
    comm_us = float(np.sum(comm[1] - comm[0]))
    compute_us = float(np.sum(comp[1] - comp[0]))
    overlap_us = interval_overlap(comm, comp)
    busy_steps = sum(b.gpu_busy_us or 0.0 for b in ctx.breakdowns)
    durations = ctx.step_durations
    numbered = [s for s in ctx.steps if s.number is not None]
    # collectives in order of GPU start, keyed by (step number, short name, occurrence in step)
    ci = np.nonzero(comm_m)[0]
    ci = ci[np.argsort(ctx.gpu_ts[ci], kind="stable")]
    c_step, c_name, c_dur = ctx.gpu_step[ci], ctx.gpu_name[ci], ctx.gpu_dur[ci]
    if not ctx.has_gpu:  # a CPU job (gloo): its collectives are host spans
        ci = np.nonzero(P.CPU_COLLECTIVE.mask(ctx.ann_name, ctx.names) & (ctx.ann_step >= 0))[0]
        ci = ci[np.argsort(ctx.ann_ts[ci], kind="stable")]
        c_step, c_name, c_dur = ctx.ann_step[ci], ctx.ann_name[ci], ctx.ann_dur[ci]
        comm = merge_intervals(ctx.ann_ts[ci], ctx.ann_ts[ci] + c_dur)
        comm_us = float(np.sum(comm[1] - comm[0]))
    seen: dict[tuple[int | None, str], int] = {}
    keys: list[_Key] = []
    for st, nm in zip(c_step.tolist(), c_name.tolist(), strict=True):
        step = ctx.steps[int(st)].number
        name = _short(ctx.names[int(nm)])
        k = seen.get((step, name), 0)
        seen[(step, name)] = k + 1
        keys.append((step, name, k))
    kb = kernel_breakdown(ctx, top=0)
    row = RankRow(
        rank=-1 if rank is None else rank,
        rank_source="distributedInfo" if rank is not None else "",
        path=path,
        steps=len(numbered) if numbered else len(ctx.steps),
        step_median_us=float(np.median(durations)) if durations.size else None,
        step_total_us=float(durations.sum()),
        first_step_start_us=float(ctx.step_starts[0]) + ctx.raw.time_base if numbered else None,
        gpu_busy_fraction=summary.gpu_busy_fraction,
        gpu_span_us=summary.gpu_span_us,
        gpu_busy_in_steps_us=float(busy_steps),
        gpu_idle_in_steps_us=float(max(durations.sum() * max(len(ctx.devices), 1) - busy_steps, 0))
        if ctx.has_gpu
        else 0.0,
        compute_us=compute_us,
        comm_us=comm_us,
        overlap_us=overlap_us,
        overlap_fraction=overlap_us / comm_us if comm_us > 0 else None,
        exposed_comm_us=comm_us - overlap_us,
        comm_kernels=int(ci.size),
        families=kb.families,
        launches=kb.launches,
        world_size=world,
        read_seconds=time.perf_counter() - t0,
        **_one_time(ctx),
    )
    dev_rank = ctx.devices[0] if len(ctx.devices) == 1 else None
    return TracePart(
        row=row,
        coll_key=keys,
        coll_dur=np.array(c_dur, dtype=float),
        first_rank_from_name=rank_from_name(path),
        device_rank=dev_rank,
        identity=identify(ctx),
        facts=trace_facts(ctx, ctx.breakdowns),
    )


def _one_time(ctx: Any) -> dict[str, Any]:
    """A rank's one-time start-up: µs, share of its profiled time, its largest call."""
    lost, share = ctx.one_time_share
    calls = ctx.one_time_calls
    call = ""
    if calls.size:
        i = int(calls[np.argmax(ctx.rt_dur[calls])])
        call = f"{ctx.rt_dur[i] / 1e3:,.1f} ms {ctx.names[int(ctx.rt_name[i])]}"
    return {"one_time_us": lost, "one_time_share": share, "one_time_call": call}


def _assign_ranks(parts: list[TracePart]) -> None:
    """Fill each row's rank: distributedInfo, else file name, else GPU id, else file order."""
    import dataclasses

    def unique(values: list[int | None]) -> bool:
        return all(v is not None for v in values) and len(set(values)) == len(values)

    order: list[int | None] = list(range(len(parts)))
    candidates: tuple[tuple[str, list[int | None]], ...] = (
        ("distributedInfo", [p.row.rank if p.row.rank_source else None for p in parts]),
        ("file name", [p.first_rank_from_name for p in parts]),
        ("GPU id", [p.device_rank for p in parts]),
        ("file order", order),
    )
    for source, values in candidates:
        if unique(values):
            for p, v in zip(parts, values, strict=True):
                p.row = dataclasses.replace(p.row, rank=int(v or 0), rank_source=source)
            return


def _match_collectives(parts: list[TracePart]) -> tuple[list[CollectiveWait], np.ndarray]:
    """Collectives present on every rank, with their waits; and the (rank × collective) waits."""
    if len(parts) < 2:
        return [], np.zeros((len(parts), 0))
    common = set(parts[0].coll_key)
    for p in parts[1:]:
        common &= set(p.coll_key)
    keys = [k for k in parts[0].coll_key if k in common]
    if not keys:
        return [], np.zeros((len(parts), 0))
    dur = np.empty((len(parts), len(keys)))
    for r, p in enumerate(parts):
        where = {k: i for i, k in enumerate(p.coll_key)}
        dur[r] = p.coll_dur[[where[k] for k in keys]]
    waits = dur - dur.min(axis=0)
    ranks = tuple(p.row.rank for p in parts)
    seq = {k: i for i, k in enumerate(parts[0].coll_key)}
    out = [
        CollectiveWait(
            name=k[1],
            occurrence=k[2],
            sequence=seq[k],
            step=k[0],
            last_rank=ranks[int(np.argmin(dur[:, c]))],
            wait_us=float(waits[:, c].sum()),
            max_wait_us=float(waits[:, c].max()),
            ranks=ranks,
            durations_us=tuple(float(x) for x in dur[:, c]),
        )
        for c, k in enumerate(keys)
    ]
    return out, waits


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _offset(progress: ProgressCallback, base: int, total: int) -> ProgressCallback:
    """A per-file progress callback reporting bytes over all the files."""
    return lambda done, _total: progress(base + done, total)


def folder_name(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> str:
    """How messages name what was given: the folder, or "these N traces"."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if len(items) == 1:
        return os.fspath(items[0])
    return f"these {len(items)} traces"


def read_traces(
    files: Sequence[str],
    steps: tuple[int, int] | None,
    progress: ProgressCallback | None = None,
) -> list[TracePart]:
    """Read ``files`` one at a time, keeping a :class:`TracePart` of each. ``progress(done,
    total)`` is called with bytes read over all the files."""
    sizes = [_size(f) for f in files]
    parts = []
    for i, f in enumerate(files):
        per_file = None
        if progress is not None:
            base, total = sum(sizes[:i]), sum(sizes)
            per_file = _offset(progress, base, total)
        parts.append(_read_rank(f, steps, per_file))
    return parts


def diagnose_ranks(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    steps: str | tuple[int, int] | None = None,
    progress: ProgressCallback | None = None,
) -> MultiRankDiagnosis:
    """Diagnose the ranks of one distributed job: a folder of traces or one trace per rank.

    Files are read one at a time; only per-rank summaries are kept. ``progress(done, total)`` is
    called with bytes read over all the files. The traces are checked first
    (:func:`~gpuprobe.tools.diagnose.layout.classify`): one process's successive profiler
    cycles, or traces of processes that did not run together, are not ranks. Raises
    :class:`~gpuprobe.core.errors.InputError` for those (one line: what was found, what to
    pass), and for a path that is missing or not a trace.
    """
    from gpuprobe.tools.diagnose.steps import parse_step_range

    t0 = time.perf_counter()
    wanted = parse_step_range(steps) if isinstance(steps, str) else steps
    files = find_trace_files(paths)
    parts = read_traces(files, wanted, progress)
    where = folder_name(paths)
    layout = classify([p.identity for p in parts], where)
    if layout.kind == "cycles":
        who = parts[layout.indices[0]].identity.label
        raise InputError(
            f"{where}: {len(parts)} successive profiler cycles of one process ({who}), not "
            "ranks: diagnose them with `gpuprobe diagnose DIR` or gpuprobe.diagnose_folder()"
        )
    return ranks_result([parts[i] for i in layout.indices], t0, note=layout.note)


def ranks_result(parts: list[TracePart], t0: float, note: str = "") -> MultiRankDiagnosis:
    """The verdict on ``parts``, the traces of one job's ranks (``t0``: when reading began)."""
    import dataclasses

    _assign_ranks(parts)
    parts.sort(key=lambda p: p.row.rank)
    colls, waits = _match_collectives(parts)
    caused = np.zeros(len(parts))
    last = np.zeros(len(parts), dtype=np.int64)
    if colls:
        lasts = np.argmin(waits, axis=0)
        np.add.at(caused, lasts, waits.sum(axis=0))
        np.add.at(last, lasts, 1)
    rows = [
        dataclasses.replace(
            p.row,
            comm_wait_us=float(waits[r].sum()) if colls else 0.0,
            caused_wait_us=float(caused[r]),
            last_arrivals=int(last[r]),
        )
        for r, p in enumerate(parts)
    ]
    straggler = _straggler(rows, bool(colls))
    findings = cold_ranks_apart(
        apply_rules(
            RULES_RANKS,
            RanksContext(rows=tuple(rows), straggler=straggler, collectives=tuple(colls)),
        ),
        rows,
    )
    top = sorted(colls, key=lambda c: -c.wait_us)[:COLLECTIVES_SHOWN]
    return MultiRankDiagnosis(
        ranks=tuple(rows),
        findings=tuple(worst_first(findings)),
        collectives=tuple(top),
        matched_collectives=len(colls),
        straggler=straggler,
        seconds=time.perf_counter() - t0,
        note=note,
    )


def _straggler(rows: list[RankRow], matched: bool) -> int | None:
    if len(rows) < 2:
        return None
    if matched and any(r.caused_wait_us > 0 for r in rows):
        return max(rows, key=lambda r: r.caused_wait_us).rank
    timed = [r for r in rows if r.step_median_us is not None]
    if not timed:
        return None
    return max(timed, key=lambda r: r.step_median_us or 0.0).rank
