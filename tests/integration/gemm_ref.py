"""The integration tests' own GEMM reference: random operands in every job
dtype, their decoding straight from the format specifications, C = A . B^T
in double, and the error bound of common/kernels/include/vtrn/
kernels_reference.h. Standard library only.

It shares no code with the CLI, vtrnd or the firmware on purpose: `vtrn run
gemm` verifies a job against the host build of the same numerics.h, so a
decoding mistake made the same way on both sides would pass there. Here the
formats are decoded from their definitions (bf16 the top half of an f32;
OCP OFP8 E4M3 bias 7 without infinities, E5M2 bias 15 IEEE-like; OCP MX
E2M1 elements with E8M0 scales per 32 values along k) and the storage is
the one numerics.h documents: row-major [m, k] and [n, k], k contiguous,
little-endian, two E2M1 values a byte with the even k in the low nibble.
"""

import math
import struct

DTYPES = ("fp32", "bf16", "fp8-e4m3", "fp8-e5m2", "mxfp4")
ELEMENT_BYTES = {"fp32": 4, "bf16": 2, "fp8-e4m3": 1, "fp8-e5m2": 1}
MX_BLOCK = 32
NAN, INF = float("nan"), float("inf")


def f32(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def decode_bf16(u):
    return f32(u << 16)


def decode_e4m3(u):
    sign = -1.0 if u & 0x80 else 1.0
    e, m = (u >> 3) & 0xF, u & 0x7
    if e == 0xF and m == 0x7:
        return NAN
    if e == 0:
        return sign * m / 8 * 2.0 ** -6
    return sign * (1 + m / 8) * 2.0 ** (e - 7)


def decode_e5m2(u):
    sign = -1.0 if u & 0x80 else 1.0
    e, m = (u >> 2) & 0x1F, u & 0x3
    if e == 0x1F:
        return sign * INF if m == 0 else NAN
    if e == 0:
        return sign * m / 4 * 2.0 ** -14
    return sign * (1 + m / 4) * 2.0 ** (e - 15)


def decode_e2m1(u):
    sign = -1.0 if u & 0x8 else 1.0
    return sign * (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)[u & 0x7]


def decode_e8m0(u):
    return NAN if u == 0xFF else 2.0 ** (u - 127)


class Operand:
    """One GEMM operand: its bytes as the job file's buffer holds them
    (data, and scales for MXFP4) and its decoded values [rows][k]."""

    def __init__(self, data, scales, values):
        self.data, self.scales, self.values = data, scales, values


def random_operand(rng, dtype, rows, k, specials=False):
    """Finite random values in the format; with specials, a few NaN and
    infinities where the format has them (for MXFP4: the NaN scale on one
    block). Magnitudes stay small enough that no f32 product or sum of k
    of them overflows."""
    values = [[0.0] * k for _ in range(rows)]
    if dtype == "mxfp4":
        if k % MX_BLOCK:
            raise ValueError("mxfp4 needs k a multiple of 32")
        nib = [[rng.randrange(16) for _ in range(k)] for _ in range(rows)]
        scl = [[rng.randrange(120, 131) for _ in range(k // MX_BLOCK)] for _ in range(rows)]
        if specials:
            scl[rng.randrange(rows)][rng.randrange(k // MX_BLOCK)] = 0xFF
        data = bytearray()
        for r in range(rows):
            for j in range(0, k, 2):
                data.append(nib[r][j] | nib[r][j + 1] << 4)
            for j in range(k):
                values[r][j] = decode_e2m1(nib[r][j]) * decode_e8m0(scl[r][j // MX_BLOCK])
        return Operand(bytes(data), bytes(b for row in scl for b in row), values)
    codes = [[0] * k for _ in range(rows)]
    for r in range(rows):
        for j in range(k):
            if dtype == "fp32":
                codes[r][j] = struct.unpack("<I", struct.pack("<f", rng.uniform(-2, 2)))[0]
            elif dtype == "bf16":
                codes[r][j] = struct.unpack("<I", struct.pack("<f", rng.uniform(-2, 2)))[0] >> 16
            elif dtype == "fp8-e4m3":
                codes[r][j] = rng.choice([c for c in range(256) if c & 0x7F != 0x7F])
            else:
                codes[r][j] = rng.choice([c for c in range(256) if (c >> 2) & 0x1F != 0x1F])
    if specials:
        pool = {"fp32": (0x7FC00000, 0x7F800000, 0xFF800000), "bf16": (0x7FC0, 0x7F80, 0xFF80),
                "fp8-e4m3": (0x7F, 0xFF), "fp8-e5m2": (0x7E, 0x7C, 0xFC)}[dtype]
        for code in pool:
            codes[rng.randrange(rows)][rng.randrange(k)] = code
    decode = {"fp32": f32, "bf16": decode_bf16, "fp8-e4m3": decode_e4m3, "fp8-e5m2": decode_e5m2}[dtype]
    fmt = {"fp32": "<I", "bf16": "<H", "fp8-e4m3": "<B", "fp8-e5m2": "<B"}[dtype]
    data = bytearray()
    for r in range(rows):
        for j in range(k):
            data += struct.pack(fmt, codes[r][j])
            values[r][j] = decode(codes[r][j])
    return Operand(bytes(data), b"", values)


def error_bound(k, abs_sum):
    """kernels_reference.h: gamma(k + 1) * S + (k + 1) * 2^-149."""
    u = 2.0 ** -24
    gamma = (k + 1) * u / (1 - (k + 1) * u)
    return gamma * abs_sum + (k + 1) * 2.0 ** -149


def check_gemm(a, b, c, m, n, k):
    """Compares C (m * n f32 values, row-major) with A . B^T element by
    element. Returns (elements checked, list of (i, j, got, want, bound)
    that are wrong): a NaN reference needs NaN, an infinite one the same
    infinity, a finite one a finite value within the bound."""
    bad = []
    for i in range(m):
        for j in range(n):
            terms = [x * y for x, y in zip(a.values[i], b.values[j])]
            want = math.fsum(terms) if all(math.isfinite(t) for t in terms) else sum(terms)
            got = c[i * n + j]
            if math.isnan(want):
                ok = math.isnan(got)
                bound = 0.0
            elif math.isinf(want):
                ok = got == want
                bound = 0.0
            else:
                bound = error_bound(k, math.fsum(abs(t) for t in terms))
                ok = math.isfinite(got) and abs(got - want) <= bound
            if not ok:
                bad.append((i, j, got, want, bound))
    return m * n, bad


def f32_values(data):
    return list(struct.unpack(f"<{len(data) // 4}f", data))
