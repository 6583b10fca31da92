"""The install hints fit the machine (issue 41): without an NVIDIA GPU, PyTorch's CPU wheel (the
default `pip install 'gpuprobe[torch]'` resolves to CUDA wheels: nvidia-cublas, cudnn, the CUDA
runtime); and every Dask hint is the same line."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest

from _support import DATA
from gpuprobe.core.errors import UsageError
from gpuprobe.platform import install
from gpuprobe.platform.inventory import load
from gpuprobe.tools.doctor.model import DoctorContext
from gpuprobe.tools.doctor.rules.frameworks import check_frameworks

SRC = Path(__file__).resolve().parents[2] / "src" / "gpuprobe"
CPU = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def test_the_torch_hint_is_the_cpu_wheel_without_a_gpu() -> None:
    assert install.torch_install(gpu=False) == CPU
    assert install.torch_install(gpu=True) == "pip install 'gpuprobe[torch]'"


@pytest.mark.parametrize("gpu", [True, False], ids=["a-card", "no-card"])
def test_doctor_with_no_framework_gives_the_line_for_the_machine_it_judged(gpu: bool) -> None:
    inv = load(DATA / "h200.json")
    inv = dataclasses.replace(inv, frameworks=())
    if not gpu:
        inv = dataclasses.replace(inv, gpus=(), pci_nvidia=())
    (f,) = check_frameworks.judge(DoctorContext(inv))
    assert f.id == "no-gpu-framework"
    assert f.fix == (install.torch_install(gpu=True) if gpu else CPU)


def test_a_command_that_needs_torch_says_the_cpu_wheel_here_without_a_gpu(monkeypatch) -> None:
    from gpuprobe.platform.frameworks import torch as torch_door

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch: ImportError
    monkeypatch.setattr(install, "has_nvidia_gpu", lambda: False)
    with pytest.raises(UsageError, match=re.escape("fit needs PyTorch") + ".*" + re.escape(CPU)):
        torch_door.require("fit")
    monkeypatch.setattr(install, "has_nvidia_gpu", lambda: True)
    with pytest.raises(UsageError, match=re.escape("install it: pip install 'gpuprobe[torch]'")):
        torch_door.require("fit")


def test_every_dask_hint_is_the_one_line(monkeypatch) -> None:
    """`dask[distributed]` (cluster's) and `gpuprobe[dask]` (scale's) disagreed."""
    from gpuprobe.platform import cluster
    from gpuprobe.tools.scale import engine

    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(UsageError) as err:
        cluster.connect_client("tcp://127.0.0.1:1", 0.1)
    assert err.value.message.endswith(install.DASK_INSTALL)
    assert engine.DASK_INSTALL_HINT == install.DASK_INSTALL == "pip install 'gpuprobe[dask]'"
    lines = set()
    for path in SRC.rglob("*.py"):
        found = re.findall(
            r"pip install [\"']?[\w.\[-]*dask\b(?!-cuda)[\w\[\],.-]*", path.read_text()
        )
        lines |= set(found)
    assert lines == {"pip install 'gpuprobe[dask]"}, lines  # install.py's, and no other
