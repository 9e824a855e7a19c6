"""The arithmetic of the CUDA kernels in tests/adversarial/scale/, emulated in NumPy: fp16 and tf32 splits,
tensor-core products (exact products, fp32 accumulation), half2 sums in short runs. Shared by the NumPy
twins of those kernels and by the test that checks them at scales 1, 1e4 and 1e-4 against float64.

fp16 conversions and float16 additions in NumPy round to nearest even like __float2half_rn and __hadd2
(a float16 sum is computed in float32 and rounded once more, which is exact for 11-bit operands), with
subnormals and overflow to Inf. tf32 is emulated by masking the low 13 mantissa bits (truncation: the
worse of the two ways the hardware may take an fp32 operand)."""

from __future__ import annotations

import numpy as np

F16 = np.float16
F32 = np.float32
TARGET_EXP = 9              # sgemm_fp16_split_scaled: a row's (column's) max |value| goes to [2^9, 2^10)
REDUCE_TARGET_EXP = 10      # reduce_sum_fp16_split_scaled: a 256-element chunk's max goes to [2^10, 2^11)
CHUNK = 256                 # elements per warp tile in the reduce kernels (32 lanes x 8)


def split16(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """fp32 -> (hi, lo) as float32 arrays holding fp16 values: hi = fp16(v), lo = fp16(v - hi)."""
    v = np.asarray(v, F32)
    with np.errstate(over="ignore", invalid="ignore"):
        hi = v.astype(F16).astype(F32)
        lo = (v - hi).astype(F16).astype(F32)      # v - hi is exact in fp32
    return hi, lo


def tensor_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b with fp32 accumulation (the operands' products are exact in fp32 for fp16 and tf32 parts)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.matmul(a.astype(F32), b.astype(F32))


def sgemm_fp16_split(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Fixed 2^8 on every input, three fp16 products, / 2^16."""
    ah, al = split16(np.asarray(A, F32) * F32(256.0))
    bh, bl = split16(np.asarray(B, F32) * F32(256.0))
    with np.errstate(over="ignore", invalid="ignore"):
        acc = tensor_product(al, bh) + tensor_product(ah, bl) + tensor_product(ah, bh)
        return (acc * F32(1.0 / 65536.0)).astype(F32)


def scale_exponents(maxabs: np.ndarray, target: int) -> np.ndarray:
    """The power-of-two exponent e that brings each max |value| into [2^target, 2^(target+1)); 0 for 0."""
    m = np.asarray(maxabs, F32)
    biased = (m.view(np.uint32) >> 23).astype(np.int64)
    e = np.clip(target + 127 - biased, -126, 126)
    return np.where(m == 0, 0, e)


def sgemm_fp16_split_scaled(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Per row of A and per column of B: a power-of-two scale, the fp16 split, three products, unscaled."""
    A = np.asarray(A, F32)
    B = np.asarray(B, F32)
    ea = scale_exponents(np.abs(A).max(axis=1), TARGET_EXP)
    eb = scale_exponents(np.abs(B).max(axis=0), TARGET_EXP)
    ah, al = split16(A * np.ldexp(F32(1.0), ea).astype(F32)[:, None])
    bh, bl = split16(B * np.ldexp(F32(1.0), eb).astype(F32)[None, :])
    acc = tensor_product(al, bh) + tensor_product(ah, bl) + tensor_product(ah, bh)
    return np.ldexp(acc, -(ea[:, None] + eb[None, :])).astype(F32)


def tf32(v: np.ndarray) -> np.ndarray:
    """fp32 with the low 13 mantissa bits cleared: tf32's 10-bit mantissa, truncated."""
    bits = np.asarray(v, F32).view(np.uint32) & np.uint32(0xFFFFE000)
    return bits.view(F32)


def sgemm_3xtf32(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    A = np.asarray(A, F32)
    B = np.asarray(B, F32)
    a_big, b_big = tf32(A), tf32(B)
    a_small, b_small = tf32(A - a_big), tf32(B - b_big)
    return (tensor_product(a_small, b_big) + tensor_product(a_big, b_small) + tensor_product(a_big, b_big)).astype(F32)


def softmax_shift_first(x: np.ndarray) -> np.ndarray:
    """exp(x - x[row, 0]) / its row sum, in fp32: Inf / Inf = NaN once a row's spread passes ~88."""
    x = np.asarray(x, F32)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x - x[:, :1])
        return (e / e.sum(axis=1, dtype=F32, keepdims=True)).astype(F32)


def softmax_rowmax(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, F32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, dtype=F32, keepdims=True)).astype(F32)


def _octet_sums(v: np.ndarray) -> np.ndarray:
    """v: (octets, 8) fp32. Per octet, as the kernel does: hi parts summed in fp32 in order, lo parts as
    half2 pairs (x0, x1), (x2, x3), ... summed lane-wise in fp16 (a run of four per lane), the two lanes
    added in fp32, then hi + lo in fp32."""
    hi, lo = split16(v)
    hi_sum = hi[:, 0].copy()
    for i in range(1, 8):
        hi_sum += hi[:, i]
    lo16 = lo.astype(F16)
    with np.errstate(over="ignore", invalid="ignore"):
        lane0 = ((lo16[:, 0] + lo16[:, 2]) + lo16[:, 4]) + lo16[:, 6]
        lane1 = ((lo16[:, 1] + lo16[:, 3]) + lo16[:, 5]) + lo16[:, 7]
        return hi_sum + (lane0.astype(F32) + lane1.astype(F32))


def _padded(x: np.ndarray, multiple: int) -> np.ndarray:
    x = np.asarray(x, F32).reshape(-1)
    pad = (-x.size) % multiple
    return np.concatenate([x, np.zeros(pad, F32)]) if pad else x


def reduce_sum_fp16_split(x: np.ndarray, chunk: int = 1 << 22) -> np.float32:
    """Octets split into fp16 hi + lo without scaling; the octet sums added in fp32 (pairwise here, a
    grid-stride loop and a block tree on the GPU: both far inside the tolerance)."""
    x = _padded(x, 8)
    parts = [_octet_sums(x[i:i + chunk].reshape(-1, 8)) for i in range(0, x.size, chunk)]
    with np.errstate(over="ignore", invalid="ignore"):
        return np.concatenate(parts).sum(dtype=F32) if parts else F32(0.0)


def reduce_sum_fp16_split_scaled(x: np.ndarray, chunk: int = 1 << 22) -> np.float32:
    """The same with a power of two per 256-element chunk (one warp's tile) from its max |value|, undone
    on each octet's fp32 sum."""
    x = _padded(x, CHUNK)
    parts = []
    for i in range(0, x.size, chunk):
        t = x[i:i + chunk].reshape(-1, CHUNK)
        e = scale_exponents(np.abs(t).max(axis=1), REDUCE_TARGET_EXP)
        scaled = t * np.ldexp(F32(1.0), e).astype(F32)[:, None]
        octets = _octet_sums(scaled.reshape(-1, 8)).reshape(-1, CHUNK // 8)
        parts.append((octets * np.ldexp(F32(1.0), -e).astype(F32)[:, None]).reshape(-1))
    return np.concatenate(parts).sum(dtype=F32) if parts else F32(0.0)
