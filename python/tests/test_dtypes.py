"""The numpy encoders and decoders of vtrn.dtypes against the C++ ones the
chip and vtrnd use (common/numerics through the dtype_codes filter): every
special value, every bf16/fp8 code boundary region, and random values over
the whole f32 range must give the same bytes, and decoding must give back
exactly what the chip computes with."""

import os
import subprocess

import numpy as np
import pytest

from vtrn import dtypes

CODES = os.environ.get("VTRN_DTYPE_CODES", "")


def cpp_encode(x, dtype):
    assert CODES and os.path.exists(CODES), "VTRN_DTYPE_CODES must name the dtype_codes filter (ctest sets it)"
    rows, k = x.shape
    r = subprocess.run([CODES, dtype, str(rows), str(k)], input=np.ascontiguousarray(x, np.float32).tobytes(),
                       capture_output=True, check=True)
    nbytes = len(dtypes.encode(np.zeros((rows, k), np.float32), dtype)[0])
    return r.stdout[:nbytes], r.stdout[nbytes:]


def probe_values(seed):
    """Specials, values at and next to every fp8 code and midpoint, bf16 ties, and random
    bit patterns (every exponent, both signs), as float32 [rows, 32]."""
    rng = np.random.default_rng(seed)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 448, 464, 480, 57344, 61440, 65536,
                        6, 6.5, 7, 2 ** -9, 2 ** -10, 3 * 2 ** -11, 2 ** -16, 2 ** -17, 3 * 2 ** -18,
                        np.finfo(np.float32).max, np.finfo(np.float32).tiny, 1e-45], dtype=np.float32)
    table = np.concatenate([dtypes.from_fp8_e4m3(np.arange(256)), dtypes.from_fp8_e5m2(np.arange(256))])
    table = table[np.isfinite(table)]
    near = np.concatenate([np.nextafter(table, np.float32(np.inf)), np.nextafter(table, np.float32(-np.inf)),
                           table, (table[:-1] + table[1:]) / 2])
    bits = rng.integers(0, 2 ** 32, size=20000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    # bf16 rounding boundaries: the low half just below, at and above the tie.
    high = rng.integers(0, 2 ** 16, size=4000, dtype=np.uint64).astype(np.uint32) << 16
    ties = np.concatenate([high | low for low in (0x7FFF, 0x8000, 0x8001, 0)]).view(np.float32)
    small = (rng.standard_normal(20000) * rng.choice([1e-3, 1, 30, 1e4], 20000)).astype(np.float32)
    v = np.concatenate([special, near.astype(np.float32), bits, ties, small])
    v = np.concatenate([v, np.zeros((-len(v)) % 32, np.float32)])
    return v.reshape(-1, 32)


@pytest.mark.parametrize("dtype", ["bf16", "fp8-e4m3", "fp8-e5m2", "mxfp4"])
def test_encoders_match_the_cpp_encoders_bit_for_bit(dtype):
    x = probe_values(1)
    want_data, want_scales = cpp_encode(x, dtype)
    data, scales = dtypes.encode(x, dtype)
    assert data == want_data
    assert scales == want_scales


def test_mxfp4_blocks_of_zeros_tiny_and_huge_values_match():
    x = np.zeros((6, 64), np.float32)
    x[1, :32] = 2 ** -140
    x[2, :] = 3e38
    x[3, 5] = np.nan
    x[4, 40] = -np.inf
    x[5, :] = np.linspace(-7, 7, 64)
    assert dtypes.encode(x, "mxfp4") == cpp_encode(x, "mxfp4")


def test_fp8_decode_tables_hit_the_spec_extremes():
    e4 = dtypes.from_fp8_e4m3(np.arange(256))
    e5 = dtypes.from_fp8_e5m2(np.arange(256))
    assert np.nanmax(e4) == 448 and np.isnan(e4[0x7F]) and np.isnan(e4[0xFF])
    assert e4[1] == 2.0 ** -9 and not np.isinf(e4).any()
    assert np.nanmax(e5[np.isfinite(e5)]) == 57344 and e5[0x7C] == np.inf and e5[0xFC] == -np.inf
    assert e5[1] == 2.0 ** -16


def test_decode_inverts_encode_on_representable_values():
    e4 = dtypes.from_fp8_e4m3(np.arange(256))
    finite = e4[np.isfinite(e4)].reshape(-1, 1)
    assert np.array_equal(dtypes.quantize(finite, "fp8-e4m3"), finite)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 64)).astype(np.float32)
    q = dtypes.quantize(x, "bf16")
    assert np.array_equal(dtypes.quantize(q, "bf16"), q)


def test_unknown_dtype_is_refused_with_the_valid_names():
    with pytest.raises(ValueError, match="fp8-e4m3"):
        dtypes.canonical("fp16")
