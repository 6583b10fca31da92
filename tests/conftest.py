"""Shared fixtures: snapshot loading, the fake pynvml, and skipping `gpu` tests without a GPU."""

from __future__ import annotations

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
