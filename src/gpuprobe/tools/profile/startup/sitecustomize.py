"""gpuprobe's start-up hook for ``gpuprobe profile`` and ``gpuprobe run``.

This folder is put first on the ``PYTHONPATH`` of the command gpuprobe runs, so every Python
process of it (``torchrun``'s ranks too) imports this module at start-up. When
``GPUPROBE_PROFILE`` is set, it puts a finder on ``sys.meta_path`` that waits for the script's
own ``import torch`` and only then imports ``_gpuprobe_profile`` (it never imports torch
itself); then it runs the ``sitecustomize`` this one hides, if there is one, as Python would
have.

Kept to ``os`` and ``sys`` (both loaded already by Python's start-up): a process that never
imports torch pays for this file and a few ``stat`` calls. Standalone on purpose: no gpuprobe
(the command's interpreter may be another environment's, without gpuprobe). Python 3.8 or later.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


class _TorchFinder:
    """Finds ``torch`` where the other finders would, and wraps its loader through
    ``_gpuprobe_profile``; it leaves ``sys.meta_path`` only when torch's code runs, so that a
    script (transformers, accelerate) asking ``importlib.util.find_spec("torch")`` first is
    hooked all the same at its import."""

    busy = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" or self.busy:
            return None
        self.busy = True
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            if spec is None or spec.loader is None:
                return None
            import _gpuprobe_profile

            return _gpuprobe_profile.wrap_loader(spec, self)
        except Exception as exc:  # never stop the user's program
            sys.stderr.write(f"gpuprobe: profiling hook not armed: {exc!r}\n")
            return None
        finally:
            self.busy = False

    def invalidate_caches(self):
        pass


def _arm():
    if not os.environ.get("GPUPROBE_PROFILE"):
        return
    if "torch" in sys.modules:  # imported before site ran (PYTHONSTARTUP, a .pth file)
        try:
            import _gpuprobe_profile

            _gpuprobe_profile.torch_already_imported(sys.modules["torch"])
        except Exception as exc:
            sys.stderr.write(f"gpuprobe: profiling hook not armed: {exc!r}\n")
        return
    sys.meta_path.insert(0, _TorchFinder())


def _chain():
    """Run the ``sitecustomize`` further along ``sys.path``, under its own name; its errors
    reach ``site`` as they would without gpuprobe. importlib is imported only when there is one
    (a ``stat`` or two per entry of ``sys.path`` otherwise)."""
    names = ("sitecustomize.py", "sitecustomize.pyc", os.path.join("sitecustomize", "__init__.py"))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    # a zip (or any file) on sys.path is read by zipimport: its sitecustomize is found below
    if not any(
        os.path.isfile(p) or any(os.path.exists(os.path.join(p or os.curdir, n)) for n in names)
        for p in path
    ):
        return
    import importlib.machinery
    import importlib.util

    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_arm()
_chain()
