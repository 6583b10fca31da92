"""The rules of the memory tools, one tuple per result they judge: :data:`RULES_OOM` an
out-of-memory report, :data:`RULES_FIT` a batch-size search, :data:`RULES_PRECISION` a precision
sweep. Each tool's judge is ``apply_rules(RULES_..., result)``.
"""

from __future__ import annotations

from gpuprobe.tools.memory.rules.fit import RULES_FIT
from gpuprobe.tools.memory.rules.oom import RULES_OOM
from gpuprobe.tools.memory.rules.precision import RULES_PRECISION

__all__ = ["RULES_FIT", "RULES_OOM", "RULES_PRECISION"]
