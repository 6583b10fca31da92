"""Profile a window of steady-state training steps inside an unmodified PyTorch script.

Armed by gpuprobe's ``sitecustomize`` in every Python process of a command run under
``gpuprobe profile`` (or ``gpuprobe run``, dormant), when ``GPUPROBE_PROFILE`` holds its settings
(JSON, written by ``gpuprobe.tools.profile.hook``):

- **No torch before the script.** gpuprobe's ``sitecustomize`` puts a finder on
  ``sys.meta_path`` that waits for the script's own ``import torch`` and only then imports this
  module (:func:`torch_spec`); a script that never imports torch pays one finder call per new
  module and nothing else. When torch is in, the finder has left ``sys.meta_path``.
- **Steps without help.** Each step of the first optimizer that steps (PyTorch's global
  optimizer step post-hook) ends one step: plain loops, Lightning and Hugging Face Trainer alike.
  Without an optimizer, each ``next()`` of a DataLoader iterator starts one. Batches fetched
  with gradients on once an optimizer exists are no steps but a training loop's, which wait
  for the optimizer's first step (with gradient accumulation they are micro-batches: Lightning's
  ``accumulate_grad_batches``, HF's ``gradient_accumulation_steps``, whose Trainer fetches them
  all before the first backward). With ``seconds``, a time window is recorded whatever the
  steps.
- **The window.** After ``skip`` steps, torch.profiler warms up for ``warmup`` steps and records
  ``active`` steps (their ``ProfilerStep#N`` numbered as the process counted them), writes
  ``traces/[rankR-]HOST_PID.pt.trace.json.gz`` and stops: later steps run unprofiled.
- **On demand.** A thread polls ``.gpuprobe-profile/request.json`` twice a second; a new request
  opens a window of its steps at the next step boundary, written under ``now-ID/``. Only a
  request file of this process's own user, in a folder of theirs, read without following a
  link, is obeyed (``_gpuprobe_private``).
- **The flight recorder.** Each step's end (``time.time()``) is appended to an array, no
  profiler: with each status the array goes to ``.gpuprobe-profile/steps-PID.f64`` (float64,
  0600, appended), which ``gpuprobe run`` writes to its timeline.
- **Never in the way.** DataLoader workers are never profiled. A script that runs its own
  torch.profiler (before or during the window), or a profiler that cannot start, makes gpuprobe
  stand aside and say why in its status; the script runs as if gpuprobe were not there. At exit,
  an open window writes the steps recorded so far (a crash included).
- **What happened** goes to ``.gpuprobe-profile/proc-PID.json`` (written whole to a random name,
  0600, then renamed; the folder made 0700 here, never a link or someone else's), for the
  gpuprobe process that reads it once the command is done. Traces are 0600 in 0700 folders.

Standalone: the standard library, and torch once the script has imported it; never gpuprobe.
Python 3.8 or later. Times are seconds.
"""

import contextlib
import os
import sys

from _gpuprobe_parts import (
    OPEN_POLL_S,
    STEPS_FILE,
    Window,
    _drop_own_frame,
    _skip_kineto_teardown,
    call_before,
    catch_term,
    close_on_its_thread,
    env_int,
    init_watch,
    is_dataloader_worker,
    park_thread,
    profiler_running,
    rank_of,
    restore_term,
    version_of,
    watch_step,
    world_size_of,
    wrap_step,
    write_steps,
)
from _gpuprobe_private import own_dir, private_dir, read_own, write_private

ENV = "GPUPROBE_PROFILE"  # the settings, JSON
CONTROL = ".gpuprobe-profile"  # under the output folder: statuses and requests
REQUEST = "request.json"
TRACES = "traces"
POLL_S = 0.5  # s between looks at the request file
STATUS_S = 5.0  # s between status refreshes while the steps go on
ALIGN_STEPS = 8  # a rank's --now window starts at a multiple of this, so the ranks share steps
FORMAT = 1  # of the status files

_hook = None


def _the_hook():
    """This process's hook, made from ``GPUPROBE_PROFILE`` the first time torch comes in."""
    global _hook
    if _hook is None:
        import json

        _hook = _Hook(json.loads(os.environ[ENV]))
    return _hook


def wrap_loader(spec, finder):
    """``spec`` with its loader wrapped so that the hook runs once torch's ``__init__`` has
    finished; ``finder`` (sitecustomize's) leaves ``sys.meta_path`` when torch's code runs, not
    before: ``importlib.util.find_spec("torch")``, as transformers and accelerate call to see
    whether torch is installed, finds it again at the real import."""
    spec.loader = _Loader(spec.loader, finder)
    return spec


def torch_already_imported(torch):
    """torch came in before site ran (PYTHONSTARTUP, a .pth file): hook it now."""
    _the_hook().on_torch(torch)


class _Loader:
    """torch's own loader, plus the hook after it (as wrapt's post-import hooks do): the
    module keeps torch's loader as ``__loader__``. The hook is made when torch's code has run,
    not before: a process that only asks whether torch is there has none."""

    def __init__(self, loader, finder=None):
        self.loader = loader
        self.finder = finder

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self.finder)
        module.__loader__ = self.loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        _the_hook().on_torch(module)

    def __getattr__(self, name):
        return getattr(self.loader, name)


class _Hook:
    """One process's counting, windows and status."""

    def __init__(self, cfg):
        import threading

        self.cfg = cfg
        self.root = cfg["dir"]
        self.control = os.path.join(self.root, CONTROL)
        self.lock = threading.RLock()
        self.torch = None
        self.steps = 0  # completed steps
        self.mode = None  # "optimizer" | "dataloader"
        self.main_opt = None  # weak reference to the optimizer whose steps are counted
        # the main optimizer's id and class once its steps are the steps and its class's step is
        # wrapped: after_step's fast path, one comparison a step (benchmarks/profile_overhead.py)
        self.fast_id = None
        self.fast_cls = None
        self.window = None  # the open _Window
        self.pending = None  # dict: a window to open at a step boundary
        self.windows = []  # what each window did, for the status
        self.notes = []
        self.aside = None  # why gpuprobe stands aside, once it does
        self.user_profiler = False  # the script made a profiler of its own
        self.requests = {}  # request id -> what became of it
        self.request_seen = None  # (inode, mtime, size) of the request file last read
        self.worker = False
        self.optimizer_made = False  # an optimizer exists: its steps are the steps, not batches
        self.t_torch = None
        self.ours = False  # True while gpuprobe's own profiler starts or steps
        self.due = None  # a time window to open or close at the next tick of the script's thread
        self.tick_hook = None  # the global module forward pre-hook that ticks while one is due
        self.step_due = False  # the main optimizer stepped: the step ends when its step() returns
        self.final = False  # the last status is written: no other after it
        self.caught = {}  # signal -> gpuprobe's handler, put in while a window is open
        self.inert = False  # a forked child: counts nothing, writes nothing, stops nothing
        self.kineto = False  # a window has started torch.profiler (Kineto) in this process
        import array
        import time

        # the end of each step not yet written (the flight recorder: no profiler, an append a
        # step), and the array swapped out last, whose late appends go first next time
        self.step_ends = array.array("d")
        self.steps_out = (array.array("d"), 0)
        self.clock = time.time
        init_watch(self)  # run --capture-on: the flight recorder's own windows

    # -- torch is in --------------------------------------------------------------------------

    def on_torch(self, torch):
        if self.torch is not None:
            return
        import atexit
        import time

        self.torch = torch
        self.t_torch = time.time()
        try:
            self._install(torch)
        except Exception as exc:  # a torch too old or too new for a hook: run unprofiled
            self._stand_aside(f"cannot hook into torch {version_of(torch)}: {exc!r}")
        atexit.register(self.on_exit)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self.in_forked_child)
        mode = self.cfg.get("mode", "auto")
        if mode == "auto" and self.aside is None:
            if self.cfg.get("seconds"):
                self._start_timer(float(self.cfg.get("delay", 0)), float(self.cfg["seconds"]))
            else:
                self.pending = self._window_spec(
                    None,
                    self.cfg.get("skip", 10),
                    self.cfg.get("warmup", 2),
                    self.cfg.get("active", 5),
                    os.path.join(self.root, TRACES),
                )
        self._start_poller()  # which writes the first status: a spawned DataLoader worker
        # imports torch before it knows it is one

    def _install(self, torch):
        import weakref

        from torch.optim.optimizer import register_optimizer_step_post_hook
        from torch.utils.data import dataloader

        hook = self

        def after_step(optimizer, args, kwargs):
            # inside Optimizer.step's own record_function: the step ends when step() returns
            # (the class's step, wrapped once from outside), else at the next DataLoader batch
            # or optimizer step
            if hook.step_due:
                hook.end_optimizer_step()  # the wrapper was bypassed last time
            elif id(optimizer) == hook.fast_id and type(optimizer) is hook.fast_cls:
                hook.step_due = True  # the main optimizer, as every step before
                return
            main = hook.main_opt() if hook.main_opt is not None else None
            if main is None:
                hook.main_opt = weakref.ref(optimizer)
                main = optimizer
            if optimizer is not main:
                return  # a second optimizer (a GAN's): its steps are the same iterations
            if hook.mode != "optimizer":
                if hook.window is not None:
                    return  # a window opened on DataLoader steps keeps them to its end
                hook.mode = "optimizer"
                hook.steps = 0  # the loader's batches counted so far were no steps
            wrap_step(type(optimizer), hook)
            hook.step_due = True
            hook.fast_id, hook.fast_cls = id(optimizer), type(optimizer)

        register_optimizer_step_post_hook(after_step)
        opt_cls = torch.optim.Optimizer
        original_init = opt_cls.__init__

        def __init__(optimizer, *args, **kwargs):
            hook.optimizer_made = True
            if opt_cls.__dict__.get("__init__") is __init__:  # seen once: out of the way
                opt_cls.__init__ = original_init
            try:
                original_init(optimizer, *args, **kwargs)
            except BaseException as exc:
                _drop_own_frame(exc)
                raise

        __init__.__wrapped__ = original_init
        opt_cls.__init__ = __init__
        base = dataloader._BaseDataLoaderIter
        original_next = base.__next__

        def __next__(it):
            if hook.step_due:
                hook.end_optimizer_step()
            if hook.mode is None:
                hook.mode = "dataloader"  # the first batch begins step 0; each next one ends one
            elif hook.mode == "dataloader" and (hook.window or not hook.training()):
                hook.boundary()  # a training loop's batches wait for its optimizer's steps
            try:
                return original_next(it)
            except BaseException as exc:  # the script's own error: its traceback, not ours
                _drop_own_frame(exc)
                raise

        __next__.__wrapped__ = original_next
        base.__next__ = __next__
        # every way a script starts a profiler of its own: torch.profiler and the autograd
        # profiler (both prepare through _prepare_trace), the legacy one, emit_nvtx, emit_itt
        ap = torch.autograd.profiler
        call_before(ap.profile, "_prepare_trace", hook)
        for cls in (
            getattr(getattr(torch.autograd, "profiler_legacy", None), "profile", None),
            getattr(ap, "emit_nvtx", None),
            getattr(ap, "emit_itt", None),
        ):
            if cls is not None:
                call_before(cls, "__enter__", hook)

    def end_optimizer_step(self):
        self.step_due = False
        self.boundary()

    # -- steps ---------------------------------------------------------------------------------

    def training(self):
        """Whether a batch fetched now is a training loop's: an optimizer exists, gradients on
        (inference runs under no_grad or inference_mode, even where it made an optimizer)."""
        return self.optimizer_made and self.torch.is_grad_enabled()

    def boundary(self):
        """One step ended (and the next begins). Runs inside the script's own calls: whatever
        goes wrong here stops gpuprobe's window, never the script."""
        self.steps += 1
        now = self.clock()
        self.step_ends.append(now)
        if self.watch:
            watch_step(self, now)
        if self.due is None and self.window is None and self.pending is None:
            return
        try:
            if self.due is not None:
                self.tick()
            with self.lock:
                if self.window is not None:
                    self.window.step()
                    if self.window.finished:
                        self._close("done")
                elif self.pending is not None and self.steps >= self.pending["start_at"]:
                    spec, self.pending = self.pending, None
                    self._open(spec)
        except Exception as exc:
            self.fail(exc)

    def fail(self, exc):
        """torch.profiler failed inside the script's step: drop the window, stand aside."""
        with self.lock:
            window, self.window = self.window, None
            self.pending = None
            if window is not None:
                window.abandon()
                self._restore_term()
            self._stand_aside(f"torch.profiler failed: {exc!r}")
            self.write_status()

    def _window_spec(self, request, skip, warmup, active, out):
        start_at = self.steps + int(skip) if request is not None else int(skip)
        return {
            "request": request,
            "start_at": start_at,
            "warmup": int(warmup),
            "active": int(active),
            "out": out,
        }

    # -- windows -------------------------------------------------------------------------------

    def _may_profile(self, spec):
        """None when a window may open now, else why not."""
        if self.aside is not None:
            return self.aside
        if is_dataloader_worker():
            self.worker = True
            return "a DataLoader worker: never profiled"
        if self.user_profiler or profiler_running(self.torch):
            self._stand_aside("the script runs its own torch.profiler")
            return self.aside
        return None

    def _open(self, spec, seconds=None):
        why = self._may_profile(spec)
        if why is not None:
            self._record_request(spec, "not taken: " + why)
            self.write_status()
            return
        try:
            self.kineto = True
            self.window = Window(self, spec, seconds)
        except Exception as exc:
            self.window = None
            self._stand_aside(f"torch.profiler could not start: {exc!r}")
            self._record_request(spec, "not taken: " + self.aside)
        else:
            self._catch_term()
        self.write_status()

    def _catch_term(self):
        catch_term(self)

    def _restore_term(self):
        restore_term(self)

    def _close(self, how):
        window, self.window = self.window, None
        if window is None:
            return
        info = window.stop(how)
        self._restore_term()
        self.windows.append(info)
        self._record_request(window.spec, info["state"], info.get("trace"))
        self.write_status()

    def _record_request(self, spec, state, trace=None):
        request = spec.get("request")
        if request is not None:
            self.requests[str(request)] = {"state": state, "trace": trace}

    def on_user_profiler(self):
        """The script is starting a torch profiler of its own: end ours first, then stand
        aside for the rest of the run."""
        with self.lock:
            self.user_profiler = True
            if self.window is not None:
                self._close("cut short: the script started its own torch.profiler")
            if self.aside is None:
                self._stand_aside("the script runs its own torch.profiler")
                self.pending = None
                self.write_status()

    def _stand_aside(self, why):
        if self.aside is None:
            self.aside = why
            self.notes.append("stood aside: " + why)

    # -- time windows and requests ------------------------------------------------------------

    def _start_timer(self, delay, seconds, spec=None):
        """Open a window of ``seconds`` after ``delay``; both ends happen on the script's own
        thread (torch.profiler records the thread that starts it, and the threads it starts),
        at its next tick: a step boundary, or a call of any nn.Module."""
        import threading
        import time

        if spec is None:
            spec = self._window_spec(None, 0, 0, 0, os.path.join(self.root, TRACES))

        def run():
            time.sleep(max(0.0, delay))
            self._due(("open", spec, seconds))
            while self.window is None and self.due is not None:  # not opened yet: wait for it
                time.sleep(OPEN_POLL_S)
            window = self.window
            if window is None or window.spec is not spec:
                return
            # timed from the profiler's start (Kineto's own start-up can take a second), not
            # from the request: the trace spans the seconds asked for
            time.sleep(max(0.0, window.t_recording + seconds - time.time()))
            if self.window is window:
                self._due(("close",))

        threading.Thread(target=run, name="gpuprobe-profile-timer", daemon=True).start()

    def _due(self, what):
        with self.lock:
            self.due = what
            if self.tick_hook is None:
                try:
                    register = self.torch.nn.modules.module.register_module_forward_pre_hook
                    self.tick_hook = register(lambda module, args: self.tick())
                except Exception:
                    pass  # the step boundaries still tick

    def tick(self):
        """On the script's thread: open or close the window that is due."""
        if self.inert:
            return
        park = False
        try:
            with self.lock:
                due, self.due = self.due, None
                if self.tick_hook is not None:
                    self.tick_hook.remove()
                    self.tick_hook = None
                if due is None:
                    return
                if due[0] == "open" and self.window is None:
                    self._open(due[1], seconds=due[2])
                elif due[0] == "close" and self.window is not None:
                    self._close(due[1] if len(due) > 1 else "done")
                    park = len(due) > 2 and due[2] == "park"
        except Exception as exc:
            self.fail(exc)
        if park:
            park_thread()

    def _start_poller(self):
        import threading

        def run():
            import time

            shown = (None, None)  # (mode, steps) in the last status written here
            refresh = 0.0
            while True:
                time.sleep(POLL_S)
                if is_dataloader_worker():
                    self.leave_as_worker()
                    return
                now = time.monotonic()
                if shown[0] != self.mode or (now >= refresh and shown[1] != self.steps):
                    shown, refresh = (self.mode, self.steps), now + STATUS_S
                    self.write_status()  # what --now reads: whether it steps, and how far
                try:
                    self._poll()
                except Exception as exc:  # a torn or foreign file: say so once, keep going
                    with self.lock:
                        note = f"request not read: {exc!r}"
                        if note not in self.notes:
                            self.notes.append(note)

        threading.Thread(target=run, name="gpuprobe-profile-requests", daemon=True).start()

    def _poll(self):
        import json

        path = os.path.join(self.control, REQUEST)
        try:
            st = os.lstat(path)
        except OSError:
            return
        seen = (st.st_ino, st.st_mtime_ns, st.st_size)  # a request is a new file (os.replace)
        if seen == self.request_seen:
            return
        self.request_seen = seen
        # only a request of this process's user, in a folder of theirs, never through a link
        if not own_dir(self.control):
            raise PermissionError(f"{self.control} is not this user's own folder: ignored")
        req = json.loads(read_own(path).decode("utf-8"))
        rid = str(req["id"])
        if rid in self.requests or float(req.get("t", 0)) < (self.t_torch or 0):
            return  # answered, or asked before this process had torch: not for it
        out = os.path.join(self.root, "now-" + rid)
        with self.lock:
            queued = self.pending is not None and self.pending["request"] is not None
            if queued:  # a request not yet begun gives way to the newer one
                self.requests[str(self.pending["request"])] = {"state": "superseded"}
                self.pending = None
            if self.window is not None or self.due is not None:
                self.requests[rid] = {"state": "not taken: a window is open already"}
            elif self.pending is not None:
                self.requests[rid] = {"state": "not taken: the automatic window is still to come"}
            elif self.aside is not None:
                self.requests[rid] = {"state": "not taken: " + self.aside}
            elif req.get("seconds"):
                self.requests[rid] = {"state": "pending"}
                spec = self._window_spec(rid, 0, 0, 0, out)
                self._start_timer(0.0, float(req["seconds"]), spec)
            else:
                self.requests[rid] = {"state": "pending"}
                self.pending = self._window_spec(
                    rid, 0, req.get("warmup", 1), req.get("steps", 5), out
                )
                if rank_of(self.torch) is not None:  # the ranks begin on the same step
                    start = self.pending["start_at"]
                    self.pending["start_at"] = -(-(start + 1) // ALIGN_STEPS) * ALIGN_STEPS
        self.write_status()

    # -- the end ---------------------------------------------------------------------------------

    def in_forked_child(self):
        """A ``fork()`` of this process (a helper, a DataLoader or multiprocessing worker): the
        hook is inert in it. Its window is the parent's (Kineto's threads did not come along:
        stopping it would hang), its lock may have been held by a thread that is gone, and it
        writes no status: the child runs as it would without gpuprobe."""
        import threading

        self.inert = True
        self.final = True
        self.lock = threading.RLock()
        self.window = self.pending = self.due = None
        self.step_due = False
        del self.step_ends[:]
        self._restore_term()
        if self.windows or self.kineto:
            _skip_kineto_teardown()

    def on_exit(self, how="cut short: the process exited"):
        if self.inert:
            return
        self._close_on_its_thread(how)
        with self.lock:
            self.pending = None
            if self.step_due:
                self.step_due = False
                self.steps += 1
            if is_dataloader_worker():
                self.leave_as_worker()
                return
            if self.window is not None:
                try:
                    self._close(how)
                except Exception as exc:
                    self.window = None
                    self._stand_aside(f"torch.profiler failed at exit: {exc!r}")
            self.write_status(final=True)

    def _close_on_its_thread(self, how):
        close_on_its_thread(self, how)

    def leave_as_worker(self):
        """A DataLoader worker: never profiled, and leaves no status (it may have written its
        first one before it knew)."""
        with self.lock:
            self.worker = True
            for name in (f"proc-{os.getpid()}.json", STEPS_FILE.format(pid=os.getpid())):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(self.control, name))

    def write_status(self, final=False):
        with self.lock:
            if self.worker or self.final:
                return  # a DataLoader worker leaves none; nothing comes after the last one
            self._write_steps()
            self._write_status(final)
            self.final = final

    def _write_steps(self):
        write_steps(self)

    def _write_status(self, final):
        import json
        import socket
        import time

        rank, world = rank_of(self.torch), world_size_of(self.torch)
        doc = {
            "format": FORMAT,
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "host": socket.gethostname(),
            "argv": [str(a) for a in sys.argv[:8]],
            "rank": rank,
            "local_rank": env_int("LOCAL_RANK"),
            "world_size": world,
            "torch": version_of(self.torch),
            "torch_imported_at": self.t_torch,
            "mode": self.mode,
            "steps": self.steps,
            "settings": {
                k: self.cfg.get(k) for k in ("mode", "skip", "warmup", "active", "seconds")
            },
            "windows": list(self.windows),
            "open_window": self.window.info() if self.window is not None else None,
            "pending": self.pending,
            "requests": dict(self.requests),
            "captures": list(self.captures),
            "aside": self.aside,
            "notes": list(self.notes),
            "exited": final,
            "t": time.time(),
        }
        try:
            private_dir(self.control)  # 0700; a link or someone else's folder is not written in
            path = os.path.join(self.control, f"proc-{os.getpid()}.json")
            write_private(path, json.dumps(doc).encode("utf-8"))  # 0600: it holds the argv
        except OSError:
            pass  # the folder went away: the parent says what it found
