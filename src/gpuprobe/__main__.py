"""``python -m gpuprobe``: the same as the ``gpuprobe`` command."""

from gpuprobe.cli import main

raise SystemExit(main())
