"""MB/s per core of ``diagnose``'s trace reader as a whole process, on a large trace built from a
real one, plain and gzip, beside the floors: gunzip alone (inflate) and ``orjson.loads``.

1. **Input**: the real events of a corpus trace (default the largest GPU trace of
   ``../shared/traces``, ``hta_df_index_resolver``: 54 MB, 216 k events) written ``--copies``
   times into one trace, each copy's ``ts`` shifted past the one before, its correlation ids and
   ``ProfilerStep#N`` numbers shifted too, the text otherwise as the profiler wrote it
   (Kineto's own indentation). Written once to ``--workdir`` (not committed: 0.5-0.9 GB), and its
   gzip (level 6, gzip's default) beside it.
2. **Reader**: a child process per run, ``python -c 'read_trace(FILE)'`` with one ``src/`` first
   on its path: the whole process (interpreter, imports, read), wall time and peak RSS (VmHWM).
   ``--before SRC`` adds the same runs with another checkout's sources (the code before a change:
   ``git archive main src | tar -x -C /tmp/before``). Optional ``--diagnose``: the whole
   ``python -m gpuprobe diagnose FILE --json`` too.
3. **Floors**, each in a child process: ``inflate`` = ``zlib.decompressobj`` over the gzip file
   in 64 KiB reads (1 MiB ones fault in fresh pages: 2x the CPU), output dropped: gzip's own
   speed, what no gzip reader beats on one core; ``gunzip -c`` beside it; ``orjson`` = read the
   plain file and ``orjson.loads`` it whole (no streaming, every event a dict: it needs memory
   for all of them).

The machine is noisy: the runs alternate (every variant once, then again), best of ``--repeat``.
MB/s counts the plain text's megabytes (10^6 bytes) for every variant, gzip included.

    .venv/bin/python benchmarks/reader_throughput.py [--copies 12] [--repeat 3]
        [--before /tmp/before/src] [--workdir /tmp/gpuprobe-reader-bench] [--diagnose]

Needs ``orjson`` on the path (benchmark only). Writes benchmarks/results/reader_throughput.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import re
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

from _pythonpath import src_first  # benchmarks/, next to this script

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
DEFAULT_TRACE = Path("/work/shared/traces/hta_df_index_resolver__df_index_resolver.json.gz")

_TS = re.compile(rb'"ts": (\d+)')
_CORR = re.compile(rb'"(correlation|External id)": (\d+)')
_STEP = re.compile(rb"ProfilerStep#(\d+)")

_READ = r"""
import sys, time
from gpuprobe.tools.diagnose.kineto import read_trace
t = time.perf_counter()
tr = read_trace(sys.argv[1])
print(tr.events, time.perf_counter() - t)
"""
_INFLATE = r"""
import sys, zlib
d = zlib.decompressobj(31)
with open(sys.argv[1], "rb") as fh:
    while chunk := fh.read(1 << 16):
        d.decompress(chunk)
"""
_ORJSON = r"""
import sys, orjson
with open(sys.argv[1], "rb") as fh:
    print(len(orjson.loads(fh.read())["traceEvents"]))
"""


def build(trace: Path, copies: int, workdir: Path) -> tuple[Path, Path]:
    """The large plain trace and its gzip in ``workdir`` (made once per trace and copies)."""
    workdir.mkdir(parents=True, exist_ok=True)
    plain = workdir / f"{trace.name.split('.')[0]}_x{copies}.json"
    gz = plain.with_suffix(".json.gz")
    if plain.exists() and gz.exists():
        return plain, gz
    text = gzip.decompress(trace.read_bytes())
    start = text.index(b"[", text.index(b'"traceEvents"'))
    _, end = json.JSONDecoder().raw_decode(text.decode(), start)  # ASCII traces: chars = bytes
    body = text[start + 1 : end - 1].strip()
    ts = [int(m.group(1)) for m in _TS.finditer(body)]
    span = max(ts) - min(ts) + 1_000_000  # µs: each copy starts a second after the last ends
    corr = max((int(m.group(2)) for m in _CORR.finditer(body)), default=0) + 1
    steps = max((int(m.group(1)) for m in _STEP.finditer(body)), default=0) + 1
    tmp = plain.with_suffix(".tmp")
    with open(tmp, "wb") as out:
        out.write(text[: start + 1] + b"\n")
        for k in range(copies):
            part = _TS.sub(lambda m, k=k: b'"ts": %d' % (int(m.group(1)) + k * span), body)
            part = _CORR.sub(
                lambda m, k=k: b'"%s": %d' % (m.group(1), int(m.group(2)) + k * corr), part
            )
            part = _STEP.sub(
                lambda m, k=k: b"ProfilerStep#%d" % (int(m.group(1)) + k * steps), part
            )
            out.write(part + (b",\n" if k < copies - 1 else b"\n"))
        out.write(text[end - 1 :])
    tmp.rename(plain)
    with open(plain, "rb") as src, gzip.open(gz.with_suffix(".tmp"), "wb", compresslevel=6) as dst:
        while chunk := src.read(16 << 20):
            dst.write(chunk)
    gz.with_suffix(".tmp").rename(gz)
    return plain, gz


def build_synthetic(launches: int, workdir: Path) -> tuple[Path, Path]:
    """reader_speed.py's synthetic trace (a cpu_op, a launch and a kernel per launch, a step per
    1000: every event kept, the shape of issue 42's 914 MB trace), gzip and plain, made once."""
    from reader_speed import _write_synthetic  # benchmarks/, next to this script

    workdir.mkdir(parents=True, exist_ok=True)
    gz = workdir / f"synthetic_{launches}.json.gz"
    plain = gz.with_suffix("")
    if not (gz.exists() and plain.exists()):
        _write_synthetic(gz, launches)
        with gzip.open(gz, "rb") as src, open(plain, "wb") as dst:
            while chunk := src.read(16 << 20):
                dst.write(chunk)
    return plain, gz


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds (user + system), peak RSS (MiB: GNU time's %M, the VmHWM) and
    stdout of one child."""
    t = time.perf_counter()
    drop = argv[0] == "gunzip"  # its output is the whole text: dropped, not kept here
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%M %U %S", *argv],
        env=env,
        stdout=subprocess.DEVNULL if drop else subprocess.PIPE,
        stderr=subprocess.PIPE,
        check=False,
    )
    wall = time.perf_counter() - t
    if proc.returncode:
        raise RuntimeError(f"{argv[:3]} failed: {proc.stderr.decode()[-400:]}")
    rss_kb, user, system = map(float, proc.stderr.decode().strip().splitlines()[-1].split())
    return wall, user + system, rss_kb / 1024, "" if drop else proc.stdout.decode()


def measure(
    plain: Path, gz: Path, srcs: dict[str, Path], repeat: int, diagnose: bool
) -> dict[str, Any]:
    py = sys.executable
    variants: dict[str, tuple[list[str], dict[str, str]]] = {}
    base_env = src_first(ROOT / "src")
    variants["inflate (gzip floor)"] = ([py, "-c", _INFLATE, str(gz)], base_env)
    variants["gunzip -c (output dropped)"] = (["gunzip", "-c", str(gz)], base_env)
    variants["orjson.loads (parse floor)"] = ([py, "-c", _ORJSON, str(plain)], base_env)
    for label, src in srcs.items():
        env = src_first(src)
        variants[f"read_trace {label}, plain"] = ([py, "-c", _READ, str(plain)], env)
        variants[f"read_trace {label}, gzip"] = ([py, "-c", _READ, str(gz)], env)
        if diagnose:
            for kind, f in (("plain", plain), ("gzip", gz)):
                argv = [py, "-m", "gpuprobe", "diagnose", str(f), "--json"]
                variants[f"diagnose --json {label}, {kind}"] = (argv, env)
    rows: dict[str, dict[str, Any]] = {k: {"runs": [], "cpu": [], "rss": []} for k in variants}
    events = None
    for _ in range(repeat):
        for label, (argv, env) in variants.items():
            wall, cpu, rss, out = _run(argv, env)
            rows[label]["runs"].append(wall)
            rows[label]["cpu"].append(cpu)
            rows[label]["rss"].append(rss)
            if label.startswith("read_trace"):
                events = int(out.split()[0])
            print(f"  {label}: {wall:.2f} s, cpu {cpu:.2f} s, {rss:.0f} MiB", file=sys.stderr)
    mb = plain.stat().st_size / 1e6
    for r in rows.values():
        r["best_s"] = min(r["runs"])
        r["mb_per_s"] = mb / r["best_s"]
        r["best_cpu_s"] = min(r["cpu"])
        r["mb_per_cpu_s"] = mb / r["best_cpu_s"]
        r["peak_mib"] = max(r["rss"])
    return {"plain_mb": mb, "gzip_mb": gz.stat().st_size / 1e6, "events": events, "rows": rows}


def render(doc: dict[str, Any]) -> str:
    lines = [
        "# diagnose's trace reader, whole process: MB/s per core against the floors",
        "",
        f"{doc['when']}, {doc['machine']}; made by `benchmarks/reader_throughput.py` (its "
        "docstring says the method). One child process per run, alternating, best of "
        f"{doc['repeat']}; MB/s = MB of plain text ÷ seconds of the whole process: wall, and "
        "CPU (user + system, what one core spent: the figure per core, less sensitive to the "
        "other work on a shared machine).",
    ]
    for inp in doc["inputs"]:
        lines += ["", f"## {inp['title']}", "", *_table(inp)]
    return "\n".join(lines) + "\n"


def _table(doc: dict[str, Any]) -> list[str]:
    lines = [
        f"{doc['plain_mb']:.0f} MB of text, {doc['events']:,} events "
        f"({doc['gzip_mb']:.0f} MB gzip).",
        "",
        "| what | best wall s | MB/s (wall) | best CPU s | MB/s per core (CPU) | peak RSS MiB "
        "| wall s of each run |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, r in doc["rows"].items():
        runs = ", ".join(f"{x:.2f}" for x in r["runs"])
        lines.append(
            f"| {label} | {r['best_s']:.2f} | {r['mb_per_s']:.0f} | {r['best_cpu_s']:.2f} "
            f"| {r['mb_per_cpu_s']:.0f} | {r['peak_mib']:.0f} | {runs} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    ap.add_argument("--copies", type=int, default=12)
    ap.add_argument(
        "--synthetic", type=int, default=1_000_000, help="launches of the synthetic input (0: none)"
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--before", type=Path, help="another checkout's src/ (the code before)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/gpuprobe-reader-bench"))
    ap.add_argument("--diagnose", action="store_true", help="the whole diagnose --json too")
    ap.add_argument("--out", type=Path, default=RESULTS / "reader_throughput.md")
    args = ap.parse_args(argv)
    t = time.perf_counter()
    plain, gz = build(args.trace, args.copies, args.workdir)
    inputs = [
        (
            f"Real events: {args.trace.name} repeated {args.copies}× with shifted times",
            plain,
            gz,
        )
    ]
    if args.synthetic:
        s_plain, s_gz = build_synthetic(args.synthetic, args.workdir)
        title = (
            f"Synthetic: {args.synthetic:,} launches (reader_speed.py's: every event kept, "
            "the shape of issue 42's trace)"
        )
        inputs.append((title, s_plain, s_gz))
    print(f"inputs ready in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    srcs = {"after": ROOT / "src"}
    if args.before:
        srcs = {"before": args.before, **srcs}
    doc: dict[str, Any] = {
        "inputs": [],
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"vm {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"zlib {zlib.ZLIB_VERSION}",
        "repeat": args.repeat,
    }
    for title, p, g in inputs:
        print(title, file=sys.stderr)
        doc["inputs"].append({"title": title, **measure(p, g, srcs, args.repeat, args.diagnose)})
    text = render(doc)
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
