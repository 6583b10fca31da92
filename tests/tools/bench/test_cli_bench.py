"""``gpuprobe bench`` on the command line: bad input, JSON, comparison, charts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Small and fast: one framework in its own process, tiny budgets.
FAST = ["--backend", "numpy", "--quick", "--budget", "0.005"]


def _gpuprobe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuprobe", *args], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bench", "gemm"], "unknown workload 'gemm'; choose from expression, scale, matmul"),
        (["bench", "--backend", "tensorflow"], "unknown backend 'tensorflow'; choose from numpy"),
        (["bench", "--device", "tpu"], "device 'tpu': gpuprobe runs on cpu, cuda or cuda:N"),
        (
            ["bench", "--plot", "x.gif"],
            "--plot x.gif: give a file ending in .png, .svg, .pdf, .jpg, .jpeg",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    p = _gpuprobe(*args)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in p.stderr


def test_a_gpu_that_is_not_here() -> None:
    from _support import HAS_GPU

    if HAS_GPU:
        pytest.skip("this machine has a GPU")
    p = _gpuprobe("bench", "--device", "cuda:0")
    assert p.returncode == 2
    (line,) = p.stderr.strip().splitlines()
    assert line.startswith("gpuprobe: cuda:0: no NVIDIA GPU here")
    assert line.endswith("; use cpu") and len(line) <= 80  # nothing to install without a card


def test_json_has_numbers() -> None:
    p = _gpuprobe("bench", "launch", "sync", "--json", "--no-save", *FAST)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["workloads"] == ["launch", "sync"]
    (call,) = [r for r in data["results"] if r["workload"] == "launch"]
    assert call["measurement"]["median"] > 0 and call["values"]["us"] > 0
    assert data["workers"][0]["environment"]["blas"]
    assert data["run_id"] is None


def test_compare_shows_the_ratio_and_the_history_grows(_data_dir: Path) -> None:
    first = _gpuprobe("bench", "launch", "--compare", *FAST)
    assert first.returncode == 0, first.stderr
    assert "no earlier run on this machine" in first.stdout
    second = _gpuprobe("bench", "launch", "--compare", *FAST)
    assert second.returncode == 0, second.stderr
    assert "compared with run 1" in second.stdout and "new/old" in second.stdout
    row = next(line for line in second.stdout.splitlines() if "launch/call/numpy/cpu/1" in line)
    ratio = float(row.split("│")[4])
    assert ratio > 0
    assert (_data_dir / "history.sqlite").stat().st_size > 0
    assert "saved as run 2" in second.stdout


@pytest.mark.parametrize("ext", ["png", "svg"])
def test_plot_writes_a_real_chart(tmp_path: Path, ext: str) -> None:
    out = tmp_path / f"bench.{ext}"
    p = _gpuprobe("bench", "crossover", "transfer", "--no-save", "--plot", str(out), *FAST)
    assert p.returncode == 0, p.stderr
    data = out.read_bytes()
    if ext == "png":
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    else:
        assert b"<svg" in data[:1000] and data.rstrip().endswith(b"</svg>")
    # whitespace normalised: a path too long for the line after "charts:" goes whole on its own
    # line, by design; a path cut anywhere would hold a space here
    assert f"charts: {out}" in " ".join(p.stdout.split())
