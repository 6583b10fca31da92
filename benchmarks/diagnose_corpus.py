"""The regression corpus of ``gpuprobe diagnose``: every real trace in ``../shared/traces/``
(MANIFEST.tsv says where each comes from), one child process each, its GPU busy %, its findings
with their status, and its time and peak memory. A rule change is judged by its diff on the
table this writes.

The verdict column comes from ``benchmarks/diagnose_corpus_verdicts.tsv``, written by hand after
reading each trace's findings against the trace itself: ``right`` (every WARN is a real problem
worth the user's time and its cause and fix are the right ones), ``wrong`` (some WARN is not), or
``n/a`` (not a trace the tool should judge, e.g. an execution trace), with the reason. A WARN on a
trace marked ``wrong`` is a bug to fix, not a verdict to edit.

Run:  .venv/bin/python benchmarks/diagnose_corpus.py [--traces DIR]
Writes benchmarks/results/diagnose_corpus.md and .json.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from _pythonpath import src_first  # benchmarks/, next to this script

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
VERDICTS = HERE / "diagnose_corpus_verdicts.tsv"
DEFAULT_TRACES = ROOT.parent / "shared" / "traces"

_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import gpuprobe.tools.diagnose.engine as D
from gpuprobe.core.errors import GpuprobeError
try:
    d = D.diagnose(sys.argv[1])
except GpuprobeError as e:
    print(json.dumps({"error": str(e).splitlines()[0], "seconds": time.perf_counter() - t0}))
    raise SystemExit(0)
s = d.summary
print(json.dumps({
    "busy": s.gpu_busy_fraction,
    "steps": len(s.steps),
    "events": s.events,
    "devices": [g.name for g in s.devices],
    "findings": [[f.id + (f"[{f.subject}]" if f.subject else ""), f.status.value, f.title]
                 for f in d.findings],
    "seconds": time.perf_counter() - t0,
}))
"""


def _run(path: Path) -> dict:
    env = src_first(ROOT / "src")
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=600,
    )
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["?"])[-1]
        out = {"crash": last}
    else:
        out = json.loads(p.stdout.strip().splitlines()[-1])
    out["wall_s"] = wall
    return out


def _peak_each(paths: list[Path]) -> dict[str, float]:
    """Peak RSS of each child, from the kernel's accounting of that child alone (wait4)."""
    env = src_first(ROOT / "src")
    peaks = {}
    for path in paths:
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        _, _, ru = os.wait4(proc.pid, 0)
        proc.returncode = 0
        peaks[path.name] = ru.ru_maxrss / 1024
    return peaks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    ap.add_argument(
        "--render-only",
        action="store_true",
        help="re-render the table from results/diagnose_corpus.json (after editing verdicts)",
    )
    args = ap.parse_args(argv)
    manifest = {}
    mf = args.traces / "MANIFEST.tsv"
    if mf.exists():
        with mf.open() as f:
            for row in csv.DictReader(f, delimiter="\t"):
                manifest[row["file"]] = row["what it is"]
    verdicts = {}
    if VERDICTS.exists():
        with VERDICTS.open() as f:
            for row in csv.DictReader(f, delimiter="\t"):
                verdicts[row["trace"]] = (row["verdict"], row["reason"])
    paths = sorted(p for p in args.traces.iterdir() if p.name != "MANIFEST.tsv" and p.is_file())
    rows = []
    if args.render_only:
        rows = json.loads((RESULTS / "diagnose_corpus.json").read_text())
        paths = []
    for p in paths:
        r = _run(p)
        r["trace"] = p.name
        r["kind"] = manifest.get(p.name, "")
        print(f"{p.name[:60]:60} {r.get('busy')!s:>8.8} {r['wall_s']:.2f} s", flush=True)
        rows.append(r)
    if paths:
        peaks = _peak_each(paths)
        for r in rows:
            r["peak_mib"] = peaks.get(r["trace"])
    wrong_warns = []
    lines = [
        "# diagnose on the real trace corpus",
        "",
        f"{dt.date.today()}, {platform.node() or 'this machine'}, Python "
        f"{platform.python_version()}; one child process per trace (time from interpreter "
        "start to the diagnosis; peak RSS of that child). Made by "
        "`benchmarks/diagnose_corpus.py`; verdicts by hand from "
        "`benchmarks/diagnose_corpus_verdicts.tsv`.",
        "",
        "| trace | what it is | GPU busy | warn / fail | info | verdict | why | s | MiB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        busy = "n/a" if r.get("busy") is None else f"{100 * r['busy']:.1f} %"
        if "crash" in r:
            warn, info = f"CRASH: {r['crash']}", ""
        elif "error" in r:
            warn, info = f"refused: {r['error'][:90]}", ""
        else:
            warn = ", ".join(i for i, st, _ in r["findings"] if st in ("warn", "fail")) or "-"
            info = ", ".join(i for i, st, _ in r["findings"] if st == "info") or "-"
        verdict, why = verdicts.get(r["trace"], ("unreviewed", ""))
        if verdict == "wrong" and warn not in ("-", ""):
            wrong_warns.append(r["trace"])
        lines.append(
            f"| {r['trace']} | {r['kind']} | {busy} | {warn} | {info} | {verdict} | {why} | "
            f"{r['wall_s']:.2f} | {r['peak_mib'] or 0:.0f} |"
        )
    total = sum(r["wall_s"] for r in rows)
    peak = max((r["peak_mib"] or 0) for r in rows)
    crashes = sum(1 for r in rows if "crash" in r)
    counts: dict[str, int] = {}
    for r in rows:
        v = verdicts.get(r["trace"], ("unreviewed", ""))[0]
        counts[v] = counts.get(v, 0) + 1
    lines += [
        "",
        f"{len(rows)} traces, {total:.1f} s in all, largest peak {peak:.0f} MiB, "
        f"{crashes} crashes. Verdicts: "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        + f". Traces marked wrong that still WARN: {len(wrong_warns)}"
        + (f" ({', '.join(wrong_warns)})" if wrong_warns else "")
        + ".",
        "",
        "## Titles of every warning",
        "",
    ]
    for r in rows:
        for i, st, title in r.get("findings", []):
            if st in ("warn", "fail"):
                lines.append(f"- {r['trace']}: **{i}** {title}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "diagnose_corpus.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "diagnose_corpus.json").write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {RESULTS / 'diagnose_corpus.md'}")
    return 1 if crashes else 0


if __name__ == "__main__":
    raise SystemExit(main())
