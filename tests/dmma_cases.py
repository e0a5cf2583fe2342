"""Operands, bounds and checks shared by the host-run and GPU tests of the GEMV kernel on the FP64 tensor cores
(``mma="dmma"``: float32 inputs widened exactly, float64 sums per K slice)."""

from __future__ import annotations

import numpy as np


def dmma_bound(a, b, ref, depth: int):
    """Per element, |C − A·B| for a float32 C from float64 sums over K slices ``depth`` deep (K: one slice): the float64
    sums' error, in the kernel and in NumPy's reference (each at most K·2^-53 of Σ|a·b|, Higham's γ_K), plus half an
    ulp of float32 per rounding: of the result with one slice; with several, of each slice's sum P_z and of each float32
    prefix sum P_0 + … + P_z the split-K sums form (the last one the result). Float32 sums within a slice exceed it."""
    k = a.shape[1]
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    floor = 2 * k * 2.0**-53 * (np.abs(a64) @ np.abs(b64))
    if depth >= k:
        return floor + 2.0**-24 * np.abs(ref)
    partials = [a64[:, z:z + depth] @ b64[z:z + depth] for z in range(0, k, depth)]
    prefixes = np.cumsum(partials, axis=0)
    return floor + 2.0**-24 * (np.abs(partials).sum(axis=0) + np.abs(prefixes[1:]).sum(axis=0))


def special_operands(rng, m: int = 12, n: int = 40, k: int = 36):
    """float32 A (m×k) and B (k×n) in [-1, 1) with IEEE special cases: row 0 only 3.4e38·2 − 3.4e38·2 (products past
    float32's range that cancel: exactly 0 in float64, ∞ − ∞ = NaN in float32 sums), a NaN in row 1, an ∞ in B's column
    4 (its column ±∞, one infinite term per output; row 0 there 0·∞ = NaN), ∞·0 in row 4 (NaN)."""
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    a[0, :] = 0.0
    a[0, 5], a[0, 6], b[5, :], b[6, :] = 3.4e38, 3.4e38, 2.0, -2.0
    a[1, 7], b[9, 4] = np.nan, np.inf
    b[10, :], a[4, 10] = 0.0, np.inf
    return a, b


def check_special_values(got, a, b) -> None:
    """``got`` (float32 C of :func:`special_operands`' A·B) follows IEEE arithmetic in float64: NaN and ±∞ where the
    float64 product has them (the same signs), row 0 exactly 0 but column 4, the rest within :func:`dmma_bound` (one
    slice, the infinite and NaN inputs left out of Σ|a·b|)."""
    with np.errstate(invalid="ignore"):
        ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.isnan(got[1]).all() and np.isnan(got[4]).all()
    assert np.array_equal(np.isnan(got), np.isnan(ref)) and np.array_equal(np.isinf(got), np.isinf(ref))
    assert np.array_equal(np.sign(got[np.isinf(ref)]), np.sign(ref[np.isinf(ref)]))
    finite = np.isfinite(ref)
    assert finite[0].sum() == got.shape[1] - 1 and (got[0][finite[0]] == 0).all()  # row 0 but column 4 (0·∞)
    bound = dmma_bound(np.nan_to_num(a, nan=0, posinf=0), np.nan_to_num(b, nan=0, posinf=0), ref, a.shape[1])
    assert (np.abs(got[finite] - ref[finite]) <= bound[finite]).all()
