"""Every command that takes a device, with every kind of device flag, on this machine's torch:
a device torch cannot run on here is one line on stderr naming the fix, exit 2, no traceback
(issue 27: ``fit --device cuda`` on a CPU-only torch printed a 40-line AssertionError). The Python
functions behind them raise a :class:`UsageError` with the same line."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from gpuprobe import cli
from gpuprobe.core.errors import EXIT_USAGE, UsageError
from gpuprobe.platform.frameworks.devices import CudaHere, cuda_refusal, parse

torch = pytest.importorskip("torch")

CUDA_HERE = torch.cuda.is_available()
CUDA_FLAGS = ("cuda", "cuda:0", "cuda:7")
OTHER_FLAGS = ("mps", "nonsense", "cpu:0", "CUDA")
# what keeps each command short, were the device accepted (it is not)
CHEAP: dict[str, list[str]] = {
    "fit": ["--max", "4", "--no-curve"],
    "precision": ["--budget", "0.01", "--batch", "1"],
    "bench": ["launch", "--quick", "--no-save"],
}


def _device_commands() -> list[str]:
    """The commands whose parser has a --device option, read from the parser itself."""
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(
        name
        for name, p in sub.choices.items()
        if any("--device" in a.option_strings for a in p._actions)
    )


def test_the_device_commands_are_found() -> None:
    assert {"fit", "precision", "bench"} <= set(_device_commands())


def _flags() -> list[str]:
    return [*([] if CUDA_HERE else CUDA_FLAGS), *OTHER_FLAGS]


@pytest.mark.parametrize("flag", _flags())
@pytest.mark.parametrize("command", _device_commands())
def test_a_device_not_here_is_one_line_and_exit_2(
    command: str, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main([command, *CHEAP.get(command, []), "--device", flag])
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"gpuprobe: {flag}: ") or lines[0].startswith(
        f"gpuprobe: device {flag!r}: "
    )
    if flag.startswith("cuda"):
        # why (no GPU / a CPU-only build) and the fix (the pip command of a CUDA build)
        if torch.version.cuda is None:
            assert f"torch {torch.__version__} is CPU-only" in lines[0]
        # no card here: nothing to install, and the line fits 80 columns
        assert "no NVIDIA GPU here" in lines[0] and lines[0].endswith("; use cpu")
        assert len(lines[0]) <= 80
    else:
        assert "cpu, cuda or cuda:N" in lines[0]


def _alloc(batch_size: int) -> int:
    return batch_size


@pytest.mark.parametrize("flag", _flags())
def test_the_python_functions_refuse_with_the_same_line(flag: str) -> None:
    import gpuprobe

    with pytest.raises(UsageError) as fit_error:
        gpuprobe.fit(_alloc, range(1, 3), device=flag, curve=False)
    with pytest.raises(UsageError) as sweep_error:
        gpuprobe.precision_sweep(torch.nn.Linear(4, 4), torch.ones(2, 4), ["fp32"], device=flag)
    with pytest.raises(ValueError) as bench_error:  # a UsageError is a ValueError too
        gpuprobe.bench(["launch"], ["torch"], [flag], quick=True, save=False)
    assert str(fit_error.value) == str(sweep_error.value) == str(bench_error.value)
    assert "\n" not in str(fit_error.value)


def test_parse_takes_cpu_cuda_and_cuda_n_only() -> None:
    assert parse("cpu") == ("cpu", None)
    assert parse("cuda") == ("cuda", None)
    assert parse("cuda:3") == ("cuda", 3)
    for bad in ("mps", "cpu:0", "cuda:", "cuda:x", "gpu", " cuda", ""):
        with pytest.raises(UsageError, match="cpu, cuda or cuda:N"):
            parse(bad)


@pytest.mark.parametrize(
    ("here", "expected"),
    [
        # a T4 (CUDA 12.4 driver) with a CPU-only torch: the build for that driver
        (
            CudaHere(gpus=1, driver_cuda="12.4", ccs=((7, 5),), torch_version="2.5.1+cpu"),
            "cuda: torch 2.5.1+cpu is a CPU-only build; install a CUDA build: pip install "
            "--force-reinstall 'torch==2.5.1' --index-url https://download.pytorch.org/whl/cu124",
        ),
        # no torch at all on a machine with a GPU
        (
            CudaHere(gpus=1, driver_cuda="12.4", ccs=((7, 5),)),
            "cuda: PyTorch is not installed; install a CUDA build: pip install "
            "--force-reinstall 'torch' --index-url https://download.pytorch.org/whl/cu126",
        ),
        # a CUDA build that sees none of the cards: doctor says why
        (
            CudaHere(gpus=2, driver_cuda="12.4", torch_version="2.5.1+cu124", torch_cuda="12.4"),
            "cuda: torch 2.5.1+cu124 (CUDA 12.4) sees none of the 2 NVIDIA GPU(s) here; run "
            "'gpuprobe doctor' for the cause and the fix",
        ),
        # a GPU torch can run on
        (CudaHere(gpus=1, torch_version="2.5.1+cu124", torch_cuda="12.4", torch_sees=1), None),
    ],
)
def test_cuda_refusal_says_why_and_what_to_install(here: CudaHere, expected: Any) -> None:
    assert cuda_refusal("cuda", here) == expected


def test_cuda_refusal_of_a_gpu_index_names_the_range() -> None:
    here = CudaHere(gpus=2, torch_version="2.5.1+cu124", torch_cuda="12.4", torch_sees=2)
    assert cuda_refusal("cuda:1", here) is None
    assert cuda_refusal("cuda:7", here) == "cuda:7: torch sees 2 CUDA GPU(s); use cuda:0..cuda:1"
