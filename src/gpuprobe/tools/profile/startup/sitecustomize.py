"""gpuprobe's start-up hook for ``gpuprobe profile`` and ``gpuprobe run``.

This folder is put first on the ``PYTHONPATH`` of the command gpuprobe runs, so every Python
process of it (``torchrun``'s ranks too) imports this module at start-up. It arms
``_gpuprobe_profile`` (which waits for the script to import torch; it never imports torch
itself), then runs the ``sitecustomize`` this one hides, if there is one, as Python would have.

Standalone on purpose: the standard library only, no gpuprobe (the command's interpreter may be
another environment's, without gpuprobe). Python 3.8 or later.
"""

import os
import sys


def _arm() -> None:
    if os.environ.get("GPUPROBE_PROFILE"):
        try:
            import _gpuprobe_profile

            _gpuprobe_profile.arm()
        except Exception as exc:  # never stop the user's program from starting
            sys.stderr.write(f"gpuprobe: profiling hook not armed: {exc!r}\n")


def _chain() -> None:
    """Run the ``sitecustomize`` further along ``sys.path``, under its own name; its errors
    reach ``site`` as they would without gpuprobe."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_arm()
_chain()
