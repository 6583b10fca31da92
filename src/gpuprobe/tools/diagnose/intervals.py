"""Interval arithmetic over NumPy columns: the union of intervals (HTA's kernel-interval merge),
the length of a union inside a window (or many), intersection and difference of two unions, and the median
per group. Intervals are half-open [start, end); times in µs.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "group_medians",
    "intersect_intervals",
    "merge_intervals",
    "overlap",
    "overlaps",
    "subtract_intervals",
]


def merge_intervals(ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals [ts, end): sorted, disjoint (starts, ends). HTA merge_kernel_intervals."""
    if ts.size == 0:
        return ts, end
    order = np.argsort(ts, kind="stable")
    s, e = ts[order], end[order]
    run_end = np.maximum.accumulate(e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    last = np.empty(s.size, dtype=bool)
    last[:-1] = new[1:]
    last[-1] = True
    return s[new], run_end[last]


def overlap(starts: np.ndarray, ends: np.ndarray, lo: float, hi: float) -> float:
    """Total length of sorted disjoint intervals inside [lo, hi]."""
    i0 = int(np.searchsorted(ends, lo, side="right"))
    i1 = int(np.searchsorted(starts, hi, side="left"))
    if i1 <= i0:
        return 0.0
    s = np.clip(starts[i0:i1], lo, hi)
    e = np.clip(ends[i0:i1], lo, hi)
    return float(np.sum(e - s))


def overlaps(starts: np.ndarray, ends: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For each window [lo_i, hi_i], the total length of the sorted disjoint intervals
    (``starts``, ``ends``) inside it: :func:`overlap` for many windows at once."""
    if starts.size == 0:
        return np.zeros(np.shape(lo))
    before = np.concatenate([[0.0], np.cumsum(ends - starts)])  # length before interval k

    def covered(t: np.ndarray) -> np.ndarray:  # the intervals' length inside (-inf, t]
        k = np.searchsorted(starts, t, side="right")
        return before[k] - np.clip(ends[np.maximum(k - 1, 0)] - t, 0.0, None) * (k > 0)

    return covered(np.asarray(hi, dtype=np.float64)) - covered(np.asarray(lo, dtype=np.float64))


def _sweep(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], keep_b: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Segments covered by ``a`` and (``keep_b``) or not (``not keep_b``) by ``b``; both are
    sorted disjoint interval sets. One sort over the boundaries."""
    (a_s, a_e), (b_s, b_e) = a, b
    if a_s.size == 0:
        return a_s, a_e
    if b_s.size == 0:
        return (a_s[:0], a_e[:0]) if keep_b else (a_s, a_e)
    pos = np.concatenate([a_s, a_e, b_s, b_e])
    da = np.concatenate([np.ones(a_s.size), -np.ones(a_e.size), np.zeros(b_s.size + b_e.size)])
    db = np.concatenate([np.zeros(a_s.size + a_e.size), np.ones(b_s.size), -np.ones(b_e.size)])
    # at one position, ends before starts: touching intervals do not overlap
    order = np.lexsort((da + db, pos))
    pos, ca, cb = pos[order], np.cumsum(da[order]), np.cumsum(db[order])
    inside = (ca[:-1] > 0) & ((cb[:-1] > 0) if keep_b else (cb[:-1] <= 0))
    lo, hi = pos[:-1][inside], pos[1:][inside]
    keep = hi > lo
    return merge_intervals(lo[keep], hi[keep])


def intersect_intervals(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """a ∩ b for sorted disjoint interval sets (starts, ends)."""
    return _sweep(a, b, True)


def subtract_intervals(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """a ∖ b for sorted disjoint interval sets (starts, ends)."""
    return _sweep(a, b, False)


def group_medians(group: np.ndarray, values: np.ndarray, n: int) -> list[float | None]:
    """Median of ``values`` per group id in [0, n) (None for an empty group)."""
    out: list[float | None] = [None] * n
    if group.size == 0:
        return out
    order = np.argsort(group, kind="stable")
    g, v = group[order], values[order]
    cuts = np.flatnonzero(np.diff(g)) + 1
    for ids, vals in zip(np.split(g, cuts), np.split(v, cuts), strict=True):
        out[int(ids[0])] = float(np.median(vals))
    return out
