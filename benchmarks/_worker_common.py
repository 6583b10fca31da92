"""What both benchmark workers (gpuprobe's and HTA's, in different venvs) need; stdlib only."""

from __future__ import annotations


def vmhwm_mib() -> float | None:
    """This process's own peak RSS (VmHWM; wait4's ru_maxrss also counts the parent at fork)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None
