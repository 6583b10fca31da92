"""Imported for its effect, by the fork server that :mod:`gpuprobe.tools.memory.isolate` starts (one of
its preload modules): the fork server then dies with gpuprobe, even when gpuprobe is killed with
SIGKILL, and its trial children (which ask the same of the fork server) die with it. Importing it
anywhere else asks the same of the importing process: do not."""

from gpuprobe.platform.proc import die_with_parent

__all__: list[str] = []

die_with_parent(parent_pid=0)
