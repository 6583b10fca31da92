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

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuprobe.core.errors import InputError
from gpuprobe.core.findings import worst_first
from gpuprobe.core.rules import apply_rules
from gpuprobe.tools.diagnose.kineto import ProgressCallback
from gpuprobe.tools.diagnose.layout import (
    classify,
)
from gpuprobe.tools.diagnose.rank_files import distinct_traces, find_trace_files
from gpuprobe.tools.diagnose.rank_part import (
    TracePart,
    _read_rank,
    interval_overlap,
    rank_from_name,
)
from gpuprobe.tools.diagnose.ranks_model import (
    CollectiveWait,
    MultiRankDiagnosis,
    RankRow,
    ReaderStat,
    UnreadRank,
)
from gpuprobe.tools.diagnose.rules.ranks import RULES_RANKS, RanksContext, cold_ranks_apart

__all__ = [
    "COLLECTIVES_SHOWN",
    "Reading",
    "TracePart",
    "diagnose_ranks",
    "distinct_traces",
    "find_trace_files",
    "folder_name",
    "interval_overlap",
    "judge_parts",
    "missing_ranks",
    "rank_from_name",
    "ranks_result",
    "read_traces",
    "whole_job",
]

COLLECTIVES_SHOWN = 5  # collectives listed by the waiting they cause; gpuprobe's choice


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


@dataclass
class Reading:
    """How a job's ranks were read, beside the parts: the ranks left out (each with why), each
    reader's figures, and where they were read."""

    unread: list[UnreadRank] = field(default_factory=list)
    readers: list[ReaderStat] = field(default_factory=list)
    read_on: str = "this process"
    whole_job: bool = False  # a folder or a pattern was read: a rank not in it is missing


def whole_job(paths: Any, cluster: Any) -> bool:
    """Whether ``paths`` stands for all of a job's traces (a folder, or what a cluster's
    workers list), not a chosen few files: then a rank its world size counts is missing."""
    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    return cluster is not None or (len(items) == 1 and os.path.isdir(items[0]))


def read_traces(
    files: Sequence[str],
    steps: tuple[int, int] | None,
    progress: ProgressCallback | None = None,
    *,
    jobs: int | None = None,
    reading: Reading | None = None,
) -> list[TracePart]:
    """Read ``files``, keeping a :class:`TracePart` of each, in the files' order.
    ``progress(done, total)`` is called with bytes read over all the files.

    ``jobs``: reader processes at once (:mod:`.ranks_read`: bounded by the usable cores and
    the free memory); ``1`` reads them one at a time in this process, as do ``None`` for less
    than :data:`~.ranks_read.PARALLEL_MIN_BYTES` in all. Without ``reading``, the first rank
    that cannot be read raises its :class:`InputError`; with it, such ranks are left out and
    added to ``reading.unread`` (each with why), and the others are read."""
    from gpuprobe.tools.diagnose.ranks_read import PARALLEL_MIN_BYTES, local_readers

    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        from gpuprobe.core.errors import bad_argument

        raise bad_argument("jobs", jobs, "give a number of reader processes, 1 or more")
    sizes = [_size(f) for f in files]
    small = jobs is None and sum(sizes) < PARALLEL_MIN_BYTES
    if len(files) > 1 and not small and local_readers(jobs, len(files)) > 1:
        from gpuprobe.tools.diagnose.ranks_read import read_parallel

        got, unread, readers, where = read_parallel(files, steps, progress, jobs)
        if unread and reading is None:
            raise InputError(f"{unread[0].path}: {unread[0].why}")
        if reading is not None:
            reading.unread += unread
            reading.readers += readers
            reading.read_on = where
        return [p for p in got if p is not None]
    parts = []
    for i, f in enumerate(files):
        per_file = None
        if progress is not None:
            base, total = sum(sizes[:i]), sum(sizes)
            per_file = _offset(progress, base, total)
        if reading is None:
            parts.append(_read_rank(f, steps, per_file))
            continue
        from gpuprobe.tools.diagnose.ranks_read import part_from_dict, read_one

        answer = read_one(f, steps, per_file)
        if "part" in answer:
            parts.append(part_from_dict(answer["part"]))
        else:
            why = str(answer["error"])
            reading.unread.append(UnreadRank(path=f, why=why.removeprefix(f"{f}: ") or why))
    return parts


def diagnose_ranks(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    steps: str | tuple[int, int] | None = None,
    progress: ProgressCallback | None = None,
    jobs: int | None = None,
    cluster: Any = None,
    worker_glob: str | None = None,
    connect_timeout: float | None = None,
    rank_timeout: float | None = None,
) -> MultiRankDiagnosis:
    """Diagnose the ranks of one distributed job: a folder of traces or one trace per rank.

    Only per-rank summaries are kept. The ranks are read in parallel on the usable cores
    (``jobs`` reader processes at most; ``jobs=1``: one at a time in this process), never more
    at once than the free memory allows, or, with ``cluster`` (a ``distributed.Client``, a
    scheduler address or ``{"scheduler_file": path}``), by the workers of a Dask cluster
    (:mod:`.ranks_cluster`): ``paths`` as the workers see it, or ``worker_glob``, a pattern each
    worker expands on its own disk. ``progress(done, total)`` is called with bytes read over all
    the files. A rank that cannot be read is left out and named in ``unread`` (the result is
    :attr:`~.ranks_model.MultiRankDiagnosis.partial`). The traces are checked first
    (:func:`~gpuprobe.tools.diagnose.layout.classify`): one process's successive profiler
    cycles, or traces of processes that did not run together, are not ranks. Raises
    :class:`~gpuprobe.core.errors.InputError` for those (one line: what was found, what to
    pass), for a path that is missing or not a trace, and when no rank can be read.
    """
    from gpuprobe.tools.diagnose.steps import parse_step_range

    t0 = time.perf_counter()
    wanted = parse_step_range(steps) if isinstance(steps, str) else steps
    reading = Reading(whole_job=whole_job(paths, cluster))
    if cluster is not None:
        from gpuprobe.tools.diagnose.ranks_cluster import RANK_TIMEOUT_S, read_on_cluster

        parts = read_on_cluster(
            cluster, paths, wanted, progress, reading,
            worker_glob=worker_glob, connect_timeout=connect_timeout,
            rank_timeout=rank_timeout or RANK_TIMEOUT_S,
        )  # fmt: skip
        where = worker_glob or folder_name(paths)
    else:
        if worker_glob is not None:
            from gpuprobe.core.errors import UsageError

            raise UsageError("--worker-glob is for a Dask cluster: give --cluster ADDRESS with it")
        files = find_trace_files(paths)
        parts = read_traces(files, wanted, progress, jobs=jobs, reading=reading)
        where = folder_name(paths)
    return judge_parts(parts, where, t0, reading)


def judge_parts(
    parts: list[TracePart], where: str, t0: float, reading: Reading
) -> MultiRankDiagnosis:
    """The verdict on the ranks read: checked as one job's (:func:`classify`), then judged;
    an InputError when none could be read (each named) or they are one process's cycles."""
    if not parts:
        names = "; ".join(u.line for u in reading.unread[:5])
        more = f" and {len(reading.unread) - 5} more" if len(reading.unread) > 5 else ""
        raise InputError(f"{where}: no rank could be read ({names}{more})")
    layout = classify([p.identity for p in parts], where)
    if layout.kind == "cycles":
        who = parts[layout.indices[0]].identity.label
        raise InputError(
            f"{where}: {len(parts)} successive profiler cycles of one process ({who}), not "
            "ranks: diagnose them with `gpuprobe diagnose DIR` or gpuprobe.diagnose_folder()"
        )
    return ranks_result([parts[i] for i in layout.indices], t0, note=layout.note, reading=reading)


def missing_ranks(
    parts: Sequence[TracePart], unread: Sequence[UnreadRank] = ()
) -> list[UnreadRank]:
    """The ranks the job's ``world_size`` counts that no trace read is of (when the traces say
    their rank and world size), but for those whose file is already named in ``unread`` (by
    the rank in its name)."""
    worlds = {p.row.world_size for p in parts if p.row.world_size}
    ranks = {p.row.rank for p in parts if p.row.rank_source == "distributedInfo"}
    if len(worlds) != 1 or len(ranks) != len(parts):
        return []
    world = worlds.pop() or 0
    ranks |= {r for u in unread if u.path and (r := rank_from_name(u.path)) is not None}
    return [
        UnreadRank(path="", rank=r, why=f"not found (world size {world}), no trace of it read")
        for r in range(world)
        if r not in ranks
    ]


def ranks_result(
    parts: list[TracePart], t0: float, note: str = "", reading: Reading | None = None
) -> MultiRankDiagnosis:
    """The verdict on ``parts``, the traces of one job's ranks (``t0``: when reading began;
    ``reading``: how they were read, the ranks left out)."""
    import dataclasses

    reading = reading or Reading()
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
        unread=(
            *reading.unread,
            *(missing_ranks(parts, reading.unread) if reading.whole_job else ()),
        ),
        read_on=reading.read_on,
        readers=tuple(reading.readers),
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
