"""The client's n × n algebra of the least-squares solvers (:mod:`gpuprobe.tools.scale.solvers`):
the Cholesky factor of a Gram matrix and its solves, the column scaling, and the condition
estimates. LAPACK through SciPy when installed, NumPy otherwise; a GPU session factors on the
card and hands the factor here (:func:`gpuprobe.tools.scale.device.device_cholesky`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["_Cholesky", "_column_scale", "_factor", "_kappa_from_cholesky", "_kappa_from_gram"]


class _Cholesky:
    """G = LLᵀ, with LAPACK's ``dpotrf`` through SciPy when installed (on G's transpose, the
    same symmetric matrix in Fortran order, so no copy is made; NumPy's ``cholesky`` takes about
    twice as long at n = 1024), NumPy's otherwise; solves with SciPy's triangular solvers, or
    NumPy's solve. ``lower`` is kept in Fortran order, as LAPACK's condition estimate reads it.
    Raises ``numpy.linalg.LinAlgError`` when G is not positive definite."""

    def __init__(self, g: np.ndarray | None, lower: np.ndarray | None = None) -> None:
        try:
            from scipy.linalg import lapack, solve_triangular
        except ImportError:
            lapack = solve_triangular = None
        self._tri = solve_triangular
        if lower is None:
            assert g is not None
            lower = _factor(g, lapack)
        if not np.isfinite(np.diagonal(lower)).all():
            raise np.linalg.LinAlgError("Cholesky factor is not finite")
        self.lower = np.asfortranarray(lower)

    @classmethod
    def of_lower(cls, lower: np.ndarray) -> _Cholesky:
        """The solver for a factor made elsewhere (on a GPU)."""
        return cls(None, lower)

    def solve(self, v: np.ndarray) -> np.ndarray:
        if self._tri is not None:
            y = self._tri(self.lower, v, lower=True, check_finite=False)
            return np.asarray(self._tri(self.lower.T, y, lower=False, check_finite=False))
        return np.linalg.solve(self.lower.T, np.linalg.solve(self.lower, v))


def _factor(g: np.ndarray, lapack: Any) -> np.ndarray:
    """The lower Cholesky factor of the symmetric ``g``."""
    if lapack is None:
        return np.linalg.cholesky(g)
    gf = g.T if g.flags.c_contiguous else np.asfortranarray(g)  # symmetric: Gᵀ = G
    lower, info = lapack.dpotrf(gf, lower=1, clean=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"Cholesky failed (LAPACK dpotrf info {info})")
    return np.asarray(lower)


def _kappa_from_gram(g: np.ndarray) -> tuple[float, float]:
    """(κ, σ_max) of A from its Gram matrix AᵀA (κ = inf when AᵀA is not positive definite)."""
    w = np.linalg.eigvalsh(g)
    smax = math.sqrt(max(float(w[-1]), 0.0)) if math.isfinite(w[-1]) else math.inf
    kappa = math.sqrt(w[-1] / w[0]) if w[0] > 0 and math.isfinite(w[-1]) else math.inf
    return kappa, smax


def _column_scale(norms_sq: np.ndarray) -> np.ndarray:
    """D = 1/‖aⱼ‖ (1 for a zero column): the solvers work on A·D, whose columns have unit norm, so
    the condition estimate and the rank decision are not fooled by the columns' units
    (van der Sluis: this D is within √n of the best diagonal scaling)."""
    with np.errstate(divide="ignore"):
        d = 1.0 / np.sqrt(norms_sq)
    d[~np.isfinite(d) | (norms_sq <= 0)] = 1.0
    return d


def _kappa_from_cholesky(lower: np.ndarray, gs: np.ndarray) -> tuple[float, float, str] | None:
    """(κ(AD), a lower bound of σ_max(AD), source) from the Cholesky factor of DAᵀAD with LAPACK's
    condition estimator (xPOCON, O(n²): κ₁(DAᵀAD) ≈ κ₂(AD)², Higham 2002 §15.3); None without
    SciPy."""
    try:
        from scipy.linalg.lapack import dpocon
    except ImportError:
        return None
    anorm = float(np.abs(gs).sum(axis=0).max())
    # LAPACK reads Fortran order: L in C order is Lᵀ = U in Fortran order (no copy made)
    if lower.flags.f_contiguous:
        rcond, info = dpocon(lower, anorm, uplo="L")
    else:
        rcond, info = dpocon(np.ascontiguousarray(lower).T, anorm, uplo="U")
    if info != 0 or not rcond > 0:
        return math.inf, math.sqrt(anorm), "dpocon(DAᵀAD)"
    # ‖G‖₂ ≥ ‖G‖₁/√n: a lower bound keeps the predicted error (_predicted_error) on the safe side
    return math.sqrt(1.0 / rcond), math.sqrt(anorm / math.sqrt(len(gs))), "dpocon(DAᵀAD)"
