"""Throttling: the clock event reasons NVML reported while the GPU worked, which and when.

Reasons that are no slowdown under load (idle, application clocks, display, sync boost) are
left out when the statistics are taken (:mod:`gpuprobe.tools.monitor.summary`).
"""

from __future__ import annotations

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.tools.monitor.rules._common import GROUP, gpu_label, gpu_subject
from gpuprobe.tools.monitor.summary import GpuStats, RunContext

__all__ = ["THROTTLE_MIN_FRACTION", "gpu_throttle"]

THROTTLE_MIN_FRACTION = 0.05  # of busy samples showing a reason before it is reported

# A power cap at full load is the card working as designed; thermal and hardware slowdowns are not.
_INFO_REASONS = frozenset({"sw_power_cap"})


@rule("monitor-gpu-throttle")
def gpu_throttle(ctx: RunContext, st: GpuStats) -> list[Finding]:
    """``monitor-gpu-throttle``: one finding per reason seen in at least
    :data:`THROTTLE_MIN_FRACTION` of the busy samples, most frequent first (a power cap is
    information, thermal and hardware slowdowns are warnings)."""
    out: list[Finding] = []
    for reason, frac in sorted(st.reasons.items(), key=lambda kv: -kv[1]):
        if frac < THROTTLE_MIN_FRACTION:
            continue
        status = Status.INFO if reason in _INFO_REASONS else Status.WARN
        out.append(
            Finding(
                id="monitor-gpu-throttle",
                status=status,
                title=f"{gpu_label(st)} clocks held back by {reason} in {100 * frac:.0f}% of "
                f"busy samples, first at {st.reasons_first_s.get(reason, 0):.0f} s",
                evidence=(
                    Evidence("reason", reason, ""),
                    Evidence("busy_samples_fraction", round(100 * frac, 1), "%"),
                    Evidence("first_seen", st.reasons_first_s.get(reason), "s"),
                    Evidence("sm_clock_median", st.sm_clock_median_mhz, "MHz"),
                    Evidence("temperature_max", st.temperature_max_c, "C"),
                    Evidence("power_max", st.power_max_w, "W"),
                ),
                fix=(
                    "Normal at full load at the power limit; check `nvidia-smi -q -d POWER` if "
                    "the limit was lowered"
                    if status is Status.INFO
                    else "Check cooling and airflow (fans, blocked intake, a hot rack); "
                    "`nvidia-smi -q -d PERFORMANCE,TEMPERATURE` shows the slowdown live"
                ),
                group=GROUP,
                subject=gpu_subject(st),
            )
        )
    return out
