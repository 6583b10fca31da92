"""``gpuprobe top``: the live terminal view (rich) of every GPU, the processes on it, and the host.

Per GPU: utilization and memory bars with a history sparkline, power, temperature, SM clock, PCIe
link and clock event reasons, and the processes on it (GPU memory, SM %, and their host CPU % and
RSS). The host: a bar per core, memory, load. With no GPU the host is shown alone, with the
reason. The data comes from a :class:`~gpuprobe.tools.monitor.live.TopView`.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from gpuprobe.core import render
from gpuprobe.core.units import NA, gib
from gpuprobe.tools.monitor.live import TopView
from gpuprobe.tools.monitor.records import Sample
from gpuprobe.tools.monitor.sampler import NvmlFactory, Sampler

__all__ = ["BUSY_STYLE_PERCENT", "QUIT_KEYS", "bar", "render_top", "run_top", "sparkline"]

_SPARKS = "▁▂▃▄▅▆▇█"
BUSY_STYLE_PERCENT = (50.0, 85.0)  # %: below green... above red-ish; nvtop-like colouring
QUIT_KEYS = ("q", "Q")


def sparkline(values: Sequence[float | None], width: int = 40) -> str:
    """0-100 values as block characters (n/a as a space), the last ``width`` of them."""
    out = []
    for v in list(values)[-width:]:
        if v is None:
            out.append(" ")
        else:
            out.append(_SPARKS[min(len(_SPARKS) - 1, max(0, int(v / 100 * len(_SPARKS))))])
    return "".join(out)


def _style(pct: float) -> str:
    lo, hi = BUSY_STYLE_PERCENT
    return "green" if pct < lo else "yellow" if pct < hi else "red"


def bar(pct: float | None, width: int = 24) -> Text:
    """A text bar for a 0-100 value, coloured by level; n/a when unknown."""
    if pct is None:
        return Text("[" + " " * width + "]  n/a", style="dim")
    pct = max(0.0, min(100.0, pct))
    n = round(pct / 100 * width)
    return Text.assemble("[", ("█" * n, _style(pct)), ("·" * (width - n), "dim"), f"] {pct:5.1f}%")


def _gib(b: float | None) -> str:
    return gib(b, 1, unit=False)


def _na(v: object, unit: str = "") -> str:
    return NA if v is None else f"{v}{unit}"


def _cpu_processes(view: TopView) -> RenderableType:
    t = Table(
        title="busiest processes on the CPU",
        title_justify="left",
        box=None,
        padding=(0, 2),
        show_edge=False,
        header_style="dim",
    )
    for col in ("PID", "name", "user", "CPU %", "RSS GiB"):
        t.add_column(col, justify="left" if col in ("name", "user") else "right")
    for pid, name, user, cpu, rss in view.cpu_processes():
        t.add_row(str(pid), name, user, f"{cpu:.0f}", _gib(rss))
    return t


def render_top(view: TopView) -> RenderableType:
    """The whole screen."""
    s = view.samples[-1] if view.samples else None
    parts: list[RenderableType] = []
    m = view.machine()
    parts.append(
        Text.assemble(
            ("gpuprobe top", "bold"),
            f"  {m.hostname}  {m.cores} cores  "
            f"{m.memory_total / 2**30:.1f} GiB  {time.strftime('%H:%M:%S')}",
        )
    )
    if s is None:
        parts.append(Text("waiting for the first sample…", style="dim"))
        return Group(*parts)
    gpus = {g.index: g for g in view.sampler.gpus}
    if not s.gpus:
        drv = view.sampler.driver
        parts.append(
            Text(
                f"No GPU: {drv.error or drv.status}. Showing the host and the processes "
                "using its CPU.",
                style="yellow",
            )
        )
    for tick in s.gpus:
        gs = tick.sample
        g = gpus.get(gs.index)
        hist: list[float | None] = [
            next((t.sample.utilization_gpu for t in x.gpus if t.sample.index == gs.index), None)
            for x in view.samples
        ]
        mem_pct = (
            100.0 * gs.memory_used / g.memory_total
            if g and g.memory_total and gs.memory_used is not None
            else None
        )
        parts.append(Text(f"GPU {gs.index}  {(g.name if g else None) or ''}", style="bold"))
        if view.gpu_lost(gs.index):
            from gpuprobe.platform.hardware.nvml import lost_gpu_fix

            fix = lost_gpu_fix(gs.index)
            parts.append(Text(f"  NVML: GPU is lost. {fix}", style="bold red"))
        elif g is not None and g.nvml_error:
            parts.append(Text(f"  NVML cannot read it: {g.nvml_error}", style="yellow"))
        parts.append(
            Text.assemble("  util ", bar(gs.utilization_gpu), "  ", (sparkline(hist), "cyan"))
        )
        parts.append(
            Text.assemble(
                "  mem  ",
                bar(mem_pct),
                f"  {_gib(gs.memory_used)}/{_gib(g.memory_total if g else None)} GiB",
            )
        )
        limit = g.power_limit_w if g else None
        reasons = [r for r in gs.clock_event_reasons or () if r != "gpu_idle"]
        parts.append(
            Text(
                f"  power {_na(None if gs.power_w is None else round(gs.power_w))}"
                f"/{_na(None if limit is None else round(limit))} W  temp "
                f"{_na(gs.temperature_c, ' °C')}  SM {_na(gs.sm_clock_mhz, ' MHz')}  "
                f"mem {_na(gs.mem_clock_mhz, ' MHz')}  PCIe gen{_na(gs.pcie_gen)} "
                f"x{_na(gs.pcie_width)}"
                + (
                    # NVML counts PCIe throughput in KiB/s (nvml.h "KB/s", 1024 bytes)
                    f"  rx {gs.pcie_rx_kbs / 1024:.0f} tx {gs.pcie_tx_kbs / 1024:.0f} MiB/s"
                    if gs.pcie_rx_kbs is not None and gs.pcie_tx_kbs is not None
                    else ""
                )
                + (f"  clocks held by: {', '.join(reasons)}" if reasons else ""),
            )
        )
        if tick.processes:
            t = Table(box=None, padding=(0, 2), show_edge=False, header_style="dim")
            for col in ("PID", "name", "GPU mem GiB", "SM %", "CPU %", "RSS GiB"):
                t.add_column(col, justify="left" if col == "name" else "right")
            for p in tick.processes:
                host = view.process_host(p.pid)
                cpu = NA if host.cpu_percent is None else f"{host.cpu_percent:.0f}"
                t.add_row(
                    str(p.pid),
                    host.name,
                    _gib(p.used_memory),
                    _na(p.sm_percent),
                    cpu,
                    _gib(host.rss),
                )
            parts.append(t)
        else:
            parts.append(Text("  no processes", style="dim"))
    if not s.gpus:
        parts.append(_cpu_processes(view))
    cores = s.host.cpu_percent
    mean = sum(cores) / len(cores) if cores else None
    host_hist: list[float | None] = [
        sum(x.host.cpu_percent) / len(x.host.cpu_percent) if x.host.cpu_percent else None
        for x in view.samples
    ]
    parts.append(
        Text.assemble(("Host", "bold"), "  cpu ", bar(mean), "  ", (sparkline(host_hist), "cyan"))
    )
    cols = 4 if len(cores) > 8 else 2
    grid = Table.grid(padding=(0, 3))
    for _ in range(cols):
        grid.add_column()
    row: list[RenderableType] = []
    for i, v in enumerate(cores):
        row.append(Text.assemble(f"  {i:>3} ", bar(v, width=12)))
        if len(row) == cols:
            grid.add_row(*row)
            row = []
    if row:
        grid.add_row(*row, *[""] * (cols - len(row)))
    parts.append(grid)
    used = s.host.memory_used
    total = m.memory_total
    load = (
        "" if m.load_average is None else "  load " + " ".join(f"{x:.2f}" for x in m.load_average)
    )
    parts.append(
        Text.assemble(
            "  mem  ",
            bar(100.0 * used / total if used is not None and total else None),
            f"  {_gib(used)}/{_gib(total)} GiB{load}",
        )
    )
    return Group(*parts)


def _sleep(seconds: float) -> str:
    time.sleep(seconds)
    return ""


@contextlib.contextmanager
def _keys() -> Iterator[Callable[[float], str]]:
    """A function that waits up to its argument in seconds for keys typed on the terminal and
    returns them ("" when none). The terminal is in cbreak mode meanwhile (keys arrive without
    Enter, Ctrl-C still interrupts) and is put back afterwards."""
    try:
        import termios
        import tty

        fd = sys.stdin.fileno()
        old = termios.tcgetattr(fd) if os.isatty(fd) else None
    except (ImportError, OSError, ValueError, AttributeError):
        old = None
    if old is None:
        yield _sleep
        return

    def wait(seconds: float) -> str:
        ready, _, _ = select.select([fd], [], [], max(0.0, seconds))
        if not ready:
            return ""
        return os.read(fd, 64).decode(errors="replace") or ""

    try:
        tty.setcbreak(fd)
        yield wait
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, old)


def run_top(
    *,
    interval: float = 1.0,
    iterations: int | None = None,
    console: Console | None = None,
    nvml: NvmlFactory | None = None,
    sink: Callable[[Sample], None] | None = None,
    pcie_throughput: bool = False,
) -> TopView:
    """Show the view every ``interval`` seconds, ``iterations`` times (forever when None) and
    return it. On a terminal the screen is redrawn in place and ``q`` quits; otherwise each frame
    is printed."""
    from rich.live import Live

    console = console or Console()
    kwargs: dict[str, Any] = {} if nvml is None else {"nvml": nvml}
    hz = min(20.0, max(0.1, 1.0 / interval))
    with Sampler(hz=hz, pcie_throughput=pcie_throughput, **kwargs) as sampler:
        view = TopView(sampler)
        if not sampler.gpus:
            view.cpu_processes()  # a process's CPU % is measured from this first reading on
        first_wait = min(interval, 0.5)  # CPU % needs two readings
        deadline = time.monotonic() + first_wait
        done = 0

        quit_asked = False

        def step(wait: Callable[[float], str]) -> None:
            nonlocal deadline, done, quit_asked
            while (delay := deadline - time.monotonic()) > 0:
                if any(k in wait(delay) for k in QUIT_KEYS):
                    quit_asked = True
                    return
            deadline = max(deadline + interval, time.monotonic())
            sample = sampler.take()
            view.update(sample)
            if sink is not None:
                sink(sample)
            done += 1

        if console.is_terminal and iterations != 1:
            with (
                _keys() as wait,
                Live(
                    render_top(view),
                    console=console,
                    auto_refresh=False,
                    screen=iterations is None,
                ) as live,
            ):
                while (iterations is None or done < iterations) and not quit_asked:
                    step(wait)
                    if not quit_asked:
                        live.update(render_top(view), refresh=True)
        else:
            while iterations is None or done < iterations:
                step(_sleep)
                console.print(render_top(view))
    return view


render.renderable.register(TopView, render_top)
