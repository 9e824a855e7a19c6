"""Shared arrays combined from themselves, read from a kernel's PTX dataflow: the one classification that
block reductions (reduction.py) and fused statistics (fusion.py) both stand on. Pure logic."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cuda_llm.tools.compiler.ptx.affine import Affine, lane_free, padd
from cuda_llm.tools.compiler.ptx.dataflow import SHFL_REDUCE, Flow, is_load, is_store, origin_ins, state_space
from cuda_llm.tools.compiler.ptx.parse import Instr, registers

COMBINE = re.compile(r"^(?:add|max|min)\.(?:[a-z]+\.)*?(?:f16x2|bf16x2|f16|bf16|f32|f64|[sub]\d+)$")


@dataclass
class SharedTrees:
    """Shared arrays by how their stores combine them: ``up`` from a slot at a positive uniform offset
    (``s[i] += s[i + stride]``), ``down`` at a negative one or copied from another slot (a scan, a sort),
    ``warp_filled`` with combines of warp shuffle results; ``loads`` every shared load by array."""

    up: set[str] = field(default_factory=set)
    down: set[str] = field(default_factory=set)
    warp_filled: set[str] = field(default_factory=set)
    loads: dict[str, list[Instr]] = field(default_factory=dict)

    @property
    def trees(self) -> set[str]:
        """The halving or doubling trees: combined upwards and never like a scan."""
        return self.up - self.down


def shared_trees(flow: Flow, poly: Affine) -> SharedTrees:
    """Every shared array a kernel stores to, classified by what its stores combine (one pass over the
    kernel: the stored value's origins, their shared loads' offsets from the written slot)."""
    k = flow.kernel
    t = SharedTrees()
    up, down, warp_filled, loads = t.up, t.down, t.warp_filled, t.loads
    for ins in k.instrs:
        if is_load(ins) and ins.base == "ld" and state_space(ins.op) in ("shared", "generic"):
            for s in flow.addr_shared(ins):
                loads.setdefault(s, []).append(ins)
        if not (is_store(ins) and ins.base == "st" and state_space(ins.op) in ("shared", "generic")):
            continue
        targets = flow.addr_shared(ins)
        vals = registers(ins.operands[-1]) if ins.operands else []
        if not targets or len(vals) != 1:
            continue
        w = poly.address(ins.operands[0])
        for src in origin_ins(flow, vals[0]):
            if is_load(src) and set(flow.addr_shared(src)) & targets:
                d = padd(poly.address(src.operands[1]), w, -1) if len(src.operands) > 1 else {}
                if d:
                    down.update(targets)          # a slot copied to another: a scan's down-sweep, a sort
                continue
            if not COMBINE.match(src.op):
                continue
            for operand in src.srcs:
                for o in origin_ins(flow, operand):
                    if SHFL_REDUCE.match(o.op):
                        warp_filled.update(targets)
                    if not (is_load(o) and set(flow.addr_shared(o)) & targets and len(o.operands) > 1):
                        continue
                    d = padd(poly.address(o.operands[1]), w, -1)
                    if not d or not lane_free(d):
                        continue
                    if all(c > 0 for c in d.values()):
                        up.update(targets)
                    elif all(c < 0 for c in d.values()):
                        down.update(targets)
    return t
