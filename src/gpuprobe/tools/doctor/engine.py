"""``gpuprobe doctor``: does this GPU setup really work? Verdicts with evidence and the fix.

Checks come in groups (driver, environment, frameworks, each GPU, performance); each is a rule in
:data:`gpuprobe.tools.doctor.rules.RULES`. The first four judge the
:class:`~gpuprobe.platform.inventory.Inventory`; performance judges real kernels, which this
module runs, each (framework, device) in its own child process
(:mod:`gpuprobe.tools.doctor.worker`), one after another so that they do not compete for the card
or the cores.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterable

from gpuprobe.core.findings import Finding
from gpuprobe.core.rules import apply_rules
from gpuprobe.platform.hardware.load import HostLoad
from gpuprobe.platform.inventory import Inventory
from gpuprobe.platform.proc import child_env, python_module
from gpuprobe.tools.doctor.model import DoctorContext, DoctorReport
from gpuprobe.tools.doctor.worker import WorkerResult

__all__ = ["doctor", "judge", "plan_workers", "run_workers"]

WORKER_TIMEOUT_S = 300.0


def plan_workers(inv: Inventory) -> list[tuple[str, str, bool]]:
    """(framework, device, time the big matmul) to run: the CPU baseline, then every GPU each
    framework sees. The CPU's matmul is timed once, and only as a GPU's baseline."""
    torch = inv.framework("torch")
    cpu_torch = torch is not None and torch.installed and torch.importable is not False
    gpu = inv.has_gpu
    plan = [("numpy", "cpu", gpu and not cpu_torch)]
    if cpu_torch:
        plan.append(("torch", "cpu", gpu))
    for name in ("torch", "cupy", "jax"):
        f = inv.framework(name)
        if f is None or not f.importable:
            continue
        plan.extend((name, f"cuda:{d.index}", True) for d in f.devices)
    return plan


def run_workers(
    plan: Iterable[tuple[str, str, bool]],
    quick: bool,
    progress: Callable[[str], None] | None = None,
) -> list[WorkerResult]:
    """Run each planned check in its own child process, one at a time."""
    env = child_env(XLA_PYTHON_CLIENT_PREALLOCATE="false")
    out = []
    for framework, device, time_matmul in plan:
        if progress:
            progress(f"{framework} on {device}")
        cmd = python_module("gpuprobe.tools.doctor.worker", framework, device)
        if quick:
            cmd.append("--quick")
        if not time_matmul:
            cmd.append("--no-matmul")
        try:
            p = subprocess.run(
                cmd, capture_output=True, text=True, env=env, timeout=WORKER_TIMEOUT_S, check=False
            )
            out.append(WorkerResult.from_dict(json.loads(p.stdout)))
        except subprocess.TimeoutExpired:
            out.append(
                WorkerResult(
                    framework, device, error=f"did not finish within {WORKER_TIMEOUT_S:.0f} s"
                )
            )
        except (json.JSONDecodeError, TypeError, ValueError):
            tail = (p.stderr.strip().splitlines() or [f"exit code {p.returncode}"])[-1]
            out.append(WorkerResult(framework, device, error=f"crashed: {tail}"))
    return out


def judge(
    inv: Inventory,
    workers: list[WorkerResult] | None = None,
    others_cores: float | None = None,
) -> list[Finding]:
    """Every finding for ``inv`` and, when given, the kernel checks' results and the cores other
    processes kept busy while they ran. Pure: no I/O."""
    from gpuprobe.tools.doctor.rules import RULES

    return apply_rules(
        RULES, DoctorContext(inv, None if workers is None else tuple(workers), others_cores)
    )


def doctor(
    quick: bool = False,
    *,
    inventory: Inventory | None = None,
    run_kernels: bool | None = None,
    progress: Callable[[str], None] | None = None,
) -> DoctorReport:
    """Check this machine (or a recorded ``inventory``) and return the report.

    ``quick`` uses smaller problems. Kernels run on a live machine; a recorded inventory is judged
    without them unless ``run_kernels`` says otherwise.
    """
    from gpuprobe.platform.inventory import inventory as read_inventory

    t0 = time.perf_counter()
    live = inventory is None
    if progress:
        progress("reading the machine")
    inv = read_inventory(frameworks="runtime") if inventory is None else inventory
    if run_kernels is None:
        run_kernels = live
    others = None
    if run_kernels:
        load = HostLoad(children=True)
        workers = run_workers(plan_workers(inv), quick, progress)
        others = load.others_cores()
    else:
        workers = None
    findings = judge(inv, workers, others)
    return DoctorReport(
        inventory=inv,
        findings=tuple(findings),
        workers=tuple(workers or ()),
        elapsed_s=round(time.perf_counter() - t0, 3),
        live=live,
        others_cores=None if others is None else round(others, 3),
    )
