"""Block reductions read from a kernel's PTX dataflow. Pure logic.

- ``shared_reduction``: shared arrays a block's values are combined in: updated by a sum, max or min from a
  slot at a positive uniform offset (``s[i] += s[i + stride]``; a scan reads at a negative one or swaps
  slots), or filled with warp shuffle reductions and read back into a combine (the 32-slot form).
"""

from __future__ import annotations

from cuda_llm.tools.compiler.ptx.affine import Affine
from cuda_llm.tools.compiler.ptx.dataflow import SHFL_REDUCE, Flow, barrier
from cuda_llm.tools.compiler.ptx.parse import Instr
from cuda_llm.tools.compiler.ptx.trees import COMBINE, shared_trees

def _feeds(flow: Flow, reg: str, uses: dict[str, list[Instr]], want, limit: int = 64) -> bool:
    """Whether a value reaches an instruction ``want`` accepts, through moves, conversions and selects."""
    seen, todo = {reg}, [reg]
    while todo and len(seen) < limit:
        for ins in uses.get(todo.pop(), []):
            if want(ins):
                return True
            if ins.base in ("mov", "cvt", "selp"):
                for d in ins.dests:
                    if d not in seen:
                        seen.add(d)
                        todo.append(d)
    return False


def shared_reductions(flow: Flow, poly: Affine) -> int:
    """Shared arrays a block's values are combined in (docs/features.md, block_reduction_tree): updated from
    themselves by a sum, max or min of a slot at a positive uniform offset from the one written (``s[i] +=
    s[i + stride]``, a halving or doubling tree, unrolled or not), never at a negative offset (a
    Hillis-Steele scan, ``s[i] += s[i - off]``) nor copied from another slot (a Blelloch scan's down-sweep
    swaps); or filled with the results of warp shuffle reductions (``shfl.down``/``bfly`` then a combine)
    and read back into a combine or a shuffle (the 32-slot form; a shuffle scan's ``shfl.up`` is not one, and
    a kernel with one is a scan)."""
    k = flow.kernel
    if not barrier(k) or any(i.op.startswith(("shfl.sync.up", "shfl.up")) for i in k.instrs):
        return 0          # (a kernel that scans with shfl.up keeps its warps' totals in shared memory for the scan)
    uses: dict[str, list[Instr]] = {}
    for ins in k.instrs:
        for r in ins.srcs:
            uses.setdefault(r, []).append(ins)
    t = shared_trees(flow, poly)
    up, down, warp_filled, loads = t.up, t.down, t.warp_filled, t.loads
    n = len(up - down)

    def combines(ins: Instr) -> bool:
        return bool(COMBINE.match(ins.op) or SHFL_REDUCE.match(ins.op))

    for s in warp_filled - up:
        if any(_feeds(flow, d, uses, combines) for ld in loads.get(s, []) for d in ld.dests):
            n += 1
    return n


def reduction_facts(flow: Flow, poly: Affine) -> dict[str, int]:
    """``shared_reduction`` of one kernel."""
    return {"shared_reduction": shared_reductions(flow, poly)}
