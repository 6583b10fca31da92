"""Real traces in tests/data/diagnose/ (origins in SOURCES.md), and the independent computations the
tests check gpuprobe against: plain json, Python lists and a hand-written interval union."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "data" / "diagnose"
DLRM8 = DATA / "dlrm8"
DLRM_FILES = sorted(DLRM8.glob("worker*.json.gz"))
SAMPLED = DATA / "hta_sampled"
SAMPLED_FILES = sorted(SAMPLED.glob("*.json.gz"))
CPU_ONLY = DATA / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
MI250 = DATA / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
DIFF_CONTROL = DATA / "hta_trace_diff_control_step1012.json.gz"
DIFF_TEST = DATA / "hta_trace_diff_test_step1012.json.gz"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def load(path: Path | str) -> dict[str, Any]:
    """The whole trace as a dict (the test files are small)."""
    with gzip.open(path, "rt") as f:
        return json.load(f)


def gpu_events(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Kernels, memcpys and memsets."""
    return [e for e in data["traceEvents"] if e.get("cat") in GPU_CATS and e.get("ph") == "X"]


def union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Merge [start, end) intervals, the plain way."""
    out: list[list[float]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def length(intervals: list[tuple[float, float]]) -> float:
    return sum(e - s for s, e in intervals)


def intersection(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Length of the intersection of two merged interval lists (two-pointer sweep)."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total
