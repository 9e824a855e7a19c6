"""What a kernel's dataflow shows, read from the PTX nvcc emits (``nvcc -ptx`` or ``-keep``). Pure logic.

Source regexes see one spelling of a shared-memory tile or a register tile; the PTX sees the structure
whatever the spelling, because its virtual registers make def-use chains plain. This module parses PTX into
kernels and instructions, runs a flow-insensitive taint analysis over the virtual registers (every
definition of a register unions into it; iterated to a fixpoint, so loop-carried registers are covered),
and derives named facts per kernel, each a count of instances:

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
- ``shared_reduction``: shared arrays a block's values are combined in: updated by a sum, max or min from a
  slot at a positive uniform offset (``s[i] += s[i + stride]``; a scan reads at a negative one or swaps
  slots), or filled with warp shuffle reductions and read back into a combine (the 32-slot form).
- ``coalesced``: kernels whose global accesses are mostly coalesced: each address evaluated as a polynomial
  of the x thread index (``_Affine``), the 32 lanes' addresses counted in 32-byte sectors: coalesced when
  they need less than twice the sectors of the same bytes side by side, strided otherwise (a row per
  thread), weighed by loop depth; ``strided``: kernels whose accesses are mostly strided.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

FACTS = ("shared_tile", "register_tile", "shared_stages", "shared_reduction", "coalesced", "strided", "fused",
         "online_rescale", "grid_stride", "shared_padding", "shared_swizzle")

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_DEBUG = re.compile(r"^\s*\.(?:loc|file)\b[^\n]*$|^\s*\.section\b[\s\S]*", re.M)   # -lineinfo / -G directives
_SHARED_DECL = re.compile(r"\.shared\s+(?:\.align\s+\d+\s+)?(?:\.\w+\s+)*?([A-Za-z_$][\w$]*)\s*(?:\[|;)")
_ENTRY = re.compile(r"\.entry\s+([\w$]+)")
_FUNC_START = re.compile(r"(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(?:entry|func)\b")
_STMT = re.compile(r"^(?:@(!?)(%?[\w$]+)\s+)?([a-z][\w.:]*)\s*(.*)$", re.S)
_LABEL = re.compile(r"^([\w$]+)\s*:\s*")
_REG = re.compile(r"%[A-Za-z_][\w$]*(?:\.[xyzw]\b)?")
_IDENT = re.compile(r"(?<![%\w.$])([A-Za-z_$][\w$]*)")
_IMM = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|\d+)")

_NO_DEST = frozenset({"st", "red", "bar", "barrier", "bra", "ret", "exit", "prefetch", "prefetchu", "membar",
                      "fence", "call", "trap", "brkpt", "cp", "stmatrix", "setmaxnreg", "griddepcontrol",
                      "pmevent", "nanosleep", "cp.async", "tensormap", "multimem", "discard", "applypriority",
                      "createpolicy_noop", "st.async", "red.async", "wgmma.fence", "wgmma.commit_group",
                      "wgmma.wait_group"})
# value-preserving moves: raw global data stays raw through them
_COPY_OPS = frozenset({"mov", "cvt", "cvta", "selp", "shfl", "prmt", "ld"})
_THREAD = {"%tid.x": "tid.x", "%tid.y": "tid.y", "%tid.z": "tid.z", "%laneid": "lane"}
_BLOCK = ("%ctaid.x", "%ctaid.y", "%ctaid.z", "%clusterid", "%cluster_ctarank")
_FLOAT_ACC = re.compile(r"^(?:fma|mad)\.(?:[a-z]+\.)*?(?:f16x2|bf16x2|f16|bf16|f32|f64)$")
_FLOAT_MUL = re.compile(r"^mul\.(?:[a-z]+\.)*?(?:f16x2|bf16x2|f16|bf16|f32|f64)$")
_FLOAT_ADD = re.compile(r"^add\.(?:[a-z]+\.)*?(?:f16x2|bf16x2|f16|bf16|f32|f64)$")
_BARRIER = re.compile(r"^(?:bar\.(?:sync|red|cta|warp\.sync)|bar\.\d|barrier\.(?:sync|cta|red)|barrier(?:\.aligned)?$|"
                      r"mbarrier\.(?:try_wait|test_wait))")


@dataclass(frozen=True, slots=True)
class Instr:
    """One PTX instruction: the full opcode with modifiers, the registers it defines and reads, and its
    first address operand (``[%rd4+16]``: registers, symbols, immediate offset)."""

    op: str
    dests: tuple[str, ...]
    srcs: tuple[str, ...]                  # registers read (address registers included)
    syms: tuple[str, ...]                  # identifiers among the operands (symbols, labels)
    operands: tuple[str, ...]
    addr_regs: tuple[str, ...] = ()
    addr_syms: tuple[str, ...] = ()
    addr_offset: int = 0
    labels: tuple[str, ...] = ()           # labels placed just before it
    base: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "base", self.op.split(".", 1)[0])


@dataclass(slots=True)
class Kernel:
    name: str
    instrs: list[Instr] = field(default_factory=list)


@dataclass(slots=True)
class Module:
    shared: frozenset[str]                 # shared-memory symbols (static and extern)
    kernels: list[Kernel]


_OPERAND = re.compile(r"\s*((?:\{[^}]*\}|\[[^\]]*\]|\([^)]*\)|[^,{\[(])+)")


def _split_operands(text: str) -> list[str]:
    """Operands at the top level: commas inside ``{...}``, ``[...]`` and ``(...)`` do not split."""
    if not any(c in text for c in "{[("):
        return [o.strip() for o in text.split(",") if o.strip()]
    return [o.strip() for o in _OPERAND.findall(text) if o.strip()]


def _regs(text: str) -> list[str]:
    return _REG.findall(text)


def _address(operand: str) -> tuple[tuple[str, ...], tuple[str, ...], int]:
    inner = operand.strip()[1:-1]
    head = inner.split(",", 1)[0]              # [tensorMap, {coords}]: the first part is the address
    regs = tuple(_regs(head))
    syms = tuple(s for s in _IDENT.findall(head))
    off = 0
    m = re.search(r"\+\s*(-?\d+)\s*$", head)
    if m:
        off = int(m.group(1))
    return regs, syms, off


def parse_instruction(stmt: str, labels: tuple[str, ...] = ()) -> Instr | None:
    """One statement (without its ';'), or None for a directive or anything that is not an instruction."""
    m = _STMT.match(stmt.strip())
    if not m:
        return None
    _neg, guard, op, rest = m.groups()
    operands = tuple(_split_operands(rest)) if rest.strip() else ()
    base = op.split(".", 1)[0]
    dests: tuple[str, ...] = ()
    srcs_ops = operands
    if operands and not operands[0].startswith("[") and base not in _NO_DEST \
            and ".".join(op.split(".", 2)[:2]) not in _NO_DEST:
        dests = tuple(_REG.findall(operands[0]))
        srcs_ops = operands[1:]
        if base in ("wgmma", "tcgen05"):          # accumulates into its destinations: they are read too
            srcs_ops = operands
    joined = " ".join(srcs_ops)
    srcs = _REG.findall(joined)
    if guard and guard.startswith("%"):
        srcs.append(guard)
    joined = joined.translate(_BRACKETS)
    syms = tuple(s for s in _IDENT.findall(joined) if not _IMM.fullmatch(s)) if _HAS_IDENT.search(joined) else ()
    addr_regs: tuple[str, ...] = ()
    addr_syms: tuple[str, ...] = ()
    off = 0
    first_addr = next((o for o in operands if o.startswith("[") and o.endswith("]")), None)
    if first_addr is not None:
        addr_regs, addr_syms, off = _address(first_addr)
    return Instr(op=op, dests=dests, srcs=tuple(srcs), syms=syms, operands=operands, addr_regs=addr_regs,
                 addr_syms=addr_syms, addr_offset=off, labels=labels)


_BRACKETS = str.maketrans("[]{}", "    ")
_HAS_IDENT = re.compile(r"(?:^|[\s,+(-])[A-Za-z_$]")
_REG_DECL = re.compile(r"^\.reg\s+(?:\.v\d\s+)?\.\w+\s+(.*)$", re.S)


def _body_statements(body: str) -> Iterable[tuple[str, tuple[str, ...]]]:
    """Statements with the labels before them; registers that inline asm declares without '%'
    (``.reg .u64 u64addr;``) are renamed ``%u64addr$N``, N counting the declarations, so they are followed
    like any other and two asm blocks' registers of one name stay apart."""
    labels: list[str] = []
    current: dict[str, str] = {}
    declared = 0
    rename: re.Pattern[str] | None = None
    for raw in body.split(";"):
        s = raw.strip().lstrip("{}").strip()
        while True:
            s = s.lstrip("{}").strip()
            m = _LABEL.match(s)
            if not m or s.startswith("%"):
                break
            labels.append(m.group(1))
            s = s[m.end():]
        if not s:
            continue
        if s.startswith("."):
            d = _REG_DECL.match(s)
            if d:
                names = {n.strip() for n in d.group(1).split(",")}
                names = {n for n in names if re.fullmatch(r"[A-Za-z_]\w*", n)}
                for n in names:
                    declared += 1
                    current[n] = f"%{n}${declared}"
                if names:
                    rename = re.compile(r"(?<![\w%.$])(" + "|".join(sorted(current, key=len, reverse=True)) + r")(?![\w$])")
            continue
        if rename is not None:
            s = rename.sub(lambda m: current[m.group(1)], s)
        yield s, tuple(labels)
        labels = []


def parse_ptx(text: str) -> Module:
    """Kernels (``.entry``) and their instructions; the shared symbols declared anywhere in the module.
    ``.func`` bodies are left out (nvcc inlines device functions unless told not to)."""
    text = _DEBUG.sub("", _COMMENT.sub("", text))
    shared = frozenset(_SHARED_DECL.findall(text))
    starts = [m.start() for m in _FUNC_START.finditer(text)]
    kernels = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        chunk = text[start:end]
        m = _ENTRY.search(chunk[:400])
        if not m or not chunk.lstrip().startswith((".visible", ".entry", ".weak", ".extern")):
            continue
        brace = chunk.find("{", chunk.find(")") if ")" in chunk else 0)
        if brace < 0:
            continue
        k = Kernel(m.group(1))
        for stmt, labels in _body_statements(chunk[brace + 1:]):
            ins = parse_instruction(stmt, labels)
            if ins is not None:
                k.instrs.append(ins)
        kernels.append(k)
    return Module(shared=shared, kernels=kernels)


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
def _space(op: str) -> str:
    parts = op.split(".")
    for p in parts[1:]:
        if p.startswith("shared"):
            return "shared"
        if p in ("global", "local", "param", "const"):
            return p
    return "generic"


@dataclass(slots=True)
class _Flow:
    kernel: Kernel
    shared: frozenset[str]
    tags: _Tags
    taint: dict[str, int]
    defs: dict[str, list[int]]
    origins: dict[str, str | None] = field(default_factory=dict)     # _copy_origin's answers

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


def _is_load(ins: Instr) -> bool:
    b = ins.base
    return b in ("ld", "ldu", "tex", "tld4", "ldmatrix", "suld") or ins.op.startswith("wmma.load")


def _is_store(ins: Instr) -> bool:
    return ins.base in ("st", "stmatrix") or ins.op.startswith("wmma.store")


LOCAL = "%__local"


def analyse(kernel: Kernel, shared: frozenset[str]) -> _Flow:
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
    flow = _Flow(kernel, shared, tags, taint, defs)
    special = {r: tags(n) for r, n in _THREAD.items()}
    block = tags("block")
    for r in _BLOCK:
        special[r] = block
    local_stores = [i for i in kernel.instrs if _is_store(i) and _space(i.op) == "local"]
    everything = (1 << 62) - 1
    # each defining instruction once: loads (their value depends on where the address points) and the
    # rest (sources, constant tags of special registers and symbols, tags the operation keeps)
    loads: list[Instr] = []
    ops: list[tuple[tuple[str, ...], tuple[str, ...], int, int]] = []
    for ins in kernel.instrs:
        if not ins.dests:
            continue
        b = ins.base
        if _is_load(ins) or b == "atom":
            loads.append(ins)
            continue
        const = 0
        for r in ins.srcs:
            const |= special.get(r, 0)
        for sname in ins.syms:
            const |= sym_bit.get(sname, 0)
        keep = everything
        if b not in _COPY_OPS and not _FLOAT_MUL.match(ins.op):
            keep &= ~RAW          # a sum or any other arithmetic makes a new value; a scaled copy stays data
        if b in ("mma", "wmma", "wgmma", "tcgen05") or _FLOAT_ACC.match(ins.op) or _FLOAT_MUL.match(ins.op):
            keep &= ~unmultiplied         # a product: a GEMM's accumulator, not a scratch being updated
        ops.append((ins.dests, tuple(r for r in ins.srcs if r not in special), const, keep))
    changed = True
    while changed:
        changed = False
        for ins in local_stores:        # a per-thread array in local memory: one location, what is stored is loaded
            val = 0
            for o in ins.operands[1:]:
                for r in _regs(o):
                    val |= taint.get(r, 0)
            old = taint.get(LOCAL, 0)
            if old | val != old:
                taint[LOCAL] = old | val
                changed = True
        for ins in loads:
            b = ins.base
            space = _space(ins.op)
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
class _Exprs:
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
        if _is_load(ins) or ins.base in ("atom", "shfl", "mma", "wgmma", "wmma"):
            return self._intern(("LD", i))
        if ins.base == "mov" and len(ins.operands) == 2 and ins.operands[1].startswith("%") and len(ins.srcs) == 1:
            return self.of(ins.srcs[0], depth + 1)            # a copy is its source
        ops = []
        for o in ins.operands[1:]:
            rs = _regs(o)
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


# ----------------------------------------------------------------------------------------- facts
def _addr_taint(flow: _Flow, ins: Instr) -> int:
    mask = 0
    for r in ins.addr_regs:
        mask |= flow.taint.get(r, 0)
    return mask


def _barrier(kernel: Kernel) -> bool:
    return any(_BARRIER.match(i.op) for i in kernel.instrs)


def shared_tiles(flow: _Flow) -> int:
    """Shared arrays staged from global memory and read back at another thread's slot (module doc)."""
    k, tags, taint = flow.kernel, flow.tags, flow.taint
    if not _barrier(k):
        return 0
    RAW = tags("RAW")
    exprs = _Exprs(k, flow.defs)
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
        elif _is_store(ins) and _space(ins.op) in ("shared", "generic"):
            targets = flow.addr_shared(ins)
            if not targets:
                continue
            val = 0
            for o in ins.operands[1:]:
                for r in _regs(o):
                    val |= taint.get(r, 0)
            for s in targets:
                store_addr.setdefault(s, set()).add(exprs.address(ins))
                if val & RAW:
                    filled.add(s)
                if val & tags("U:" + s) and not _copy_origin(flow, _regs(ins.operands[-1])[0] if _regs(ins.operands[-1]) else ""):
                    self_fed.add(s)          # updated from itself (a reduction, scan, sorting network), not copied
        elif b == "atom" or b == "red":
            for s in flow.addr_shared(ins) if _space(ins.op) in ("shared", "generic") else ():
                self_fed.add(s)
        elif b == "ldmatrix" or (b == "wmma" and "load" in ins.op):
            cross |= flow.addr_shared(ins)
        elif _is_load(ins) and _space(ins.op) in ("shared", "generic"):
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
        if any(exprs.address(ld) not in own and not _addr_taint(flow, ld) & data for ld in ls):
            cross.add(s)
    return len((filled & cross) - self_fed)


def _copy_origin(flow: _Flow, reg: str, depth: int = 0) -> str | None:
    """The register a loaded value was loaded into, when ``reg`` is that value or a move/conversion of it."""
    if depth == 0:
        if reg not in flow.origins:
            flow.origins[reg] = _copy_origin(flow, reg, 1)
        return flow.origins[reg]
    ds = flow.defs.get(reg, [])
    if not ds or depth > 8:
        return None
    instrs = [flow.kernel.instrs[i] for i in ds]
    loaded = [i for i in instrs if _is_load(i) and i.base != "ldmatrix" and _space(i.op) not in ("const", "param")]
    if loaded and all(i in loaded or (i.base == "mov" and not i.srcs) for i in instrs):
        return reg           # loaded, or a constant where the load is skipped (a bounds check's zero); a constant-bank
        # or parameter operand is a broadcast the FMA reads itself, not a loaded register
    if len(instrs) == 1 and instrs[0].base in ("mov", "cvt", "shfl") and len(instrs[0].srcs) >= 1 and depth < 9:
        return _copy_origin(flow, instrs[0].srcs[0], depth + 1)
    return None


def register_tiles(flow: _Flow) -> int:
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
        if _FLOAT_MUL.match(ins.op) and len(ins.dests) == 1 and len(ins.srcs) >= 2:
            mul_of[ins.dests[0]] = list(ins.srcs[:2])
    for ins in k.instrs:
        if len(ins.dests) != 1:
            continue
        d = ins.dests[0]
        if _FLOAT_ACC.match(ins.op) and len(ins.operands) == 4:
            c = _regs(ins.operands[3])
            members.add(d)
            if c:
                union(d, c[0])
            steps.append((d, [r for o in ins.operands[1:3] for r in _regs(o)]))
        elif _FLOAT_ADD.match(ins.op) and len(ins.srcs) == 2:
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
            o = _copy_origin(flow, m)
            if o is not None:
                fed.setdefault(o, set()).add(acc)
    accs: set[str] = set()
    for group in fed.values():
        if len(group) >= 2:
            accs |= group
    return len(accs) if len(accs) >= 4 else 0


_WAIT_N = re.compile(r"^cp\.async(?:\.bulk)?\.wait_group(?:\.read)?$")


def _depends_on(flow: _Flow, reg: str, target: str, limit: int = 400) -> bool:
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


def _toggles(flow: _Flow) -> set[str]:
    """Registers that alternate between two values from one loop iteration to the next: a loop-carried
    register flipped with a constant (``s ^= 1``, ``off ^= 8192``, ``s = 1 - s``) or a loop counter's parity
    (``k & 1``, ``k % 2``)."""
    out = set()
    for ins in flow.kernel.instrs:
        if len(ins.dests) != 1 or len(ins.operands) != 3:
            continue
        d, a, c = ins.dests[0], ins.operands[1], ins.operands[2]
        if ins.base == "xor" and _IMM.fullmatch(c) and a.startswith("%") and _depends_on(flow, a, d):
            out.add(d)
        elif ins.base == "sub" and _IMM.fullmatch(a) and c.startswith("%") and _depends_on(flow, c, d):
            out.add(d)
        elif ins.base in ("and", "rem") and c in ("1", "2") and (c == "1") == (ins.base == "and") \
                and a.startswith("%") and _depends_on(flow, a, a):
            out.add(d)
    return out


def _derived(flow: _Flow, roots: set[str]) -> set[str]:
    """Every register computed from one of ``roots`` (the roots included)."""
    uses: dict[str, list[Instr]] = {}
    for ins in flow.kernel.instrs:
        if ins.dests and not _is_load(ins):
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


def _stage_op(ins: Instr, alternating: set[str]) -> bool:
    """A flip or parity of an alternating register: ``x ^ C``, ``C - x``, ``x & 1``, ``x % 2``."""
    if len(ins.dests) != 1 or len(ins.operands) != 3:
        return False
    a, c = ins.operands[1], ins.operands[2]
    if ins.base == "xor" and _IMM.fullmatch(c):
        return a in alternating
    if ins.base == "sub" and _IMM.fullmatch(a):
        return c in alternating
    return ins.base in ("and", "rem") and c == ("1" if ins.base == "and" else "2")


def shared_stages(flow: _Flow) -> int:
    """Waits that leave copies in flight, or a shared array written at one stage while it is read at
    another: both addressed through a stage index that alternates between loop iterations, the writes
    through another value of it than the reads (``cur ^ 1`` and ``cur``, ``(k + 1) & 1`` and ``k & 1``). A
    ring that writes and reads each slot through the same index waits for every copy before using it."""
    k = flow.kernel
    n = 0
    toggles = _toggles(flow)
    if toggles:
        alternating = _derived(flow, toggles)
        stage_regs = {d for i in k.instrs if i.dests and i.dests[0] in alternating and _stage_op(i, alternating)
                      for d in i.dests} | toggles
        exprs = _Exprs(k, flow.defs)

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
            if not (is_copy or _is_store(ins) or _is_load(ins)) or not ins.addr_regs:
                continue
            if _space(ins.op) not in ("shared", "generic") and not is_copy:
                continue
            targets = flow.addr_shared(ins)
            if targets and any(r in alternating for r in ins.addr_regs):
                key = stage_key(ins.addr_regs)
                for t in targets:
                    (written if is_copy or _is_store(ins) else read).setdefault(t, set()).add(key)
        n += sum(1 for t in written.keys() & read.keys() if written[t] != read[t])
    waits = [int(i.operands[0], 0) for i in k.instrs
             if _WAIT_N.match(i.op) and i.operands and _IMM.fullmatch(i.operands[0])]
    if len(set(waits)) <= 3:         # more: a switch over a count known at run time (cuda::pipeline's wait)
        n += sum(1 for w in waits if w > 0)
    return n


# --------------------------------------------------------------------------- affine address values
Poly = dict[tuple[str, ...], int]      # monomial (sorted symbols; () the constant) -> coefficient

_MAX_TERMS = 24


def _padd(a: Poly, b: Poly, sign: int = 1) -> Poly:
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


def _imm(text: str) -> int | None:
    t = text.strip()
    if _IMM.fullmatch(t):
        return int(t, 0)
    return None


class _Affine:
    """Registers as polynomials over the x thread index and opaque symbols (a small symbolic evaluator over
    the def chains: add, sub, mul, mad, shl, cvt, mov, ``mul.wide``). A register defined more than once (a
    loop-carried one) is read at its first definition; parameters, block indices and other special registers
    are symbols; anything else is an opaque symbol, ``~r`` where it varies across a warp's lanes (its taint
    has the thread index) and ``?r`` where it does not. ``x & (2^k - 1)`` and ``x % 2^k`` with k >= 5 keep x
    (lanes of one warp differ in the low five bits); ``x >> k`` and ``x / 2^k`` of the thread index, k >= 5,
    are the same for a whole warp."""

    def __init__(self, flow: _Flow) -> None:
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
        v = _imm(t)
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
        return _padd(p, {(): int(off)}) if off else p

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
        if b == "ld" and _space(ins.op) == "param" and ins.addr_syms:
            return {("param:" + ins.addr_syms[0],): 1}
        if b in ("mov", "cvt", "cvta") and len(ops) == 1:
            return self.operand(ops[0])
        if b in ("add", "sub") and len(ops) == 2 and ".f" not in ins.op:
            return _padd(self.operand(ops[0]), self.operand(ops[1]), 1 if b == "add" else -1)
        if b == "mul" and len(ops) == 2 and ".f" not in ins.op and ".hi" not in ins.op:
            return _pmul(self.operand(ops[0]), self.operand(ops[1]))
        if b == "mad" and len(ops) == 3 and ".hi" not in ins.op and ".f" not in ins.op:
            p = _pmul(self.operand(ops[0]), self.operand(ops[1]))
            return None if p is None else _padd(p, self.operand(ops[2]))
        if len(ops) == 2:
            k = _imm(ops[1])
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
                        return _padd(_padd(_pmul(_low_bits(hi), {(): scale}) or {}, _pmul(_low_bits(lo), {(): scale}) or {}, -1), rest)
                if (b == "shr" and 0 < k < 64) or (b == "div" and k > 1 and k & (k - 1) == 0):
                    sh = k if b == "shr" else k.bit_length() - 1
                    if sh <= e:
                        return _padd({("tid.x",): 1 << (e - sh)}, rest)
                    m = 1 << (sh - e)                  # the group of m lanes (a warp's index for m >= 32)
                    return {("?" + reg,): 1} if m >= 32 else _padd({(f"tid.hi{m}",): 1}, rest)
        if all(_lane_free(self.operand(o)) for o in ops if o.startswith("%")):
            return {("?" + reg,): 1}        # computed from values the same for every lane of a warp
        return None


_SPECIAL_NAMES = frozenset({"%ntid.x", "%ntid.y", "%ntid.z", "%nctaid.x", "%nctaid.y", "%nctaid.z", "%ctaid.x",
                            "%ctaid.y", "%ctaid.z", "%tid.y", "%tid.z", "%warpid", "%nwarpid", "%smid"})


def _scaled_index(p: Poly) -> int | None:
    """2^e where a polynomial is 2^e times the x thread index plus terms the same for every lane, else None."""
    s = p.get(("tid.x",), 0)
    if s > 0 and s & (s - 1) == 0 and all(m == ("tid.x",) or _lane_free({m: 1}) for m in p):
        return s
    return None


def _low_bits(n: int) -> Poly:
    """The x thread index modulo 2^n: its low n bits (all a warp's lanes differ in from n = 5 on)."""
    if n <= 0:
        return {}
    return {("tid.x",): 1} if n >= 5 else {(f"tid.lo{1 << n}",): 1}


def _lane_free(p: Poly) -> bool:
    """Whether a polynomial is the same for every lane of a warp."""
    return not any(s.startswith(("~", "tid.")) for m in p for s in m)


def _lane_addresses(p: Poly) -> list[int] | None:
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


# ------------------------------------------------------------------------------------ reductions
_COMBINE = re.compile(r"^(?:add|max|min)\.(?:[a-z]+\.)*?(?:f16x2|bf16x2|f16|bf16|f32|f64|[sub]\d+)$")
_SHFL_REDUCE = re.compile(r"^shfl\.sync\.(?:down|bfly)\b|^shfl\.(?:down|bfly)\b|^redux\.sync\b")


def _origin_ins(flow: _Flow, reg: str, depth: int = 0) -> list[Instr]:
    """The instructions a value comes from, through moves and conversions (every definition of a register
    defined more than once: a conditional load and its default)."""
    out = []
    for i in flow.defs.get(reg, []):
        ins = flow.kernel.instrs[i]
        if ins.base in ("mov", "cvt") and len(ins.srcs) == 1 and depth < 8:
            out.extend(_origin_ins(flow, ins.srcs[0], depth + 1))
        else:
            out.append(ins)
    return out


def _feeds(flow: _Flow, reg: str, uses: dict[str, list[Instr]], want, limit: int = 64) -> bool:
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


def shared_reductions(flow: _Flow, poly: _Affine) -> int:
    """Shared arrays a block's values are combined in (docs/features.md, block_reduction_tree): updated from
    themselves by a sum, max or min of a slot at a positive uniform offset from the one written (``s[i] +=
    s[i + stride]``, a halving or doubling tree, unrolled or not), never at a negative offset (a
    Hillis-Steele scan, ``s[i] += s[i - off]``) nor copied from another slot (a Blelloch scan's down-sweep
    swaps); or filled with the results of warp shuffle reductions (``shfl.down``/``bfly`` then a combine)
    and read back into a combine or a shuffle (the 32-slot form; a shuffle scan's ``shfl.up`` is not one, and
    a kernel with one is a scan)."""
    k = flow.kernel
    if not _barrier(k) or any(i.op.startswith(("shfl.sync.up", "shfl.up")) for i in k.instrs):
        return 0          # (a kernel that scans with shfl.up keeps its warps' totals in shared memory for the scan)
    uses: dict[str, list[Instr]] = {}
    for ins in k.instrs:
        for r in ins.srcs:
            uses.setdefault(r, []).append(ins)
    up: set[str] = set()
    down: set[str] = set()
    warp_filled: set[str] = set()
    loads: dict[str, list[Instr]] = {}
    for ins in k.instrs:
        if _is_load(ins) and ins.base == "ld" and _space(ins.op) in ("shared", "generic"):
            for s in flow.addr_shared(ins):
                loads.setdefault(s, []).append(ins)
        if not (_is_store(ins) and ins.base == "st" and _space(ins.op) in ("shared", "generic")):
            continue
        targets = flow.addr_shared(ins)
        vals = _regs(ins.operands[-1]) if ins.operands else []
        if not targets or len(vals) != 1:
            continue
        w = poly.address(ins.operands[0])
        for src in _origin_ins(flow, vals[0]):
            if _is_load(src) and set(flow.addr_shared(src)) & targets:
                d = _padd(poly.address(src.operands[1]), w, -1) if len(src.operands) > 1 else {}
                if d:
                    down.update(targets)          # a slot copied to another: a scan's down-sweep, a sort
                continue
            if not _COMBINE.match(src.op):
                continue
            for operand in src.srcs:
                for o in _origin_ins(flow, operand):
                    if _SHFL_REDUCE.match(o.op):
                        warp_filled.update(targets)
                    if not (_is_load(o) and set(flow.addr_shared(o)) & targets and len(o.operands) > 1):
                        continue
                    d = _padd(poly.address(o.operands[1]), w, -1)
                    if not d or not _lane_free(d):
                        continue
                    if all(c > 0 for c in d.values()):
                        up.update(targets)
                    elif all(c < 0 for c in d.values()):
                        down.update(targets)
    n = len(up - down)

    def combines(ins: Instr) -> bool:
        return bool(_COMBINE.match(ins.op) or _SHFL_REDUCE.match(ins.op))

    for s in warp_filled - up:
        if any(_feeds(flow, d, uses, combines) for ld in loads.get(s, []) for d in ld.dests):
            n += 1
    return n


# ------------------------------------------------------------------------------------- coalescing
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


def access_strides(flow: _Flow, poly: _Affine) -> tuple[int, int]:
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
            width = _imm(ins.operands[2]) if len(ins.operands) > 2 else None
            if width is None:
                continue
        elif (b in ("ld", "st") or b == "ldu") and ins.operands:
            space = _space(ins.op)
            if space == "generic":
                if not _addr_taint(flow, ins) & (PARAM | G):
                    continue
            elif space != "global":
                continue
            operand = next((o for o in ins.operands if o.startswith("[")), None)
            if operand is None:
                continue
            width = _access_width(ins.op)
        else:
            continue
        lanes = _lane_addresses(poly.address(operand))
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


def coalescing(flow: _Flow, poly: _Affine) -> dict[str, int]:
    """``coalesced``: 1 when a kernel's global accesses are mostly coalesced (at least two thirds of their
    weight); ``strided``: 1 when they are mostly strided (at least two thirds the other way)."""
    good, bad = access_strides(flow, poly)
    return {"coalesced": int(good > 0 and good >= 2 * bad), "strided": int(bad > 0 and bad >= 2 * good)}


def kernel_facts(kernel: Kernel, shared: frozenset[str]) -> dict[str, int]:
    # the facts of the other modules, which import this module's helpers
    from cuda_llm.tools.compiler.ptx_fusion import fusion_facts
    from cuda_llm.tools.compiler.ptx_layout_loops import layout_loop_facts

    flow = analyse(kernel, shared)
    poly = _Affine(flow)
    return {"shared_tile": shared_tiles(flow), "register_tile": register_tiles(flow),
            "shared_stages": shared_stages(flow), "shared_reduction": shared_reductions(flow, poly),
            **coalescing(flow, poly), **fusion_facts(flow, poly),
            **layout_loop_facts(flow)}


def flow_facts(ptx: str) -> dict[str, int]:
    """The facts of every kernel of a PTX module, summed; every fact is named, 0 where none was found (so
    an empty dict means the PTX was not read)."""
    mod = parse_ptx(ptx)
    total = dict.fromkeys(FACTS, 0)
    for k in mod.kernels:
        for name, n in kernel_facts(k, mod.shared).items():
            total[name] += n
    return total
