"""The public API: one typed module, re-exported by the package; no callable packages."""

from __future__ import annotations

import importlib
import inspect
import json
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import gpuprobe
from gpuprobe import api
from gpuprobe.core.errors import InputError, UsageError

# api name -> the implementation it calls
IMPLEMENTATIONS = {
    "available_cores": "gpuprobe.tools.scale.engine:available_cores",
    "bench": "gpuprobe.tools.bench.runner:run_bench",
    "classify_oom": "gpuprobe.tools.memory.oom.classify:classify_oom",
    "compare": "gpuprobe.tools.diagnose.engine:compare",
    "diagnose": "gpuprobe.tools.diagnose.engine:diagnose",
    "demo_device": "gpuprobe.tools.memory.demo:best_device",
    "diagnose_folder": "gpuprobe.tools.diagnose.cycles:diagnose_folder",
    "diagnose_ranks": "gpuprobe.tools.diagnose.ranks:diagnose_ranks",
    "diagnose_with_context": "gpuprobe.tools.diagnose.engine:diagnose_with_context",
    "doctor": "gpuprobe.tools.doctor.engine:doctor",
    "fleet_doctor": "gpuprobe.tools.fleet.engine:fleet_doctor",
    "explain_oom": "gpuprobe.tools.memory.oom.explain:explain_oom",
    "fleet_bench": "gpuprobe.tools.fleet.bench_engine:fleet_bench",
    "find_trace_files": "gpuprobe.tools.diagnose.ranks:find_trace_files",
    "fit": "gpuprobe.tools.memory.fit:fit",
    "install_oom_hook": "gpuprobe.tools.memory.oom.hook:install_oom_hook",
    "inventory": "gpuprobe.platform.inventory:inventory",
    "kernel_breakdown": "gpuprobe.tools.diagnose.kernels:kernel_breakdown",
    "kernel_diff": "gpuprobe.tools.diagnose.kernel_diff:compare_kernels",
    "load_inventory": "gpuprobe.platform.inventory:load",
    "lstsq": "gpuprobe.tools.scale.lstsq:lstsq",
    "pack": "gpuprobe.tools.monitor.pack:pack",
    "parse_counts": "gpuprobe.tools.monitor.pack:parse_counts",
    "precision_sweep": "gpuprobe.tools.memory.precision:precision_sweep",
    "read_timeline": "gpuprobe.tools.monitor.timeline:read_timeline",
    "record": "gpuprobe.tools.monitor.record:record",
    "scale_lstsq": "gpuprobe.tools.scale.sweep:scale_lstsq",
    "serve_metrics": "gpuprobe.tools.monitor.exporter:serve",
    "summarize": "gpuprobe.tools.monitor.judge:summarize",
    "top": "gpuprobe.tools.monitor.show.top:run_top",
    "uninstall_oom_hook": "gpuprobe.tools.memory.oom.hook:uninstall_oom_hook",
    "write_diagnosis_html": "gpuprobe.tools.diagnose.show.html:write_html",
    "write_run_report": "gpuprobe.tools.monitor.show.html:write_run_report",
}
# api functions that put several calls together (no one implementation to compare with)
COMPOSED = {
    "demo_encoder",
    "energy",
    "demo_fit_step",
    "demo_models",
    "plot_timeline",
    "precision_dtypes",
    "profile_command",
    "profile_now",
    "run",
    "write_folder_html",
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


def test_profile_command_has_the_hooks_and_the_ondemand_defaults() -> None:
    from gpuprobe.tools.profile.hook import HookSettings
    from gpuprobe.tools.profile.ondemand import request_now

    ours = {n: d for n, _, d in _params(api.profile_command)}
    hook = HookSettings()
    for name in ("skip", "warmup", "active", "seconds", "delay", "with_stack", "memory"):
        assert ours[name] == getattr(hook, name), name
    assert ours["record_shapes"] is hook.record_shapes and ours["later"] is False
    now = {n: d for n, _, d in _params(api.profile_now)}
    theirs = {n: d for n, _, d in _params(request_now)}
    assert {k: now[k] for k in ("steps", "warmup", "seconds", "timeout")} == {
        k: theirs[k] for k in ("steps", "warmup", "seconds", "timeout")
    }


def test_run_has_the_recorders_options() -> None:
    from gpuprobe.tools.monitor.run import run_command

    ours = {n: d for n, _, d in _params(api.run)}
    theirs = {n: d for n, _, d in _params(run_command)}
    assert ours["hz"] == theirs["hz"] == 2.0
    assert ours["pcie_throughput"] is theirs["pcie_throughput"] is False


def test_every_api_function_is_exported_typed_and_documented() -> None:
    assert set(api.__all__) == set(IMPLEMENTATIONS) | COMPOSED
    for name in api.__all__:
        f = getattr(gpuprobe, name)
        assert f is getattr(api, name)
        assert isinstance(f, types.FunctionType), name
        assert f.__doc__ and len(f.__doc__.split()) >= 8, name
        assert "return" in f.__annotations__, name


def test_every_type_an_api_function_returns_is_exported() -> None:
    """``gpuprobe.profile_command`` returns a ProfileReport: ``gpuprobe.ProfileReport`` is it, and
    ``from gpuprobe import *`` and ``dir(gpuprobe)`` list it, as for every other result type."""
    builtin = {"None", "Any", "Callable", "Path", "AbstractContextManager"}  # not gpuprobe's
    missing = {}
    for name in api.__all__:
        returned = set(re.findall(r"\b[A-Z]\w+", str(getattr(api, name).__annotations__["return"])))
        missing.update({t: name for t in returned - builtin - set(gpuprobe.__all__)})
    assert missing == {}
    assert set(gpuprobe._TYPES) <= set(gpuprobe.__all__)
    assert gpuprobe.ProfileReport.__name__ == "ProfileReport"


def test_no_package_is_callable_and_submodules_do_not_hide_the_functions() -> None:
    import gpuprobe.platform.inventory
    import gpuprobe.tools.bench.runner
    import gpuprobe.tools.diagnose.kineto
    import gpuprobe.tools.doctor.rules.env

    for name in ("doctor", "bench", "diagnose", "inventory", "record", "fit", "pack", "run"):
        assert isinstance(getattr(gpuprobe, name), types.FunctionType), name
    for package in (
        "core",
        "platform",
        "ui",
        "tools",
        "tools.doctor",
        "tools.bench",
        "tools.diagnose",
        "tools.monitor",
        "tools.memory",
        "tools.scale",
    ):
        module = importlib.import_module(f"gpuprobe.{package}")
        assert type(module) is types.ModuleType and not callable(module), package


def test_public_types_load_on_first_use() -> None:
    from gpuprobe.tools.doctor.model import DoctorReport
    from gpuprobe.tools.monitor.run import RunResult

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
    assert set(eval(out[1])) == {
        "gpuprobe",
        "gpuprobe._version",
        "gpuprobe.api",
        "gpuprobe.api._edge",
        "gpuprobe.api.jobs",
        "gpuprobe.api.machine",
        "gpuprobe.api.memory",
        "gpuprobe.api.scale",
        "gpuprobe.api.traces",
        "gpuprobe.core",
        "gpuprobe.core.errors",
    }


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
    # no .gpuprobe-profile/: a process that never imports torch leaves no status (issue 41 #20)
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["timeline.jsonl"]


def test_run_refuses_a_missing_command(tmp_path: Path) -> None:
    with pytest.raises(gpuprobe.GpuprobeError, match="not found") as err:
        gpuprobe.run(["no-such-command-here"], tmp_path / "r")
    assert err.value.exit_code == 127


# every api function that returns a result -> the type a type checker must see (no Any)
REVEALED = {
    "doctor()": "gpuprobe.tools.doctor.model.DoctorReport",
    "inventory()": "gpuprobe.platform.inventory.Inventory",
    "load_inventory('s.json')": "gpuprobe.platform.inventory.Inventory",
    "bench()": "gpuprobe.tools.bench.model.BenchReport",
    "run(['true'])": "gpuprobe.tools.monitor.run.RunResult",
    "profile_command(['true'])": "gpuprobe.tools.profile.model.ProfileReport",
    "profile_now('dir')": "gpuprobe.tools.profile.model.ProfileReport",
    "record()": "contextlib.AbstractContextManager[gpuprobe.tools.monitor.record.Recording",
    "diagnose('t.json')": "gpuprobe.tools.diagnose.model.Diagnosis",
    "compare('a.json', 'b.json')": "gpuprobe.tools.diagnose.model.TraceComparison",
    "diagnose_ranks('traces')": "gpuprobe.tools.diagnose.ranks_model.MultiRankDiagnosis",
    "diagnose_folder('traces')": "gpuprobe.tools.diagnose.ranks_model.MultiRankDiagnosis | "
    "gpuprobe.tools.diagnose.cycles_model.CycleDiagnosis",
    "diagnose_with_context('t.json')": "tuple[gpuprobe.tools.diagnose.model.Diagnosis, "
    "gpuprobe.tools.diagnose.analysis.TraceContext]",
    "kernel_breakdown(ctx)": "gpuprobe.tools.diagnose.kernels.KernelBreakdown",
    "kernel_diff(ctx, ctx)": "gpuprobe.tools.diagnose.kernel_diff_model.KernelDiff",
    "find_trace_files('traces')": "list[str]",
    "write_diagnosis_html('p.html', d, ctx)": "str",
    "write_folder_html('p.html', gpuprobe.diagnose_folder('traces'))": "str",
    "read_timeline('r')": "gpuprobe.tools.monitor.timeline.Timeline",
    "summarize(tl)": "gpuprobe.tools.monitor.summary.RunSummary",
    "write_run_report(tl, gpuprobe.summarize(tl))": "list[pathlib.Path]",
    "top(iterations=1)": "gpuprobe.tools.monitor.live.TopView",
    "serve_metrics()": "tuple[gpuprobe.tools.monitor.exporter.MetricsServer, "
    "gpuprobe.tools.monitor.sampler.Sampler, gpuprobe.tools.monitor.exporter.GpuprobeCollector]",
    "lstsq('A.npy')": "fallback=gpuprobe.tools.scale.lstsq.LstsqResult]",
    "scale_lstsq()": "gpuprobe.tools.scale.model.ScaleResult",
    "explain_oom()": "gpuprobe.tools.memory.oom.report.OomReport",
    "classify_oom(MemoryError())": "gpuprobe.tools.memory.oom.classify.OomError | None",
    "fit(lambda n: None)": "gpuprobe.tools.memory.model.FitResult",
    "pack(['true'])": "gpuprobe.tools.monitor.pack_model.PackReport",
    "parse_counts('1-4')": "list[int]",
    "precision_sweep(None, None)": "gpuprobe.tools.memory.model.PrecisionReport",
    "precision_dtypes()": "tuple[str, ...]",
    "available_cores()": "int",
    "demo_device()": "str",
}


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("mypy") is None and not Path(sys.executable).with_name("mypy").exists(),
    reason="mypy is not installed (pip install -e .[dev])",
)
def test_type_checkers_see_the_real_types(tmp_path: Path) -> None:
    snippet = tmp_path / "use.py"
    lines = [
        "import gpuprobe",
        "d, ctx = gpuprobe.diagnose_with_context('t.json')",
        "tl = gpuprobe.read_timeline('r')",
    ]
    lines += [f"reveal_type(gpuprobe.{call})" for call in REVEALED]
    snippet.write_text("\n".join(lines) + "\n")
    mypy = shutil.which("mypy") or str(Path(sys.executable).with_name("mypy"))
    # the project's own settings and, where `make lint` left one, its cache (CI runs lint first:
    # 19 s -> 1 s); never a new cache in the tree
    root = Path(__file__).resolve().parents[1]
    cache = root / ".mypy_cache" if (root / ".mypy_cache").is_dir() else tmp_path / "cache"
    out = subprocess.run(
        [mypy, "--cache-dir", str(cache), str(snippet)],
        capture_output=True,
        text=True,
        cwd=root,
    ).stdout
    revealed = [
        line.split('Revealed type is "', 1)[1].rstrip('"')
        for line in out.splitlines()
        if "Revealed type is" in line
    ]
    assert len(revealed) == len(REVEALED), out
    for (call, expected), got in zip(REVEALED.items(), revealed, strict=True):
        assert expected in got, (call, got)
    assert "error" not in out, out


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


def _first_required(name: str) -> tuple[inspect.Parameter, int] | None:
    params = inspect.signature(getattr(api, name)).parameters.values()
    required = [p for p in params if p.default is p.empty and p.kind == p.POSITIONAL_OR_KEYWORD]
    if not required or required[0].annotation in ("Any", "object"):
        return None
    return required[0], len(required)


@pytest.mark.parametrize("name", [n for n in sorted(api.__all__) if _first_required(n)])
def test_none_for_a_needed_argument_is_a_usage_error_naming_the_parameter(name: str) -> None:
    """``gpuprobe.fit(None)``, ``gpuprobe.diagnose(None)``: the README promises a UsageError
    (a ValueError too), one line naming the Python parameter, never a bare TypeError."""
    first, count = _first_required(name)  # type: ignore[misc]
    with pytest.raises(UsageError) as err:
        getattr(gpuprobe, name)(*[None] * count)
    assert err.value.message.startswith(f"{first.name}=None: give "), err.value.message
    assert "\n" not in err.value.message and "--" not in err.value.message


def test_wrong_arguments_name_the_python_parameter_and_the_cli_names_the_flag() -> None:
    with pytest.raises(UsageError) as err:
        gpuprobe.fit(None)
    assert err.value.message == "step=None: give Callable[[int], Any] (got NoneType)"
    with pytest.raises(UsageError, match=r"^path=42: give str \| os.PathLike \(got int\)$"):
        gpuprobe.diagnose(42)  # type: ignore[arg-type]
    with pytest.raises(UsageError) as err, gpuprobe.record(hz=100):
        pass
    assert err.value.message == "hz=100: give 0.1 to 20 samples per second"
    assert err.value.cli_message == "--hz 100: give 0.1 to 20 samples per second"
    with pytest.raises(UsageError) as err:
        gpuprobe.parse_counts("0")
    assert err.value.message.startswith("counts='0': copies must be 1 or more")
    assert err.value.cli_message.startswith("-n 0: copies must be 1 or more")
    assert gpuprobe.parse_counts("1-3") == [1, 2, 3]  # what fits goes through unchanged


def test_the_cli_prints_a_wrong_value_by_its_flag(capsys: pytest.CaptureFixture[str]) -> None:
    from gpuprobe.cli import main

    assert main(["pack", "-n", "0", "--", "true"]) == 2
    assert capsys.readouterr().err == "gpuprobe: -n 0: copies must be 1 or more, like 1,2,3,4\n"


def test_the_edge_lets_through_what_stands_for_a_string() -> None:
    """A ``device: str`` parameter takes a torch.device as the implementation does; a number is
    refused by name."""
    from gpuprobe.api._edge import checked

    def f(device: str | None = None) -> str:
        return str(device)

    f.__annotations__ = {"device": "str | None", "return": "str"}
    g = checked(f)
    assert g(type("device", (), {"__str__": lambda self: "cuda:0"})()) == "cuda:0"
    assert g(None) == "None" and g("cpu") == "cpu"
    with pytest.raises(UsageError, match=r"^device=3: give str \| None \(got int\)$"):
        g(3)
