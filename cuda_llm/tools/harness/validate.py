"""Comparing a candidate's outputs with the reference: pure NumPy, so every rule is tested on CPU.

Outputs are poisoned before each call (NaN for floats, a sentinel for integers, int64 included): an element
the kernel never wrote keeps the poison and fails, even where the reference happens to be zero.
"""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

INT_SENTINEL = 0xDEADBEEF          # as uint32; as int32 it reads -559038737
# int64 (indices): the 32-bit sentinel twice, so the same 32-bit fill writes it; as int64 it reads
# -2401053088876216593, never a valid index and far from any count or sum a kernel returns.
INT64_SENTINEL = (INT_SENTINEL << 32) | INT_SENTINEL
# Quiet NaNs with a payload that arithmetic never produces (the GPU's own NaN is 0x7FFFFFFF, NumPy's
# 0x7FC00000): an element that still holds exactly this pattern was never written, any other NaN was.
FLOAT32_POISON = 0x7FC0DEAD
FLOAT16_POISON = 0x7E5A
UINT8_POISON = 0xAD               # a byte no 0/1 mask holds

# dtype -> the bit pattern of one poisoned element (as an unsigned int of the element's size)
_POISON_BITS: dict[np.dtype, int] = {
    np.dtype(np.float32): FLOAT32_POISON,
    np.dtype(np.float16): FLOAT16_POISON,
    np.dtype(np.int32): INT_SENTINEL,
    np.dtype(np.uint32): INT_SENTINEL,
    np.dtype(np.int64): INT64_SENTINEL,
    np.dtype(np.uint8): UINT8_POISON,
}


def _uint(itemsize: int) -> type:
    return {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[itemsize]


def _poison_bits(dtype: np.dtype) -> np.ndarray:
    """One poisoned element's bits, as a 0-d unsigned array of the element's size."""
    dtype = np.dtype(dtype)
    if dtype not in _POISON_BITS:
        raise ValueError(f"no poison value for dtype {dtype}")
    return np.array(_POISON_BITS[dtype], dtype=_uint(dtype.itemsize))


def poison_value(dtype: np.dtype) -> Any:
    """The value an unwritten element of this dtype keeps."""
    dtype = np.dtype(dtype)
    return _poison_bits(dtype).view(dtype)[()]


def poison_word32(dtype: np.dtype) -> int:
    """The 32-bit word whose repetition fills a poisoned buffer (memset_d32, the worker's only fill): one
    element of a 4-byte dtype, two float16 halves, half of an int64. Derived from the element's pattern,
    and refused where that pattern is not a repeated 32-bit word (a fill would then poison nothing)."""
    dtype = np.dtype(dtype)
    raw = _poison_bits(dtype).tobytes()
    reps = max(1, 4 // len(raw))
    words = np.frombuffer(raw * reps, dtype=np.uint32)
    if not (words == words[0]).all():
        raise ValueError(f"the poison of {dtype} is not a repeated 32-bit word: a 32-bit fill cannot write it")
    return int(words[0])


def poisoned(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A host array as the worker leaves a poisoned device buffer (bit-exact)."""
    dtype = np.dtype(dtype)
    return np.full(shape, _poison_bits(dtype), dtype=_uint(dtype.itemsize)).view(dtype)


def is_poison(got: np.ndarray) -> np.ndarray:
    """Elementwise: does this element still hold the poison bit pattern?"""
    if got.dtype not in _POISON_BITS:
        return np.zeros(got.shape, dtype=bool)
    return got.view(_uint(got.dtype.itemsize)) == _poison_bits(got.dtype)


def _exact_integers(got: np.ndarray, expected: np.ndarray, atol: float, rtol: float) -> bool:
    """Integers on both sides with no tolerance: compared as integers (float64 holds only 53 bits of an int64)."""
    return atol == 0 and rtol == 0 and got.dtype.kind in "iu" and expected.dtype.kind in "iu"


# Large outputs are checked in blocks of this many elements: the float64 temporaries of one block stay in
# the CPU caches, which makes the check of a 64M-element output several times faster than whole-array math.
CHUNK = 1 << 20


def _bits(a: np.ndarray) -> np.ndarray:
    flat = np.ascontiguousarray(a).reshape(-1)
    return flat.view(np.uint8 if flat.dtype.itemsize == 1 else f"u{flat.dtype.itemsize}")


def unchanged(before: np.ndarray, after: np.ndarray) -> bool:
    """Bitwise equality (NaN-safe): an input the kernel wrote to is a mutated input."""
    if before.shape != after.shape or before.dtype != after.dtype:
        return False
    a, b = _bits(before), _bits(after)
    return all(np.array_equal(a[i:i + CHUNK], b[i:i + CHUNK]) for i in range(0, a.size, CHUNK))


def first_difference(before: np.ndarray, after: np.ndarray) -> list[int] | None:
    a, b = _bits(before), _bits(after)
    idx = np.flatnonzero(a != b)
    if idx.size == 0:
        return None
    return [int(i) for i in np.unravel_index(int(idx[0]), before.shape)] if before.shape else []


def within(diff: np.ndarray, mag: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    """The tolerance rule, elementwise, in one place: |got - exp| <= atol + rtol * |exp|, and never where the
    reference is Inf (its tolerance would be Inf, so any number would pass). NaN is never within."""
    return (diff <= atol + rtol * mag) & (mag < np.inf)


def count_outside(got: np.ndarray, want: np.ndarray, atol: float, rtol: float, *, exact: bool) -> int:
    """How many elements break the rule (within tolerance or the same value; integers with no tolerance
    exactly equal): the count the GPU worker's comparison kernel (device_compare.py) makes after every timed
    call, here for the test device."""
    g, w = np.ascontiguousarray(got).reshape(-1), np.ascontiguousarray(want).reshape(-1)
    if exact:
        return int(np.count_nonzero(g != w))
    with np.errstate(invalid="ignore", over="ignore"):
        gd, wd = g.astype(np.float64), w.astype(np.float64)
        ok = within(np.abs(gd - wd), np.abs(wd), atol, rtol) | (gd == wd)
    return int(np.count_nonzero(~ok))


def compare_output(name: str, got: np.ndarray, expected: np.ndarray, tol: Any, *, is_float: bool,
                   pool: Executor | None = None) -> dict[str, Any]:
    """Check ``got`` against ``expected``: |got - exp| <= atol + rtol * |exp| elementwise.

    ``tol`` is (atol, rtol) or an object with numeric ``atol``/``rtol``. Returns CaseResult fields:
    passed, reason, kind, output, max_abs_err, max_rel_err, first_bad_index, expected, got.
    ``pool`` (threads) splits the pass over a large output: NumPy releases the GIL in each block.
    """
    atol, rtol = (tol if isinstance(tol, tuple) else (tol.atol, tol.rtol))
    atol, rtol = float(atol), float(rtol)
    res: dict[str, Any] = {"passed": True, "reason": None, "kind": None, "output": name, "max_abs_err": None,
                           "max_rel_err": None, "first_bad_index": None, "expected": None, "got": None}
    expected = np.asarray(expected)
    if got.size != expected.size:
        res.update(passed=False, kind="size", reason=f"{name}: {got.size} elements, expected {expected.size}")
        return res
    got = got.reshape(expected.shape)
    if got.size == 0:
        return res

    def fail(flat: int, why: str, kind: str) -> dict[str, Any]:
        idx = [int(i) for i in np.unravel_index(flat, expected.shape)]
        res.update(passed=False, reason=why, kind=kind, first_bad_index=idx,
                   expected=_num(expected.reshape(-1)[flat]), got=_num(got.reshape(-1)[flat]))
        return res

    quick = _passes_quickly(got, expected, atol, rtol, pool=pool)
    if quick is not None:               # every element finite and within tolerance: only the error maxima
        res["max_abs_err"], res["max_rel_err"] = quick
        return res
    stats = _failure_stats(np.ascontiguousarray(got).reshape(-1), np.ascontiguousarray(expected).reshape(-1),
                           atol, rtol, is_float=is_float, pool=pool)
    res["max_abs_err"], res["max_rel_err"] = stats.max_abs, stats.max_rel
    if stats.unwritten:
        return fail(stats.first_unwritten, f"{name}: {stats.unwritten} of {got.size} elements never written (the "
                                           f"poison value survived; wrong bounds, a kernel that did not launch, or "
                                           f"work skipped)", "unwritten")
    if stats.nonfinite:
        return fail(stats.first_nonfinite, f"{name}: {stats.nonfinite} NaN/Inf values where the reference is finite",
                    "nonfinite")
    if stats.bad:
        worst = "" if res["max_abs_err"] is None else f"; max abs err {res['max_abs_err']:.3g}"
        return fail(stats.first_bad, f"{name}: {stats.bad} of {got.size} elements outside tolerance (atol {atol:g}, "
                                     f"rtol {rtol:g}){worst}", "wrong_values")
    return res


@dataclass
class _Stats:
    """What a failed check reports, summed over blocks: counts, first flat index of each kind, error maxima."""

    unwritten: int = 0
    first_unwritten: int = -1
    nonfinite: int = 0
    first_nonfinite: int = -1
    bad: int = 0
    first_bad: int = -1
    max_abs: float | None = None
    max_rel: float | None = None

    def add(self, o: "_Stats") -> "_Stats":
        for kind in ("unwritten", "nonfinite", "bad"):
            n, first = getattr(o, kind), getattr(o, f"first_{kind}")
            if n and getattr(self, f"first_{kind}") < 0:
                setattr(self, f"first_{kind}", first)          # blocks are added in order
            setattr(self, kind, getattr(self, kind) + n)
        for m in ("max_abs", "max_rel"):
            mine, theirs = getattr(self, m), getattr(o, m)
            setattr(self, m, theirs if mine is None else mine if theirs is None else max(mine, theirs))
        return self


def _failure_stats(g_flat: np.ndarray, e_flat: np.ndarray, atol: float, rtol: float, *, is_float: bool,
                   pool: Executor | None) -> _Stats:
    """The full diagnosis of a failed check, block by block (float64 temporaries that stay in the CPU
    caches), over the pool's threads for a large output: a 64M-element failure costs about what a pass does."""
    exact = _exact_integers(g_flat, e_flat, atol, rtol)
    poisoned = g_flat.dtype in _POISON_BITS
    poison = poison_value(g_flat.dtype) if poisoned and not is_float else None

    def block(lo: int, hi: int) -> _Stats:
        out = _Stats()
        for i in range(lo, hi, CHUNK):
            j = min(i + CHUNK, hi)
            got, exp = g_flat[i:j], e_flat[i:j]
            g, e = got.astype(np.float64), exp.astype(np.float64)
            if is_float:
                unwritten = is_poison(got) & ~np.isnan(e)
            else:
                unwritten = is_poison(got) & (exp != poison) if poisoned else np.zeros(g.shape, bool)
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                diff = np.abs(g - e)               # Inf - Inf is NaN: judged by the rules below
                finite = np.isfinite(g)
                bad_nonfinite = ~finite & ~(g == e)          # NaN/Inf never passes unless the reference has the same Inf
                ok = within(diff, np.abs(e), atol, rtol) | (g == e)   # g == e: the same Inf as the reference
                ok &= ~bad_nonfinite
                if exact:
                    ok = got == exp
            fin = finite & np.isfinite(e)
            part = _Stats()
            if fin.any():
                part.max_abs = float(diff[fin].max())
                part.max_rel = float((diff[fin] / np.maximum(np.abs(e[fin]), 1e-30)).max())
            for kind, mask in (("unwritten", unwritten), ("nonfinite", bad_nonfinite), ("bad", ~ok)):
                n = int(mask.sum())
                if n:
                    setattr(part, kind, n)
                    setattr(part, f"first_{kind}", i + int(np.flatnonzero(mask)[0]))
            out.add(part)
        return out

    total = _Stats()
    for part in _over_blocks(block, g_flat.size, pool):
        total.add(part)
    return total


def _over_blocks(block: Callable[[int, int], Any], n: int, pool: Executor | None) -> list[Any]:
    """``block(lo, hi)`` over [0, n) in order: one call, or up to 16 parts of whole CHUNKs on the pool's threads."""
    if pool is None or n <= 4 * CHUNK:
        return [block(0, n)]
    parts = max(2, min(16, n // (4 * CHUNK)))
    step = -(-n // parts // CHUNK) * CHUNK
    return list(pool.map(lambda lo: block(lo, min(n, lo + step)), range(0, n, step)))


def passes(got: np.ndarray, expected: np.ndarray, tol: Any) -> bool:
    """The verdict of ``compare_output`` alone (same rules: within tolerance, or the same Inf as the
    reference; NaN never passes), block by block, stopping at the first block that fails. For the
    benchmark data's replay test, where a failure is the expected answer and the 64M-element full
    diagnosis of ``compare_output`` would be wasted."""
    atol, rtol = (tol if isinstance(tol, tuple) else (tol.atol, tol.rtol))
    atol, rtol = float(atol), float(rtol)
    expected = np.asarray(expected)
    if got.size != expected.size:
        return False
    g_flat, e_flat = np.ascontiguousarray(got).reshape(-1), np.ascontiguousarray(expected).reshape(-1)
    if _exact_integers(g_flat, e_flat, atol, rtol):
        return all(np.array_equal(g_flat[i:i + CHUNK], e_flat[i:i + CHUNK]) for i in range(0, g_flat.size, CHUNK))
    with np.errstate(invalid="ignore", over="ignore"):
        for i in range(0, g_flat.size, CHUNK):
            g = g_flat[i:i + CHUNK].astype(np.float64)
            e = e_flat[i:i + CHUNK].astype(np.float64)
            ok = within(np.abs(g - e), np.abs(e), atol, rtol) | (g == e)
            if not ok.all():
                return False
    return True


def _passes_quickly(got: np.ndarray, expected: np.ndarray, atol: float, rtol: float,
                    pool: Executor | None = None) -> tuple[float, float] | None:
    """(max abs error, max rel error) when every element is finite and within tolerance, else None (then
    the full check finds what is wrong and where). Block by block; in float32 when both sides are at most
    float32 (half the memory traffic; the rounding is far below any float tolerance), else in float64
    (integers stay exact up to 2^53)."""
    g_flat, e_flat = np.ascontiguousarray(got).reshape(-1), np.ascontiguousarray(expected).reshape(-1)
    small = {g_flat.dtype, e_flat.dtype} <= {np.dtype(np.float32), np.dtype(np.float16)}
    work = np.float32 if small else np.float64
    if _exact_integers(g_flat, e_flat, atol, rtol):
        work = None                                   # exact integers: compare as they are

    def block(lo: int, hi: int) -> tuple[float, float] | None:
        max_abs = max_rel = 0.0
        with np.errstate(invalid="ignore", over="ignore"):
            for i in range(lo, hi, CHUNK):
                if work is None:
                    if not np.array_equal(g_flat[i:min(i + CHUNK, hi)], e_flat[i:min(i + CHUNK, hi)]):
                        return None
                    continue
                g = g_flat[i:min(i + CHUNK, hi)].astype(work)
                e = e_flat[i:min(i + CHUNK, hi)].astype(work)
                mag = np.abs(e)
                diff = np.abs(g - e)
                if not within(diff, mag, atol, rtol).all():      # NaN (poison included) is never within
                    return None
                if diff.size:
                    max_abs = max(max_abs, float(diff.max()))
                    max_rel = max(max_rel, float((diff / np.maximum(mag, 1e-30)).max()))
        return max_abs, max_rel

    results = _over_blocks(block, g_flat.size, pool)
    if any(r is None for r in results):
        return None
    return max(r[0] for r in results), max(r[1] for r in results)  # type: ignore[index]


def _num(x: Any) -> float:
    return float(x)
