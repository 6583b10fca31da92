"""Probe every framework: statically (package files, fast) or at run time (one child process per
framework, all at once). ``python -m gpuprobe.platform.frameworks.probe NAME`` is the child."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping

from gpuprobe.platform.frameworks import FRAMEWORKS
from gpuprobe.platform.frameworks.base import FrameworkInfo, import_failed
from gpuprobe.platform.proc import child_env, python_module

__all__ = ["CHILD_TIMEOUT_S", "probe_frameworks", "runtime_probe_all", "static_probe_all"]

CHILD_TIMEOUT_S = 120.0  # a first CUDA init plus a cold import of torch or jax can take a minute


def _door(name: str) -> object:
    return importlib.import_module(f"gpuprobe.platform.frameworks.{name}")


def static_probe_all(names: Iterable[str] = FRAMEWORKS) -> tuple[FrameworkInfo, ...]:
    """What is installed, from package metadata; imports nothing."""
    return tuple(_door(n).static_probe() for n in names)  # type: ignore[attr-defined]


def runtime_probe_all(
    names: Iterable[str] = FRAMEWORKS, env: Mapping[str, str] | None = None
) -> tuple[FrameworkInfo, ...]:
    """Import each installed framework in its own child process, all in parallel."""
    statics = {s.name: s for s in static_probe_all(names)}
    helper_env = child_env(env)
    helper_env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    procs = {
        name: subprocess.Popen(
            python_module("gpuprobe.platform.frameworks.probe", name),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=helper_env,
        )
        for name, s in statics.items()
        if s.installed
    }
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    out = []
    for name, s in statics.items():
        p = procs.get(name)
        if p is None:
            out.append(s)
            continue
        try:
            stdout, stderr = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            out.append(import_failed(s, f"probe did not finish within {CHILD_TIMEOUT_S:.0f} s"))
            continue
        try:
            out.append(FrameworkInfo.from_dict(json.loads(stdout)))
        except (json.JSONDecodeError, TypeError, ValueError):
            tail = (stderr.strip().splitlines() or [f"exit code {p.returncode}"])[-1]
            out.append(import_failed(s, f"import crashed: {tail}"))
    return tuple(out)


def probe_frameworks(runtime: bool) -> tuple[FrameworkInfo, ...]:
    """Runtime probe when asked, static otherwise."""
    return runtime_probe_all() if runtime else static_probe_all()


if __name__ == "__main__":
    from gpuprobe.platform.proc import die_with_parent

    die_with_parent()  # a helper never outlives gpuprobe
    info = _door(sys.argv[1]).runtime_probe()  # type: ignore[attr-defined]
    sys.stdout.write(json.dumps(info.to_dict()))
