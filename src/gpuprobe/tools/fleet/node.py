"""What runs on each Dask worker for ``gpuprobe doctor --cluster``: this machine's doctor, as
plain data (a dict that pickles and round-trips through JSON), with the facts that name the node.
Kept small: a worker unpickles this module by name, so a worker without gpuprobe fails here and
is reported as such."""

from __future__ import annotations

import os
import socket
import time
from typing import Any

__all__ = ["node_doctor"]


def node_doctor(quick: bool, run_kernels: bool | None) -> dict[str, Any]:
    """Doctor on this worker's machine: ``{"host", "pid", "report" (DoctorReport.to_dict()),
    "elapsed_s"}``. Kernels run on the worker's GPUs unless ``run_kernels`` is False."""
    from gpuprobe.tools.doctor.engine import doctor

    t0 = time.perf_counter()
    report = doctor(quick, run_kernels=run_kernels)
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "report": report.to_dict(),
        "elapsed_s": round(time.perf_counter() - t0, 3),
    }
