"""The public API: every function a user calls, typed, in one package.

One module per family (``machine``, ``jobs``, ``traces``, ``memory``, ``scale``), all re-exported
here; ``gpuprobe/__init__.py`` re-exports these names. Each function imports its implementation when it
is called, so ``import gpuprobe`` stays cheap (no NVML, no torch, no matplotlib); the
``TYPE_CHECKING`` block gives type checkers and IDEs the real types, so
``reveal_type(gpuprobe.doctor())`` is :class:`~gpuprobe.tools.doctor.model.DoctorReport`.

The signatures here repeat those of the implementations (the defaults as literals, to keep these
modules free of imports); ``tests/test_api.py`` checks that they stay the same.

Units: seconds, bytes, hertz.
"""

from __future__ import annotations

from gpuprobe.api.jobs import (
    pack,
    parse_counts,
    plot_timeline,
    profile_command,
    profile_now,
    read_timeline,
    record,
    run,
    serve_metrics,
    summarize,
    top,
    write_run_report,
)
from gpuprobe.api.machine import (
    bench,
    doctor,
    energy,
    fleet_bench,
    fleet_doctor,
    inventory,
    load_inventory,
)
from gpuprobe.api.memory import (
    classify_oom,
    demo_device,
    demo_encoder,
    demo_fit_step,
    demo_models,
    explain_oom,
    fit,
    install_oom_hook,
    precision_dtypes,
    precision_sweep,
    uninstall_oom_hook,
)
from gpuprobe.api.scale import available_cores, lstsq, scale_lstsq
from gpuprobe.api.traces import (
    compare,
    diagnose,
    diagnose_folder,
    diagnose_ranks,
    diagnose_with_context,
    find_trace_files,
    kernel_breakdown,
    kernel_diff,
    write_diagnosis_html,
    write_folder_html,
)

__all__ = [
    "available_cores",
    "bench",
    "classify_oom",
    "compare",
    "demo_device",
    "demo_encoder",
    "demo_fit_step",
    "demo_models",
    "diagnose",
    "diagnose_folder",
    "diagnose_ranks",
    "diagnose_with_context",
    "doctor",
    "energy",
    "explain_oom",
    "find_trace_files",
    "fit",
    "fleet_bench",
    "fleet_doctor",
    "install_oom_hook",
    "inventory",
    "kernel_breakdown",
    "kernel_diff",
    "load_inventory",
    "lstsq",
    "pack",
    "parse_counts",
    "plot_timeline",
    "precision_dtypes",
    "precision_sweep",
    "profile_command",
    "profile_now",
    "read_timeline",
    "record",
    "run",
    "scale_lstsq",
    "serve_metrics",
    "summarize",
    "top",
    "uninstall_oom_hook",
    "write_diagnosis_html",
    "write_folder_html",
    "write_run_report",
]

# Each function checks what it is given against its annotations (api/_edge.py): a wrong argument
# is a UsageError that names the parameter, not a TypeError from deep inside.
from gpuprobe.api._edge import checked

for _name in __all__:
    globals()[_name] = checked(globals()[_name])
del _name
