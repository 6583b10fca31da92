"""Shared fixtures for the parallel tests: one small in-process Dask cluster for the whole run,
and test problems with known conditioning."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

if importlib.util.find_spec("distributed") is None:  # Dask is optional: gpuprobe[dask]
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def client() -> Iterator[Any]:
    """Two workers of one thread each, in this process: started once, by the first test that asks,
    and shared by every test after it (a cluster per module was started and stopped seven
    times). The tests submit work and read results; none changes the cluster itself (the ones
    that kill or add workers start clusters of their own)."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0"
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


def _conditioned(m: int, n: int, cond: float, seed: int = 0) -> np.ndarray:
    """An m × n matrix with singular values spread geometrically from 1 to 1/cond."""
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.standard_normal((m, n)))
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return (u * np.geomspace(1.0, 1.0 / cond, n)) @ v.T


def _rhs(a: np.ndarray, noise: float = 0.1, seed: int = 1) -> np.ndarray:
    """b = A·x_true + noise: a least-squares problem with a non-zero residual."""
    rng = np.random.default_rng(seed)
    return a @ rng.standard_normal(a.shape[1]) + noise * rng.standard_normal(a.shape[0])


@pytest.fixture
def conditioned() -> Any:
    """``conditioned(m, n, cond, seed=0)``: a matrix with κ₂ = cond."""
    return _conditioned


@pytest.fixture
def rhs() -> Any:
    """``rhs(A, noise=0.1, seed=1)``: b = A·x + noise."""
    return _rhs


@pytest.fixture
def numpy_solution() -> Any:
    """``numpy_solution(A, b)``: numpy.linalg.lstsq's x (the reference)."""
    return lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0]
