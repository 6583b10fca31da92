"""Write a real Kineto trace again as the legacy autograd profiler (PyTorch 1.5-1.7,
``torch.autograd.profiler.profile(use_cuda=True).export_chrome_trace()``) would have written it.

This is a CONSTRUCTED fixture, made because no public legacy export of a GPU run was found (see
SOURCES.md). The events and their times come from the real trace; the file's format and the GPU
spans follow that exporter's source code (torch/autograd/profiler.py of PyTorch 1.7:
``EventList.export_chrome_trace`` and ``parse_event_records``):

- the file is a bare JSON list; every CPU op and ``record_function`` span is
  ``{"name", "ph": "X", "ts", "dur", "tid", "pid": "CPU functions", "args": {}}``, ``ts`` in µs
  since profiling began, ``tid`` the profiler's small thread index;
- with use_cuda=True the profiler records a CUDA event on the current stream when each op starts
  and when it ends; an op's "kernel" is the GPU time between the two, kept when positive, named
  like the op, on ``"pid": "CUDA functions"`` with ``"tid"`` the device, linked to the op by a
  flow pair (``"ph": "s"`` on the op, ``"ph": "f"`` on the span, ``"cat": "cpu_to_cuda"``).
  A CUDA event completes when the GPU has finished the work queued on its stream before it, so
  here an event recorded at host time t completes at max(t, the latest end of the device's GPU
  activities launched before t): nested ops each get a span, and an op that queues nothing on an
  idle GPU spans its own host time, as the legacy profiler's "CUDA time" did;
- ``ProfilerStep#N`` spans are left out: PyTorch 1.7 has no torch.profiler schedule.

    python tests/data/diagnose/make_legacy_fixture.py SRC.pt.trace.json.gz OUT.json.gz
"""

from __future__ import annotations

import bisect
import gzip
import json
import sys

CPU_CATS = {"cpu_op", "Operator", "user_annotation"}
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}


def convert(events: list[dict]) -> list[dict]:
    """The legacy export of a Kineto trace's events (see the module docstring)."""
    launch = {
        e["args"]["correlation"]: e["ts"]
        for e in events
        if e.get("cat") in RUNTIME_CATS and e.get("ph") == "X"
    }
    # per device: GPU activities by launch time, with the running latest end
    by_dev: dict[int, list[tuple[float, float]]] = {}
    for e in events:
        if e.get("cat") in GPU_CATS and e.get("ph") == "X":
            t = launch.get(e["args"].get("correlation"))
            if t is not None:
                by_dev.setdefault(int(e["args"]["device"]), []).append((t, e["ts"] + e["dur"]))
    done: dict[int, tuple[list[float], list[float]]] = {}
    for dev, acts in by_dev.items():
        acts.sort()
        ends, top = [], -1.0
        for _, end in acts:
            top = max(top, end)
            ends.append(top)
        done[dev] = ([a[0] for a in acts], ends)
    device = min(done)  # the device the ops' CUDA events go to (one-GPU traces)
    starts, ends = done[device]

    def complete(t: float) -> float:
        i = bisect.bisect_right(starts, t)
        return max(t, ends[i - 1]) if i else t

    ops = [
        e
        for e in events
        if e.get("cat") in CPU_CATS
        and e.get("ph") == "X"
        and not str(e.get("name", "")).startswith("ProfilerStep#")
    ]
    ops.sort(key=lambda e: (e["ts"], -e["dur"]))
    base = ops[0]["ts"]
    tids: dict[object, int] = {}
    out: list[dict] = []
    next_id = 0
    for e in ops:
        tid = tids.setdefault(e["tid"], len(tids))
        ts = round(e["ts"] - base, 3)
        out.append(
            {
                "name": e["name"],
                "ph": "X",
                "ts": ts,
                "dur": round(e["dur"], 3),
                "tid": tid,
                "pid": "CPU functions",
                "args": {},
            }
        )
        gs, ge = complete(e["ts"]), complete(e["ts"] + e["dur"])
        if ge <= gs:
            continue
        k = round(gs - base, 3)
        flow = {"ts": ts, "tid": tid, "pid": "CPU functions", "id": next_id}
        out.append({"name": e["name"], "ph": "s", **flow, "cat": "cpu_to_cuda", "args": {}})
        span = {"tid": device, "pid": "CUDA functions"}
        out.append(
            {"name": e["name"], "ph": "f", "ts": k, **span, "id": next_id, "cat": "cpu_to_cuda"}
            | {"args": {}}
        )
        dur = round(ge - gs, 3)
        out.append({"name": e["name"], "ph": "X", "ts": k, "dur": dur, **span, "args": {}})
        next_id += 1
    return out


def main(argv: list[str]) -> None:
    src, dst = argv
    with gzip.open(src, "rt") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    with gzip.GzipFile(dst, "wb", mtime=0) as g:
        g.write(json.dumps(convert(events)).encode())


if __name__ == "__main__":
    main(sys.argv[1:])
