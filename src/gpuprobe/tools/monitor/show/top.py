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
from gpuprobe.ui.console import HangingLine, make_console

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


def _cpu_processes(view: TopView, rows: int | None) -> RenderableType:
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
    for pid, name, user, cpu, rss in view.cpu_processes()[:rows]:
        t.add_row(str(pid), name, user, f"{cpu:.0f}", _gib(rss))
    return t


# Columns a core's cell takes in the host grid: "  NNN [" + 12 bar + "] 100.0%", and the gap
CORE_CELL = 26
CORE_GAP = 3
SPARK_MAX = 40  # samples of history a sparkline shows at most
SPARK_MIN = 5  # fewer columns left than this: no sparkline
BAR_WIDTH = 24  # a GPU's or the host's bar, in blocks (fewer on a narrow screen)


def render_top(view: TopView) -> RenderableType:
    """The whole screen: fitted to the console's width and, on a terminal, to its height."""
    return _Screen(view)


class _Screen:
    """``gpuprobe top``'s frame, drawn for the console it prints on: bars and sparklines as wide
    as the line allows, the core grid in as many columns as fit, and on a terminal only as many
    process rows and core rows as its height leaves, so that the essentials (each GPU's bars,
    power and clocks, the host's CPU and memory) stay on a small screen."""

    def __init__(self, view: TopView) -> None:
        self.view = view

    def __rich_console__(self, console: Console, options: Any) -> Any:
        width = options.max_width
        height = options.height or (console.height if console.is_terminal else None)
        parts = _parts(self.view, width, None, True)
        if height is not None:
            plain = options.update(height=None)
            # fewer process rows first, then the core grid, until the frame fits the screen
            for rows, grid in [(n, True) for n in range(CPU_ROWS_MAX, -1, -1)] + [(0, False)]:
                if len(console.render_lines(Group(*parts), plain, pad=False)) <= height:
                    break
                parts = _parts(self.view, width, rows, grid)
        yield Group(*parts)


CPU_ROWS_MAX = 8  # process rows shown per table when the screen's height does not limit them


def _parts(view: TopView, width: int, rows: int | None, grid: bool) -> list[RenderableType]:
    """The frame's lines for ``width`` columns, with at most ``rows`` rows in each process table
    (None: all) and the per-core grid when ``grid``."""
    s = view.samples[-1] if view.samples else None
    parts: list[RenderableType] = []
    m = view.machine()
    bar_w = max(8, min(BAR_WIDTH, width - 20))
    # "Host  cpu [" + bar + "]  100.0%  " before a sparkline: 21 columns and the bar
    spark_w = min(SPARK_MAX, width - bar_w - 21)
    spark_w = spark_w if spark_w >= SPARK_MIN else 0
    parts.append(
        HangingLine(
            Text.assemble(
                ("gpuprobe top", "bold"),
                f"  {m.hostname}  {m.cores} cores  "
                f"{m.memory_total / 2**30:.1f} GiB  {time.strftime('%H:%M:%S')}",
            )
        )
    )
    if s is None:
        parts.append(Text("waiting for the first sample…", style="dim"))
        return parts
    gpus = {g.index: g for g in view.sampler.gpus}
    if not s.gpus:
        drv = view.sampler.driver
        parts.append(
            HangingLine(
                Text(
                    f"No GPU: {drv.error or drv.status}. Showing the host and the processes "
                    "using its CPU.",
                    style="yellow",
                )
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
        parts.append(
            HangingLine(Text(f"GPU {gs.index}  {(g.name if g else None) or ''}", style="bold"))
        )
        if view.gpu_lost(gs.index):
            from gpuprobe.platform.hardware.nvml import lost_gpu_fix

            fix = lost_gpu_fix(gs.index)
            parts.append(HangingLine(Text(f"  NVML: GPU is lost. {fix}", style="bold red")))
        elif g is not None and g.nvml_error:
            parts.append(
                HangingLine(Text(f"  NVML cannot read it: {g.nvml_error}", style="yellow"))
            )
        util = Text.assemble("  util ", bar(gs.utilization_gpu, bar_w))
        if spark_w:
            util.append_text(Text.assemble("  ", (sparkline(hist, spark_w), "cyan")))
        parts.append(util)
        parts.append(
            HangingLine(
                Text.assemble(
                    "  mem  ",
                    bar(mem_pct, bar_w),
                    f"  {_gib(gs.memory_used)}/{_gib(g.memory_total if g else None)} GiB",
                )
            )
        )
        limit = g.power_limit_w if g else None
        reasons = [r for r in gs.clock_event_reasons or () if r != "gpu_idle"]
        parts.append(
            HangingLine(
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
        )
        if tick.processes and rows != 0:
            t = Table(box=None, padding=(0, 2), show_edge=False, header_style="dim")
            for col in ("PID", "name", "GPU mem GiB", "SM %", "CPU %", "RSS GiB"):
                t.add_column(col, justify="left" if col == "name" else "right")
            for p in tick.processes[:rows]:
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
        elif tick.processes:
            parts.append(
                Text(f"  {len(tick.processes)} processes (a taller screen lists them)", style="dim")
            )
        else:
            parts.append(Text("  no processes", style="dim"))
    if not s.gpus and rows != 0:
        parts.append(_cpu_processes(view, rows))
    cores = s.host.cpu_percent
    mean = sum(cores) / len(cores) if cores else None
    host_hist: list[float | None] = [
        sum(x.host.cpu_percent) / len(x.host.cpu_percent) if x.host.cpu_percent else None
        for x in view.samples
    ]
    host_line = Text.assemble(("Host", "bold"), "  cpu ", bar(mean, bar_w))
    if spark_w:
        host_line.append_text(Text.assemble("  ", (sparkline(host_hist, spark_w), "cyan")))
    parts.append(host_line)
    if grid and cores:
        cols = max(1, min(4 if len(cores) > 8 else 2, (width + CORE_GAP) // (CORE_CELL + CORE_GAP)))
        table = Table.grid(padding=(0, CORE_GAP))
        for _ in range(cols):
            table.add_column()
        row: list[RenderableType] = []
        for i, v in enumerate(cores):
            row.append(Text.assemble(f"  {i:>3} ", bar(v, width=12)))
            if len(row) == cols:
                table.add_row(*row)
                row = []
        if row:
            table.add_row(*row, *[""] * (cols - len(row)))
        parts.append(table)
    used = s.host.memory_used
    total = m.memory_total
    load = (
        "" if m.load_average is None else "  load " + " ".join(f"{x:.2f}" for x in m.load_average)
    )
    mem = Text.assemble(
        "  mem  ",
        bar(100.0 * used / total if used is not None and total else None, bar_w),
        f"  {_gib(used)}/{_gib(total)} GiB",
    )
    if mem.cell_len + len(load) <= width:
        parts.append(HangingLine(mem.append(load)))
    else:  # the load's label stays with its readings, on a line of their own
        parts.extend((HangingLine(mem), Text("    " + load.strip())))
    return parts


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
    return it. On a terminal the screen is redrawn in place and ``q`` quits (on a dumb one,
    ``TERM=dumb``, each frame is printed and ``q`` still quits); otherwise each frame is printed."""
    from rich.live import Live

    console = console or make_console()
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
                typed = wait(
                    delay
                )  # once per wait: a key read here is compared with every quit key
                if any(k in typed for k in QUIT_KEYS):
                    quit_asked = True
                    return
            deadline = max(deadline + interval, time.monotonic())
            sample = sampler.take()
            view.update(sample)
            if sink is not None:
                sink(sample)
            done += 1

        if console.is_terminal and console.is_dumb_terminal and iterations != 1:
            # TERM=dumb cannot redraw in place (rich's Live would show nothing until the end):
            # each frame is printed, and q still quits
            with _keys() as wait:
                while (iterations is None or done < iterations) and not quit_asked:
                    step(wait)
                    if not quit_asked:
                        console.print(render_top(view))
        elif console.is_terminal and iterations != 1:
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
