"""Transpose on the GPU against numpy, on fresh random data, with the output poisoned beforehand.

A transpose moves bits, so every comparison is exact (bit patterns for 16-bit floats, NaN-aware for the
poison check). Shapes are the awkward ones: 1×1, 1×N, N×1, 7×13, 127×129 (non-multiples of every tile),
1000×1000, a 3-D batch, sliced / transposed / reversed views, and a strided ``out``.
"""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl
from tiledsl.transpose import TRANSPOSE_DTYPES, TransposeSchedule

pytestmark = pytest.mark.gpu

SHAPES = [(1, 1), (1, 37), (37, 1), (1, 1000), (1000, 1), (7, 13), (127, 129), (1000, 1000), (64, 64),
          (3, 7, 13), (5, 127, 129), (2, 64, 192)]
CUPY_DTYPES = [d for d in TRANSPOSE_DTYPES if d != "bfloat16"]
PRESETS = list(tiledsl.presets("transpose"))


def _random(rng, shape, dtype: str) -> np.ndarray:
    """Fresh random host data of ``dtype``; no zeros, every element distinct with high probability."""
    if dtype.startswith("int"):
        info = np.iinfo(dtype)
        x = rng.integers(info.min // 2, info.max // 2, size=shape, dtype=dtype)
        x[x == 0] = 1
        return x
    return (rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)).astype(dtype)


def _poison(shape, dtype, cp):
    """An output buffer filled with NaN (floats) or a sentinel (ints) that random data never holds."""
    if np.dtype(dtype).kind == "f":
        return cp.full(shape, np.nan, dtype=dtype)
    return cp.full(shape, np.iinfo(dtype).min, dtype=dtype)


def _check(y, x_host: np.ndarray) -> None:
    import cupy as cp

    want = np.swapaxes(x_host, -1, -2)
    got = cp.asnumpy(y)
    assert got.shape == want.shape
    # bitwise: a transpose must not change a single bit (and NaN poison must be gone)
    assert np.array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}")), (
        f"mismatch at {np.argwhere(got.view(f'u{got.itemsize}') != want.view(f'u{want.itemsize}'))[:5]}")


@pytest.mark.parametrize("dtype", CUPY_DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=[ "x".join(map(str, s)) for s in SHAPES])
def test_default_schedule_every_dtype_and_shape(shape, dtype, rng):
    import cupy as cp

    xh = _random(rng, shape, dtype)
    out_shape = (*shape[:-2], shape[-1], shape[-2])
    y = _poison(out_shape, dtype, cp)
    res = tiledsl.transpose(cp.asarray(xh), out=y)
    assert res is y
    _check(y, xh)
    _check(tiledsl.transpose(cp.asarray(xh)), xh)  # the allocating form


@pytest.mark.parametrize("dtype", CUPY_DTYPES)
@pytest.mark.parametrize("name", PRESETS)
@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (127, 129), (1000, 1000), (3, 130, 66)],
                         ids=["1x1", "7x13", "127x129", "1000x1000", "3x130x66"])
def test_every_preset(name, shape, dtype, rng):
    import cupy as cp

    xh = _random(rng, shape, dtype)
    y = _poison((*shape[:-2], shape[-1], shape[-2]), dtype, cp)
    tiledsl.transpose(cp.asarray(xh), out=y, schedule=tiledsl.preset("transpose", name))
    _check(y, xh)


@pytest.mark.parametrize("schedule", [
    TransposeSchedule(tile=32, rows_per_thread=2, vec=2, smem_pad=0, swizzle=3),
    TransposeSchedule(tile=64, rows_per_thread=8, vec=4, smem_pad=1, swizzle=1),
    TransposeSchedule(tile=64, rows_per_thread=2, vec=8, smem_pad=1, swizzle=32),
    TransposeSchedule(variant="naive_write", tile=64, rows_per_thread=4, vec=1, smem_pad=0, swizzle=5),
], ids=["t32v2", "t64v4r8", "t64v8", "naive_write_t64"])
@pytest.mark.parametrize("dtype", CUPY_DTYPES)
def test_more_schedules_on_ragged_and_aligned_shapes(schedule, dtype, rng):
    import cupy as cp

    for shape in [(200, 328), (4, 96, 40), (129, 127)]:
        xh = _random(rng, shape, dtype)
        y = _poison((*shape[:-2], shape[-1], shape[-2]), dtype, cp)
        tiledsl.transpose(cp.asarray(xh), out=y, schedule=schedule)
        _check(y, xh)


VIEWS = {
    "cols_slice": lambda a: a[:, 1:],           # ragged rows: scalar loads
    "aligned_slice": lambda a: a[4:, 8:200],     # rows 16-byte aligned: vector loads
    "row_step": lambda a: a[::3, :],            # strided rows
    "col_step": lambda a: a[:, ::2],            # no unit stride at all
    "transposed": lambda a: a.T,                # a transpose of a transpose
    "reversed_rows": lambda a: a[::-1, :],      # negative row stride
    "reversed_cols": lambda a: a[:, ::-1],      # negative column stride
}


@pytest.mark.parametrize("dtype", CUPY_DTYPES)
@pytest.mark.parametrize("view", list(VIEWS))
def test_non_contiguous_views_are_read_in_place(view, dtype, rng):
    import cupy as cp

    base_h = _random(rng, (301, 264), dtype)
    base = cp.asarray(base_h)
    x = VIEWS[view](base)
    xh = VIEWS[view](base_h)
    assert not x.flags.c_contiguous or view == "transposed"
    y = _poison((x.shape[1], x.shape[0]), dtype, cp)
    tiledsl.transpose(x, out=y)
    _check(y, np.ascontiguousarray(xh))


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_batched_views_and_strided_out(dtype, rng):
    import cupy as cp

    base_h = _random(rng, (6, 130, 72), dtype)
    x = cp.asarray(base_h)[1::2, 2:, :64]        # batch stride, row offset, ragged rows
    xh = base_h[1::2, 2:, :64]
    big = _poison((3, 80, 200), dtype, cp)
    y = big[:, 8:72, 4:132]                       # strided, offset output
    tiledsl.transpose(x, out=y)
    _check(y, np.ascontiguousarray(xh))
    # untouched parts of the out buffer stay poisoned
    rest = cp.asnumpy(big).copy()
    rest[:, 8:72, 4:132] = 0
    if np.dtype(dtype).kind == "f":
        assert np.isnan(rest[:, :8]).all() and np.isnan(rest[:, :, :4]).all()


def test_bfloat16_through_torch(rng):
    torch = pytest.importorskip("torch")
    for shape in [(7, 13), (1000, 1000), (3, 127, 129), (64, 256)]:
        bits = rng.integers(0, 2**16, size=shape, dtype=np.uint16)
        bits[(bits & 0x7F80) == 0x7F80] = 0x3F80  # no NaN/inf patterns; exactness is bitwise anyway
        bits[bits == 0] = 0x4000
        xt = torch.from_numpy(bits.view(np.int16)).cuda().view(torch.bfloat16)
        y = torch.full((*shape[:-2], shape[-1], shape[-2]), float("nan"), dtype=torch.bfloat16, device="cuda")
        res = tiledsl.transpose(xt, out=y)
        assert res is y
        got = y.view(torch.int16).cpu().numpy().view(np.uint16)
        assert np.array_equal(got, np.swapaxes(bits, -1, -2))
        fresh = tiledsl.transpose(xt[..., 1:, :])  # allocating form, a sliced view
        assert fresh.dtype == torch.bfloat16
        assert np.array_equal(fresh.view(torch.int16).cpu().numpy().view(np.uint16),
                              np.swapaxes(bits[..., 1:, :], -1, -2))


def test_torch_float_tensors_are_accepted(rng):
    torch = pytest.importorskip("torch")
    xt = torch.from_numpy(_random(rng, (33, 65), "float32")).cuda()
    y = tiledsl.transpose(xt)
    assert isinstance(y, torch.Tensor), "torch in -> torch out"
    assert np.array_equal(y.cpu().numpy(), xt.cpu().numpy().T)


def test_errors_name_argument_and_value():
    import cupy as cp

    with pytest.raises(tiledsl.SpecError, match=r"x must be 2-D \(R, C\) or 3-D \(B, R, C\), got 4-D"):
        tiledsl.transpose(cp.ones((2, 2, 2, 2), dtype=cp.float32))
    with pytest.raises(tiledsl.SpecError, match=r"x.dtype=uint8 is not supported for transpose"):
        tiledsl.transpose(cp.ones((2, 2), dtype=cp.uint8))
    with pytest.raises(tiledsl.SpecError, match=r"out.shape=\(3, 2\) must be .* \(2, 3\)"):
        tiledsl.transpose(cp.ones((3, 2), dtype=cp.float32), out=cp.empty((3, 2), dtype=cp.float32))
    with pytest.raises(tiledsl.SpecError, match=r"out.dtype=float64 must equal x.dtype=float32"):
        tiledsl.transpose(cp.ones((3, 2), dtype=cp.float32), out=cp.empty((2, 3), dtype=cp.float64))


def test_empty_inputs_return_empty_outputs():
    import cupy as cp

    for shape in [(0, 5), (5, 0), (0, 3, 4)]:
        y = tiledsl.transpose(cp.ones(shape, dtype=cp.float32))
        assert y.shape == (*shape[:-2], shape[-1], shape[-2])


def test_large_batch_beyond_grid_y(rng):
    import cupy as cp

    xh = _random(rng, (70000, 2, 3), "int32")  # gridDim.y is capped at 65535: the kernel strides
    y = _poison((70000, 3, 2), "int32", cp)
    tiledsl.transpose(cp.asarray(xh), out=y)
    _check(y, xh)


def test_out_overlapping_the_input_is_refused():
    import cupy as cp

    x = cp.arange(64 * 64, dtype=cp.float32).reshape(64, 64)
    with pytest.raises(ValueError, match="out shares memory with x"):
        tiledsl.transpose(x, out=x)
