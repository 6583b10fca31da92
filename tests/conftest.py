"""Shared fixtures: snapshot loading, the real pynvml over a fake NVML library, and skipping
`gpu` tests without a GPU.

``GPUPROBE_TEST_PYNVML`` names another nvidia-ml-py to run the NVML tests against: a folder made by
``pip install --target DIR nvidia-ml-py==X`` (several, separated by ``os.pathsep``); the default is
the copy installed in the environment."""

from __future__ import annotations

import gc
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import _leftovers
from _support import HAS_GPU, snapshot_dict


@pytest.hookimpl(trylast=True)  # after pytest's tmp_path factory is made
def pytest_configure(config: pytest.Config) -> None:
    _leftovers.start(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with a working driver (none here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything imported to collect the suite (numpy, torch, Dask, every test module: ~430k
    objects) is moved out of the garbage collector's sight for the run (``gc.freeze``): none of
    it becomes garbage, and every full collection walked it again. The code under test collects
    on purpose (``fit`` twice a trial, ``scale`` on each worker, bench between runs) and Python
    collects on its own; ~150 s of the suite went to walking these objects. What the tests make
    is collected as before."""
    gc.collect()
    gc.freeze()


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
        # the run's one copy, as loaded; a second library in the same test gets a copy of its own
        mod = nvml_lib.load_pynvml(pynvml_copy) if libs else nvml_lib.as_loaded_pynvml(pynvml_copy)
        lib = nvml_lib.FakeNvmlLibrary(snap, **kwargs)
        nvml_lib.attach(mod, lib)
        monkeypatch.setitem(sys.modules, "pynvml", mod)
        lib.module = mod  # type: ignore[attr-defined]
        libs.append(lib)
        return lib

    yield install
    violations = [v for lib in libs for v in lib.violations]
    assert not violations, f"pynvml called the fake NVML library wrongly: {violations}"


@pytest.fixture
def quick_inventory(monkeypatch: pytest.MonkeyPatch) -> None:
    """inventory() without its child processes and package scans: NVML is what is under test."""
    from _support import DATA
    from gpuprobe.platform.hardware import host as host_mod
    from gpuprobe.platform.inventory import Inventory, load

    host = load(DATA / "h200.json").host
    monkeypatch.setattr(host_mod, "read_host", lambda: host)
    monkeypatch.setattr("gpuprobe.platform.inventory._cuda_views", lambda env: (None, None))
    monkeypatch.setattr("gpuprobe.platform.frameworks.probe.probe_frameworks", lambda runtime: ())
    monkeypatch.setattr("gpuprobe.platform.hardware.pci.nvidia_devices", lambda: ())
    monkeypatch.setattr("gpuprobe.platform.hardware.nvml._process_name", lambda pid: None)
    assert Inventory  # imported for the type only


# -- every Finding made while the suite runs has a catalogued id and status --------------------
# The recorder wraps Finding.__init__ for the session and keeps each (id, status) once, with
# the first test that made it. Findings made directly by test code (files under tests/, such as a
# renderer's test making Finding(id="x", ...)) are not the code's and are left out; findings the
# code makes while a test drives it, and findings read back from recorded files, are checked;
# ids a test hands to a helper of the code on purpose are listed in _TEST_ONLY_IDS.

_TESTS = str(Path(__file__).resolve().parent)
# ids tests pass on purpose to the code's own finding helpers (the helper makes the Finding, so the
# caller is not a test file): host_busy_finding's test calls its finding "x"
# (tests/tools/memory/test_memory_everyday.py)
_TEST_ONLY_IDS = frozenset({"x"})
_FINDINGS_SEEN: dict[tuple[str, str], str] = {}
_CURRENT_TEST = ["(collection)"]


@pytest.fixture(autouse=True, scope="session")
def _record_findings() -> Iterator[None]:
    from gpuprobe.core.findings import Finding

    original = Finding.__init__

    def record(self: Finding, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        caller = sys._getframe(1).f_code.co_filename  # who made the Finding
        if not caller.startswith(_TESTS) and self.id not in _TEST_ONLY_IDS:
            status = getattr(self.status, "value", self.status)
            _FINDINGS_SEEN.setdefault((self.id, str(status)), _CURRENT_TEST[0])

    Finding.__init__ = record  # type: ignore[method-assign]
    yield
    Finding.__init__ = original  # type: ignore[method-assign]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _CURRENT_TEST[0] = item.nodeid


def uncatalogued_findings() -> list[str]:
    """The (id, status) pairs seen this session that the catalogue lacks, with a test that made
    each."""
    from gpuprobe.core.catalogue import find

    bad = []
    for (fid, status), test in sorted(_FINDINGS_SEEN.items()):
        e = find(fid)
        if e is None:
            bad.append(f"{fid} ({status}): not in the catalogue; made in {test}")
        elif status not in e.statuses:
            bad.append(f"{fid}: status {status} not among {list(e.statuses)}; made in {test}")
    return bad


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _leftovers.finish(session)
    bad = uncatalogued_findings()
    if not bad:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    text = (
        "findings made during the tests that src/gpuprobe/core/catalogue.json does not declare "
        "(add them, then `python -m gpuprobe.core.catalogue > docs/findings.md`):\n  "
        + "\n  ".join(bad)
    )
    if reporter is not None:
        reporter.write_line("")
        reporter.write_sep("=", "uncatalogued findings", red=True)
        reporter.write_line(text)
    else:
        print(text, file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def chromium() -> str:
    """The headless browser for the HTML tests (the monitor's report, diagnose's timeline;
    Debian: apt-get install -y chromium)."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip(
        "chromium is not installed (apt-get install -y chromium): the HTML pages cannot be "
        "checked in a real browser here"
    )
