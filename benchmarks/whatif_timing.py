"""diagnose's time on the corpus with the what-if engine against a checkout without it.

Runs every trace of ``../shared/traces/`` and ``tests/data/diagnose/gpu_h200/`` through
``diagnose`` in one child process per checkout, alternating the two ``--rounds`` times (this
machine is noisy: compare the ratios of one run), and prints each round's seconds and the ratio.
The issue's goal: no more than 1.3x.

Run:  git worktree add /tmp/base <commit without the engine>
      .venv/bin/python benchmarks/whatif_timing.py --base /tmp/base/src
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from _pythonpath import src_first

ROOT = Path(__file__).resolve().parent.parent
_CHILD = """
import glob, time
from gpuprobe.tools.diagnose.engine import diagnose
paths = sorted(glob.glob({corpus!r})) + sorted(glob.glob({h200!r}))
t0 = time.perf_counter()
for p in paths:
    try:
        diagnose(p)
    except Exception:
        pass
print(time.perf_counter() - t0)
"""


def _seconds(src: str) -> float:
    code = _CHILD.format(
        corpus=str(ROOT.parent / "shared" / "traces" / "*.gz"),
        h200=str(ROOT / "tests" / "data" / "diagnose" / "gpu_h200" / "*.gz"),
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=src_first(src), capture_output=True, text=True, cwd="/"
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="src/ of a checkout without the engine")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    for r in range(args.rounds):
        base = _seconds(args.base)
        new = _seconds(str(ROOT / "src"))
        print(f"round {r + 1}: base {base:.2f} s, what-if {new:.2f} s, ratio {new / base:.2f}")


if __name__ == "__main__":
    main()
