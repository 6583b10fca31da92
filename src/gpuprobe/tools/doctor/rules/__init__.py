"""The rules of ``gpuprobe doctor``, one module per group: the driver, the environment, the
frameworks, each GPU, the performance of real kernels, and the host's load while they ran. Each rule judges a
:class:`~gpuprobe.tools.doctor.model.DoctorContext`; the judge is ``apply_rules(RULES, ctx)``
(:func:`gpuprobe.tools.doctor.engine.judge`).
"""

from __future__ import annotations

from gpuprobe.core.rules import Rule
from gpuprobe.tools.doctor.rules.driver import check_cuda_init, check_driver
from gpuprobe.tools.doctor.rules.env import check_env
from gpuprobe.tools.doctor.rules.frameworks import check_frameworks
from gpuprobe.tools.doctor.rules.gpu import check_gpus
from gpuprobe.tools.doctor.rules.host import host_busy
from gpuprobe.tools.doctor.rules.kernels import judge_cpu, judge_gpus

__all__ = ["RULES"]

# In the order the report lists them: the inventory's groups, the kernels' results, then the
# host's load while the kernels ran.
RULES: tuple[Rule, ...] = (
    check_driver,
    check_cuda_init,
    check_env,
    check_frameworks,
    check_gpus,
    judge_cpu,
    judge_gpus,
    host_busy,
)
