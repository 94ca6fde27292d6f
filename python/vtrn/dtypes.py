"""The chip's number formats in numpy: encode float32 arrays into the bytes a
GEMM operand holds on the chip, and decode them back.

The rules are those of common/numerics/include/vtrn/numerics.h, which the
firmware's kernels, vtrnd and the C++ host reference share: round to nearest,
ties to even, sign of zero kept; bf16 is the top half of an f32; OCP OFP8
E4M3 (no infinities, max 448) and E5M2 (IEEE-like, max 57344), saturating;
OCP MX v1.0 MXFP4: E2M1 elements two to a byte (even k in the low nibble) and
one E8M0 scale byte per row and block of 32 along k. The integer rounding is
a vectorised copy of numerics.h's round_small, so every code comes out the
same as the C++ encoder's (test_dtypes.py checks exhaustive tables).

This is not arithmetic in these formats: decode to float32 (or float64) and
compute there.
"""

import numpy as np

F32, BF16, FP8_E4M3, FP8_E5M2, MXFP4 = "fp32", "bf16", "fp8-e4m3", "fp8-e5m2", "mxfp4"
NAMES = (F32, BF16, FP8_E4M3, FP8_E5M2, MXFP4)
_ALIASES = {"f32": F32, "float32": F32}
MX_BLOCK = 32


def canonical(dtype):
    """The dtype's canonical name (as `vtrn run gemm --dtype` spells it)."""
    name = _ALIASES.get(str(dtype), str(dtype))
    if name not in NAMES:
        raise ValueError(f"unknown dtype {dtype!r}: one of {', '.join(NAMES)}")
    return name


def _bits(x):
    return np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)


def _round_small(a, mbits, bias):
    """numerics.h detail::round_small over uint32 magnitude bits `a` (finite,
    sign cleared): the magnitude code, possibly above the format's max."""
    a = a.astype(np.uint64)
    e = (a >> 23).astype(np.int64) - 127
    emin = 1 - bias
    shift = 23 - mbits
    normal = ((a + ((1 << (shift - 1)) - 1) + ((a >> shift) & 1)) >> shift).astype(np.int64) - (
        (127 - bias) << mbits)
    mant = (a & 0x7FFFFF) | 0x800000
    s = np.clip(23 + emin - mbits - e, 1, 63).astype(np.uint64)
    q = mant >> s
    rem = mant & ((np.uint64(1) << s) - 1)
    half = np.uint64(1) << (s - 1)
    q = q + ((rem > half) | ((rem == half) & ((q & 1) == 1))).astype(np.uint64)
    sub = np.where(e < emin - mbits - 1, 0, q.astype(np.int64))
    return np.where(e >= emin, normal, sub).astype(np.uint32)


def to_bf16(x):
    """float32 -> uint16 bf16 codes (NaN made quiet)."""
    u = _bits(x)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u.astype(np.uint64) + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), r)


def from_bf16(h):
    return (np.asarray(h, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _to_fp8(x, mbits, bias, maxcode, nancode):
    u = _bits(x)
    sign = ((u >> 24) & 0x80).astype(np.uint8)
    a = u & 0x7FFFFFFF
    nan = a > 0x7F800000
    inf = a == 0x7F800000
    c = _round_small(np.where(nan | inf, 0, a), mbits, bias)
    c = np.where(c > maxcode, maxcode, c)  # saturating: overflow and inf give max
    c = np.where(inf, maxcode, c)
    c = np.where(nan, nancode, c)
    return (sign | c.astype(np.uint8)).astype(np.uint8)


def to_fp8_e4m3(x):
    return _to_fp8(x, 3, 7, 0x7E, 0x7F)


def to_fp8_e5m2(x):
    return _to_fp8(x, 2, 15, 0x7B, 0x7E)


def _table_e4m3():
    c = np.arange(256, dtype=np.uint32)
    sign = np.where(c & 0x80, -1.0, 1.0)
    e, m = (c >> 3) & 0xF, c & 7
    v = np.where(e == 0, m * 2.0 ** -9, (1 + m / 8.0) * 2.0 ** (e.astype(np.int64) - 7))
    v = sign * v
    v[(e == 15) & (m == 7)] = np.nan
    return v.astype(np.float32)


def _table_e5m2():
    c = np.arange(256, dtype=np.uint32)
    sign = np.where(c & 0x80, -1.0, 1.0)
    e, m = (c >> 2) & 0x1F, c & 3
    v = np.where(e == 0, m * 2.0 ** -16, (1 + m / 4.0) * 2.0 ** (e.astype(np.int64) - 15))
    v = np.where(e == 31, np.where(m == 0, np.inf, np.nan), v)
    return (sign * v).astype(np.float32)


_E4M3 = _table_e4m3()
_E5M2 = _table_e5m2()
_E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def from_fp8_e4m3(c):
    return _E4M3[np.asarray(c, dtype=np.uint8)]


def from_fp8_e5m2(c):
    return _E5M2[np.asarray(c, dtype=np.uint8)]


def _to_e2m1(x):
    u = _bits(x)
    sign = ((u >> 28) & 0x8).astype(np.uint8)
    a = u & 0x7FFFFFFF
    nan = a > 0x7F800000
    inf = a == 0x7F800000
    c = _round_small(np.where(nan | inf, 0, a), 1, 1)
    c = np.where(inf | (c > 7), 7, c).astype(np.uint8)
    return np.where(nan, 0, sign | c).astype(np.uint8)


def _e8m0(e):
    e = np.asarray(e, dtype=np.uint32)
    v = np.where(e == 0, 2.0 ** -127, np.ldexp(1.0, e.astype(np.int64) - 127))
    return np.where(e == 0xFF, np.nan, v)


def to_mxfp4(x):
    """float32 [rows, k] (k a multiple of 32) -> (elements uint8 [rows, k/2],
    scales uint8 [rows, k/32]) by the MX v1.0 block conversion."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim != 2 or x.shape[1] % MX_BLOCK:
        raise ValueError(f"mxfp4 operands are [rows, k] with k a multiple of {MX_BLOCK}, not {x.shape}")
    rows, k = x.shape
    blocks = x.reshape(rows, k // MX_BLOCK, MX_BLOCK)
    special = ~np.isfinite(blocks).all(axis=2)
    amax = np.abs(np.where(np.isfinite(blocks), blocks, 0)).max(axis=2)
    # floor(log2(amax)) exactly, from the exponent bits (subnormals included).
    with np.errstate(divide="ignore"):
        _, exp = np.frexp(amax.astype(np.float32))
    shared = np.clip(exp.astype(np.int64) - 1 - 2, -127, 127)
    scales = np.where(amax == 0, 0, shared + 127).astype(np.uint8)
    scales = np.where(special, 0xFF, scales).astype(np.uint8)
    # V_i / X exactly: X is a power of two (2^-127 for the smallest scale).
    # Computed in float64 and rounded once to float32, as the C++ float32
    # product rounds; a quotient past the float32 range becomes inf, which
    # E2M1 saturates to 6 exactly as the C++ product's overflow does
    # (signalling NaNs of special blocks raise "invalid" on the way: their
    # codes are replaced below).
    with np.errstate(over="ignore", invalid="ignore"):
        q = np.ldexp(blocks.astype(np.float64), (-np.where(amax == 0, -127, shared))[..., None])
        q32 = q.astype(np.float32)
    codes = _to_e2m1(q32).reshape(rows, k)
    codes = np.where(np.repeat(special, MX_BLOCK, axis=1), 0, codes).astype(np.uint8)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    return packed, scales


def from_mxfp4(packed, scales, k):
    packed = np.asarray(packed, dtype=np.uint8)
    rows = packed.shape[0]
    codes = np.empty((rows, k), dtype=np.uint8)
    codes[:, 0::2] = packed & 0xF
    codes[:, 1::2] = packed >> 4
    vals = _E2M1[codes].astype(np.float64)
    scale = np.repeat(_e8m0(np.asarray(scales, dtype=np.uint8).reshape(rows, k // MX_BLOCK)), MX_BLOCK,
                      axis=1)
    return (vals * scale).astype(np.float32)


def encode(x, dtype):
    """float32 [rows, k] -> (operand bytes, scale bytes or b"") for `dtype`."""
    dtype = canonical(dtype)
    x = np.ascontiguousarray(x, dtype=np.float32)
    if dtype == F32:
        return x.tobytes(), b""
    if dtype == BF16:
        return to_bf16(x).tobytes(), b""
    if dtype == FP8_E4M3:
        return to_fp8_e4m3(x).tobytes(), b""
    if dtype == FP8_E5M2:
        return to_fp8_e5m2(x).tobytes(), b""
    packed, scales = to_mxfp4(x)
    return packed.tobytes(), scales.tobytes()


def decode(data, scales, dtype, rows, k):
    """Operand bytes of `dtype` -> float32 [rows, k]: exactly the values the
    chip computes with."""
    dtype = canonical(dtype)
    raw = np.frombuffer(data, dtype=np.uint8)
    if dtype == F32:
        return raw.view(np.float32).reshape(rows, k).copy()
    if dtype == BF16:
        return from_bf16(raw.view(np.uint16)).reshape(rows, k)
    if dtype == FP8_E4M3:
        return from_fp8_e4m3(raw).reshape(rows, k)
    if dtype == FP8_E5M2:
        return from_fp8_e5m2(raw).reshape(rows, k)
    return from_mxfp4(raw.reshape(rows, k // 2), np.frombuffer(scales, dtype=np.uint8), k)


def quantize(x, dtype):
    """x rounded to `dtype` and decoded back: the values the chip will see."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    data, scales = encode(x, dtype)
    return decode(data, scales, dtype, x.shape[0], x.shape[1])


def gemm_error_bound(k, abs_sum):
    """kernels_reference.h's bound on |c_chip - c_ref| for one element with
    S = sum |a_ik||b_jk| (decoded inputs), the same for every dtype."""
    u = 2.0 ** -24
    j = float(k) + 1.0
    return j * u / (1.0 - j * u) * np.asarray(abs_sum, dtype=np.float64) + j * 2.0 ** -149
