"""How an :class:`~gpuprobe.platform.energy.EnergyReading` reads: one short line as its repr, a
few lines as text (each GPU, the host, and the reason where a figure is an estimate or missing)."""

from __future__ import annotations

from gpuprobe.core import render
from gpuprobe.core.units import joules, seconds
from gpuprobe.core.wrap import hang_lines
from gpuprobe.platform.energy import EnergyReading

__all__ = ["energy_repr", "energy_text"]


def _j(j: float | None) -> str:
    return joules(j, missing="not measured")


def energy_repr(r: EnergyReading) -> str:
    parts = [f"{_j(r.joules)} in {seconds(r.seconds)}"]
    if r.gpus:
        est = " (estimate)" if any(g.estimate for g in r.gpus) else ""
        parts.append(f"GPUs {_j(r.gpu_joules)}{est}")
    else:
        parts.append("no GPU")
    parts.append(f"host {_j(r.host_joules)}")
    return render.one_line("EnergyReading", "; ".join(parts))


def energy_text(r: EnergyReading) -> str:
    watts = f", {r.watts:.1f} W on average" if r.watts is not None else ""
    lines = [f"energy over {seconds(r.seconds)}: {_j(r.joules)}{watts}"]
    for g in r.gpus:
        how = " (estimate: power × time)" if g.estimate else ""
        lines.append(f"  GPU {g.index} {g.name or ''}".rstrip() + f": {_j(g.joules)}{how}")
        if g.note:
            lines.append(f"    {g.note}")
    if r.gpu_note:
        lines.append(f"  {r.gpu_note}")
    zones = f" ({', '.join(r.host.zones)})" if r.host.zones else ""
    lines.append(f"  host CPU packages{zones}: {_j(r.host.joules)}")
    if r.host.note:
        lines.append(f"    {r.host.note}")
    return "\n".join(hang_lines(lines))


render.repr_.register(EnergyReading, energy_repr)
render.text.register(EnergyReading, energy_text)
