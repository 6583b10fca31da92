"""gpuprobe diagnose against an expert's reading, on real traces nobody here recorded.

``benchmarks/diagnose_expert.tsv`` lists each trace (repository, path, commit, licence, the
device) with what a person reading its timeline by hand sees as the main cause of lost GPU time,
with the evidence, and that cause as a category. This runs ``gpuprobe.diagnose`` on each (one
child process per trace), takes the category of what gpuprobe puts first, and writes whether
they agree:

* ``cold``: a one-time start-up (gpuprobe: a cold first pass, or a one-time-start warning with
  nothing larger);
* ``host``: CPU work while the GPU idles (host-work first); ``launch``: launch-bound first;
  ``sync``/``outside``: the host waits in a sync (``outside`` when the wait is for work the trace
  does not show); ``untraced``: untraced host time first; ``input``: the DataLoader;
* ``none``: nothing big to fix (no warning with a gain); ``cpu``: a CPU-only trace (no claim
  about a GPU: no GPU rule warns).

The traces are not in this repository (most have no licence to copy them); fetch them at the
listed commits into one folder and pass it with ``--traces``.

Run:  .venv/bin/python benchmarks/diagnose_expert.py --traces DIR
Writes benchmarks/results/diagnose_expert.md and .json, and the table in docs/diagnose-verdicts.md.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

from _pythonpath import src_first  # benchmarks/, next to this script

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TABLE = HERE / "diagnose_expert.tsv"
RESULTS = HERE / "results"
DOC = ROOT / "docs" / "diagnose-verdicts.md"

_CHILD = r"""
import json, os, sys
from gpuprobe.core.errors import GpuprobeError
from gpuprobe.tools.diagnose.engine import diagnose
if os.path.isdir(sys.argv[1]):
    from gpuprobe.api import diagnose_folder
    try:
        f = diagnose_folder(sys.argv[1])
    except GpuprobeError as e:
        print(json.dumps({"folder": "refused", "message": str(e).splitlines()[0]}))
        raise SystemExit(0)
    if hasattr(f, "cycles"):
        warm = [c.cycle for c in f.cycles if c.phase == "warm-up"]
        print(json.dumps({"folder": "cycles", "warm": warm, "diagnosed": f.diagnosed,
                          "note": f.note}))
    else:
        cold = any(x.id == "cold-ranks" and x.status.value == "warn" for x in f.findings)
        print(json.dumps({"folder": "ranks", "cold": cold,
                          "findings": [[x.id, x.status.value, x.title] for x in f.findings]}))
    raise SystemExit(0)
d = diagnose(sys.argv[1])
h = d.headline
print(json.dumps({
    "cold": d.cold,
    "busy": d.summary.gpu_busy_fraction,
    "headline": None if h is None else [h.id, h.title, h.gain],
    "findings": [[f.id, f.status.value, f.title, f.gain] for f in d.findings],
}))
"""

_GPU_RULES = ("gpu-idle", "launch-bound", "sync", "pageable-copies", "no-tensor-cores")
_CATEGORY = {
    "one-time-start": "cold",
    "host-work": "host",
    "launch-bound": "launch",
    "untraced-host": "untraced",
    "input-bound": "input",
    "sync": "sync",
    "pageable-copies": "copies",
    "contiguous-copies": "copies",
    "no-tensor-cores": "precision",
    "python-loop": "loop",
}


def category(out: dict) -> str:
    """What gpuprobe puts first, as one of the expert's categories (for a folder: ``cycles
    warm-up=1,2``, ``ranks cold``, ``ranks`` or ``refused``)."""
    if "folder" in out:
        if out["folder"] == "cycles":
            return "cycles warm-up=" + ",".join(str(c) for c in out["warm"])
        if out["folder"] == "ranks":
            return "ranks cold" if out["cold"] else "ranks"
        return "refused"
    warns = {f[0]: f for f in out["findings"] if f[1] in ("warn", "fail")}
    if out["cold"]:
        return "cold"
    if out["headline"] is not None:
        fid, title, _ = out["headline"]
        if fid == "sync" and "the trace does not show" in title:
            return "outside"
        return _CATEGORY.get(fid, fid)
    if "one-time-start" in warns:
        return "cold"
    if out["busy"] is None and not any(k in warns for k in _GPU_RULES):
        return "cpu"
    return "none"


def run(path: Path) -> dict:
    env = src_first(ROOT / "src")
    p = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=600,
    )
    if p.returncode != 0:
        return {"crash": (p.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def _said(out: dict) -> str:
    if "crash" in out:
        return f"CRASH: {out['crash']}"
    if out.get("folder") == "cycles":
        return (
            f"cycles of one process; warm-up: {out['warm'] or 'none'}; cycle "
            f"{out['diagnosed']} diagnosed" + (f" ({out['note']})" if out["note"] else "")
        )
    if out.get("folder") == "ranks":
        warns = [f"{f[0]}: {f[2]}" for f in out["findings"] if f[1] == "warn"]
        return "ranks; " + ("; ".join(warns) or "no warning")
    if out.get("folder") == "refused":
        return f"refused: {out['message']}"
    h = out["headline"]
    warns = [f[0] for f in out["findings"] if f[1] in ("warn", "fail")]
    head = "no problem with a gain" if h is None else f"**{h[0]}**: {h[1]}"
    if out["cold"]:
        head = f"cold first pass; **{h[0]}**: {h[1]}" if h else "cold first pass"
    return head + (f" (warnings: {', '.join(warns)})" if warns else " (no warning)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=Path, required=True, help="folder holding the traces")
    args = ap.parse_args(argv)
    rows = list(csv.DictReader(TABLE.open(), delimiter="\t"))
    results = []
    for r in rows:
        path = args.traces / r["trace"]
        out = run(path) if path.exists() else {"crash": "missing"}
        got = "crash" if "crash" in out else category(out)
        agree = got in r["expected"].split("|")
        results.append({**r, "gpuprobe": out, "category": got, "agree": agree})
        print(
            f"{r['trace'][:48]:48} expert {r['expected']:<12} gpuprobe {got:<9} "
            f"{'agree' if agree else 'DIFFER'}",
            flush=True,
        )
    n = len(results)
    ok = sum(x["agree"] for x in results)
    crashes = sum("crash" in x["gpuprobe"] for x in results)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "diagnose_expert.json").write_text(json.dumps(results, indent=1) + "\n")
    head = [
        "# diagnose against an expert's reading of real traces nobody here recorded",
        "",
        f"{dt.date.today()}: {ok} of {n} traces agree (gpuprobe's first finding names the cause "
        f"a person reading the timeline by hand names), {crashes} crashes. Made by "
        "`benchmarks/diagnose_expert.py` from `benchmarks/diagnose_expert.tsv` (the expert's "
        "reading, written before looking at gpuprobe's, and each trace's origin).",
        "",
        "| trace | device | what an expert sees (evidence) | expected | what gpuprobe says first |"
        " gpuprobe | agree |",
        "|---|---|---|---|---|---|---|",
    ]
    lines = head + [
        f"| `{x['trace']}` ({x['repository']} `{x['path']}` @ {x['commit'][:8]}, "
        f"{x['licence']}) | {x['device']} | {x['expert reading']} | {x['expected']} | "
        f"{_said(x['gpuprobe']).replace('|', '/')} | {x['category']} | "
        f"{'yes' if x['agree'] else '**no**'} |"
        for x in results
    ]
    text = "\n".join(lines) + "\n"
    (RESULTS / "diagnose_expert.md").write_text(text)
    DOC.write_text(text)
    print(f"{ok} of {n} agree; wrote {RESULTS / 'diagnose_expert.md'} and {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
