"""Tiles and stages read from a kernel's PTX dataflow. Pure logic.

- ``shared_tile``: shared arrays filled with global data as it was loaded (moved, converted, selected,
  scaled, or copied by ``cp.async``/``cp.async.bulk``), in a kernel with a barrier, read back at another
  slot than the thread's own (a different index, a neighbour's offset, a loop over the tile, an
  ``ldmatrix``/``wmma.load``/``wgmma`` operand) at an address computed from indices, not from loaded data
  (that is a lookup table), and never updated from itself without a product (a reduction, scan or
  sorting-network scratch). A value summed before it is stored (a warp's partial sum) is not data as
  loaded, so a shuffle reduction's 32-slot array is not a tile; a strided loop's slots are numbered alike
  in every loop that visits them, so a staging copy read back by its own thread is not one either.
- ``register_tile``: loop-carried accumulators (chains of floating-point ``fma``, or ``mul`` then ``add``,
  on CUDA cores) of which at least four take a product of a loaded value (not a constant-bank operand) that
  also feeds another accumulator: several outputs per thread, each loaded value reused (counted: the
  accumulators; 0 below four). A dot product feeds each loaded value to one.
- ``shared_stages``: waits that leave the newest asynchronous copies in flight (``cp.async.wait_group N``,
  ``cp.async.bulk.wait_group N``, N > 0; not a switch over every count, which a run-time count compiles to),
  or a shared array written through one value of a stage index that alternates between loop iterations
  (``cur ^ 1``, ``(k + 1) & 1``) and read through another (``cur``, ``k & 1``).
"""

from __future__ import annotations

import re

from cuda_llm.tools.compiler.ptx.dataflow import (FLOAT_ACC, FLOAT_ADD, FLOAT_MUL, Exprs, Flow, addr_taint, barrier,
                                                  copy_origin, depends_on, derived, is_load, is_store, state_space)
from cuda_llm.tools.compiler.ptx.parse import IMM, Instr, registers

def shared_tiles(flow: Flow) -> int:
    """Shared arrays staged from global memory and read back at another thread's slot (module doc)."""
    k, tags, taint = flow.kernel, flow.tags, flow.taint
    if not barrier(k):
        return 0
    RAW = tags("RAW")
    exprs = Exprs(k, flow.defs)
    filled: set[str] = set()
    self_fed: set[str] = set()
    store_addr: dict[str, set] = {}
    loads: dict[str, list[Instr]] = {}
    cross: set[str] = set()
    for ins in k.instrs:
        b = ins.base
        if b == "cp" and ins.op.startswith("cp.async") and "shared" in ins.op and "global" in ins.op \
                and ins.operands and ins.operands[0].startswith("["):
            targets = flow.addr_shared(ins)
            filled |= targets
            for s in targets:
                store_addr.setdefault(s, set()).add(exprs.address(ins))
        elif is_store(ins) and state_space(ins.op) in ("shared", "generic"):
            targets = flow.addr_shared(ins)
            if not targets:
                continue
            val = 0
            for o in ins.operands[1:]:
                for r in registers(o):
                    val |= taint.get(r, 0)
            for s in targets:
                store_addr.setdefault(s, set()).add(exprs.address(ins))
                if val & RAW:
                    filled.add(s)
                if val & tags("U:" + s) and not copy_origin(flow, registers(ins.operands[-1])[0] if registers(ins.operands[-1]) else ""):
                    self_fed.add(s)          # updated from itself (a reduction, scan, sorting network), not copied
        elif b == "atom" or b == "red":
            for s in flow.addr_shared(ins) if state_space(ins.op) in ("shared", "generic") else ():
                self_fed.add(s)
        elif b == "ldmatrix" or (b == "wmma" and "load" in ins.op):
            cross |= flow.addr_shared(ins)
        elif is_load(ins) and state_space(ins.op) in ("shared", "generic"):
            for s in flow.addr_shared(ins):
                loads.setdefault(s, []).append(ins)
        elif b in ("wgmma", "tcgen05") and "mma" in ins.op:
            mask = 0
            for r in ins.srcs:
                mask |= taint.get(r, 0)
            cross |= {n[2:] for n in tags.names(mask) if n.startswith("A:")}
    data = tags("G")
    for n, b in tags.bits.items():
        if n.startswith(("S:", "U:")):
            data |= b
    for s, ls in loads.items():
        own = store_addr.get(s, set())
        # read at another slot than the thread's own, at an address computed from indices (a lookup at a
        # loaded key's digit is a table, not a tile)
        if any(exprs.address(ld) not in own and not addr_taint(flow, ld) & data for ld in ls):
            cross.add(s)
    return len((filled & cross) - self_fed)


def register_tiles(flow: Flow) -> int:
    """Accumulators fed by loaded values each reused by two or more of them (0 below four; module doc)."""
    k = flow.kernel
    parent: dict[str, str] = {}
    members: set[str] = set()

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            parent[x] = parent.get(parent[x], parent[x])
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        members.update((a, b))
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb

    steps: list[tuple[str, list[str]]] = []        # (accumulator register, multiplicands)
    mul_of: dict[str, list[str]] = {}
    for ins in k.instrs:
        if FLOAT_MUL.match(ins.op) and len(ins.dests) == 1 and len(ins.srcs) >= 2:
            mul_of[ins.dests[0]] = list(ins.srcs[:2])
    for ins in k.instrs:
        if len(ins.dests) != 1:
            continue
        d = ins.dests[0]
        if FLOAT_ACC.match(ins.op) and len(ins.operands) == 4:
            c = registers(ins.operands[3])
            members.add(d)
            if c:
                union(d, c[0])
            steps.append((d, [r for o in ins.operands[1:3] for r in registers(o)]))
        elif FLOAT_ADD.match(ins.op) and len(ins.srcs) == 2:
            a, b2 = ins.srcs
            for m, other in ((a, b2), (b2, a)):
                if m in mul_of and len(flow.defs.get(m, [])) == 1:
                    union(d, other)
                    steps.append((d, mul_of[m]))
                    break
    carried: set[str] = set()       # accumulators carried around a loop (a register defined again each iteration)
    for r, ds in flow.defs.items():
        if len(ds) > 1 and r in members:
            carried.add(find(r))
    fed: dict[str, set[str]] = {}
    for d, ms in steps:
        acc = find(d)
        if acc not in carried:
            continue
        for m in ms:
            o = copy_origin(flow, m)
            if o is not None:
                fed.setdefault(o, set()).add(acc)
    accs: set[str] = set()
    for group in fed.values():
        if len(group) >= 2:
            accs |= group
    return len(accs) if len(accs) >= 4 else 0


_WAIT_N = re.compile(r"^cp\.async(?:\.bulk)?\.wait_group(?:\.read)?$")


def _toggles(flow: Flow) -> set[str]:
    """Registers that alternate between two values from one loop iteration to the next: a loop-carried
    register flipped with a constant (``s ^= 1``, ``off ^= 8192``, ``s = 1 - s``) or a loop counter's parity
    (``k & 1``, ``k % 2``)."""
    out = set()
    for ins in flow.kernel.instrs:
        if len(ins.dests) != 1 or len(ins.operands) != 3:
            continue
        d, a, c = ins.dests[0], ins.operands[1], ins.operands[2]
        if ins.base == "xor" and IMM.fullmatch(c) and a.startswith("%") and depends_on(flow, a, d):
            out.add(d)
        elif ins.base == "sub" and IMM.fullmatch(a) and c.startswith("%") and depends_on(flow, c, d):
            out.add(d)
        elif ins.base in ("and", "rem") and c in ("1", "2") and (c == "1") == (ins.base == "and") \
                and a.startswith("%") and depends_on(flow, a, a):
            out.add(d)
    return out


def _stage_op(ins: Instr, alternating: set[str]) -> bool:
    """A flip or parity of an alternating register: ``x ^ C``, ``C - x``, ``x & 1``, ``x % 2``."""
    if len(ins.dests) != 1 or len(ins.operands) != 3:
        return False
    a, c = ins.operands[1], ins.operands[2]
    if ins.base == "xor" and IMM.fullmatch(c):
        return a in alternating
    if ins.base == "sub" and IMM.fullmatch(a):
        return c in alternating
    return ins.base in ("and", "rem") and c == ("1" if ins.base == "and" else "2")


def shared_stages(flow: Flow) -> int:
    """Waits that leave copies in flight, or a shared array written at one stage while it is read at
    another: both addressed through a stage index that alternates between loop iterations, the writes
    through another value of it than the reads (``cur ^ 1`` and ``cur``, ``(k + 1) & 1`` and ``k & 1``). A
    ring that writes and reads each slot through the same index waits for every copy before using it."""
    k = flow.kernel
    n = 0
    toggles = _toggles(flow)
    if toggles:
        alternating = derived(flow, toggles)
        stage_regs = {d for i in k.instrs if i.dests and i.dests[0] in alternating and _stage_op(i, alternating)
                      for d in i.dests} | toggles
        exprs = Exprs(k, flow.defs)

        def stage_key(regs: tuple[str, ...]) -> frozenset[int]:
            seen, todo, key = set(regs), [r for r in regs if r in alternating], set()
            while todo:
                r = todo.pop()
                if r in stage_regs:
                    key.add(exprs.of(r))
                    continue
                for i in flow.defs.get(r, []):
                    for src in k.instrs[i].srcs:
                        if src in alternating and src not in seen:
                            seen.add(src)
                            todo.append(src)
            return frozenset(key)

        written: dict[str, set[frozenset[int]]] = {}
        read: dict[str, set[frozenset[int]]] = {}
        for ins in k.instrs:
            is_copy = ins.op.startswith("cp.async") and "shared" in ins.op and ins.operands[:1] != () \
                and ins.operands[0].startswith("[")
            if not (is_copy or is_store(ins) or is_load(ins)) or not ins.addr_regs:
                continue
            if state_space(ins.op) not in ("shared", "generic") and not is_copy:
                continue
            targets = flow.addr_shared(ins)
            if targets and any(r in alternating for r in ins.addr_regs):
                key = stage_key(ins.addr_regs)
                for t in targets:
                    (written if is_copy or is_store(ins) else read).setdefault(t, set()).add(key)
        n += sum(1 for t in written.keys() & read.keys() if written[t] != read[t])
    waits = [int(i.operands[0], 0) for i in k.instrs
             if _WAIT_N.match(i.op) and i.operands and IMM.fullmatch(i.operands[0])]
    if len(set(waits)) <= 3:         # more: a switch over a count known at run time (cuda::pipeline's wait)
        n += sum(1 for w in waits if w > 0)
    return n


def tile_facts(flow: Flow) -> dict[str, int]:
    """``shared_tile``, ``register_tile`` and ``shared_stages`` of one kernel."""
    return {"shared_tile": shared_tiles(flow), "register_tile": register_tiles(flow),
            "shared_stages": shared_stages(flow)}
