"""Kernel fusion read from a kernel's PTX dataflow (docs/features.md, ``kernel_fusion``). Pure logic.

The source rules recognise a fused kernel by how it is spelled; the build shows what one kernel does with
the values it computes. ``fused`` counts, per kernel, the forms of fusion found (0 to 4):

a. statistics and the elementwise step in one kernel: a cross-thread reduction's result (a chain of
   ``shfl.down``/``shfl.bfly`` combines, or a broadcast read of a shared reduction tree, of a shared slot
   every thread adds to atomically, or of a slot such a result was put in) and an input element (a global load, or a shared or local copy of one) meet in the value of a
   global store whose address differs between the lanes of a warp (one output per thread). A reduction that
   stores one value per block or per warp, or whose stored value is the reduction alone, is not one.
b. an epilogue: a multiply-accumulate of loaded values (carried around a loop or unrolled) or an MMA's
   result stored through a nonlinearity (``ex2.approx``, ``tanh.approx``, a float ``max``/``min`` with
   zero), not through another value carried around a loop; a GEMM scaled by alpha and beta or with a bias
   added is not one.
c. phases joined in one kernel: a grid-wide barrier (an atomic arrival on a counter, then a spin on an
   acquire or volatile load of that counter; what ``cg::this_grid().sync()`` compiles to), or the last-block
   finish (a fence, then an ``atom.add``/``atom.inc`` ticket whose value decides a branch).
d. flash attention: a product (MMA or a multiply-accumulate chain of loaded values) through ``ex2`` into a
   second product in the same kernel.

``online_rescale`` (docs/features.md, ``online_softmax``): a running maximum's change through ``ex2`` into a
factor that scales a running value, ``acc *= exp(m_old - m_new)``, carried in registers or through memory
between tiles; a two-pass softmax (the maximum first, then the sum of exponentials) rescales nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from cuda_llm.tools.compiler.ptx.affine import Affine, lane_addresses, lane_free
from cuda_llm.tools.compiler.ptx.dataflow import (FLOAT_ACC, FLOAT_ADD, FLOAT_MUL, SHFL_REDUCE, Exprs, Flow, barrier,
                                                  copy_origin, depends_on, is_load, is_store, origin_ins, state_space)
from cuda_llm.tools.compiler.ptx.parse import Instr, Kernel, registers
from cuda_llm.tools.compiler.ptx.trees import shared_trees

FUSION_FACTS = ("fused", "online_rescale")

_NONLINEAR = re.compile(r"^(?:ex2|tanh)\.approx\b")
_FLOAT_MINMAX = re.compile(r"^(?:max|min)\.(?:[a-zA-Z]+\.)*?(?:f16x2|bf16x2|f16|bf16|f32|f64)$")
_ZERO = re.compile(r"^(?:0[fF][08]0000000|0[dD][08]000000000000000|0)$")
_UNROLLED = 8                     # steps of an unrolled dot product (a fixed head dimension)
_MMA = ("mma", "wmma", "wgmma", "tcgen05")
_FENCE = re.compile(r"^(?:membar\.(?:gl|sys)|fence\.(?:sc|acq_rel)(?:\.\w+)*?\.(?:gpu|sys))\b")
_SPIN_LENGTH = 16                 # instructions of a spin loop at most
_SPIN_LOAD = re.compile(r"^ld\.(?:[a-z:]+\.)*?(?:acquire|volatile|relaxed)\b")


# ----------------------------------------------------------------------------------------- helpers
def _values(ins: Instr) -> list[str]:
    """The registers whose values an instruction's result is made of: a store's stored operands, a
    shuffle's shuffled value, every other operand of the rest (not a guard predicate, not an address)."""
    if is_store(ins):
        return [r for o in ins.operands[1:] for r in registers(o)]
    if ins.base == "shfl":
        return registers(ins.operands[1]) if len(ins.operands) > 1 else []
    if is_load(ins) or ins.base in ("atom", "red"):
        return []
    return [r for o in ins.operands[(1 if ins.dests else 0):] if not o.startswith("[") for r in registers(o)]


def _uses(flow: Flow) -> dict[str, list[Instr]]:
    out: dict[str, list[Instr]] = {}
    for ins in flow.kernel.instrs:
        for r in _values(ins):
            out.setdefault(r, []).append(ins)
    return out


def _forward(flow: Flow, roots: set[str], uses: dict[str, list[Instr]], *, through_shared: bool = True,
             blocked: frozenset[str] = frozenset()) -> set[str]:
    """Every register computed from ``roots`` (the roots included), through arithmetic, moves and shuffles,
    and through a shared array: what is stored into it is in whatever is loaded from it; never into a
    ``blocked`` register."""
    out, todo = set(roots), list(roots)
    arrays: set[str] = set()
    loads: dict[str, list[Instr]] = {}
    if through_shared:
        for ins in flow.kernel.instrs:
            if is_load(ins) and state_space(ins.op) in ("shared", "generic"):
                for s in flow.addr_shared(ins):
                    loads.setdefault(s, []).append(ins)
    while todo:
        for ins in uses.get(todo.pop(), []):
            new = list(ins.dests)
            if through_shared and is_store(ins) and state_space(ins.op) in ("shared", "generic"):
                for s in flow.addr_shared(ins) - arrays:
                    arrays.add(s)
                    new += [d for ld in loads.get(s, []) for d in ld.dests]
            for d in new:
                if d not in out and d not in blocked:
                    out.add(d)
                    todo.append(d)
    return out


def _global_store(flow: Flow, ins: Instr) -> bool:
    """A store to global memory (or a generic one through a kernel parameter's pointer; a WMMA fragment's
    store too); not an atomic."""
    if not (is_store(ins) and ins.base in ("st", "wmma")):
        return False
    space = state_space(ins.op)
    if space == "global":
        return True
    if space != "generic" or flow.addr_shared(ins):
        return False
    mask = 0
    for r in ins.addr_regs:
        mask |= flow.taint.get(r, 0)
    return bool(mask & (flow.tags("param") | flow.tags("G")))


def _lane_varying(poly: Affine, operand: str) -> bool:
    """Whether an address differs between the lanes of a warp (one element per thread)."""
    lanes = lane_addresses(poly.address(operand))
    return lanes is None or len(set(lanes)) > 1


# --------------------------------------------------------------------------- a. reduction -> outputs
def _chained_shuffles(flow: Flow, uses: dict[str, list[Instr]]) -> set[str]:
    """Results of ``shfl.down``/``shfl.bfly`` whose shuffled value was itself made from such a result (a
    reduction's steps: a shuffle, a combine, a shuffle of the combined value), or of ``redux``."""
    shuffles = [i for i in flow.kernel.instrs if SHFL_REDUCE.match(i.op) and i.dests]
    out = {s.dests[0] for s in shuffles if s.base == "redux"}
    shfl = [s for s in shuffles if s.base == "shfl" and _values(s)]
    made = {s.dests[0]: _forward(flow, {s.dests[0]}, uses, through_shared=False) for s in shfl}
    for s in shfl:
        fed = [d for d, fwd in made.items() if _values(s)[0] in fwd]
        if fed:
            out.add(s.dests[0])
            out.update(fed)
    return out


_RED, _INPUT = 1, 2


def statistics_and_outputs(flow: Flow, poly: Affine) -> bool:
    """Form a: a reduction's result and an input element in the value of a per-thread global store."""
    k = flow.kernel
    if any(i.op.startswith(("shfl.sync.up", "shfl.up")) for i in k.instrs):
        return False                      # a scan keeps its totals beside its elements; not statistics
    uses = _uses(flow)
    chained = _chained_shuffles(flow, uses)
    todo = list(chained)
    while todo:                           # and their moves and conversions (``mov.b32 %f5, %r31``)
        for ins in uses.get(todo.pop(), []):
            if ins.base in ("mov", "cvt") and len(ins.dests) == 1 and ins.dests[0] not in chained:
                chained.add(ins.dests[0])
                todo.append(ins.dests[0])
    trees = shared_trees(flow, poly).trees if barrier(k) else set()
    if barrier(k):                       # ... or updated by every thread's atomic (``atomicAdd(&s_sum, v)``)
        trees |= {s for i in k.instrs if i.base in ("atom", "red") and re.search(r"\.(?:add|max|min)\.", i.op)
                  and state_space(i.op) in ("shared", "generic") for s in flow.addr_shared(i)}
    if not chained and not trees:
        return False
    raw = flow.tags("RAW")
    local_vals = [r for i in k.instrs if is_store(i) and state_space(i.op) == "local" for r in _values(i)]
    stores_of: dict[str, list[Instr]] = {}
    for ins in k.instrs:
        if is_store(ins) and state_space(ins.op) in ("shared", "generic"):
            for s in flow.addr_shared(ins):
                stores_of.setdefault(s, []).append(ins)
    # what each register is made of, to a fixpoint: _RED a reduction's result, _INPUT an input element;
    # the walk stops at both (a reduction's own inputs are not the output's)
    summary: dict[str, int] = {}

    def leaf(ins: Instr) -> int | None:
        """The summary of a definition that ends the walk, or None to go on through its operands."""
        if any(r in chained for r in _values(ins)) and ins.base != "shfl":
            return _RED
        if ins.base == "shfl" and SHFL_REDUCE.match(ins.op):
            return _RED if ins.dests and ins.dests[0] in chained else 0
        if ins.base == "redux":
            return _RED
        if not is_load(ins):
            return None
        space = state_space(ins.op)
        arrays = flow.addr_shared(ins) if space in ("shared", "generic") else set()
        if arrays:
            lane_free = len(ins.operands) > 1 and not _lane_varying(poly, ins.operands[1])
            bits = 0
            for s in arrays:
                if s in trees:
                    bits |= _RED if lane_free else 0
                elif lane_free and any(summary.get(r, 0) & _RED for st in stores_of.get(s, []) for r in _values(st)):
                    bits |= _RED
                elif any(flow.taint.get(r, 0) & raw for st in stores_of.get(s, []) for r in _values(st)):
                    bits |= _INPUT
            return bits
        if space == "local":
            return None
        if space in ("global", "generic") or ins.base in ("ldu", "tex", "tld4"):
            return _INPUT if flow.taint.get(ins.dests[0], 0) & raw else 0
        return 0

    defs = [(ins, leaf(ins)) for ins in k.instrs if ins.dests]
    changed = True
    while changed:
        changed = False
        for ins, fixed in defs:
            if fixed is None:
                val = 0
                srcs = local_vals if is_load(ins) else _values(ins)
                for r in srcs:
                    val |= summary.get(r, 0)
            elif is_load(ins) and flow.addr_shared(ins):
                val = leaf(ins) or 0          # a broadcast slot's stores may have become reductions since
            else:
                val = fixed
            for d in ins.dests:
                old = summary.get(d, 0)
                if old | val != old:
                    summary[d] = old | val
                    changed = True
    for ins in k.instrs:
        if _global_store(flow, ins) and _lane_varying(poly, ins.operands[0]):
            bits = 0
            for r in _values(ins):
                bits |= summary.get(r, 0)
            if bits == _RED | _INPUT:
                return True
    return False


# ---------------------------------------------------------------------------- b, d. accumulations
def _accumulators(flow: Flow) -> tuple[set[str], set[str]]:
    """(registers of multiply-accumulate chains with a loaded multiplicand, carried around a loop or
    unrolled (``_UNROLLED`` steps or more), registers MMA results are written to): products summed over
    an inner dimension."""
    k = flow.kernel
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            parent[x] = parent.get(parent[x], parent[x])
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb

    mul_of: dict[str, list[str]] = {}
    for ins in k.instrs:
        if FLOAT_MUL.match(ins.op) and len(ins.dests) == 1 and len(ins.srcs) >= 2:
            mul_of[ins.dests[0]] = list(ins.srcs[:2])
    members: set[str] = set()
    steps: list[tuple[str, list[str]]] = []
    for ins in k.instrs:
        if len(ins.dests) != 1:
            continue
        d = ins.dests[0]
        if FLOAT_ACC.match(ins.op) and len(ins.operands) == 4:
            c = registers(ins.operands[3])
            members.add(d)
            if c:
                members.add(c[0])
                union(d, c[0])
            steps.append((d, [r for o in ins.operands[1:3] for r in registers(o)]))
        elif FLOAT_ADD.match(ins.op) and len(ins.srcs) == 2:
            a, b = ins.srcs
            for m, other in ((a, b), (b, a)):
                if m in mul_of and len(flow.defs.get(m, [])) == 1:
                    members.update((d, other))
                    union(d, other)
                    steps.append((d, mul_of[m]))
                    break
    carried = {find(r) for r in members if len(flow.defs.get(r, [])) > 1}
    fed: dict[str, int] = {}
    for d, ms in steps:
        if any(copy_origin(flow, m) is not None for m in ms):
            fed[find(d)] = fed.get(find(d), 0) + 1
    loaded = {acc for acc, n in fed.items() if acc in carried or n >= _UNROLLED}
    fma = {r for r in members if find(r) in loaded}
    mma = {d for ins in k.instrs if ins.base in _MMA and "mma" in ins.op for d in ins.dests}
    return fma, mma


def _nonlinear(ins: Instr, zeros: set[str]) -> bool:
    if _NONLINEAR.match(ins.op):
        return True
    if _FLOAT_MINMAX.match(ins.op) and len(ins.operands) == 3:
        return any(_ZERO.match(o.strip()) or o.strip() in zeros for o in ins.operands[1:])
    return False


def _zero_registers(flow: Flow) -> set[str]:
    """Registers only ever set to zero (``mov.f32 %f1, 0f00000000``)."""
    out = set()
    for r, ds in flow.defs.items():
        ins = [flow.kernel.instrs[i] for i in ds]
        if all(i.base == "mov" and len(i.operands) == 2 and _ZERO.match(i.operands[1].strip()) for i in ins):
            out.add(r)
    return out


def _loops(kernel: Kernel) -> list[tuple[int, int]]:
    """(first, last) instruction of every backward branch's range."""
    where = {lab: i for i, ins in enumerate(kernel.instrs) for lab in ins.labels}
    return [(where[ins.syms[-1]], j) for j, ins in enumerate(kernel.instrs)
            if ins.base == "bra" and ins.syms and where.get(ins.syms[-1], j + 1) <= j]


def _recurrent(flow: Flow) -> frozenset[str]:
    """Registers carried around a loop and computed from themselves (a running sum, a rescaled output): one
    of their definitions inside a loop that reads them at or before it, a read that no earlier definition in
    the loop precedes (it sees the value of the iteration before). (A value redefined from itself in
    straight-line code, ``erff``'s branch for large arguments, is not carried, also where that code lies in a
    loop: a persistent kernel's epilogue.)"""
    loops = _loops(flow.kernel)
    if not loops:
        return frozenset()
    read_at: dict[str, list[int]] = {}
    for i, ins in enumerate(flow.kernel.instrs):
        for r in ins.srcs:
            read_at.setdefault(r, []).append(i)

    def carried(ds: list[int], reads: list[int]) -> bool:
        return any(lo <= u <= j <= hi and not any(lo <= d < u for d in ds)
                   for lo, hi in loops for j in ds for u in reads)

    out = set()
    for r, ds in flow.defs.items():
        if len(ds) < 2 or not carried(ds, read_at.get(r, [])):
            continue
        if depends_on(flow, r, r):
            out.add(r)
    return frozenset(out)


def epilogue(flow: Flow, accs: set[str], uses: dict[str, list[Instr]]) -> bool:
    """Form b: an accumulator's value through a nonlinearity into a global store, not through another
    running value (attention's exponentials are summed into its output: that is form d)."""
    if not accs:
        return False
    zeros = _zero_registers(flow)
    made = _forward(flow, accs, uses)
    after = {d for ins in flow.kernel.instrs if _nonlinear(ins, zeros) and any(r in made for r in _values(ins))
             for d in ins.dests}
    if not after:
        return False
    reach = _forward(flow, after, uses, blocked=_recurrent(flow))
    return any(_global_store(flow, ins) and any(r in reach for r in _values(ins)) for ins in flow.kernel.instrs)


def attention(flow: Flow, fma: set[str], mma: set[str], uses: dict[str, list[Instr]]) -> bool:
    """Form d: a product's result through ``ex2`` into another product: an MMA's operand, or a loaded
    value's multiplier summed into a running register (an unrolled chain or one carried around a loop)."""
    products = fma | mma
    if not products:
        return False
    made = _forward(flow, products, uses)
    exps = {d for ins in flow.kernel.instrs if ins.op.startswith("ex2") and any(r in made for r in _values(ins))
            for d in ins.dests}
    if not exps:
        return False
    probs = _forward(flow, exps, uses)
    sums = fma | _recurrent(flow)
    for ins in flow.kernel.instrs:
        if ins.base in _MMA and "mma" in ins.op:
            if any(r in probs for r in _values(ins) if r not in ins.dests):
                return True
            continue
        if not (FLOAT_ACC.match(ins.op) or FLOAT_MUL.match(ins.op)) or len(ins.dests) != 1:
            continue
        ms = [r for o in ins.operands[1:3] for r in registers(o)]
        if not (any(r in probs for r in ms) and any(r not in probs and copy_origin(flow, r) is not None for r in ms)):
            continue
        into, todo = {ins.dests[0]}, [ins.dests[0]]
        for _ in range(3):                # the product summed within a step or two
            todo = [d for r in todo for u in uses.get(r, []) if FLOAT_ACC.match(u.op) or FLOAT_ADD.match(u.op)
                    for d in u.dests if d not in into]
            into.update(todo)
        if into & sums:
            return True
    return False


# ------------------------------------------------------------------------------------- c. phases
def grid_phases(flow: Flow, poly: Affine) -> bool:
    """Form c: a grid-wide barrier or a last-block finish."""
    k = flow.kernel
    if not barrier(k):
        return False
    atoms = [(i, ins) for i, ins in enumerate(k.instrs) if ins.base == "atom" and state_space(ins.op) in ("global", "generic")
             and not flow.addr_shared(ins) and ".cta" not in ins.op]     # (a tile barrier of a block is .cta)
    if not atoms:
        return False
    loops = _loops(k)
    for i, a in atoms:
        addr = poly.address(a.operands[1]) if len(a.operands) > 1 and a.operands[1].startswith("[") else None
        if addr is None or not lane_free(addr):
            continue
        # a grid barrier: after the arrival, a short loop spinning on a load of the same counter, or on an
        # atomic that reads it unchanged (``atomicAdd(&c, 0)``; a work queue's next ``atomicAdd(&c, 1)`` is
        # no wait)
        for lo, hi in loops:
            if i < lo and hi - lo <= _SPIN_LENGTH and any(
                    (_SPIN_LOAD.match(x.op) or (x.base == "atom" and x.operands[-1].strip() == "0"))
                    and ".cta" not in x.op and len(x.operands) > 1 and poly.address(x.operands[1]) == addr
                    for x in k.instrs[lo:hi + 1]):
                return True
        # the last block: a fence just before a ticket whose value decides a branch
        if re.match(r"^atom\.(?:[a-z:]+\.)*?(?:add|inc)\.", a.op) and a.dests and any(
                _FENCE.match(x.op) for x in k.instrs[max(0, i - 12):i]):
            uses = _uses(flow)
            reach = _forward(flow, set(a.dests), uses)
            if any(x.base == "bra" and x.srcs and x.srcs[-1] in reach for x in k.instrs):
                return True
    return False


# ---------------------------------------------------------------------------------- online softmax
def _near(flow: Flow, roots: set[str], uses: dict[str, list[Instr]], steps: int) -> set[str]:
    """Registers computed from ``roots`` within ``steps`` instructions (the roots included)."""
    out, todo = set(roots), list(roots)
    for _ in range(steps):
        todo = [d for r in todo for u in uses.get(r, []) if not is_store(u) for d in u.dests if d not in out]
        out.update(todo)
    return out


def _carried(flow: Flow, exprs: Exprs) -> Callable[[str, str], bool]:
    """Whether a value ``r`` is computed from a result ``d`` of the same loop: through registers (``r`` is
    ``d`` or made from it), or through memory (``r`` is loaded from where a value made from ``d`` is stored:
    a running value kept in global or shared memory between tiles, also copied from one to the other on its
    way back: two stores and loads at most)."""
    stores: dict[tuple, list[Instr]] = {}
    for ins in flow.kernel.instrs:
        if is_store(ins) and ins.base == "st" and state_space(ins.op) in ("global", "shared", "generic"):
            stores.setdefault(exprs.address(ins), []).append(ins)

    def carried(r: str, d: str, hops: int = 2) -> bool:
        if r == d or depends_on(flow, r, d):
            return True
        for ld in origin_ins(flow, r) if hops else ():
            if is_load(ld) and ld.base == "ld":
                for st in stores.get(exprs.address(ld), []):
                    if any(carried(v, d, hops - 1) for v in _values(st)):
                        return True
        return False

    return carried


def online_rescale(flow: Flow, uses: dict[str, list[Instr]]) -> bool:
    """A running maximum (a float ``max`` or a compared value carried around a loop, ``m_new = max(m, x)``)
    whose difference goes through ``ex2`` into a factor that scales a running value: ``acc *= exp(m_old -
    m_new)`` (docs/features.md, online_softmax). Carried in registers, or through memory between tiles."""
    k = flow.kernel
    if not any(i.op.startswith("ex2") for i in k.instrs):
        return False
    recurrent = _recurrent(flow)
    carried = _carried(flow, Exprs(k, flow.defs))
    running = {i.dests[0] for i in k.instrs if _FLOAT_MINMAX.match(i.op) and i.op.startswith("max") and len(i.dests) == 1
               and (i.dests[0] in recurrent or any(carried(r, i.dests[0]) for r in _values(i)))}
    # ... or kept by a comparison: ``if (v > m) m = v``
    running |= {r for i in k.instrs if i.base == "setp" and ".f" in i.op for r in _values(i)
                if len(flow.defs.get(r, [])) > 1}
    running = _near(flow, running, {r: [u for u in us if u.base in ("mov", "cvt")] for r, us in uses.items()}, 4)
    if not running:
        return False
    diffs = {d for i in k.instrs if i.base == "sub" and ".f" in i.op and any(r in running for r in _values(i))
             for d in i.dests}
    near_diff = _near(flow, diffs, uses, 3)
    exps = {d for i in k.instrs if i.op.startswith("ex2") and any(r in near_diff for r in _values(i)) for d in i.dests}
    factors = _near(flow, exps, {r: [u for u in us if u.base in ("mov", "cvt", "mul", "fma", "shl", "add")
                                     or FLOAT_MUL.match(u.op)] for r, us in uses.items()}, 4)
    for i in k.instrs:
        if not (FLOAT_ACC.match(i.op) or FLOAT_MUL.match(i.op)) or len(i.dests) != 1:
            continue
        ms = [r for o in i.operands[1:3] for r in registers(o)]
        if len(ms) != 2:
            continue
        for f, r in (ms, ms[::-1]):
            # the scaled value is computed from the product's result: a running value rescaled
            if f in factors and f != r and carried(r, i.dests[0]):
                return True
    return False


# ------------------------------------------------------------------------------------------- fact
def fusion_facts(flow: Flow, poly: Affine) -> dict[str, int]:
    """``fused``: how many of the four forms (module doc) a kernel shows; ``online_rescale``: 1 where a
    running value is rescaled by the exponential of a running maximum's change."""
    uses = _uses(flow)
    fma, mma = _accumulators(flow)
    forms = (statistics_and_outputs(flow, poly), epilogue(flow, fma | mma, uses), grid_phases(flow, poly),
             attention(flow, fma, mma, uses))
    return {"fused": sum(forms), "online_rescale": int(online_rescale(flow, uses))}
