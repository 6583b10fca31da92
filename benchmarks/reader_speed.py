"""How fast ``diagnose``'s trace reader is, against the parse floor and against HTA, and how much
memory it keeps per million events.

1. **Floor**: for every trace of the real corpus (``../shared/traces``, MANIFEST.tsv), in this
   process, alternating which goes first, best of ``--repeat``: ``read_trace(path)`` (gunzip,
   decode, reduce each event to its columns) against gunzip + ``orjson.loads`` of the whole file
   (the fastest general JSON parser, which keeps every event as dicts: no streaming, no columns).
2. **HTA**: ``TraceAnalysis(trace_dir=...)`` (HolisticTraceAnalysis's parse of the same file, in
   its own venv, one long-lived process asked file by file between the two above, so the three
   figures of a trace are taken side by side; HTA imported before the clock starts), best of
   ``--hta-repeat``.
3. **Memory**: synthetic traces of ``--million`` million launches (a cpu_op, a
   cudaLaunchKernel and a kernel each, a ProfilerStep per 1000), each read in a child process:
   peak RSS (VmHWM) of ``read_trace`` and of the whole ``diagnose``; MiB per million events is
   the slope between the sizes.

    .venv/bin/python benchmarks/reader_speed.py [--traces DIR] [--hta-python PATH]
        [--repeat 3] [--hta-repeat 1] [--million 0.5 1]

Needs ``orjson`` in the venv (benchmark only). Writes benchmarks/results/reader_speed.{md,json}.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _pythonpath import src_first  # benchmarks/, next to this script

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
DEFAULT_TRACES = Path("/work/shared/traces")
DEFAULT_HTA = Path("/work/hta-venv/bin/python")
sys.path.insert(0, str(ROOT / "src"))

_HTA = r"""
import json, logging, os, sys, tempfile, time
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
print("ready", flush=True)
for line in sys.stdin:
    repeat, path = line.rstrip("\n").split(" ", 1)
    best, out = None, {}
    for _ in range(int(repeat)):
        with tempfile.TemporaryDirectory() as d:
            os.symlink(path, os.path.join(d, os.path.basename(path)))
            t = time.perf_counter()
            try:
                TraceAnalysis(trace_dir=d)
            except Exception as e:
                out = {"error": f"{type(e).__name__}: {str(e)[:120]}"}
                break
            dt = time.perf_counter() - t
            best = dt if best is None else min(best, dt)
    if best is not None:
        out = {"seconds": best}
    print(json.dumps(out), flush=True)
"""

_CHILD = r"""
import sys, time
t = time.perf_counter()
if sys.argv[1] == "read":
    from gpuprobe.tools.diagnose.kineto import read_trace
    n = read_trace(sys.argv[2]).events
else:
    from gpuprobe.tools.diagnose.engine import diagnose
    n = diagnose(sys.argv[2]).summary.events
for line in open("/proc/self/status"):
    if line.startswith("VmHWM:"):
        print(n, int(line.split()[1]) / 1024, time.perf_counter() - t)
"""

_LAUNCH = (
    '{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": %(t)d.000, '
    '"dur": 4, "args": {"External id": %(i)d, "Sequence number": %(i)d}},\n'
    '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, '
    '"ts": %(t1)d.000, "dur": 2, "args": {"correlation": %(i)d, "External id": %(i)d}},\n'
    '{"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4>", '
    '"pid": 0, "tid": 7, "ts": %(t2)d.000, "dur": 3, "args": {"device": 0, "stream": 7, '
    '"correlation": %(i)d, "registers per thread": 32, "grid": [1024, 1, 1]}}'
)


def _write_synthetic(path: Path, launches: int) -> int:
    """A trace of ``launches`` launches (3 events each) and a step per 1000; returns events."""
    t0 = 1_700_000_000_000_000
    events = 0
    with gzip.open(path, "wt", compresslevel=1) as fh:
        fh.write('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "H100"}],\n')
        fh.write('"traceEvents": [\n')
        for i in range(launches):
            t = t0 + 10 * i
            if i % 1000 == 0:
                fh.write(
                    '{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#'
                    f'{i // 1000}", "pid": 1, "tid": 1, "ts": {t}, "dur": 10000}},\n'
                )
                events += 1
            fh.write(_LAUNCH % {"t": t, "t1": t + 1, "t2": t + 5, "i": i})
            fh.write(",\n" if i < launches - 1 else "\n")
            events += 3
        fh.write('], "traceName": "synthetic"}\n')
    return events


def _floor(path: Path) -> Any:
    import orjson

    with open(path, "rb") as fh:
        data = fh.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return orjson.loads(data)


def _best(fn: Any, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
        del out
    return best


class _Hta:
    """HTA in its own venv as one long-lived process: a path in, its parse time out."""

    def __init__(self, python: Path, repeat: int) -> None:
        self.repeat = repeat
        self.proc: subprocess.Popen[str] | None = None
        if python.exists():
            self.proc = subprocess.Popen(
                [str(python), "-c", _HTA],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            assert self.proc.stdout is not None
            if self.proc.stdout.readline().strip() != "ready":
                self.proc = None

    def parse(self, path: Path) -> dict[str, Any]:
        if self.proc is None or self.proc.stdin is None or self.proc.stdout is None:
            return {}
        self.proc.stdin.write(f"{self.repeat} {path}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        return json.loads(line) if line else {"error": "HTA's process ended"}

    def close(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()
            self.proc.wait()


def measure(paths: list[Path], repeat: int, hta: _Hta) -> dict[str, dict[str, Any]]:
    """Per trace, side by side: the reader, the orjson floor and HTA, which goes first rotating."""
    from gpuprobe.core.errors import InputError
    from gpuprobe.tools.diagnose.kineto import read_trace

    rows: dict[str, dict[str, Any]] = {}
    for k, p in enumerate(paths):
        try:
            read_trace(p)  # warm the page cache and refuse what is not a trace
        except InputError as exc:
            rows[p.name] = {"refused": str(exc).split(": ", 1)[-1][:80]}
            continue
        order = ["reader", "orjson", "hta"]
        order = order[k % 3 :] + order[: k % 3]
        row: dict[str, Any] = {"mb": len(_raw_bytes(p)) / 1e6}
        for name in order:
            if name == "reader":
                row[name] = _best(lambda p=p: read_trace(p), repeat)
            elif name == "orjson":
                row[name] = _best(lambda p=p: _floor(p), repeat)
            else:
                row["hta"] = hta.parse(p)
        row["ratio"] = row["reader"] / row["orjson"]
        rows[p.name] = row
        h = row["hta"].get("seconds")
        vs = f"HTA x{h / row['reader']:.1f}" if h else row["hta"].get("error", "no HTA")[:30]
        print(f"{p.name[:50]:50} {row['mb']:6.1f} MB  x{row['ratio']:.2f} of orjson  {vs}")
    return rows


def _raw_bytes(p: Path) -> bytes:
    data = p.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def measure_memory(millions: list[float]) -> list[dict[str, Any]]:
    env = src_first(ROOT / "src")
    out = []
    with tempfile.TemporaryDirectory() as d:
        for m in millions:
            path = Path(d) / f"launches_{m}.json.gz"
            events = _write_synthetic(path, int(m * 1e6))
            row: dict[str, Any] = {"launches_million": m, "events": events}
            row["text_mb"] = sum(len(c) for c in _chunks(path)) / 1e6
            for mode in ("read", "diagnose"):
                p = subprocess.run(
                    [sys.executable, "-c", _CHILD, mode, str(path)],
                    capture_output=True,
                    text=True,
                    env=env,
                    check=False,
                )
                if p.returncode:
                    row[mode] = {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}
                    continue
                _n, peak, secs = p.stdout.split()
                row[mode] = {"peak_mib": float(peak), "seconds": float(secs)}
            out.append(row)
            print(f"{m} M launches ({events} events): {row}", flush=True)
    return out


def _chunks(path: Path) -> Any:
    with gzip.open(path, "rb") as fh:
        while chunk := fh.read(1 << 24):
            yield chunk


def _slope(rows: list[dict[str, Any]], mode: str) -> float | None:
    ok = [r for r in rows if "peak_mib" in r.get(mode, {})]
    if len(ok) < 2:
        return None
    a, b = ok[0], ok[-1]
    return (b[mode]["peak_mib"] - a[mode]["peak_mib"]) / ((b["events"] - a["events"]) / 1e6)


def render(doc: dict[str, Any]) -> str:
    rows, hta = doc["floor"], doc["hta"]
    lines = [
        "# diagnose's trace reader: against the parse floor (orjson) and HTA",
        "",
        f"{doc['when']}, {doc['machine']}, Python {doc['python']}; made by "
        "`benchmarks/reader_speed.py` (read its docstring for the method). Reader = "
        "`read_trace` (gunzip, decode, columns); floor = gunzip + `orjson.loads` of the whole "
        "file; HTA = `TraceAnalysis(trace_dir)` on the same file. Best of "
        f"{doc['repeat']} (HTA: {doc['hta_repeat']}), seconds.",
        "",
        "| trace | MB (text) | reader s | orjson s | reader ÷ orjson | HTA s | HTA ÷ reader |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        h = hta.get(name, {})
        if "refused" in r:
            lines.append(f"| {name} | | refused: {r['refused']} | | | | |")
            continue
        hs = f"{h['seconds']:.3f}" if "seconds" in h else (h.get("error", "–")[:40] or "–")
        hr = f"{h['seconds'] / r['reader']:.1f}×" if "seconds" in h else "–"
        lines.append(
            f"| {name} | {r['mb']:.1f} | {r['reader']:.3f} | {r['orjson']:.3f} | "
            f"{r['ratio']:.2f} | {hs} | {hr} |"
        )
    s = doc["summary"]
    lines += [
        "",
        f"All {s['n']} traces read: reader {s['reader_s']:.2f} s, orjson {s['orjson_s']:.2f} s: "
        f"**{s['total_ratio']:.2f}×** the floor in all (median per trace {s['median_ratio']:.2f}×; "
        f"the {s['big_n']} traces over 10 MB: {s['big_ratio']:.2f}×).",
    ]
    if s.get("hta_ratio"):
        lines.append(
            f"HTA on the {s['hta_n']} traces it parsed: {s['hta_s']:.2f} s against the reader's "
            f"{s['hta_reader_s']:.2f} s: **{s['hta_ratio']:.1f}×** (median per trace "
            f"{s['hta_median']:.1f}×; over 10 MB: {s['hta_big_ratio']:.1f}×)."
        )
    lines += [
        "",
        "## Memory per million events (synthetic launches, one child process each)",
        "",
        "| launches | events | text MB | read_trace peak MiB | s | diagnose peak MiB | s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in doc["memory"]:
        cells = []
        for mode in ("read", "diagnose"):
            m = r.get(mode, {})
            cells += (
                [f"{m['peak_mib']:.0f}", f"{m['seconds']:.1f}"]
                if "peak_mib" in m
                else [m.get("error", "–"), ""]
            )
        lines.append(
            f"| {r['launches_million']} M | {r['events']} | {r['text_mb']:.0f} | "
            + " | ".join(cells)
            + " |"
        )
    for mode, what in (("read", "read_trace"), ("diagnose", "the whole diagnose")):
        slope = doc.get(f"{mode}_mib_per_million")
        if slope is not None:
            lines.append(f"\n{what}: {slope:.0f} MiB per million events (slope between the sizes).")
    return "\n".join(lines) + "\n"


def summarise(doc: dict[str, Any]) -> dict[str, Any]:
    rows = {k: r for k, r in doc["floor"].items() if "reader" in r}
    big = {k: r for k, r in rows.items() if r["mb"] > 10}
    s: dict[str, Any] = {
        "n": len(rows),
        "reader_s": sum(r["reader"] for r in rows.values()),
        "orjson_s": sum(r["orjson"] for r in rows.values()),
        "median_ratio": statistics.median(r["ratio"] for r in rows.values()),
        "big_n": len(big),
        "big_ratio": sum(r["reader"] for r in big.values())
        / max(1e-9, sum(r["orjson"] for r in big.values())),
    }
    s["total_ratio"] = s["reader_s"] / s["orjson_s"]
    both = {k: r for k, r in rows.items() if "seconds" in doc["hta"].get(k, {})}
    if both:
        hs = {k: doc["hta"][k]["seconds"] for k in both}
        s["hta_n"] = len(both)
        s["hta_s"] = sum(hs.values())
        s["hta_reader_s"] = sum(r["reader"] for r in both.values())
        s["hta_ratio"] = s["hta_s"] / s["hta_reader_s"]
        s["hta_median"] = statistics.median(hs[k] / r["reader"] for k, r in both.items())
        bigb = [k for k in both if both[k]["mb"] > 10]
        s["hta_big_ratio"] = sum(hs[k] for k in bigb) / max(
            1e-9, sum(both[k]["reader"] for k in bigb)
        )
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    ap.add_argument("--hta-python", type=Path, default=DEFAULT_HTA)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--hta-repeat", type=int, default=1)
    ap.add_argument("--million", type=float, nargs="*", default=[0.5, 1.0])
    ap.add_argument("--render", action="store_true", help="only re-render the saved JSON")
    args = ap.parse_args(argv)
    RESULTS.mkdir(exist_ok=True)
    out_json = RESULTS / "reader_speed.json"
    if args.render:
        doc = json.loads(out_json.read_text())
    else:
        paths = sorted(p for p in args.traces.iterdir() if p.is_file() and p.suffix != ".tsv")
        doc = {
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{platform.node()} {os.cpu_count()} CPUs",
            "python": platform.python_version(),
            "repeat": args.repeat,
            "hta_repeat": args.hta_repeat,
        }
        hta = _Hta(args.hta_python, args.hta_repeat)
        try:
            doc["floor"] = measure(paths, args.repeat, hta)
        finally:
            hta.close()
        doc["hta"] = {k: r.pop("hta") for k, r in doc["floor"].items() if "hta" in r}
        doc["memory"] = measure_memory(args.million)
        for mode in ("read", "diagnose"):
            doc[f"{mode}_mib_per_million"] = _slope(doc["memory"], mode)
        doc["summary"] = summarise(doc)
        out_json.write_text(json.dumps(doc, indent=1) + "\n")
    text = render(doc)
    (RESULTS / "reader_speed.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
