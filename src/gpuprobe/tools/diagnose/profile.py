"""``gpuprobe.profile``: run torch.profiler around a training loop, write the trace, diagnose it.

As a context manager, call ``prof.step()`` once per iteration::

    with gpuprobe.profile("trace.json.gz") as prof:
        for batch in loader:
            train_step(batch)
            prof.step()
    prof.diagnosis          # the Diagnosis, also printed when the active steps are done

As a decorator of the *step* function, each call is one step::

    @gpuprobe.profile(active=5)
    def train_step(batch): ...

The schedule skips the first ``skip`` steps (lazy init, cudnn autotuning, compilation), warms up
for ``warmup`` steps, records ``active`` steps, then stops; later steps run unprofiled. CUDA
activity is recorded when torch sees a GPU; it works on the CPU too.

PyTorch is imported in one place, :func:`_torch`, the only torch import of the diagnose package
(to move behind ``gpuprobe.platform.frameworks.torch`` when that door exists).
"""

from __future__ import annotations

import atexit
import functools
import os
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from gpuprobe.core import render
from gpuprobe.core.errors import UsageError
from gpuprobe.platform.frameworks.torch import profiler_modules
from gpuprobe.tools.diagnose.model import Diagnosis

__all__ = ["profile"]

F = TypeVar("F", bound=Callable[..., Any])


class profile:
    """Profile ``skip + warmup + active`` steps of a loop with torch.profiler and diagnose them.

    ``path``: where to write the trace (``.json`` or ``.json.gz``); default
    ``./gpuprobe-trace-<time>.json.gz``. ``show``: print the diagnosis when the trace is ready.
    ``record_shapes``, ``with_stack``, ``profile_memory``: torch.profiler's options, on by default
    since the rules use them (they add overhead: profile to find problems, not to time).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        skip: int = 1,
        warmup: int = 1,
        active: int = 3,
        record_shapes: bool = True,
        with_stack: bool = True,
        profile_memory: bool = True,
        show: bool = True,
    ) -> None:
        if skip < 0 or warmup < 0 or active < 1:
            raise UsageError("gpuprobe.profile: need skip >= 0, warmup >= 0 and active >= 1")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.path = os.fspath(path) if path is not None else f"gpuprobe-trace-{stamp}.json.gz"
        self.skip, self.warmup, self.active = skip, warmup, active
        self.options = {
            "record_shapes": record_shapes,
            "with_stack": with_stack,
            "profile_memory": profile_memory,
        }
        self.show = show
        self.steps = 0
        self.diagnosis: Diagnosis | None = None
        self._prof: Any = None
        self._done = False

    # -- context manager --------------------------------------------------------------------

    def __enter__(self) -> profile:
        torch, tp = profiler_modules()
        activities = [tp.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(tp.ProfilerActivity.CUDA)
        self._prof = tp.profile(
            activities=activities,
            schedule=tp.schedule(
                skip_first=self.skip, wait=0, warmup=self.warmup, active=self.active, repeat=1
            ),
            on_trace_ready=self._ready,
            **self.options,
        )
        self._prof.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop()
        if exc_type is None and self.diagnosis is None and self.show:
            need = self.skip + self.warmup + 1
            print(
                f"gpuprobe.profile: no trace: {self.steps} steps ran, the schedule records from "
                f"step {need} on; call prof.step() once per iteration, or lower skip/warmup"
            )

    def step(self) -> None:
        """Mark the end of one iteration (torch.profiler's ``step``)."""
        self.steps += 1
        if self._prof is not None and not self._done:
            self._prof.step()

    def _stop(self) -> None:
        if self._prof is not None and not self._done:
            self._done = True
            self._prof.__exit__(None, None, None)

    def _ready(self, prof: Any) -> None:
        from gpuprobe.core.errors import GpuprobeError
        from gpuprobe.tools.diagnose.engine import diagnose

        prof.export_chrome_trace(self.path)
        try:
            self.diagnosis = diagnose(self.path)
        except GpuprobeError as exc:  # never break the user's training loop
            print(f"gpuprobe.profile: trace written to {self.path}, not diagnosed: {exc.message}")
            return
        if self.show:
            self._show(self.diagnosis)

    def _show(self, diagnosis: Diagnosis) -> None:
        render.terminal(diagnosis)
        print(f"trace written to {self.path}; see it again with: gpuprobe diagnose {self.path}")

    # -- decorator --------------------------------------------------------------------------

    def __call__(self, fn: F) -> F:
        """Profile the first ``skip + warmup + active`` calls of the step function ``fn``."""

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self._done:
                return fn(*args, **kwargs)
            if self._prof is None:
                self.__enter__()
                atexit.register(self._stop)
            try:
                return fn(*args, **kwargs)
            finally:
                self.step()
                if self.diagnosis is not None:
                    self._stop()

        wrapper.profiler = self  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]
