"""The host's CPU: other processes' load on it, how many cores the command used, and a main
thread bound to one core."""

from __future__ import annotations

import dataclasses

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.platform.hardware.load import host_busy_finding
from gpuprobe.tools.monitor.rules._common import GROUP, enough_samples
from gpuprobe.tools.monitor.rules.starvation import ONE_THREAD_MAX_CORES, PEGGED_MIN_FRACTION
from gpuprobe.tools.monitor.summary import RunContext

__all__ = ["HOST_WAIT_MIN_CORES", "cpu_main_thread", "cpu_usage", "host_busy"]

# A busy host is reported for a command that used at least this many cores on average, or whose
# busiest thread waited that much for a core (ran + waited, less ran; schedstat): gpuprobe's
# choice, a tenth of a core; a command that sleeps or waits on the GPU loses nothing to the load.
HOST_WAIT_MIN_CORES = 0.1


@rule("monitor-host-busy", applies=enough_samples)
def host_busy(ctx: RunContext) -> list[Finding]:
    """``monitor-host-busy``: other processes kept the host's cores busy while a command that
    wanted the CPU (at least :data:`HOST_WAIT_MIN_CORES` used or waited for) ran."""
    host = ctx.host
    wants = host.main_thread_wants_mean_percent
    got = host.main_thread_mean_percent
    waited = (wants - got) / 100 if wants is not None and got is not None else None
    # a command that sleeps or waits on the GPU loses nothing to a busy host: only one that
    # used the CPU or waited for a core is judged
    wanted_cpu = (waited or 0) >= HOST_WAIT_MIN_CORES or (
        host.command_cores_mean or 0
    ) >= HOST_WAIT_MIN_CORES
    # measured (schedstat's runnable time, where the kernel gives it): the busiest thread's wait
    # for a core says whether the load slowed it; without it, wants is only what the thread got
    measured = any(
        s.tree is not None and s.tree.main_thread_runnable_percent is not None
        for s in ctx.timeline.samples
    )
    spared = measured and waited is not None and waited < HOST_WAIT_MIN_CORES
    effect = f"it got {host.command_cores_mean or 0:.2f} cores on average"
    if wants is not None:
        effect += f" while its busiest thread wanted {wants / 100:.2f} (ran + waited for a core)"
    effect += (
        f"; that thread waited for a core only {waited:.2f} of the time, so the load barely "
        "slowed it"
        if spared
        else ", so it ran slower than it would on an idle machine"
    )
    busy = host_busy_finding(
        "monitor-host-busy",
        "the command" if ctx.timeline.header.command else "the block",
        host.others_cores_mean if wanted_cpu else None,
        host.cores,
        effect=effect,
        fix="run it when the machine is idle (see 'gpuprobe top' for who uses the cores), or ask "
        "for dedicated cores (taskset, a job scheduler's --cpus-per-task)",
        group=GROUP,
        subject="host",
    )
    if busy is not None and spared:  # a fact about the machine, not a slowdown of the command
        busy = dataclasses.replace(busy, status=Status.INFO)
    return [] if busy is None else [busy]


def _cores_measured(ctx: RunContext) -> bool:
    """Enough samples, and the command's cores were measured."""
    return ctx.enough_samples and ctx.host.command_cores_mean is not None


@rule("monitor-cpu-usage", applies=_cores_measured)
def cpu_usage(ctx: RunContext) -> list[Finding]:
    """``monitor-cpu-usage``: the cores the command's process tree used, mean and peak."""
    host = ctx.host
    return [
        Finding(
            id="monitor-cpu-usage",
            status=Status.INFO,
            title=f"The command used {host.command_cores_mean:.2f} of {host.cores} cores on "
            f"average (peak {host.command_cores_peak:.2f})",
            evidence=(
                Evidence("command_cores_mean", host.command_cores_mean, "cores"),
                Evidence("command_cores_peak", host.command_cores_peak, "cores"),
                Evidence("host_cpu_mean", host.cpu_mean_percent, "%"),
                Evidence("host_cores", host.cores, "cores"),
                Evidence("workers_max", host.workers_max, ""),
            ),
            group=GROUP,
            subject="host",
        )
    ]


@rule("monitor-cpu-main-thread", applies=enough_samples)
def cpu_main_thread(ctx: RunContext) -> list[Finding]:
    """``monitor-cpu-main-thread``: one thread of the main process pegged a core in at least
    :data:`~gpuprobe.tools.monitor.rules.starvation.PEGGED_MIN_FRACTION` of the run, on a host with
    more than one core, while the command used at most
    :data:`~gpuprobe.tools.monitor.rules.starvation.ONE_THREAD_MAX_CORES` cores on average (one
    that used more was not bound to one thread)."""
    host = ctx.host
    pegged = host.main_thread_pegged_fraction or 0
    if pegged < PEGGED_MIN_FRACTION or host.cores <= 1:
        return []
    if (host.command_cores_mean or 0) > ONE_THREAD_MAX_CORES:
        return []
    return [
        Finding(
            id="monitor-cpu-main-thread",
            status=Status.INFO,
            title=f"One thread of the main process pegged a core in "
            f"{100 * pegged:.0f}% of the run: it is bound to one of {host.cores} cores",
            evidence=(
                Evidence("main_thread_pegged_fraction", round(100 * pegged, 1), "%"),
                Evidence("main_thread_cpu_mean", host.main_thread_mean_percent, "%"),
                Evidence("main_thread_wants_mean", host.main_thread_wants_mean_percent, "%"),
                Evidence("host_cores", host.cores, "cores"),
            ),
            fix="Vectorise the hot loop (NumPy/torch ops instead of Python loops), or spread "
            "it over processes (multiprocessing, DataLoader workers, Dask)",
            group=GROUP,
            subject="host",
        )
    ]
