"""Framework probes: the fast static probe agrees with importing, and the install commands."""

from __future__ import annotations

from gpuprobe.platform.frameworks.probe import runtime_probe_all, static_probe_all
from gpuprobe.platform.frameworks.torch_builds import install_command


def test_static_probe_agrees_with_the_runtime_probe() -> None:
    static = {f.name: f for f in static_probe_all()}
    runtime = {f.name: f for f in runtime_probe_all(("torch",))}
    s, r = static["torch"], runtime["torch"]
    assert s.installed and r.installed and r.importable
    assert s.version == r.version
    assert s.cuda_version == r.cuda_version and s.cpu_only_build == r.cpu_only_build
    assert r.probe == "runtime" and s.probe == "static"
    assert not static["cupy"].installed or static["cupy"].distribution


def test_install_command_picks_the_newest_build_the_driver_runs() -> None:
    assert install_command("2.5.1+cpu", "12.4").endswith("whl/cu124")
    assert install_command("2.5.1+cpu", "12.2").endswith("whl/cu121")
    assert install_command("2.7.0", "13.0").endswith("whl/cu128")
    assert "'torch==2.13.0'" in install_command("2.13.0+cpu", "13.0")
    assert install_command("2.13.0+cpu", "13.0").endswith("whl/cu130")  # newer than the table
