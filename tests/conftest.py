"""Shared fixtures: snapshot loading, the fake pynvml, and skipping `gpu` tests without a GPU."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(Path(__file__).parent))


def _has_gpu() -> bool:
    try:
        from gpuprobe.hardware.nvml import read_driver

        return bool(read_driver()[1])
    except Exception:
        return False


HAS_GPU = _has_gpu()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with a working driver (none here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def snapshot_dict(name: str) -> dict[str, Any]:
    """A snapshot from tests/data as a dict."""
    return json.loads((DATA / name).read_text())


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Install a fake pynvml built from a snapshot: ``fake_nvml("t4.json")``."""
    from fakes import fake_pynvml

    def install(name_or_dict: str | dict[str, Any], init_error: Any = None) -> Any:
        snap = snapshot_dict(name_or_dict) if isinstance(name_or_dict, str) else name_or_dict
        mod = fake_pynvml.build(snap, init_error)
        monkeypatch.setitem(sys.modules, "pynvml", mod)
        return mod

    yield install
