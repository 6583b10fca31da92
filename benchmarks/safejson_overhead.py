"""What the depth check of ``gpuprobe.core.safejson.loads`` costs against ``json.loads``.

Three documents, each read both ways, alternated A B A B in one run so that drifts in machine
speed cancel; the median of each side is quoted and the ratio safejson / json:

1. a real timeline (``tests/data/monitor/gpu_h200_train.jsonl``, recorded on an H200), line by
   line as ``parse_timeline`` reads it: the common case (each line has fewer brackets than the
   128-level limit, so only two ``count`` calls are added);
2. a real inventory snapshot (``tests/data/h200.json``);
3. a synthetic 15 MB document with 2.1 M brackets (300 000 rows of ``[i, {"a": [1, 2]}, …]``):
   the worst ordinary case, where the depth is measured level by level.

Usage: ``PYTHONPATH=src python benchmarks/safejson_overhead.py [--rounds N]``; writes
``benchmarks/results/safejson_overhead.md`` and prints the same table.
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from gpuprobe.core import safejson

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "tests" / "data"


def _lines(path: Path) -> Callable[[Callable[[bytes], object]], None]:
    lines = [ln for ln in path.read_bytes().split(b"\n") if ln.strip()]

    def run(load: Callable[[bytes], object]) -> None:
        for ln in lines:
            load(ln)

    return run


def _whole(doc: str) -> Callable[[Callable[[str], object]], None]:
    def run(load: Callable[[str], object]) -> None:
        load(doc)

    return run


def _time(fn: Callable[[], None]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    rows = [[i, {"a": [1, 2]}, None, True, -1.5e-3] for i in range(300_000)]
    cases = {
        "timeline, 1 H200 run, line by line": _lines(DATA / "monitor" / "gpu_h200_train.jsonl"),
        "inventory snapshot (h200.json)": _whole((DATA / "h200.json").read_text()),
        "15 MB, 2.1 M brackets": _whole(json.dumps(rows)),
    }
    out = [
        f"# safejson.loads against json.loads ({platform.python_implementation()} "
        f"{platform.python_version()}, {args.rounds} rounds alternated, medians)",
        "",
        "| document | json.loads | safejson.loads | ratio |",
        "|---|---|---|---|",
    ]
    for name, run in cases.items():
        plain: list[float] = []
        safe: list[float] = []
        for _ in range(args.rounds):
            plain.append(_time(functools.partial(run, json.loads)))
            safe.append(_time(functools.partial(run, safejson.loads)))
        a, b = statistics.median(plain), statistics.median(safe)
        out.append(f"| {name} | {a * 1e3:.2f} ms | {b * 1e3:.2f} ms | {b / a:.2f}× |")
    text = "\n".join(out) + "\n"
    print(text)
    (HERE / "results" / "safejson_overhead.md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
