"""The public API: one typed module, re-exported by the package; no callable packages."""

from __future__ import annotations

import importlib
import inspect
import json
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import gpuprobe
from gpuprobe import api
from gpuprobe.errors import InputError, UsageError

# api name -> the implementation it calls
IMPLEMENTATIONS = {
    "bench": "gpuprobe.measure.runner:run_bench",
    "compare": "gpuprobe.trace:compare",
    "diagnose": "gpuprobe.trace:diagnose",
    "diagnose_ranks": "gpuprobe.trace.ranks:diagnose_ranks",
    "doctor": "gpuprobe.checks:doctor",
    "explain_oom": "gpuprobe.memory.oom:explain_oom",
    "fit": "gpuprobe.memory.fit:fit",
    "install_oom_hook": "gpuprobe.memory.oom:install_oom_hook",
    "inventory": "gpuprobe.machine:inventory",
    "lstsq": "gpuprobe.parallel.lstsq:lstsq",
    "pack": "gpuprobe.monitor.pack:pack",
    "precision_sweep": "gpuprobe.memory.precision:precision_sweep",
    "record": "gpuprobe.monitor.record:record",
    "uninstall_oom_hook": "gpuprobe.memory.oom:uninstall_oom_hook",
}


def _impl(name: str) -> object:
    module, _, attr = IMPLEMENTATIONS[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def _params(f: object) -> list[tuple[str, object, object]]:
    sig = inspect.signature(f)  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


@pytest.mark.parametrize("name", sorted(IMPLEMENTATIONS))
def test_api_signature_is_the_implementations(name: str) -> None:
    assert _params(getattr(api, name)) == _params(_impl(name))


def test_run_has_the_recorders_options() -> None:
    from gpuprobe.monitor.run import run_command

    ours = {n: d for n, _, d in _params(api.run)}
    theirs = {n: d for n, _, d in _params(run_command)}
    assert ours["hz"] == theirs["hz"] == 2.0
    assert ours["pcie_throughput"] is theirs["pcie_throughput"] is False


def test_every_api_function_is_exported_typed_and_documented() -> None:
    assert set(api.__all__) == set(IMPLEMENTATIONS) | {"run"}
    for name in api.__all__:
        f = getattr(gpuprobe, name)
        assert f is getattr(api, name)
        assert isinstance(f, types.FunctionType), name
        assert f.__doc__ and len(f.__doc__.split()) >= 8, name
        assert "return" in f.__annotations__, name


def test_no_package_is_callable_and_submodules_do_not_hide_the_functions() -> None:
    import gpuprobe.checks.env
    import gpuprobe.machine
    import gpuprobe.measure.runner
    import gpuprobe.trace.kineto

    for name in ("doctor", "bench", "diagnose", "inventory", "record", "fit", "pack", "run"):
        assert isinstance(getattr(gpuprobe, name), types.FunctionType), name
    for package in ("checks", "measure", "trace", "monitor", "memory", "parallel", "report"):
        module = importlib.import_module(f"gpuprobe.{package}")
        assert type(module) is types.ModuleType and not callable(module), package


def test_public_types_load_on_first_use() -> None:
    from gpuprobe.checks import DoctorReport
    from gpuprobe.monitor.run import RunResult

    assert gpuprobe.DoctorReport is DoctorReport and gpuprobe.RunResult is RunResult
    assert set(gpuprobe.__all__) <= set(dir(gpuprobe)) | {"__version__"}
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = gpuprobe.nope  # type: ignore[attr-defined]


def test_public_methods_are_documented() -> None:
    undocumented = []
    for name in gpuprobe.__all__:
        obj = getattr(gpuprobe, name)
        if not isinstance(obj, type):
            continue
        for attr, value in vars(obj).items():
            if attr.startswith("_") or not (callable(value) or isinstance(value, property)):
                continue
            target = value.fget if isinstance(value, property) else value
            if not inspect.getdoc(target):
                undocumented.append(f"{name}.{attr}")
    assert undocumented == []


def test_usage_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="wrong"):
        raise UsageError("wrong option")
    assert UsageError("x").exit_code == 2 and issubclass(InputError, gpuprobe.GpuprobeError)


def test_import_is_cheap() -> None:
    code = (
        "import sys, gpuprobe; "
        "heavy = ('torch', 'numpy', 'pynvml', 'matplotlib', 'rich', 'psutil', 'dask'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy)); "
        "print(sorted(m for m in sys.modules if m.startswith('gpuprobe')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[0] == "[]"
    assert set(eval(out[1])) == {"gpuprobe", "gpuprobe._version", "gpuprobe.api", "gpuprobe.errors"}


def test_run_records_judges_and_writes_the_report(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", "import time; time.sleep(0.5); raise SystemExit(3)"]
    result = gpuprobe.run(cmd, tmp_path / "r", hz=10)
    assert result.exit_code == 3
    assert result.summary is not None and result.summary.exit_code == 3
    names = [p.name for p in result.files]
    assert names[0] == "timeline.jsonl" and {"report.html", "report.png", "summary.json"} <= set(
        names
    )
    assert all(p.exists() and p.stat().st_size > 0 for p in result.files)
    saved = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert saved["exit_code"] == 3 and result.samples >= 2
    assert result.findings == result.summary.findings
    assert "exit code 3" in repr(result)
    page = result._repr_html_()
    assert "exit code 3" in page and "report.html" in page and "exit code 3" in str(result)


def test_run_without_report_writes_the_timeline_only(tmp_path: Path) -> None:
    result = gpuprobe.run([sys.executable, "-c", "pass"], tmp_path / "r", report=False)
    assert result.exit_code == 0 and result.summary is not None
    assert [p.name for p in result.files] == ["timeline.jsonl"]
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["timeline.jsonl"]


def test_run_refuses_a_missing_command(tmp_path: Path) -> None:
    with pytest.raises(gpuprobe.GpuprobeError, match="not found") as err:
        gpuprobe.run(["no-such-command-here"], tmp_path / "r")
    assert err.value.exit_code == 127


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("mypy") is None and not Path(sys.executable).with_name("mypy").exists(),
    reason="mypy is not installed (pip install -e .[dev])",
)
def test_type_checkers_see_the_real_types(tmp_path: Path) -> None:
    snippet = tmp_path / "use.py"
    snippet.write_text(
        "import gpuprobe\n"
        "reveal_type(gpuprobe.doctor())\n"
        "reveal_type(gpuprobe.diagnose('t.json'))\n"
        "reveal_type(gpuprobe.run(['true']))\n"
    )
    mypy = shutil.which("mypy") or str(Path(sys.executable).with_name("mypy"))
    out = subprocess.run(
        [mypy, "--cache-dir", str(tmp_path / "cache"), "--follow-imports=silent", str(snippet)],
        capture_output=True,
        text=True,
    ).stdout
    assert 'Revealed type is "gpuprobe.checks.DoctorReport"' in out, out
    assert 'Revealed type is "gpuprobe.trace.model.Diagnosis"' in out, out
    assert 'Revealed type is "gpuprobe.monitor.run.RunResult"' in out, out


@pytest.mark.parametrize("call", ["run", "pack"])
def test_a_command_given_as_one_string_is_refused_before_anything_starts(
    tmp_path: Path, call: str
) -> None:
    with pytest.raises(
        UsageError,
        match=r"one string; give it as an argument list, such as "
        r"\['python3', 'train.py'\]",
    ) as err:
        if call == "run":
            gpuprobe.run("python3 train.py", tmp_path / "r")
        else:
            gpuprobe.pack("python3 train.py", [1])
    assert err.value.exit_code == 2 and not (tmp_path / "r").exists()
