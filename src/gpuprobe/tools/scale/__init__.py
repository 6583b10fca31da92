"""Data-parallel least squares on Dask: the exact answer, as parallel as the approximate one.

Each worker reduces its rows to ``AᵢᵀAᵢ`` and ``Aᵢᵀbᵢ`` (``normal``) or to a small R factor
(``tsqr``); one tree reduction combines them, and the client solves an ``n × n`` system. The
``local-sgd`` method (E6, ``docs/experiments.md#e6``: shards, local SGD, models averaged every
epoch) is kept as the baseline, and reported as the approximation it is.

Modules:

- :mod:`gpuprobe.tools.scale.engine`: the Dask cluster (a LocalCluster sized to the machine,
  dask-cuda's LocalCUDACluster on GPUs, or an existing scheduler), BLAS threads, teardown and
  memory release.
- :mod:`gpuprobe.tools.scale.sources`: inputs as dask arrays: NumPy, CuPy, torch, dask, and lazy
  ``.npy`` / Zarr / Parquet files larger than memory.
- :mod:`gpuprobe.tools.scale.kernels`: the block kernels that run on the workers (top-level
  functions, so Dask pickles them by reference).
- :mod:`gpuprobe.tools.scale.solvers`: normal equations with refinement, TSQR, local SGD, and the
  sessions that run them on a cluster or in this process.
- :mod:`gpuprobe.tools.scale.device`: one GPU in this process: a CuPy array (or a torch CUDA
  tensor) solved where it is, each pass a few cuBLAS products over all rows.
- :mod:`gpuprobe.tools.scale.lstsq`: :func:`~gpuprobe.tools.scale.lstsq.lstsq`, :class:`LstsqReport`
  and its findings.
- :mod:`gpuprobe.tools.scale.sweep`: the worker-count sweep behind ``gpuprobe scale lstsq``.

Nothing heavy is imported here; Dask is imported only when a solve starts.
"""

from __future__ import annotations

from gpuprobe.tools.scale import show  # registers the views of this tool's results

__all__ = ["show"]
