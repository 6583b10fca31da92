"""Shared fixtures: snapshot loading, the real pynvml over a fake NVML library, and skipping
`gpu` tests without a GPU.

``GPUPROBE_TEST_PYNVML`` names another nvidia-ml-py to run the NVML tests against: a folder made by
``pip install --target DIR nvidia-ml-py==X`` (several, separated by ``os.pathsep``); the default is
the copy installed in the environment."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from _support import HAS_GPU, snapshot_dict


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with a working driver (none here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pynvml_copies() -> list[str | None]:
    """The nvidia-ml-py copies NVML tests run against: None (the installed one) and any folders
    named in GPUPROBE_TEST_PYNVML."""
    extra = [p for p in os.environ.get("GPUPROBE_TEST_PYNVML", "").split(os.pathsep) if p]
    return extra or [None]


@pytest.fixture(params=pynvml_copies(), ids=lambda p: "pynvml-" + (Path(p).name if p else "venv"))
def pynvml_copy(request: pytest.FixtureRequest) -> str | None:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch, pynvml_copy: str | None) -> Iterator[Any]:
    """The real pynvml over a fake libnvidia-ml answering from a snapshot:
    ``lib = fake_nvml("t4.json", missing={...}, errors={...}, init_error=9)``. Fails the test if
    the binding called the library in a way the C ABI would not accept."""
    from fakes import nvml_lib

    libs: list[nvml_lib.FakeNvmlLibrary] = []

    def install(name_or_dict: str | dict[str, Any], **kwargs: Any) -> nvml_lib.FakeNvmlLibrary:
        snap = snapshot_dict(name_or_dict) if isinstance(name_or_dict, str) else name_or_dict
        mod = nvml_lib.load_pynvml(pynvml_copy)
        lib = nvml_lib.FakeNvmlLibrary(snap, **kwargs)
        nvml_lib.attach(mod, lib)
        monkeypatch.setitem(sys.modules, "pynvml", mod)
        lib.module = mod  # type: ignore[attr-defined]
        libs.append(lib)
        return lib

    yield install
    violations = [v for lib in libs for v in lib.violations]
    assert not violations, f"pynvml called the fake NVML library wrongly: {violations}"
