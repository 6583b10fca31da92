"""How the trimmed fixtures in this folder were made from real traces (see SOURCES.md).

A trimmed trace keeps one profiled step (or the steps ``N..M``) of a real trace: every event on
the host that starts inside those ``ProfilerStep#N``, the GPU activities launched by those
runtime calls (same ``correlation``), the metadata events (``ph: M``) and the header. Nothing
else is changed. PyTorch <= 1.9's category names (``Runtime``, ``Kernel``, ``Memcpy``,
``Memset``) are understood too.

With ``--prune-python``, the ``python_function`` events (with_stack frames) that hold no
``cpu_op`` of their thread are left out too: every frame around an op stays (the op's stack is
unchanged), the leaf frames of pure-Python work go, which is most of a with_stack trace's size.

    python tests/data/diagnose/make_fixtures.py SRC.json.gz STEP OUT.json.gz [--prune-python]

STEP is ``N`` or ``N..M`` (inclusive).

STEP ``all`` keeps every event of a trace without ProfilerStep (only ``--prune-python`` cuts).
"""

from __future__ import annotations

import bisect
import gzip
import json
import sys

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}


def _with_ops(frames: list[dict], ops: list[dict]) -> list[dict]:
    """The frames that hold at least one of ``ops`` on their thread."""
    starts: dict[object, list[float]] = {}
    for o in ops:
        starts.setdefault(o["tid"], []).append(o["ts"])
    for v in starts.values():
        v.sort()
    keep = []
    for f in frames:
        s = starts.get(f["tid"], [])
        i = bisect.bisect_left(s, f["ts"])
        if i < len(s) and s[i] <= f["ts"] + f.get("dur", 0):
            keep.append(f)
    return keep


def trim(
    src: str, step: int | tuple[int, int] | None, out: str, prune_python: bool = False
) -> None:
    with gzip.open(src, "rt") as f:
        data = json.load(f)
    events = data["traceEvents"]
    if step is None:  # no ProfilerStep: keep the whole window (with --prune-python)
        host = [e for e in events if e.get("ph") == "X" and e.get("cat") not in GPU_CATS]
        gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATS]
        return _write(data, events, host, gpu, out, prune_python)
    first, last = step if isinstance(step, tuple) else (step, step)
    windows = []
    for n in range(first, last + 1):
        name = f"ProfilerStep#{n}"
        (ps,) = [
            e
            for e in events
            if e.get("name") == name
            and e.get("ph") == "X"
            and e.get("cat") != "gpu_user_annotation"
        ]
        windows.append((ps["ts"], ps["ts"] + ps["dur"]))
    host = [
        e
        for e in events
        if e.get("ph") == "X"
        and e.get("cat") not in GPU_CATS
        and any(lo <= e.get("ts", -1) <= hi for lo, hi in windows)
    ]
    corr = {
        e["args"]["correlation"]
        for e in host
        if e.get("cat") in RUNTIME_CATS and "correlation" in e.get("args", {})
    }
    gpu = [
        e
        for e in events
        if e.get("cat") in GPU_CATS and e.get("args", {}).get("correlation") in corr
    ]
    _write(data, events, host, gpu, out, prune_python)


def _write(
    data: dict, events: list[dict], host: list[dict], gpu: list[dict], out: str, prune: bool
) -> None:
    if prune:
        frames = [e for e in host if e.get("cat") == "python_function"]
        kept = {id(e) for e in _with_ops(frames, [e for e in host if e.get("cat") == "cpu_op"])}
        host = [e for e in host if e.get("cat") != "python_function" or id(e) in kept]
    meta = [e for e in events if e.get("ph") == "M"]
    data["traceEvents"] = meta + host + gpu
    with gzip.GzipFile(out, "wb", compresslevel=9, mtime=0) as g:
        g.write(json.dumps(data).encode())


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--prune-python"]
    if args[1] == "all":
        step: int | tuple[int, int] | None = None
    elif ".." in args[1]:
        a, _, b = args[1].partition("..")
        step = (int(a), int(b))
    else:
        step = int(args[1])
    trim(args[0], step, args[2], prune_python="--prune-python" in sys.argv)
