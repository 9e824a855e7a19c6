"""The taint analysis over a kernel's virtual registers, and what the fact modules read from it. Pure logic.

``analyse`` runs a flow-insensitive taint analysis (every definition of a register unions into it; iterated
to a fixpoint, so loop-carried registers are covered) and returns a ``Flow``: each register's tags (global
data, data as loaded, loaded from or an address into a shared array, thread and block indexes). Beside it:
the kinds of instruction (``is_load``, ``is_store``, ``state_space``, ``barrier``), def-use walks
(``depends_on``, ``derived``, ``copy_origin``, ``origin_ins``) and structural value numbers (``Exprs``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from cuda_llm.tools.compiler.ptx.parse import Instr, Kernel, registers

# value-preserving moves: raw global data stays raw through them
_COPY_OPS = frozenset({"mov", "cvt", "cvta", "selp", "shfl", "prmt", "ld"})
_THREAD = {"%tid.x": "tid.x", "%tid.y": "tid.y", "%tid.z": "tid.z", "%laneid": "lane"}
_BLOCK = ("%ctaid.x", "%ctaid.y", "%ctaid.z", "%clusterid", "%cluster_ctarank")
FLOAT_ACC = re.compile(r"^(?:fma|mad)\.(?:[a-z]+\.)*?(?:f16x2|bf16x2|f16|bf16|f32|f64)$")
FLOAT_MUL = re.compile(r"^mul\.(?:[a-z]+\.)*?(?:f16x2|bf16x2|f16|bf16|f32|f64)$")
FLOAT_ADD = re.compile(r"^add\.(?:[a-z]+\.)*?(?:f16x2|bf16x2|f16|bf16|f32|f64)$")
_BARRIER = re.compile(r"^(?:bar\.(?:sync|red|cta|warp\.sync)|bar\.\d|barrier\.(?:sync|cta|red)|barrier(?:\.aligned)?$|"
                      r"mbarrier\.(?:try_wait|test_wait))")


# ------------------------------------------------------------------------------------------- taint
class _Tags:
    """Taint tags as bits of an int: 'G' global data, 'RAW' global data as loaded, 'S:x' loaded from
    shared array x, 'A:x' an address into x, 'tid.x'... thread index, 'block' block index."""

    def __init__(self) -> None:
        self.bits: dict[str, int] = {}

    def __call__(self, name: str) -> int:
        b = self.bits.get(name)
        if b is None:
            b = self.bits[name] = 1 << len(self.bits)
        return b

    def names(self, mask: int) -> set[str]:
        return {n for n, b in self.bits.items() if mask & b}


@functools.lru_cache(maxsize=4096)
def state_space(op: str) -> str:
    parts = op.split(".")
    for p in parts[1:]:
        if p.startswith("shared"):
            return "shared"
        if p in ("global", "local", "param", "const"):
            return p
    return "generic"


@dataclass(slots=True)
class Flow:
    kernel: Kernel
    shared: frozenset[str]
    tags: _Tags
    taint: dict[str, int]
    defs: dict[str, list[int]]
    origins: dict[str, str | None] = field(default_factory=dict)     # copy_origin's answers

    def addr_shared(self, ins: Instr) -> set[str]:
        """The shared arrays an instruction's first address operand points into."""
        out = {s for s in ins.addr_syms if s in self.shared}
        mask = 0
        for r in ins.addr_regs:
            mask |= self.taint.get(r, 0)
        for n in self.tags.names(mask):
            if n.startswith("A:"):
                out.add(n[2:])
        return out


def is_load(ins: Instr) -> bool:
    b = ins.base
    return b in ("ld", "ldu", "tex", "tld4", "ldmatrix", "suld") or ins.op.startswith("wmma.load")


def is_store(ins: Instr) -> bool:
    return ins.base in ("st", "stmatrix") or ins.op.startswith("wmma.store")


LOCAL = "%__local"


def analyse(kernel: Kernel, shared: frozenset[str]) -> Flow:
    """Taint of every register of the kernel, to a fixpoint over all its definitions."""
    tags = _Tags()
    G, RAW, PARAM = tags("G"), tags("RAW"), tags("param")
    sym_bit = {s: tags("A:" + s) for s in shared}
    unmultiplied = 0                  # 'U:x': loaded from x and not multiplied since (an update, not a product)
    for s in shared:
        unmultiplied |= tags("U:" + s)
    defs: dict[str, list[int]] = {}
    for i, ins in enumerate(kernel.instrs):
        for d in ins.dests:
            defs.setdefault(d, []).append(i)
    taint: dict[str, int] = {}
    flow = Flow(kernel, shared, tags, taint, defs)
    special = {r: tags(n) for r, n in _THREAD.items()}
    block = tags("block")
    for r in _BLOCK:
        special[r] = block
    local_stores = [i for i in kernel.instrs if is_store(i) and state_space(i.op) == "local"]
    everything = (1 << 62) - 1
    # each defining instruction once: loads (their value depends on where the address points) and the
    # rest (sources, constant tags of special registers and symbols, tags the operation keeps)
    loads: list[Instr] = []
    ops: list[tuple[tuple[str, ...], tuple[str, ...], int, int]] = []
    for ins in kernel.instrs:
        if not ins.dests:
            continue
        b = ins.base
        if is_load(ins) or b == "atom":
            loads.append(ins)
            continue
        const = 0
        for r in ins.srcs:
            const |= special.get(r, 0)
        for sname in ins.syms:
            const |= sym_bit.get(sname, 0)
        keep = everything
        if b not in _COPY_OPS and not FLOAT_MUL.match(ins.op):
            keep &= ~RAW          # a sum or any other arithmetic makes a new value; a scaled copy stays data
        if b in ("mma", "wmma", "wgmma", "tcgen05") or FLOAT_ACC.match(ins.op) or FLOAT_MUL.match(ins.op):
            keep &= ~unmultiplied         # a product: a GEMM's accumulator, not a scratch being updated
        ops.append((ins.dests, tuple(r for r in ins.srcs if r not in special), const, keep))
    changed = True
    while changed:
        changed = False
        for ins in local_stores:        # a per-thread array in local memory: one location, what is stored is loaded
            val = 0
            for o in ins.operands[1:]:
                for r in registers(o):
                    val |= taint.get(r, 0)
            old = taint.get(LOCAL, 0)
            if old | val != old:
                taint[LOCAL] = old | val
                changed = True
        for ins in loads:
            b = ins.base
            space = state_space(ins.op)
            targets = flow.addr_shared(ins) if space in ("shared", "generic") else set()
            if b == "ldmatrix" or targets:
                val = 0
                for sname in targets:
                    val |= tags("S:" + sname) | tags("U:" + sname)
            elif space == "global" or b in ("tex", "tld4", "ldu", "suld"):
                val = G if b == "atom" else G | RAW
            elif space == "generic":
                # a generic pointer made from a kernel parameter or loaded from memory points to global
                # memory; one from nowhere (the local stack, a library's scratch) is not global data as loaded
                amask = 0
                for r in ins.addr_regs:
                    amask |= taint.get(r, 0)
                val = G | RAW if amask & (PARAM | G) and b != "atom" else G
            elif space == "param":
                val = PARAM
            elif space == "local":
                val = taint.get(LOCAL, 0)
            else:
                val = 0
            for d in ins.dests:
                old = taint.get(d, 0)
                if old | val != old:
                    taint[d] = old | val
                    changed = True
        for dests, srcs, const, keep in ops:
            val = const
            for r in srcs:
                val |= taint.get(r, 0)
            val &= keep
            for d in dests:
                old = taint.get(d, 0)
                if old | val != old:
                    taint[d] = old | val
                    changed = True
    return flow


# ------------------------------------------------------------------------------- address identity
class Exprs:
    """Structural value numbers of registers: two addresses computed the same way from the same inputs get
    the same number (a loop counter is its initial value and its update, the counter itself as SELF), so a
    thread's store address and its load address can be compared even when nvcc computes them twice."""

    def __init__(self, kernel: Kernel, defs: dict[str, list[int]]) -> None:
        self.k, self.defs = kernel, defs
        self.ids: dict[object, int] = {}
        self.memo: dict[str, int] = {}
        self.busy: set[str] = set()
        self.keys: list[object] = []

    def _intern(self, key: object) -> int:
        v = self.ids.get(key)
        if v is None:
            v = self.ids[key] = len(self.ids)
            self.keys.append(key)
        return v

    def _def(self, i: int, reg: str, depth: int) -> int:
        ins = self.k.instrs[i]
        if is_load(ins) or ins.base in ("atom", "shfl", "mma", "wgmma", "wmma"):
            return self._intern(("LD", i))
        if ins.base == "mov" and len(ins.operands) == 2 and ins.operands[1].startswith("%") and len(ins.srcs) == 1:
            return self.of(ins.srcs[0], depth + 1)            # a copy is its source
        ops = []
        for o in ins.operands[1:]:
            rs = registers(o)
            ops.append(tuple(self.of(r, depth + 1) for r in rs) if rs else o)
        return self._intern((ins.op, tuple(ops), ins.dests.index(reg) if len(ins.dests) > 1 else 0))

    def _induction(self, parts: list[int]) -> int | None:
        """A loop counter (an initial value and ``SELF + step``) numbered as its initial value, shifted back
        by one step when the loop starts a step in (``for (i = tid + S; ...; i += S)`` after reading
        ``tid``): the slots a strided loop visits are numbered alike whichever loop visits them."""
        if len(parts) != 2:
            return None
        self_id = self._intern(("SELF",))
        for upd, init in ((parts[0], parts[1]), (parts[1], parts[0])):
            key = self.keys[upd]
            if len(key) == 3 and isinstance(key[0], str) and key[0].startswith("add.") and len(key[1]) == 2:
                a, b = key[1]
                if a == (self_id,) or b == (self_id,):
                    step = b if a == (self_id,) else a
                    ik = self.keys[init]
                    if len(ik) == 3 and isinstance(ik[0], str) and ik[0].startswith("add.") and len(ik[1]) == 2:
                        x, y = ik[1]
                        if y == step and len(x) == 1:
                            return x[0]
                        if x == step and len(y) == 1:
                            return y[0]
                    return init
        return None

    def of(self, reg: str, depth: int = 0) -> int:
        if reg in self.memo:
            return self.memo[reg]
        if reg in self.busy or depth > 60:
            return self._intern(("SELF",))
        ds = self.defs.get(reg)
        if not ds:
            return self._intern(("IN", reg))
        self.busy.add(reg)
        parts = [self._def(i, reg, depth) for i in ds]
        self.busy.discard(reg)
        if len(parts) == 1:
            v = parts[0]
        else:
            iv = self._induction(parts)
            v = iv if iv is not None else self._intern(("PHI", frozenset(parts)))
        if depth == 0 or len(parts) == 1:
            self.memo[reg] = v
        return v

    def address(self, ins: Instr) -> tuple:
        return (tuple(self.of(r) for r in ins.addr_regs), ins.addr_syms, ins.addr_offset)


def addr_taint(flow: Flow, ins: Instr) -> int:
    mask = 0
    for r in ins.addr_regs:
        mask |= flow.taint.get(r, 0)
    return mask


def barrier(kernel: Kernel) -> bool:
    return any(_BARRIER.match(i.op) for i in kernel.instrs)


def copy_origin(flow: Flow, reg: str, depth: int = 0) -> str | None:
    """The register a loaded value was loaded into, when ``reg`` is that value or a move/conversion of it."""
    if depth == 0:
        if reg not in flow.origins:
            flow.origins[reg] = copy_origin(flow, reg, 1)
        return flow.origins[reg]
    ds = flow.defs.get(reg, [])
    if not ds or depth > 8:
        return None
    instrs = [flow.kernel.instrs[i] for i in ds]
    loaded = [i for i in instrs if is_load(i) and i.base != "ldmatrix" and state_space(i.op) not in ("const", "param")]
    if loaded and all(i in loaded or (i.base == "mov" and not i.srcs) for i in instrs):
        return reg           # loaded, or a constant where the load is skipped (a bounds check's zero); a constant-bank
        # or parameter operand is a broadcast the FMA reads itself, not a loaded register
    if len(instrs) == 1 and instrs[0].base in ("mov", "cvt", "shfl") and len(instrs[0].srcs) >= 1 and depth < 9:
        return copy_origin(flow, instrs[0].srcs[0], depth + 1)
    return None


def depends_on(flow: Flow, reg: str, target: str, limit: int = 400) -> bool:
    """Whether ``reg`` is computed from ``target`` (through any chain of definitions)."""
    seen, todo = {reg}, [reg]
    while todo and len(seen) < limit:
        for i in flow.defs.get(todo.pop(), []):
            for r in flow.kernel.instrs[i].srcs:
                if r == target:
                    return True
                if r not in seen:
                    seen.add(r)
                    todo.append(r)
    return False


def derived(flow: Flow, roots: set[str]) -> set[str]:
    """Every register computed from one of ``roots`` (the roots included)."""
    uses: dict[str, list[Instr]] = {}
    for ins in flow.kernel.instrs:
        if ins.dests and not is_load(ins):
            for r in ins.srcs:
                uses.setdefault(r, []).append(ins)
    out, todo = set(roots), list(roots)
    while todo:
        for ins in uses.get(todo.pop(), []):
            for d in ins.dests:
                if d not in out:
                    out.add(d)
                    todo.append(d)
    return out


SHFL_REDUCE = re.compile(r"^shfl\.sync\.(?:down|bfly)\b|^shfl\.(?:down|bfly)\b|^redux\.sync\b")


def origin_ins(flow: Flow, reg: str, depth: int = 0) -> list[Instr]:
    """The instructions a value comes from, through moves and conversions (every definition of a register
    defined more than once: a conditional load and its default)."""
    out = []
    for i in flow.defs.get(reg, []):
        ins = flow.kernel.instrs[i]
        if ins.base in ("mov", "cvt") and len(ins.srcs) == 1 and depth < 8:
            out.extend(origin_ins(flow, ins.srcs[0], depth + 1))
        else:
            out.append(ins)
    return out
