"""Damage a valid file can carry that would change the verdicts without a word: events written
twice (two exports merged, a trace appended to itself) and a step annotation around the other
steps (a wrapper's ``record_function`` named like one, a merged profile). Each is repaired where
the repair is certain (a repeated event counted once, the enclosing step left out) and said in
:attr:`~.kineto.RawTrace.damage`, which the summary carries (``damage`` in ``--json``) and the
views print under the header. The reader itself notes data after the trace's end and events
without ``"ph"`` (:mod:`.kineto`, :mod:`.jsonstream`). Times in µs.
"""

from __future__ import annotations

from array import array

import numpy as np

from gpuprobe.tools.diagnose.kineto import RawTrace

__all__ = ["REPEATED_OPS_FRACTION", "drop_repeats", "enclosing_steps"]

REPEATED_OPS_FRACTION = 0.01  # of a CPU-only trace's ops repeated whole before they are taken
# as the file's repeats rather than nested ops of one name at the same microseconds; ours

# the columns of each kind of event, its key (an event is a repeat when every key column equals
# an earlier event's) first
_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gpu", ("gpu_ts", "gpu_dur", "gpu_name", "gpu_dev", "gpu_stream", "gpu_corr", "gpu_kind")),
    ("rt", ("rt_ts", "rt_dur", "rt_name", "rt_tid", "rt_corr")),
    ("op", ("op_ts", "op_dur", "op_name", "op_tid")),
    ("py", ("py_ts", "py_dur", "py_name", "py_tid")),
    ("ann", ("ann_ts", "ann_dur", "ann_name")),
)
_EXTRA = {"gpu": ("gpu_bytes",), "op": ("op_stack",)}  # carried along, not in the key


def _first_of_each(cols: list[np.ndarray]) -> np.ndarray:
    """A mask of the rows that are not a repeat of an earlier row (every column equal)."""
    n = cols[0].size
    keep = np.ones(n, dtype=bool)
    if n < 2:
        return keep
    order = np.lexsort(cols[::-1])
    same = np.ones(n - 1, dtype=bool)
    for c in cols:
        s = c[order]
        same &= s[1:] == s[:-1]
    keep[order[1:][same]] = False
    return keep


def _corr_repeats(raw: RawTrace) -> bool:
    """Whether a correlation id (unique per launch in Kineto) appears twice among the GPU
    activities or the runtime calls: the cheap test run on every trace before the full one."""
    for name in ("gpu_corr", "rt_corr"):
        c = np.frombuffer(getattr(raw, name), dtype=np.int64)
        c = c[c > 0]
        if c.size > 1 and np.unique(c).size < c.size:
            return True
    return False


def _keep(raw: RawTrace, key: tuple[str, ...]) -> np.ndarray:
    cols = [np.frombuffer(getattr(raw, c), dtype=getattr(raw, c).typecode) for c in key]
    return _first_of_each(cols)


def drop_repeats(raw: RawTrace) -> int:
    """Count each event written twice once (all its columns equal to an earlier event's, in
    every kind of event), say so in ``raw.damage``, and return how many were dropped.

    Two GPU activities cannot run at the same instant with the same correlation id on one
    stream, so a repeated GPU activity proves the file repeats events: then every kind is
    cleaned. A trace without GPU work is cleaned when a hundredth or more of its ops repeat
    (two ops of one name nested at the same microseconds are rare, not that common). The full
    comparison runs only where a correlation id repeats, or where there is no GPU work."""
    if len(raw.gpu_ts):
        if not _corr_repeats(raw) or _keep(raw, _KINDS[0][1]).all():
            return 0
    elif len(raw.op_ts):
        keep = _keep(raw, _KINDS[2][1])
        if (~keep).sum() < REPEATED_OPS_FRACTION * keep.size:
            return 0
    else:
        return 0
    dropped = 0
    for kind, key in _KINDS:
        if not len(getattr(raw, key[0])):
            continue
        keep = _keep(raw, key)
        if keep.all():
            continue
        dropped += int((~keep).sum())
        if kind == "op":  # the shapes name ops by index
            new = np.cumsum(keep) - 1
            raw.shaped = [(int(new[i]), d, s, t) for i, d, s, t in raw.shaped if keep[i]]
        for c in (*key, *_EXTRA.get(kind, ())):
            col = getattr(raw, c)
            setattr(raw, c, array(col.typecode, np.frombuffer(col, dtype=col.typecode)[keep]))
    if dropped:
        raw.damage.append(
            f"{dropped:,} events appear twice (same name, thread or stream, start and "
            "duration): counted once; were two traces merged, or one written twice?"
        )
    return dropped


def enclosing_steps(steps: list[tuple[int | None, float, float]]) -> set[int]:
    """The indices of the steps (number, start, end; sorted by start) that hold another step
    whole: a span around the steps, not one of them."""
    out: set[int] = set()
    for i in range(len(steps) - 1):
        _, s0, e0 = steps[i]
        _, s1, e1 = steps[i + 1]
        if s1 >= s0 and e1 <= e0:
            out.add(i)
    return out
