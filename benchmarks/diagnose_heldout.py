"""gpuprobe diagnose against blind expert readings of traces held out from tuning.

``benchmarks/heldout/readings.tsv`` holds, for each of 30 real public traces (sources, commits
and licences in ``heldout/SOURCES.tsv``), what a person reading its timeline by hand, who never
ran gpuprobe on it, names as the headline cause, the warnings they would give, the advice that
would be wrong there, and the GPU's busy share over its whole span. Each trace is in the ``tune``
or the ``held`` split (by the parity of its content's sha1): rules may be fixed on what the tune
split shows; the held split is scored, not tuned on. ``seen`` marks the traces that an earlier
session's expert or unseen set already held (benchmarks/diagnose_expert.tsv,
results/diagnose_unseen.md): they were tuned on before, so the never-seen count is given apart.

Each trace is diagnosed in a child process (a crash is a result, not an abort), and scored:

* headline: gpuprobe's headline (``one-time-start`` for a cold first pass; ``none`` with no
  warning that has a gain) against the reading's (``unsure`` readings are not scored);
* warnings: each gpuprobe warning is right when the reading expects it; each expected warning is
  found when gpuprobe warns of it;
* busy: gpuprobe's busy over the GPU's whole span within 0.1 point of the reading's.

Run:  .venv/bin/python benchmarks/diagnose_heldout.py --traces DIR [--split tune|held|all]
          [--set heldout|heldout2|heldout3]
Writes benchmarks/results/diagnose_<set>_<split>.md and .json.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import re
import subprocess
import sys
from pathlib import Path

from _pythonpath import src_first  # benchmarks/, next to this script

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
SEEN = {  # in an earlier session's expert or unseen set (see the module docstring)
    "switch_a100_mid",
    "switch_a100_first",
    "gpumodel_t1",
    "gpumodel_t3",
    "kforge_lambda_tf",
    "kforge_log",
    "parT_bs2",
    "zoology",
    "solangii_custom4",
    "solangii_default",
    "parT_tb128",  # one of the expert set's parT_tb_fwd_batch_size_128 folder
    "parT_cpu_tb",  # one of its parT_cpu_tb_logs folder
}
VOCAB = [
    "gpu-idle",
    "launch-bound",
    "host-work",
    "untraced-host",
    "input-bound",
    "sync",
    "pageable-copies",
    "contiguous-copies",
    "python-loop",
    "no-tensor-cores",
    "compiled-regions",
    "one-time-start",
    "peak-memory",
    "gpu-unused",
    "unsteady-window",
    "exposed-communication",
]
BUSY_TOLERANCE = 0.1  # percentage points

_CHILD = r"""
import json, sys
from gpuprobe.core.errors import GpuprobeError
from gpuprobe.tools.diagnose.engine import diagnose
try:
    d = diagnose(sys.argv[1])
except GpuprobeError as e:
    print(json.dumps({"refused": str(e).splitlines()[0]}))
    raise SystemExit(0)
h = d.headline
s = d.summary
busy = getattr(s, "trace_gpu_busy_fraction", None)
print(json.dumps({
    "cold": d.cold,
    "busy": s.gpu_busy_fraction if busy is None else busy,
    "headline": None if h is None else [h.id, h.title, h.gain],
    "warn": [[f.id, f.gain] for f in d.findings if f.status.value in ("warn", "fail")],
    "info": [f.id for f in d.findings if f.status.value == "info"],
}))
"""


def expected(text: str) -> set[str]:
    """The vocabulary's finding ids named in a reading's expected warnings."""
    return {v for v in VOCAB if re.search(rf"(?<![\w-]){re.escape(v)}(?![\w-])", text)}


def ours(out: dict) -> str:
    """gpuprobe's headline as a reading's headline id."""
    if out["cold"]:
        return "one-time-start"
    if out["headline"] is not None:
        return out["headline"][0]
    return "none"


def run(path: Path) -> dict:
    p = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)],
        capture_output=True,
        text=True,
        env=src_first(ROOT / "src"),
        check=False,
        timeout=600,
    )
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(p.stdout)


def score(row: dict, out: dict) -> dict:
    if "error" in out or "refused" in out:
        return {
            "crash": "error" in out,
            "refused": out.get("refused", ""),
            "ours": "refused" if "refused" in out else "CRASH",
            "headline_ok": False,
            "right": 0,
        }
    reading = row["headline_cause"].split()[0].strip(",;") if row["headline_cause"] else ""
    head = ours(out)
    exp = expected(row["expected_warnings"])
    warned = {w[0] for w in out["warn"]}
    busy_ok = None
    if row["busy_gpu_span_pct"] and out["busy"] is not None:
        busy_ok = abs(100 * out["busy"] - float(row["busy_gpu_span_pct"])) <= BUSY_TOLERANCE
    elif row["busy_gpu_span_pct"] or out["busy"] is not None:
        busy_ok = False
    same = head == reading or (
        # compiling inside the window: the reading's vocabulary puts it under compiled-regions,
        # gpuprobe under one-time-start with compiling as its largest cost (the same cause)
        reading == "compiled-regions"
        and head == "one-time-start"
        and "compiling" in (out["headline"] or ["", ""])[1]
    )
    return {
        "crash": False,
        "reading": reading,
        "ours": head,
        "headline_ok": None if reading == "unsure" else same,
        "expected": sorted(exp),
        "warned": sorted(warned),
        "right": len(warned & exp),
        "wrong": sorted(warned - exp),
        "missed": sorted(exp - warned),
        "as_info": sorted((exp - warned) & set(out.get("info", []))),
        "busy_ok": busy_ok,
        "busy": None if out["busy"] is None else round(100 * out["busy"], 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=Path, required=True, help="folder with the .json.gz files")
    ap.add_argument("--split", choices=("tune", "held", "all"), default="tune")
    ap.add_argument(
        "--set",
        default="heldout",
        help="the folder of benchmarks/ with readings.tsv: heldout (the first set, 30 traces), "
        "heldout2 (the second, 15 traces, read blind on 2026-12-07) or heldout3 (the third, "
        "10 traces, read blind on 2026-12-07)",
    )
    a = ap.parse_args()
    readings = HERE / a.set / "readings.tsv"
    stem = "diagnose_" + a.set
    with readings.open() as fh:
        rows = [r for r in csv.DictReader(fh, delimiter="\t") if a.split in ("all", r["split"])]
    results = []
    for r in rows:
        out = run(a.traces / r["file"])
        s = score(r, out)
        name = r["file"].removesuffix(".json.gz")
        results.append({"file": name, "split": r["split"], "seen": name in SEEN, **s})
        print(
            f"{name:24} {s.get('reading', ''):18} {s.get('ours', 'CRASH'):18} "
            f"{'ok' if s['headline_ok'] else '-' if s['headline_ok'] is None else 'WRONG':6} "
            f"wrong={s.get('wrong')} missed={s.get('missed')} busy_ok={s.get('busy_ok')}"
        )
    lines = [
        f"# diagnose on held-out traces ({a.set}): the {a.split} split",
        "",
        f"{dt.date.today()}, `{_commit()}`; readings: benchmarks/{a.set}/readings.md "
        "(written blind, before gpuprobe ran on the traces).",
        "",
    ]
    for label, sub in (
        ("all", results),
        ("never seen before", [x for x in results if not x["seen"]]),
    ):
        scored = [x for x in sub if x["headline_ok"] is not None]
        warned = sum(len(x.get("warned", [])) for x in sub)
        exp = sum(len(x.get("expected", [])) for x in sub)
        busy = [x for x in sub if x.get("busy_ok") is not None]
        lines.append(
            f"- {label} ({len(sub)} traces): headline right on "
            f"{sum(bool(x['headline_ok']) for x in scored)} of {len(scored)} scored; warnings "
            f"right {sum(x['right'] for x in sub)} of {warned} given, expected found "
            f"{sum(x['right'] for x in sub)} of {exp} (and "
            f"{sum(len(x.get('as_info', [])) for x in sub)} more as information); busy exact on "
            f"{sum(bool(x['busy_ok']) for x in busy)} of {len(busy)}; crashes "
            f"{sum(x['crash'] for x in sub)}, refused {sum(bool(x.get('refused')) for x in sub)}"
        )
    lines += [
        "",
        "| trace | seen | reading | gpuprobe | headline | warnings not expected | "
        "expected, not warned | busy % (exact) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for x in results:
        ok = "-" if x["headline_ok"] is None else ("right" if x["headline_ok"] else "WRONG")
        lines.append(
            f"| {x['file']} | {'yes' if x['seen'] else ''} | {x.get('reading', '')} | "
            f"{x.get('ours', 'crash')} | {ok} | {', '.join(x.get('wrong', []))} | "
            f"{', '.join(x.get('missed', []))} ({', '.join(x.get('as_info', []))}) | "
            f"{x.get('busy')} ({x.get('busy_ok')}) |"
        )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}_{a.split}.md").write_text("\n".join(lines) + "\n")
    (RESULTS / f"{stem}_{a.split}.json").write_text(json.dumps(results, indent=1))
    print("\n".join(lines[4:7]))


def _commit() -> str:
    p = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return p.stdout.strip() or "unknown"


if __name__ == "__main__":
    main()
