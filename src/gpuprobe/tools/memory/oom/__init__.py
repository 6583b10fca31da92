"""Out of memory, explained: who holds the memory, the largest live tensors, and what to do.

- :mod:`.explain`: :func:`~.explain.explain_oom`, the report of one out-of-memory error;
- :mod:`.classify`: the error recognised by its type and message;
- :mod:`.state`: who holds the memory (allocators, the card, the host, live tensors);
- :mod:`.report`: the :class:`~.report.OomReport` (judged by
  :data:`gpuprobe.tools.memory.rules.RULES_OOM`);
- :mod:`.hook`: the opt-in exception hook that prints the report under the traceback.
"""

from __future__ import annotations

__all__: list[str] = []
