"""Coalescing read from a kernel's PTX dataflow. Pure logic.

- ``coalesced``: kernels whose global accesses are mostly coalesced: each address evaluated as a polynomial
  of the x thread index (``Affine``), the 32 lanes' addresses counted in 32-byte sectors: coalesced when
  they need less than twice the sectors of the same bytes side by side, strided otherwise (a row per
  thread), weighed by loop depth; ``strided``: kernels whose accesses are mostly strided.
"""

from __future__ import annotations

import re

from cuda_llm.tools.compiler.ptx.affine import Affine, lane_addresses
from cuda_llm.tools.compiler.ptx.dataflow import Flow, addr_taint, state_space
from cuda_llm.tools.compiler.ptx.parse import Kernel, imm

_WIDTH = {"8": 1, "16": 2, "32": 4, "64": 8, "128": 16}


def _access_width(op: str) -> int:
    parts = op.split(".")
    vec = next((int(p[1:]) for p in parts if re.fullmatch(r"v\d", p)), 1)
    size = next((_WIDTH[p[1:]] for p in reversed(parts) if re.fullmatch(r"[bufs](?:8|16|32|64|128)", p)), 4)
    return vec * size


def _loop_depths(k: Kernel) -> list[int]:
    """How many loops (a backward branch's range) hold each instruction."""
    where: dict[str, int] = {}
    for i, ins in enumerate(k.instrs):
        for lab in ins.labels:
            where[lab] = i
    depth = [0] * (len(k.instrs) + 1)
    for j, ins in enumerate(k.instrs):
        if ins.base == "bra" and ins.syms:
            i = where.get(ins.syms[-1])
            if i is not None and i <= j:
                depth[i] += 1
                depth[j + 1] -= 1
    out, run = [], 0
    for i in range(len(k.instrs)):
        run += depth[i]
        out.append(run)
    return out


def access_strides(flow: Flow, poly: Affine) -> tuple[int, int]:
    """(coalesced, strided) global accesses of a kernel, each weighed 4^loop depth (capped at 3 loops): the
    32 lanes' addresses are computed from the address polynomial, and an access is coalesced when the
    32-byte sectors they touch are fewer than twice what the same bytes would need side by side and at
    least half the steps from one lane to the next are one element (consecutive lanes on consecutive
    elements, or groups of lanes on runs of a row; not a permutation of a line), strided otherwise (a
    stride of two elements or more, a run-time multiple of the index: a row per thread). Accesses whose
    lanes are an opaque function of the index (a gather) or the same for every lane (a broadcast) are
    counted in neither."""
    k = flow.kernel
    PARAM, G = flow.tags("param"), flow.tags("G")
    depths = _loop_depths(k)
    good = bad = 0
    for i, ins in enumerate(k.instrs):
        b = ins.base
        if b == "cp" and ins.op.startswith("cp.async") and "global" in ins.op and len(ins.operands) > 1 \
                and ins.operands[1].startswith("["):
            operand = ins.operands[1]
            width = imm(ins.operands[2]) if len(ins.operands) > 2 else None
            if width is None:
                continue
        elif (b in ("ld", "st") or b == "ldu") and ins.operands:
            space = state_space(ins.op)
            if space == "generic":
                if not addr_taint(flow, ins) & (PARAM | G):
                    continue
            elif space != "global":
                continue
            operand = next((o for o in ins.operands if o.startswith("[")), None)
            if operand is None:
                continue
            width = _access_width(ins.op)
        else:
            continue
        lanes = lane_addresses(poly.address(operand))
        if lanes is None or len(set(lanes)) == 1:
            continue                         # a gather, or the same address for the whole warp
        sectors = {(x + j) // 32 for x in lanes for j in (0, width - 1)}
        ideal = -(-len(set(lanes)) * width // 32)
        weight = 4 ** min(depths[i], 3)
        steps = sum(1 for a, b in zip(lanes, lanes[1:]) if b - a == width)
        if 2 * ideal > len(sectors) and steps >= 15:
            good += weight
        else:
            bad += weight
    return good, bad


def coalescing_facts(flow: Flow, poly: Affine) -> dict[str, int]:
    """``coalesced``: 1 when a kernel's global accesses are mostly coalesced (at least two thirds of their
    weight); ``strided``: 1 when they are mostly strided (at least two thirds the other way)."""
    good, bad = access_strides(flow, poly)
    return {"coalesced": int(good > 0 and good >= 2 * bad), "strided": int(bad > 0 and bad >= 2 * good)}
