"""A workload is one module: every module in the workloads package is in the registry, each says
its name, title and how to run it, and every bench rule is a rule object that declares the
finding ids it emits (checked on a quick NumPy run)."""

from __future__ import annotations

import pkgutil

import pytest

import gpuprobe.tools.bench.workloads as package
from gpuprobe.core.rules import Rule, undeclared
from gpuprobe.platform.frameworks.backends import make_backend
from gpuprobe.tools.bench.model import BenchResult, WorkerRun
from gpuprobe.tools.bench.rules import COMMON_RULES, RULES, judge
from gpuprobe.tools.bench.workloads import NAMES, WORKLOADS, Settings, by_name, run_workload
from gpuprobe.tools.bench.workloads.base import BenchContext, Workload

# Modules of the package that hold what the workloads share, not a workload.
SHARED = {"_common", "base"}


def test_every_workload_module_is_in_the_registry() -> None:
    modules = {m.name for m in pkgutil.iter_modules(package.__path__)} - SHARED
    assert modules == set(NAMES)
    for name in modules:
        module = __import__(f"{package.__name__}.{name}", fromlist=["WORKLOAD"])
        assert by_name(name) is module.WORKLOAD
        assert module.WORKLOAD in WORKLOADS


@pytest.mark.parametrize("w", WORKLOADS, ids=lambda w: w.name)
def test_each_workload_says_its_name_title_and_run(w: Workload) -> None:
    assert isinstance(w, Workload)
    assert w.name and w.title.startswith(f"{w.name}: ")
    assert callable(w.run)
    assert w.rate in ("gbs", "tflops")
    assert all(isinstance(r, Rule) for r in w.rules)


def test_the_rules_are_rule_objects_in_order() -> None:
    assert all(isinstance(r, Rule) for r in RULES)
    assert RULES[: len(COMMON_RULES)] == COMMON_RULES
    assert set(RULES) == set(COMMON_RULES) | {r for w in WORKLOADS for r in w.rules}
    assert len(RULES) == len(set(RULES))
    ids = [i for r in RULES for i in r.ids]
    assert len(ids) == len(set(ids)), "each finding id belongs to one rule"


def test_by_name_and_an_unknown_workload() -> None:
    assert by_name("not-a-workload") is None
    with pytest.raises(ValueError, match="unknown workload"):
        list(run_workload("not-a-workload", make_backend("numpy", "cpu"), Settings(quick=True)))


@pytest.fixture(scope="module")
def quick_numpy() -> list[BenchResult]:
    b = make_backend("numpy", "cpu")
    s = Settings(quick=True, budget_s=0.005, rep_limit_s=2.0)
    return [r for w in WORKLOADS for r in w.run(b, s)]


def test_no_rule_emits_an_id_it_does_not_declare(quick_numpy: list[BenchResult]) -> None:
    workers = [WorkerRun("numpy", "cpu", others_cores=0.0), WorkerRun("torch", "cpu", error="x")]
    ctx = BenchContext(quick_numpy, workers, None)
    assert undeclared(RULES, ctx) == []
    found = {f.id for f in judge(quick_numpy, workers)}
    assert {"bench-worker-failed", "bench-multi-skipped"} <= found
