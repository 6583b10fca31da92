"""A longer fuzzing run than the suite's: ``diagnose`` on mutated real traces and ``plot``'s reader
(plus the judge) on mutated recorded timelines. Each case is counted as accepted (a result),
refused (InputError: one line, exit code 2) or a crash (any other exception: a bug), grouped by
where it was raised. Writes benchmarks/results/fuzz.md.

    python benchmarks/fuzz.py [--cases N] [--seed S]

Bounded: N cases per target (default 300); no timing is asserted.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from fuzzing import mutate_bytes, mutate_json  # noqa: E402
from gpuprobe.core.errors import InputError  # noqa: E402
from gpuprobe.tools.diagnose.engine import diagnose  # noqa: E402
from gpuprobe.tools.monitor.judge import summarize  # noqa: E402
from gpuprobe.tools.monitor.timeline import parse_timeline  # noqa: E402

TRACES = Path(os.environ.get("GPUPROBE_FUZZ_TRACES", "/work/shared/traces"))
TIMELINES = ROOT / "tests" / "data" / "monitor"


def _where(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "gpuprobe" in f.filename]
    f = frames[-1] if frames else traceback.extract_tb(exc.__traceback__)[-1]
    return f"{type(exc).__name__} at {Path(f.filename).name}:{f.name}"


def run_target(name: str, cases: list[tuple[str, bytes]], check: Any, tmp: Path) -> dict[str, Any]:
    out: Counter[str] = Counter()
    crashes: Counter[str] = Counter()
    t0 = time.perf_counter()
    for i, (suffix, data) in enumerate(cases):
        path = tmp / f"{name}-{i}{suffix}"
        path.write_bytes(data)
        try:
            check(path)
            out["accepted"] += 1
        except InputError:
            out["refused"] += 1
        except Exception as exc:  # a bug: count it by where it was raised
            out["crash"] += 1
            crashes[_where(exc)] += 1
        finally:
            path.unlink()
    return {"counts": out, "crashes": crashes, "seconds": time.perf_counter() - t0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "fuzz.md"))
    a = ap.parse_args()
    rng = random.Random(a.seed)
    traces = sorted(p for p in TRACES.glob("*.json.gz") if p.stat().st_size < 60_000)
    docs = []
    for p in traces:
        with gzip.open(p, "rt", encoding="utf-8") as f:
            docs.append(json.load(f))
    timelines = [p.read_bytes() for p in sorted(TIMELINES.glob("*.jsonl"))]
    results = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if docs:
            value_cases = [
                (
                    ".json",
                    json.dumps(mutate_json(rng.choice(docs), rng, rng.randint(1, 6))).encode(),
                )
                for _ in range(a.cases)
            ]
            byte_cases = [
                (
                    ".json",
                    mutate_bytes(json.dumps(rng.choice(docs)).encode(), rng, rng.randint(1, 4)),
                )
                for _ in range(a.cases)
            ]
            results["diagnose, mutated values"] = run_target("dv", value_cases, diagnose, tmp)
            results["diagnose, mutated bytes"] = run_target("db", byte_cases, diagnose, tmp)

        def plot_reader(path: Path) -> None:
            summarize(parse_timeline(path.read_bytes(), path=path))

        tl_cases = []
        for _ in range(a.cases):
            lines = rng.choice(timelines).split(b"\n")
            for _ in range(rng.randint(1, 8)):
                i = rng.randrange(len(lines))
                try:
                    doc = json.loads(lines[i])
                except ValueError:
                    continue
                lines[i] = json.dumps(mutate_json(doc, rng, 1)).encode()
            tl_cases.append((".jsonl", b"\n".join(lines)))
        results["plot reader + judge, mutated timelines"] = run_target(
            "tl", tl_cases, plot_reader, tmp
        )
    rows = [
        "# Fuzzing: cases tried per target",
        "",
        f"`python benchmarks/fuzz.py --cases {a.cases} --seed {a.seed}`; sources: "
        f"{len(docs)} real traces under 60 kB from {TRACES}, {len(timelines)} recorded timelines "
        "from tests/data/monitor. Accepted: a result; refused: a one-line InputError (exit 2); "
        "crash: any other exception (a bug).",
        "",
        "| target | cases | accepted | refused | crashes | seconds |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        c = r["counts"]
        total = sum(c.values())
        rows.append(
            f"| {name} | {total} | {c['accepted']} | {c['refused']} | {c['crash']} | "
            f"{r['seconds']:.1f} |"
        )
    rows += ["", "## Crashes by place", ""]
    any_crash = False
    for name, r in results.items():
        for where, n in r["crashes"].most_common():
            rows.append(f"- {name}: {n} × {where}")
            any_crash = True
    if not any_crash:
        rows.append("- none")
    text = "\n".join(rows) + "\n"
    out = Path(a.out)
    marker = "## Found and fixed"  # kept by hand across runs: what earlier runs found
    if out.exists() and marker in out.read_text():
        text += "\n" + marker + out.read_text().split(marker, 1)[1]
    out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
