"""Build small timelines in memory for the rules' tests (deterministic, no clocks)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpuprobe.platform.hardware.types import Driver, Gpu, GpuSample, Host
from gpuprobe.tools.monitor.records import (
    GpuProcSample,
    GpuTick,
    HostSample,
    ProcSample,
    Sample,
    TimelineHeader,
    TreeSample,
)
from gpuprobe.tools.monitor.timeline import Timeline

__all__ = ["GIB", "MAIN_PID", "build"]

GIB = 2**30
MAIN_PID = 100
GPU0 = Gpu(
    index=0, name="NVIDIA RTX A5000", uuid="GPU-test", memory_total=24 * GIB, power_limit_w=230.0
)


def build(
    n: int = 40,
    *,
    util: Callable[[int], int | None] | None = lambda i: 95,
    mem: Callable[[int], int] = lambda i: 10 * GIB,
    reasons: Callable[[int], Sequence[str]] = lambda i: (),
    clock: Callable[[int], int] = lambda i: 1695,
    main_thread: Callable[[int], float] = lambda i: 20.0,
    tree_cpu: Callable[[int], float] | None = None,
    children: Callable[[int], Sequence[float]] = lambda i: (),
    host_cpu: Callable[[int], Sequence[float]] = lambda i: (20.0,) * 8,
    rss: Callable[[int], int] = lambda i: 2 * GIB,
    available: Callable[[int], int] = lambda i: 20 * GIB,
    gpu_pids: Callable[[int], Sequence[int]] = lambda i: (MAIN_PID,),
    energy_mj: Callable[[int], int | None] = lambda i: None,
    gpus: bool = True,
    end: bool = True,
    exit_code: int = 0,
) -> Timeline:
    """A timeline of ``n`` samples at 2 Hz; each argument gives a value per sample index."""
    header = TimelineHeader(
        started=1000.0,
        hz=2.0,
        host=Host(hostname="t", logical_cores=8, memory_total=32 * GIB),
        driver=Driver(status="ok") if gpus else Driver(status="no-library", error="no NVML"),
        gpus=(GPU0,) if gpus else (),
        command=("python", "train.py"),
        pid=MAIN_PID,
    )
    samples = []
    for i in range(n):
        t = 1000.0 + (i + 1) * 0.5
        kids = tuple(
            ProcSample(pid=200 + k, cpu_percent=c, rss=GIB // 4, threads=2)
            for k, c in enumerate(children(i))
        )
        main = main_thread(i)
        tree = TreeSample(
            cpu_percent=tree_cpu(i) if tree_cpu else main + sum(c.cpu_percent for c in kids),
            rss=rss(i),
            threads=10,
            processes=1 + len(kids),
            main_cpu_percent=main,
            main_thread_max_percent=main,
            children=kids,
        )
        ticks: tuple[GpuTick, ...] = ()
        if gpus:
            u = util(i) if util else None
            ticks = (
                GpuTick(
                    sample=GpuSample(
                        index=0,
                        time=t,
                        utilization_gpu=u,
                        memory_used=mem(i),
                        power_w=150.0,
                        temperature_c=70,
                        sm_clock_mhz=clock(i),
                        clock_event_reasons=tuple(reasons(i)),
                        energy_mj=energy_mj(i),
                    ),
                    processes=tuple(
                        GpuProcSample(pid=p, used_memory=GIB, sm_percent=u) for p in gpu_pids(i)
                    ),
                ),
            )
        samples.append(
            Sample(
                t=t,
                host=HostSample(
                    cpu_percent=tuple(host_cpu(i)),
                    memory_used=8 * GIB,
                    memory_available=available(i),
                ),
                tree=tree,
                gpus=ticks,
                sampler_cpu_s=0.001 * i,
            )
        )
    end_line = (
        {
            "type": "end",
            "t": 1000.0 + (n + 1) * 0.5,
            "exit_code": exit_code,
            "sampler_cpu_s": 0.001 * n,
            "sampler_wall_s": n * 0.5,
        }
        if end
        else None
    )
    return Timeline(header=header, samples=samples, end=end_line)
