"""The watched process's threads from one schedstat read each (Linux), as psutil sees them.

A torch process on a GPU has a dozen threads or more (the H200 sweep's recordings show 10 to 25);
each used to cost psutil's ``/proc/PID/task/TID/stat`` read and then the schedstat read. The
schedstat file's first figure is the thread's CPU time in ns, so one read gives both numbers.
"""

from __future__ import annotations

import os
import threading

import psutil
import pytest

from gpuprobe.tools.monitor.readers import TreeReader

HAS_SCHEDSTAT = os.path.exists(f"/proc/{os.getpid()}/task/{threading.get_native_id()}/schedstat")
# s: /proc/PID/task/TID/stat counts CPU in clock ticks (USER_HZ, 100 per second on Linux), and
# the two reads are a moment apart while this thread runs
TICK_SLACK_S = 0.05


@pytest.mark.skipif(not HAS_SCHEDSTAT, reason="no /proc/PID/task/TID/schedstat on this kernel")
def test_threads_from_schedstat_match_psutil() -> None:
    stop = threading.Event()
    idle = [threading.Thread(target=stop.wait, daemon=True) for _ in range(4)]
    for t in idle:
        t.start()
    try:
        reader = TreeReader(os.getpid())
        ours = reader._read_schedstat()
        theirs = {t.id: t.user_time + t.system_time for t in psutil.Process().threads()}
    finally:
        stop.set()
        for t in idle:
            t.join()
    assert set(ours) == set(theirs)
    assert len(ours) >= 5  # this thread and the four waiting ones
    for tid, (cpu, runnable) in ours.items():
        assert abs(cpu - theirs[tid]) < TICK_SLACK_S, tid
        assert runnable is not None and runnable >= cpu


@pytest.mark.skipif(not HAS_SCHEDSTAT, reason="no /proc/PID/task/TID/schedstat on this kernel")
def test_the_samplers_own_thread_is_left_out() -> None:
    me = threading.get_native_id()
    reader = TreeReader(os.getpid(), exclude_tids=lambda: {me})
    assert me not in reader._read_schedstat()
    assert os.getpid() in TreeReader(os.getpid())._read_schedstat()  # the main thread's TID


def test_a_process_gone_has_no_threads() -> None:
    reader = TreeReader(os.getpid())
    reader.pid = 2**22 + 1  # above pid_max's largest value: no such process
    assert reader._read_schedstat() == {}
