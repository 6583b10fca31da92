"""How the trimmed fixtures in this folder were made from real traces (see SOURCES.md).

A trimmed trace keeps one profiled step of a real trace: every event on the host that starts
inside that ``ProfilerStep#N``, the GPU activities launched by those runtime calls (same
``correlation``), the metadata events (``ph: M``) and the header. Nothing else is changed.

    python tests/data/diagnose/make_fixtures.py SRC.json.gz STEP OUT.json.gz
"""

from __future__ import annotations

import gzip
import json
import sys

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def trim(src: str, step: int, out: str) -> None:
    with gzip.open(src, "rt") as f:
        data = json.load(f)
    events = data["traceEvents"]
    name = f"ProfilerStep#{step}"
    (ps,) = [e for e in events if e.get("name") == name and e.get("ph") == "X"]
    lo, hi = ps["ts"], ps["ts"] + ps["dur"]
    host = [
        e
        for e in events
        if e.get("ph") == "X" and e.get("cat") not in GPU_CATS and lo <= e.get("ts", -1) <= hi
    ]
    corr = {
        e["args"]["correlation"]
        for e in host
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }
    gpu = [
        e
        for e in events
        if e.get("cat") in GPU_CATS and e.get("args", {}).get("correlation") in corr
    ]
    meta = [e for e in events if e.get("ph") == "M"]
    data["traceEvents"] = meta + host + gpu
    with gzip.GzipFile(out, "wb", compresslevel=9, mtime=0) as g:
        g.write(json.dumps(data).encode())


if __name__ == "__main__":
    trim(sys.argv[1], int(sys.argv[2]), sys.argv[3])
