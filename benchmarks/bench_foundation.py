"""Issue 2's numbers: `gpuprobe info --json` under 1 s, `gpuprobe doctor` (E1 included) under
15 s on a CPU-only machine; on a GPU machine the full doctor under 30 s and its pinned
host-to-device figure within 10 % of a direct torch measurement on the same card.

Run: .venv/bin/python benchmarks/bench_foundation.py [--runs N]
Writes benchmarks/results/foundation.json and prints a table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
TARGETS_S = {"info --json": 1.0, "doctor": 15.0, "doctor --quick": 15.0}
GPU_TARGETS_S = {"doctor": 30.0}


def wall(cmd: list[str]) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return time.perf_counter() - t0, p.returncode, p.stdout


def direct_torch_h2d(nbytes: int = 256 * 2**20, reps: int = 20) -> float | None:
    """Pinned host-to-device GB/s measured with torch alone (events, median), for comparison."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    src = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        dst.copy_(src, non_blocking=True)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    return nbytes / statistics.median(times) / 1e9


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    exe = [sys.executable, "-m", "gpuprobe"]
    rows = {}
    doctor_json = None
    for label, cmd in (
        ("info --json", ["info", "--json"]),
        ("doctor --quick", ["doctor", "--quick", "--json"]),
        ("doctor", ["doctor", "--json"]),
    ):
        times = []
        for _ in range(args.runs):
            t, rc, out = wall(exe + cmd)
            times.append(t)
            if label == "doctor":
                doctor_json = json.loads(out)
        rows[label] = {
            "median_s": statistics.median(times),
            "min_s": min(times),
            "max_s": max(times),
            "runs": args.runs,
            "exit_code": rc,
        }
    has_gpu = bool(doctor_json and doctor_json["inventory"]["gpus"])
    result = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "cpu": doctor_json["inventory"]["host"]["cpu_model"] if doctor_json else None,
            "cores": doctor_json["inventory"]["host"]["logical_cores"] if doctor_json else None,
            "python": platform.python_version(),
            "gpu": has_gpu,
        },
        "wall_seconds": rows,
        "targets_s": GPU_TARGETS_S | {"info --json": 1.0} if has_gpu else TARGETS_S,
    }
    if has_gpu and doctor_json:
        ours = [
            m
            for w in doctor_json["workers"]
            if w["framework"] == "torch" and w["device"] != "cpu"
            for m in w["measurements"]
            if m["name"] == "h2d-pinned"
        ]
        direct = direct_torch_h2d()
        if ours and direct:
            g = ours[0]["work"]["bytes"] / ours[0]["median"] / 1e9
            result["h2d_pinned_gbs"] = {"gpuprobe": g, "direct_torch": direct, "ratio": g / direct}
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "foundation.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'command':<16} {'median s':>9} {'min':>7} {'max':>7} {'target':>7}  ok")
    for label, r in rows.items():
        target = result["targets_s"].get(label)
        ok = "yes" if target is None or r["median_s"] < target else "NO"
        print(
            f"{label:<16} {r['median_s']:9.2f} {r['min_s']:7.2f} {r['max_s']:7.2f} "
            f"{target if target else '':>7}  {ok}"
        )
    if "h2d_pinned_gbs" in result:
        h = result["h2d_pinned_gbs"]
        print(
            f"pinned H2D: gpuprobe {h['gpuprobe']:.1f} GB/s, torch {h['direct_torch']:.1f} GB/s, "
            f"ratio {h['ratio']:.3f} (target within 10 %)"
        )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
