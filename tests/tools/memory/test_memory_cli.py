"""The fit, pack and precision commands: bad input gets one line and exit 2 or 127; --json."""

from __future__ import annotations

import json
import sys

import pytest

from gpuprobe.cli import main

BUSY = [sys.executable, "-c", "x = 0\nfor i in range(300_000): x += i"]


@pytest.mark.parametrize(
    ("argv", "code", "text"),
    [
        (["pack", "-n", "0", "--", "true"], 2, "copies must be 1 or more"),
        (["pack", "-n", "two", "--", "true"], 2, "not a whole number"),
        (["pack", "-n", "1"], 2, "no command given"),
        (["pack", "-n", "1", "--", "gpuprobe-no-such-cmd"], 127, "command not found"),
        (["pack", "--rate", "([", "--", sys.executable, "-c", "0"], 2, "not a regular expression"),
        (["fit", "--memory-limit", "lots"], 2, "not a size"),
        (["fit", "--device", "tpu"], 2, "runs on cpu, cuda or cuda:N"),
        (["fit", "--min", "10", "--max", "5"], 2, "below --min"),
        (["precision", "--dtypes", "fp8"], 2, "dtypes are"),
    ],
)
def test_bad_input(
    argv: list[str], code: int, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse type errors
        rc = int(exc.code or 0)
    err = capsys.readouterr().err
    assert rc == code
    assert text in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_pack_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pack", "-n", "1,2", "--json", "--", *BUSY]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [lv["n"] for lv in doc["levels"]] == [1, 2]
    assert doc["recommended"] in (1, 2)


def test_fit_json_on_cpu_under_a_cap(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    argv = ["fit", "--device", "cpu", "--max", "4", "--memory-limit", "2GiB", "--repeats", "1"]
    assert main([*argv, "--json", "--no-curve"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["best"] == 4 and doc["first_fail"] is None  # a 2 GiB cap holds 4 samples
    assert doc["isolated"] and "RLIMIT_AS" in doc["cap"]
    assert doc["exit_code"] == 0 and doc["verdict"] in ("ok", "info", "warn")


def test_precision_json(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    argv = ["precision", "--device", "cpu", "--batch", "1", "--dtypes", "fp32,int8"]
    assert main([*argv, "--budget", "0.05", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["dtype"] for r in doc["results"]] == ["fp32", "int8"]
    assert doc["results"][1]["outcome"] == "ok"
    assert doc["exit_code"] == 0 and doc["verdict"] in ("ok", "info", "warn")


@pytest.mark.parametrize(
    "argv", [["fit", "--device", "cuda", "--max", "8"], ["precision", "--device", "cuda:0"]]
)
def test_a_cuda_device_torch_cannot_use_is_refused_in_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("torch sees a GPU here")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert torch.__version__ in err and ("is CPU-only" in err or "sees no CUDA GPU" in err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_fit_says_its_model_in_words_within_80_columns(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 41: fit's first line was a 106-character Python dict."""
    pytest.importorskip("torch")
    argv = ["fit", "--device", "cpu", "--max", "2", "--memory-limit", "2GiB", "--repeats", "1"]
    assert main([*argv, "--no-curve"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("model: demo MLP (12 layers of 256 on 256 features, 10 classes)")
    assert "{" not in lines[0] and all(len(line) <= 80 for line in lines[:2])
