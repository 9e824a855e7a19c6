"""Addresses as polynomials over the x thread index (``Affine``), the polynomial ops, and the 32 lanes'
addresses a polynomial gives (``lane_addresses``). Pure logic."""

from __future__ import annotations

import re

from cuda_llm.tools.compiler.ptx.dataflow import Flow, state_space
from cuda_llm.tools.compiler.ptx.parse import Instr, imm

Poly = dict[tuple[str, ...], int]      # monomial (sorted symbols; () the constant) -> coefficient
_MAX_TERMS = 24


def padd(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for m, c in b.items():
        v = out.get(m, 0) + sign * c
        if v:
            out[m] = v
        else:
            out.pop(m, None)
    return out


def _pmul(a: Poly, b: Poly) -> Poly | None:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = tuple(sorted(ma + mb))
            if len(m) > 3:
                return None
            v = out.get(m, 0) + ca * cb
            if v:
                out[m] = v
            else:
                out.pop(m, None)
    return out if len(out) <= _MAX_TERMS else None


class Affine:
    """Registers as polynomials over the x thread index and opaque symbols (a small symbolic evaluator over
    the def chains: add, sub, mul, mad, shl, cvt, mov, ``mul.wide``). A register defined more than once (a
    loop-carried one) is read at its first definition; parameters, block indices and other special registers
    are symbols; anything else is an opaque symbol, ``~r`` where it varies across a warp's lanes (its taint
    has the thread index) and ``?r`` where it does not. ``x & (2^k - 1)`` and ``x % 2^k`` with k >= 5 keep x
    (lanes of one warp differ in the low five bits); ``x >> k`` and ``x / 2^k`` of the thread index, k >= 5,
    are the same for a whole warp."""

    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.memo: dict[str, Poly] = {}
        self.busy: set[str] = set()
        lane = 0
        for n in ("tid.x", "lane"):
            lane |= flow.tags.bits.get(n, 0)
        self.lane_bits = lane

    def _opaque(self, reg: str) -> Poly:
        varies = self.flow.taint.get(reg, 0) & self.lane_bits
        return {(("~" if varies else "?") + reg,): 1}

    def operand(self, text: str) -> Poly:
        t = text.strip()
        v = imm(t)
        if v is not None:
            return {(): v} if v else {}
        if t == "%tid.x":
            return {("tid.x",): 1}
        if t == "%laneid":
            return {("tid.x",): 1}
        if t.startswith("%"):
            if t in _SPECIAL_NAMES or "." in t:
                return {(t,): 1}
            return self.of(t)
        m = re.fullmatch(r"([A-Za-z_$][\w$]*)(?:\s*\+\s*(-?\d+))?", t)
        if m:
            p: Poly = {("@" + m.group(1),): 1}
            if m.group(2):
                p[()] = int(m.group(2))
            return p
        return {("?" + t,): 1}

    def address(self, operand: str) -> Poly:
        inner = operand.strip()[1:-1].split(",", 1)[0]
        m = re.fullmatch(r"\s*(.*?)\s*(?:\+\s*(-?\d+))?\s*", inner)
        head, off = (m.group(1), m.group(2)) if m else (inner, None)
        p = self.operand(head)
        return padd(p, {(): int(off)}) if off else p

    def of(self, reg: str) -> Poly:
        got = self.memo.get(reg)
        if got is not None:
            return got
        ds = self.flow.defs.get(reg)
        if not ds or reg in self.busy or len(self.busy) > 60:
            return self._opaque(reg) if ds else {(reg,): 1}
        self.busy.add(reg)
        try:
            v = self._eval(self.flow.kernel.instrs[ds[0]], reg)
        finally:
            self.busy.discard(reg)
        if v is None or len(v) > _MAX_TERMS:
            v = self._opaque(reg)
        self.memo[reg] = v
        return v

    def _eval(self, ins: Instr, reg: str) -> Poly | None:
        b, ops = ins.base, ins.operands[1:]
        if len(ins.dests) != 1:
            return None
        if b == "ld" and state_space(ins.op) == "param" and ins.addr_syms:
            return {("param:" + ins.addr_syms[0],): 1}
        if b in ("mov", "cvt", "cvta") and len(ops) == 1:
            return self.operand(ops[0])
        if b in ("add", "sub") and len(ops) == 2 and ".f" not in ins.op:
            return padd(self.operand(ops[0]), self.operand(ops[1]), 1 if b == "add" else -1)
        if b == "mul" and len(ops) == 2 and ".f" not in ins.op and ".hi" not in ins.op:
            return _pmul(self.operand(ops[0]), self.operand(ops[1]))
        if b == "mad" and len(ops) == 3 and ".hi" not in ins.op and ".f" not in ins.op:
            p = _pmul(self.operand(ops[0]), self.operand(ops[1]))
            return None if p is None else padd(p, self.operand(ops[2]))
        if len(ops) == 2:
            k = imm(ops[1])
            if b == "shl" and k is not None and 0 <= k < 32:
                return _pmul(self.operand(ops[0]), {(): 1 << k})
            x = self.operand(ops[0])
            scale = _scaled_index(x)
            if k is not None and scale is not None:
                e = scale.bit_length() - 1          # x = 2^e * tid + (the same for every lane)
                rest = {} if len(x) == 1 else {("?" + reg,): 1}
                if b == "rem" and k > 1 and k & (k - 1) == 0:
                    b, k = "and", k - 1
                if b == "and" and k != 0:
                    bits = k & 0xFFFFFFFFFFFFFFFF
                    low = (bits & -bits).bit_length() - 1
                    run = bits >> low
                    if (run + 1) & run == 0:              # one run of bits, [low, high)
                        lo, hi = max(low - e, 0), max(low + run.bit_length() - e, 0)
                        # tid & bits[lo, hi) = tid mod 2^hi - tid mod 2^lo
                        return padd(padd(_pmul(_low_bits(hi), {(): scale}) or {}, _pmul(_low_bits(lo), {(): scale}) or {}, -1), rest)
                if (b == "shr" and 0 < k < 64) or (b == "div" and k > 1 and k & (k - 1) == 0):
                    sh = k if b == "shr" else k.bit_length() - 1
                    if sh <= e:
                        return padd({("tid.x",): 1 << (e - sh)}, rest)
                    m = 1 << (sh - e)                  # the group of m lanes (a warp's index for m >= 32)
                    return {("?" + reg,): 1} if m >= 32 else padd({(f"tid.hi{m}",): 1}, rest)
        if all(lane_free(self.operand(o)) for o in ops if o.startswith("%")):
            return {("?" + reg,): 1}        # computed from values the same for every lane of a warp
        return None


_SPECIAL_NAMES = frozenset({"%ntid.x", "%ntid.y", "%ntid.z", "%nctaid.x", "%nctaid.y", "%nctaid.z", "%ctaid.x",
                            "%ctaid.y", "%ctaid.z", "%tid.y", "%tid.z", "%warpid", "%nwarpid", "%smid"})


def _scaled_index(p: Poly) -> int | None:
    """2^e where a polynomial is 2^e times the x thread index plus terms the same for every lane, else None."""
    s = p.get(("tid.x",), 0)
    if s > 0 and s & (s - 1) == 0 and all(m == ("tid.x",) or lane_free({m: 1}) for m in p):
        return s
    return None


def _low_bits(n: int) -> Poly:
    """The x thread index modulo 2^n: its low n bits (all a warp's lanes differ in from n = 5 on)."""
    if n <= 0:
        return {}
    return {("tid.x",): 1} if n >= 5 else {(f"tid.lo{1 << n}",): 1}


def lane_free(p: Poly) -> bool:
    """Whether a polynomial is the same for every lane of a warp."""
    return not any(s.startswith(("~", "tid.")) for m in p for s in m)


def lane_addresses(p: Poly) -> list[int] | None:
    """The part of an address that differs between the 32 lanes of a warp, lane by lane (the x thread index
    0..31, its low bits and groups as named; every other symbol a large stride, 4096), or None where a lane
    dependence is opaque (a gather)."""
    terms = []
    for m, c in p.items():
        if not any(s.startswith("tid.") for s in m):
            if any(s.startswith("~") for s in m):
                return None
            continue
        if any(s.startswith("~") for s in m):
            return None
        terms.append((m, c))
    out = []
    for lane in range(32):
        v = 0
        for m, c in terms:
            f = c
            for s in m:
                if s == "tid.x":
                    f *= lane
                elif s.startswith("tid.lo"):
                    f *= lane % int(s[6:])
                elif s.startswith("tid.hi"):
                    f *= lane // int(s[6:])
                else:
                    f *= 4096
            v += f
        out.append(v)
    return out
