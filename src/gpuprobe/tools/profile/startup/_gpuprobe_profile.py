"""Profile a window of steady-state training steps inside an unmodified PyTorch script.

Armed by gpuprobe's ``sitecustomize`` in every Python process of a command run under
``gpuprobe profile`` (or ``gpuprobe run``, dormant), when ``GPUPROBE_PROFILE`` holds its settings
(JSON, written by ``gpuprobe.tools.profile.hook``):

- **No torch before the script.** :func:`arm` puts a finder on ``sys.meta_path`` that waits for
  the script's own ``import torch``; a script that never imports torch pays one finder call per
  new module and nothing else. When torch is in, the finder leaves ``sys.meta_path``.
- **Steps without help.** Each step of the first optimizer that steps (PyTorch's global
  optimizer step post-hook) ends one step: plain loops, Lightning and Hugging Face Trainer alike.
  Without an optimizer, each ``next()`` of a DataLoader iterator starts one; with
  ``seconds``, a time window is recorded whatever the steps.
- **The window.** After ``skip`` steps, torch.profiler warms up for ``warmup`` steps and records
  ``active`` steps (their ``ProfilerStep#N`` numbered as the process counted them), writes
  ``traces/[rankR-]HOST_PID.pt.trace.json.gz`` and stops: later steps run unprofiled.
- **On demand.** A thread polls ``.gpuprobe-profile/request.json`` twice a second; a new request
  opens a window of its steps at the next step boundary, written under ``now-ID/``.
- **Never in the way.** DataLoader workers are never profiled. A script that runs its own
  torch.profiler (before or during the window), or a profiler that cannot start, makes gpuprobe
  stand aside and say why in its status; the script runs as if gpuprobe were not there. At exit,
  an open window writes the steps recorded so far (a crash included).
- **What happened** goes to ``.gpuprobe-profile/proc-PID.json`` (written whole, then renamed), for
  the gpuprobe process that reads it once the command is done.

Standalone: the standard library, and torch once the script has imported it; never gpuprobe.
Python 3.8 or later. Times are seconds.
"""

import contextlib
import os
import sys

ENV = "GPUPROBE_PROFILE"  # the settings, JSON
CONTROL = ".gpuprobe-profile"  # under the output folder: statuses and requests
REQUEST = "request.json"
TRACES = "traces"
POLL_S = 0.5  # s between looks at the request file
FORMAT = 1  # of the status files

_hook = None


def arm():
    """Read the settings and wait for torch (once per process)."""
    global _hook
    if _hook is not None:
        return
    import json

    cfg = json.loads(os.environ[ENV])
    _hook = _Hook(cfg)
    if "torch" in sys.modules:  # imported before site ran (PYTHONSTARTUP, a .pth file)
        _hook.on_torch(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchFinder(_hook))


class _TorchFinder:
    """Finds nothing itself; when ``torch`` is about to be loaded, wraps its loader so that the
    hook runs once torch's ``__init__`` has finished, then leaves ``sys.meta_path``."""

    def __init__(self, hook):
        self.hook = hook

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch":
            return None
        import importlib.util

        self._leave()
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader, self.hook)
        return spec

    def _leave(self):
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)

    def invalidate_caches(self):
        pass


class _Loader:
    """torch's own loader, plus the hook after it (as wrapt's post-import hooks do): the
    module keeps torch's loader as ``__loader__``."""

    def __init__(self, loader, hook):
        self.loader = loader
        self.hook = hook

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = self.loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        self.hook.on_torch(module)

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
        self.window = None  # the open _Window
        self.pending = None  # dict: a window to open at a step boundary
        self.windows = []  # what each window did, for the status
        self.notes = []
        self.aside = None  # why gpuprobe stands aside, once it does
        self.user_profiler = False  # the script made a profiler of its own
        self.requests = {}  # request id -> what became of it
        self.request_mtime = None
        self.worker = False
        self.t_torch = None
        self.ours = False  # True while gpuprobe's own profiler starts or steps
        self.due = None  # a time window to open or close at the next tick of the script's thread
        self.tick_hook = None  # the global module forward pre-hook that ticks while one is due

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
            self._stand_aside(f"cannot hook into torch {_version(torch)}: {exc!r}")
        atexit.register(self.on_exit)
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
        self._start_poller()
        self.write_status()

    def _install(self, torch):
        import weakref

        from torch.optim.optimizer import register_optimizer_step_post_hook
        from torch.utils.data import dataloader

        hook = self

        def after_step(optimizer, args, kwargs):
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
            hook.boundary()

        register_optimizer_step_post_hook(after_step)
        base = dataloader._BaseDataLoaderIter
        original_next = base.__next__

        def __next__(it):
            if hook.mode is None:
                hook.mode = "dataloader"  # the first batch begins step 0; each next one ends one
            elif hook.mode == "dataloader":
                hook.boundary()
            return original_next(it)

        __next__.__wrapped__ = original_next
        base.__next__ = __next__
        prof_cls = torch.autograd.profiler.profile
        original_prepare = prof_cls._prepare_trace

        def _prepare_trace(prof, *args, **kwargs):
            if not hook.ours:
                hook.on_user_profiler()
            return original_prepare(prof, *args, **kwargs)

        _prepare_trace.__wrapped__ = original_prepare
        prof_cls._prepare_trace = _prepare_trace

    # -- steps ---------------------------------------------------------------------------------

    def boundary(self):
        """One step ended (and the next begins)."""
        self.steps += 1
        if self.due is not None:
            self.tick()
        if self.window is None and self.pending is None:
            return
        with self.lock:
            if self.window is not None:
                self.window.step()
                if self.window.finished:
                    self._close("done")
            elif self.pending is not None and self.steps >= self.pending["start_at"]:
                spec, self.pending = self.pending, None
                self._open(spec)

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
        if _is_dataloader_worker():
            self.worker = True
            return "a DataLoader worker: never profiled"
        if self.user_profiler or _profiler_running(self.torch):
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
            self.window = _Window(self, spec, seconds)
        except Exception as exc:
            self.window = None
            self._stand_aside(f"torch.profiler could not start: {exc!r}")
            self._record_request(spec, "not taken: " + self.aside)
        self.write_status()

    def _close(self, how):
        window, self.window = self.window, None
        if window is None:
            return
        info = window.stop(how)
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
            time.sleep(seconds)
            while self.window is None and self.due is not None:  # not opened yet: wait for it
                time.sleep(POLL_S)
            if self.window is not None and self.window.spec is spec:
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
                self._close("done")

    def _start_poller(self):
        import threading

        def run():
            import time

            while True:
                time.sleep(POLL_S)
                try:
                    self._poll()
                except Exception as exc:  # a torn or foreign file: say so once, keep going
                    note = f"request not read: {exc!r}"
                    if note not in self.notes:
                        self.notes.append(note)

        threading.Thread(target=run, name="gpuprobe-profile-requests", daemon=True).start()

    def _poll(self):
        import json

        path = os.path.join(self.control, REQUEST)
        try:
            mtime = os.stat(path).st_mtime_ns
        except OSError:
            return
        if mtime == self.request_mtime:
            return
        self.request_mtime = mtime
        with open(path, encoding="utf-8") as f:
            req = json.load(f)
        rid = str(req["id"])
        if rid in self.requests:
            return
        out = os.path.join(self.root, "now-" + rid)
        with self.lock:
            if _is_dataloader_worker():
                self.worker = True
                return
            busy = self.window is not None or self.due is not None
            if busy or (self.pending is not None and self.pending["request"] is not None):
                self.requests[rid] = {"state": "not taken: a window is open already"}
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
        self.write_status()

    # -- the end ---------------------------------------------------------------------------------

    def on_exit(self):
        with self.lock:
            self.pending = None
            if self.window is not None:
                self._close("cut short: the process exited")
            if not self.worker and _is_dataloader_worker():
                self.worker = True
            self.write_status(final=True)

    def write_status(self, final=False):
        import json
        import socket
        import time

        if self.worker:
            return  # a DataLoader worker leaves no status: it is not one of the command's
        doc = {
            "format": FORMAT,
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "host": socket.gethostname(),
            "argv": [str(a) for a in sys.argv[:8]],
            "rank": _env_int("RANK"),
            "local_rank": _env_int("LOCAL_RANK"),
            "world_size": _env_int("WORLD_SIZE"),
            "torch": _version(self.torch),
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
            "aside": self.aside,
            "notes": list(self.notes),
            "exited": final,
            "t": time.time(),
        }
        try:
            os.makedirs(self.control, exist_ok=True)
            path = os.path.join(self.control, f"proc-{os.getpid()}.json")
            tmp = path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(doc, f)
            os.replace(tmp, path)
        except OSError:
            pass  # the folder went away: the parent says what it found


class _Window:
    """One torch.profiler window: ``warmup`` then ``active`` steps (or ``seconds`` of time)."""

    def __init__(self, hook, spec, seconds):
        import time

        torch = hook.torch
        import torch.profiler as tp

        self.hook = hook
        self.spec = spec
        self.seconds = seconds
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
        if seconds is None:
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
        self.t_start = time.time()
        self._ours(self.prof.start)

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
        self._export(prof)
        self.finished = True

    def _export(self, prof):
        out = self.spec["out"]
        try:
            os.makedirs(out, exist_ok=True)
            path = os.path.join(out, _trace_name())
            prof.export_chrome_trace(path)
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
        }

    def stop(self, how):
        import time

        info = self.info()
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
            stopped=time.time(),
        )
        return info


def _trace_name():
    import socket

    rank = _env_int("RANK")
    prefix = f"rank{rank}-" if rank is not None else ""
    return f"{prefix}{socket.gethostname()}_{os.getpid()}.pt.trace.json.gz"


def _is_dataloader_worker():
    data = sys.modules.get("torch.utils.data")
    try:
        return data is not None and data.get_worker_info() is not None
    except Exception:
        return False


def _profiler_running(torch):
    try:
        return bool(torch._C._autograd._profiler_enabled())
    except Exception:
        return False


def _env_int(name):
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def _version(torch):
    return getattr(torch, "__version__", None) if torch is not None else None
