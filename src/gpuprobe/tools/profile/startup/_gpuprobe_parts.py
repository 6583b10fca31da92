"""The parts of gpuprobe's profiling hook that touch torch.profiler: one window
(:class:`Window`) and the helpers the hook shares with it; the hook's signal handlers, its exit
while another thread's window is open, and its step log (functions of the hook). Imported by ``_gpuprobe_profile``
once the script has imported torch; standalone like it (the standard library and torch, never
gpuprobe; Python 3.8+)."""

import contextlib
import os
import sys

from _gpuprobe_private import FILE_MODE, append_private, open_new, private_dir, temp_beside

OPEN_POLL_S = 0.01  # s between looks for a due time window's opening (or its close at exit)
EXIT_WAIT_S = 2.0  # s a window's own thread is given at exit to reach a step and close it
CAUGHT_SIGNALS = ("SIGTERM", "SIGHUP", "SIGQUIT")  # written before they end the process
CAPTURE_RECENT = 64  # steps the running median of --capture-on is taken over
CAPTURE_MIN_STEPS = 20  # steps seen before a step can be judged slow
PARK_S = 30.0  # s the thread that closed its window at exit waits for the process to end
DRIFT_K = 1.5  # × the lowest running median: the steps have drifted (capture-on drift)
CAPTURE_FREE = 3  # captures that held no slow step and left the budget as it was, at most
CAPTURE_MEDIAN_EVERY = 8  # steps between two reckonings of the running median
STEPS_FILE = "steps-{pid}.f64"  # each step's end (time.time(), float64, native order), appended


class Window:
    """One torch.profiler window: ``warmup`` then ``active`` steps (or ``seconds`` of time)."""

    def __init__(self, hook, spec, seconds):
        import threading
        import time

        torch = hook.torch
        import torch.profiler as tp

        self.hook = hook
        self.spec = spec
        self.seconds = seconds
        self.thread = threading.current_thread()  # torch.profiler is stopped on it, or not at all
        self.first = hook.steps  # the index of the first step inside the window (0-based)
        self.finished = False
        self.trace = None
        self.error = None
        cfg = hook.cfg
        activities = [tp.ProfilerActivity.CPU]
        # CUDA only when the script has set it up: gpuprobe never initialises CUDA itself
        if torch.cuda.is_initialized():
            activities.append(tp.ProfilerActivity.CUDA)
        self.cuda = len(activities) > 1
        kwargs = {}
        self.abandoned = False
        if seconds is None:
            import warnings

            with warnings.catch_warnings():  # "won't be using warmup" with --warmup 0
                warnings.simplefilter("ignore")
                kwargs["schedule"] = tp.schedule(
                    skip_first=self.first,
                    wait=0,
                    warmup=spec["warmup"],
                    active=spec["active"],
                    repeat=1,
                )
            kwargs["on_trace_ready"] = self._ready
        self.prof = tp.profile(
            activities=activities,
            record_shapes=bool(cfg.get("record_shapes")),
            with_stack=bool(cfg.get("with_stack")),
            profile_memory=bool(cfg.get("memory")),
            **kwargs,
        )
        if seconds is not None and hook.mode is not None:
            self.prof.record_steps = True  # mark the steps a time window sees
        # number the steps as the process counted them: ProfilerStep#<first>...
        self.prof.step_num = self.first
        self.prof.current_action = self.prof.schedule(self.first)
        if hasattr(self.prof, "_prev_schedule_action"):
            self.prof._prev_schedule_action = self.prof.current_action
        self.t_start = time.time()
        self.t_recording = self.t_start  # until start() has returned
        self._ours(self.prof.start)
        self.t_recording = time.time()

    def _ours(self, call):
        # the profile objects torch.profiler prepares meanwhile are gpuprobe's, not the script's
        self.hook.ours = True
        try:
            call()
        finally:
            self.hook.ours = False

    def step(self):
        if not self.finished:
            self._ours(self.prof.step)

    def _ready(self, prof):
        if not self.abandoned:
            self._export(prof)
        self.finished = True

    def abandon(self):
        """Stop without writing anything (torch.profiler failed in the script's step)."""
        self.abandoned = True
        try:
            self.hook.ours = True
            self.prof.stop()
        except Exception:
            pass
        finally:
            self.hook.ours = False

    def _export(self, prof):
        out = self.spec["out"]
        try:
            private_dir(out)  # 0700: the trace shows the job's code and data shapes
            path = os.path.join(out, trace_name())
            export_private(prof, path)
            self.trace = path
        except Exception as exc:
            self.error = f"trace not written: {exc!r}"

    def info(self):
        return {
            "request": self.spec.get("request"),
            "first_step": self.first,
            "warmup": self.spec["warmup"],
            "active": self.spec["active"],
            "seconds": self.seconds,
            "cuda": self.cuda,
            "started": self.t_start,
            "recording": self.t_recording,
        }

    def stop(self, how):
        import time

        info = self.info()
        ending = time.time()  # the recording ends here: torch's stop and the export come after
        if self.seconds is not None:
            try:
                self.prof.stop()
                self._export(self.prof)
            except Exception as exc:
                self.error = f"torch.profiler failed: {exc!r}"
        elif not self.finished:
            try:
                self.prof.stop()  # records, then calls _ready, when inside the active steps
            except Exception as exc:
                self.error = f"torch.profiler failed: {exc!r}"
        else:
            with contextlib.suppress(Exception):
                self.prof.stop()
        last = self.hook.steps - 1 if how == "done" else self.hook.steps
        info.update(
            state=how,
            trace=self.trace,
            error=self.error,
            last_step=last,
            recorded_from=self.first + (0 if self.seconds else self.spec["warmup"]),
            ending=ending,
            stopped=time.time(),
        )
        return info


def export_private(prof, path):
    """``prof``'s trace gzipped at ``path``, 0600, with every temporary file inside ``path``'s
    own (private) folder: torch's ``.gz`` export would put the plain trace in ``$TMPDIR``, where
    its exporter's ``.tmp`` is world-readable and stays there when the process is killed."""
    import gzip
    import shutil

    plain = temp_beside(path, ".json")
    packed = temp_beside(path, ".gz.tmp")
    try:
        prof.export_chrome_trace(plain)
        os.chmod(plain, FILE_MODE)
        with open(plain, "rb") as fin, open_new(packed) as raw:  # noqa: SIM117 (Python 3.8)
            with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
        os.replace(packed, path)
    finally:
        for tmp in (plain, packed, plain + ".tmp"):
            with contextlib.suppress(OSError):
                os.remove(tmp)


def wrap_step(cls, hook):
    """Wrap ``cls.step`` once, from outside torch's own wrapper, so that a step ends when the
    optimizer's step() has returned (after its ``Optimizer.step#`` range). ``functools.wraps``
    copies torch's ``hooked`` mark, so torch does not wrap it again."""
    inner = cls.__dict__.get("step")
    if inner is None or getattr(inner, "_gpuprobe", False):
        return
    import functools

    @functools.wraps(inner)
    def step(self, *args, **kwargs):
        try:
            out = inner(self, *args, **kwargs)
        except BaseException as exc:  # the script's own error: its traceback, not ours
            _drop_own_frame(exc)
            raise
        if hook.step_due:  # end_optimizer_step, inlined: this runs every step
            hook.step_due = False
            hook.boundary()
        return out

    step._gpuprobe = True
    cls.step = step


def call_before(cls, name, hook):
    """Call ``hook.on_user_profiler()`` before ``cls.name`` runs, unless gpuprobe is calling."""
    original = cls.__dict__.get(name)
    if original is None or getattr(original, "_gpuprobe", False):
        return

    def wrapper(prof, *args, **kwargs):
        if not hook.ours:
            hook.on_user_profiler()
        try:
            return original(prof, *args, **kwargs)
        except BaseException as exc:
            _drop_own_frame(exc)
            raise

    wrapper.__wrapped__ = original
    wrapper._gpuprobe = True
    setattr(cls, name, wrapper)


def _drop_own_frame(exc):
    """Take the calling wrapper's frame off ``exc``'s traceback, so that the script's error reads
    as it does without gpuprobe (no ``_gpuprobe_*.py`` line in it). A bare ``raise`` after this
    adds no frame again (Python 3.11 and later; on 3.10 the wrapper's line stays)."""
    tb = exc.__traceback__
    if tb is not None and tb.tb_frame is sys._getframe(1):
        exc.__traceback__ = tb.tb_next


def _skip_kineto_teardown():
    """In a forked child of a process whose window started Kineto: end the process, at C exit,
    before Kineto's static destructors run. Its config loader's thread did not come along, and
    destroying the condition variable that thread waited on hangs for ever (a fork()ed helper
    would never exit). glibc's ``on_exit`` calls ``_exit(status)`` with the exit status Python
    gave; the handlers registered before this one (Kineto's) are skipped, those after it (and
    Python's own shutdown, which flushes its files) have run. Elsewhere: nothing."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        on_exit, end = libc.on_exit, libc._exit
    except (OSError, AttributeError, ImportError):
        return
    on_exit.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    on_exit(ctypes.cast(end, ctypes.c_void_p), None)


def trace_name():
    import socket

    rank = rank_of(sys.modules.get("torch"))
    prefix = f"rank{rank}-" if rank is not None else ""
    return f"{prefix}{socket.gethostname()}_{os.getpid()}.pt.trace.json.gz"


def is_dataloader_worker():
    data = sys.modules.get("torch.utils.data")
    try:
        return data is not None and data.get_worker_info() is not None
    except Exception:
        return False


def profiler_running(torch):
    try:
        return bool(torch._C._autograd._profiler_enabled())
    except Exception:
        return False


def rank_of(torch):
    """RANK (torchrun), else torch.distributed's rank once it is set up (mp.spawn)."""
    return _distributed("RANK", "get_rank", torch)


def world_size_of(torch):
    """WORLD_SIZE, else torch.distributed's once it is set up."""
    return _distributed("WORLD_SIZE", "get_world_size", torch)


def _distributed(env, getter, torch):
    value = env_int(env)
    if value is None and torch is not None:
        try:
            dist = torch.distributed
            if dist.is_available() and dist.is_initialized():
                value = int(getattr(dist, getter)())
        except Exception:
            value = None
    return value


def env_int(name):
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def version_of(torch):
    return getattr(torch, "__version__", None) if torch is not None else None


# -- the hook's signals, its exit from another thread, its steps (methods of _Hook) ------------


def catch_term(hook):
    """While a window is open, SIGTERM (torchrun stopping the other ranks, a scheduler's
    preemption), SIGHUP (a hang-up, gpuprobe passing one on) and SIGQUIT write the steps
    recorded so far, then end the process by the same signal, as before; only a signal the
    script left at its default (a handler or SIG_IGN of its own, or inherited, is kept),
    and only when the window is on the main thread."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    for name in CAUGHT_SIGNALS:
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        try:
            if signal.getsignal(signum) is not signal.SIG_DFL:
                continue

            def on_signal(signum, frame):
                signal.signal(signum, signal.SIG_DFL)
                hook.caught.clear()
                try:
                    hook.on_exit("cut short: " + signal.Signals(signum).name)
                finally:
                    os.kill(os.getpid(), signum)

            signal.signal(signum, on_signal)
            hook.caught[signum] = on_signal
        except (ValueError, OSError):
            pass


def restore_term(hook):
    """Put SIG_DFL back where gpuprobe's handler still is; a handler the script installed
    since (its own checkpoint on SIGTERM) stays."""
    if not hook.caught:
        return
    import signal

    caught, hook.caught = hook.caught, {}
    for signum, ours in caught.items():
        # off the main thread the handler stays: it still ends the process as before
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(signum) is ours:
                signal.signal(signum, signal.SIG_DFL)


def close_on_its_thread(hook, how):
    """The process exits while a window another thread opened is open (training on a daemon
    thread, the main thread done): torch.profiler is stopped on that thread, at its next
    step boundary, within ``EXIT_WAIT_S``; stopped from here it crashes the process
    (SIGSEGV in Kineto). A thread that does not come back keeps its window: nothing is
    stopped, the status says so, and Kineto's teardown is skipped at exit."""
    import threading
    import time

    window = hook.window
    if window is None or window.thread is threading.current_thread():
        return
    if window.thread.is_alive():
        # at its next step's end, not at a module call: the thread then goes on in the
        # script's own code, where finalization stops a daemon thread as without gpuprobe
        # (stopped inside torch's C++ it aborts the process)
        hook.due = ("close", how, "park")
        end = time.monotonic() + EXIT_WAIT_S
        while hook.window is window and window.thread.is_alive() and time.monotonic() < end:
            time.sleep(OPEN_POLL_S)
    with hook.lock:
        if hook.window is not window:
            return  # closed on its thread: the trace is written
        hook.window = hook.due = None
        info = window.info()
        info.update(
            state=how,
            trace=None,
            error=f"no trace: the process exited while its window was open on thread "
            f"{window.thread.name!r}, which did not reach the end of a step within "
            f"{EXIT_WAIT_S:g} s; the window was left as it was",
            last_step=hook.steps,
            recorded_from=window.first + (0 if window.seconds else window.spec["warmup"]),
            stopped=time.time(),
        )
        hook.windows.append(info)
        hook._record_request(window.spec, info["state"])
        hook._restore_term()
    _skip_kineto_teardown()  # Kineto still records on that thread: its teardown would hang


def park_thread():
    """The thread that closed its window because the process exits waits here (at most
    :data:`PARK_S`) rather than go back into torch's C++ code, where finalization would stop it
    (a daemon thread is stopped as it takes the GIL: inside C++ frames that aborts the process,
    "terminate called without an active exception"); waiting here it is stopped as it would be
    in the script's own ``time.sleep``."""
    import threading

    threading.Event().wait(PARK_S)


def write_steps(hook):
    """Append the step ends recorded since the last status to ``steps-PID.f64``. The array
    is swapped, not locked: an append the training thread made to the old one meanwhile is
    written first next time, so the times stay in order."""
    import array

    old, done = hook.steps_out
    ends, hook.step_ends = hook.step_ends, array.array("d")
    n = len(ends)
    hook.steps_out = (ends, n)
    data = old[done:].tobytes() + ends[:n].tobytes()
    if not data:
        return
    try:
        private_dir(hook.control)
        append_private(os.path.join(hook.control, STEPS_FILE.format(pid=os.getpid())), data)
    except OSError:
        pass  # the folder went away, or is not ours: the steps are not recorded


def init_watch(hook):
    """``run --capture-on slow``: the state that :func:`watch_step` keeps."""
    import collections

    cfg = hook.cfg
    on = cfg.get("capture_on") or ()
    hook.watch_slow = "slow" in on
    hook.watch_drift = "drift" in on
    hook.watch = hook.watch_slow or hook.watch_drift
    hook.lowest_median = None  # s: the lowest running median yet (the steady state's)
    hook.all_steps = collections.deque(maxlen=CAPTURE_RECENT)  # every step, slow ones too
    hook.drifted = False  # a drift was captured: once a process
    hook.recent = collections.deque(maxlen=CAPTURE_RECENT)  # the last steps' durations
    hook.slow_at = None  # s: a step this long or longer is slow
    hook.last_end = None
    hook.slow_seen = []  # the slow steps' numbers, the last few
    hook.captures = []  # what each capture was set off by, for the status
    hook.last_capture = None  # time.time() of the last capture
    hook.free_captures = 0  # captures that held no slow step, not counted against the budget


def _settle_capture(hook, slow):
    """The last capture at a step end: a slow step while its window is open is in its trace;
    once its window is over, a capture that held no slow step does not count against
    ``capture_every_s`` (at most :data:`CAPTURE_FREE` times): the slow step came and went, and
    the next one, or the one its period points at, is captured."""
    c = hook.captures[-1]
    if "held_slow" in c:
        return
    if hook.window is not None:
        c["slow_inside"] = c.get("slow_inside", False) or slow
        return
    if hook.pending is not None or hook.due is not None:
        return
    held = c.pop("slow_inside", False)
    if c.get("why") == "drift":  # its steps are the drifted ones, slow or not
        c["held_slow"] = None
        return
    c["held_slow"] = held
    if not held and hook.free_captures < CAPTURE_FREE:
        hook.free_captures += 1
        hook.last_capture = None
        c["free"] = True


def _watch_drift(hook, now, d):
    """The running median of every step (slow ones too: a drift makes each step slow against
    the median before it) against the lowest one yet; nothing more once a drift was captured."""
    if hook.drifted:
        return
    steps = hook.all_steps
    steps.append(d)
    if len(steps) < CAPTURE_MIN_STEPS or hook.steps % CAPTURE_MEDIAN_EVERY:
        return
    median = sorted(steps)[len(steps) // 2]
    low = hook.lowest_median
    if low is None or median < low:
        hook.lowest_median = low = median
    if median >= DRIFT_K * low > 0 and _may_capture(hook, now):
        hook.drifted = True
        _capture(hook, now, d, "drift", median, from_s=low)


def watch_step(hook, now):
    """After each step: its duration against ``k`` × the running median (``k`` the settings',
    more when the recent steps spread more); a slow one opens a window of ``capture_steps``
    steps, through the on-demand path, when none is open or due and the last capture is
    ``capture_every_s`` old; with ``drift``, so does a running median :data:`DRIFT_K` × the
    lowest one yet (once a process). When the slow steps recur (the last three a period apart) the
    window is placed on the next one; otherwise it records the steps that follow. A few
    operations a step; the median is reckoned every :data:`CAPTURE_MEDIAN_EVERY` steps."""
    last, hook.last_end = hook.last_end, now
    if last is None:
        return
    d = now - last
    recent = hook.recent
    if len(recent) >= CAPTURE_MIN_STEPS and hook.steps % CAPTURE_MEDIAN_EVERY == 0:
        ordered = sorted(recent)
        median = ordered[len(ordered) // 2]
        p90 = ordered[int(0.9 * (len(ordered) - 1))]
        k = max(float(hook.cfg.get("capture_k") or 2.0), 1.5 * p90 / median if median else 0)
        hook.slow_at = (k * median, median)
    if hook.watch_drift:
        _watch_drift(hook, now, d)
    slow = hook.slow_at is not None and d >= hook.slow_at[0]
    if hook.captures:
        _settle_capture(hook, slow)
    if not slow:
        recent.append(d)  # slow steps stay out of the median
        return
    step = hook.steps - 1  # the step that just ended, 0-based
    seen = hook.slow_seen
    seen.append(step)
    del seen[:-4]
    if not hook.watch_slow or not _may_capture(hook, now):
        return
    _capture(hook, now, d, "slow", hook.slow_at[1], seen)


def _may_capture(hook, now):
    """No window open or due, gpuprobe not standing aside, the last capture old enough."""
    if hook.window is not None or hook.pending is not None or hook.due is not None:
        return False
    return hook.aside is None and (
        hook.last_capture is None
        or now - hook.last_capture >= float(hook.cfg.get("capture_every_s", 600))
    )


def _capture(hook, now, d, why, median, seen=(), from_s=None):
    """Profile the next steps (or, slow steps that recur, the next slow one): ``why`` the
    capture's cause, ``slow`` or ``drift`` (the running median ``from_s`` the lowest)."""
    step = hook.steps - 1
    every = aimed = None
    if len(seen) >= 3 and seen[-1] - seen[-2] == seen[-2] - seen[-3] > 2:
        every = seen[-1] - seen[-2]
        aimed = step + every
    rid = f"capture-{step}"
    active = int(hook.cfg.get("capture_steps") or 5)
    spec = hook._window_spec(rid, 0, 1, active, os.path.join(hook.root, "captures", f"step-{step}"))
    if aimed is not None:  # warm-up two steps before it: a steady step, then the slow one
        spec["start_at"] = max(hook.steps, aimed - 2)
    with hook.lock:
        hook.pending = spec
        hook.requests[rid] = {"state": "pending"}
        hook.captures.append(
            {
                "request": rid,
                "step": step,
                "seconds": d,
                "median_s": median,
                "aimed_at": aimed,
                "every": every,
                "why": why,
                "from_median_s": from_s,
            }
        )
        hook.last_capture = now
    hook.write_status()
