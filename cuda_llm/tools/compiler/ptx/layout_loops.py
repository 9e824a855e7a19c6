"""Loop strides and shared-memory layouts read from a kernel's PTX dataflow (facts beside tiles.py's,
built on parse.py, dataflow.py and affine.py). Pure logic.

- ``grid_stride``: thread-level loops (a backward branch) with a loop-carried register that starts at a
  value computed from the thread and the block index and steps by a product of a grid size and a block size
  (``%nctaid.* * %ntid.*``, times a constant: an element size, a vector width, an unrolled step; a product
  of the 3-D sizes, cooperative groups' ``grid.size()``; a quotient, a warp-level stride), however the step
  was computed (once before the loop, through a 64-bit conversion, folded into a pointer), or along x by a
  constant times the grid size where the start is that constant times the block index plus the thread
  index (a block size fixed at compile time). Not a block-level loop stepping by the grid alone
  (``tile += gridDim.x``, a persistent kernel), a block-stride loop (``i += blockDim.x``), a loop over a
  tile (``k += TILE``), nor a tile loop along y (``row += gridDim.y * TILE``).
- ``shared_padding``: shared arrays addressed with a padded row pitch multiplying an index that differs
  between a warp's lanes (the x thread index, its low bits or groups: the accesses that would otherwise
  fall in one bank): an odd number of 4-byte words, 17 or more (33, 65, 81 floats), or a power of two of 8
  words or more plus a few words (36, 40, 68 floats; 24 halves of a 16-half row); or the stride operand of a
  ``wmma.load`` / ``wmma.store`` (the pitch of the fragment's rows) of that kind. A 1-D array of odd length
  has no pitch; a row index the whole warp shares (``threadIdx.y`` of a 32-wide block, a loop counter) is
  no conflict to avoid; a row each thread picks by its own index in every access is its private row (a
  per-thread window or list), not a tile's; a skewed pitch read a row or a column before the slot the
  thread stored is a stencil's halo.
- ``shared_swizzle``: shared arrays addressed through an XOR of two indices computed from neither loaded
  data nor constants (``col ^ row``, ``col ^ ((row & 3) << 3)``, an address XOR-ed with its own higher bits),
  and wgmma descriptors that set a swizzle mode (bits 62-63); one side is a field of bits (masked, shifted,
  a remainder) or both are thread indexes. Not a sorting network's or a butterfly's partner ``i ^ j`` (``j``
  one bit: a loop stride halved or doubled each step, or ``1 << s``; or a stride the kernel is given), a
  stage flip ``s ^ 1`` (a constant), nor a hash of a key (loaded data). A TMA tensor map's swizzle is set on the host:
  the PTX does not show it.
"""

from __future__ import annotations

from collections.abc import Iterator

from cuda_llm.tools.compiler.ptx.affine import Affine, Poly, padd
from cuda_llm.tools.compiler.ptx.dataflow import Flow, depends_on, derived, is_load, is_store, state_space
from cuda_llm.tools.compiler.ptx.parse import Instr, Kernel, imm

_GRID = ("%nctaid.x", "%nctaid.y", "%nctaid.z")
_BLOCK_SIZE = ("%ntid.x", "%ntid.y", "%ntid.z")
_SELF = "SELF"


def _loops(k: Kernel) -> list[tuple[int, int]]:
    """Every loop as the range of instructions from its head label to its backward branch, inclusive."""
    where: dict[str, int] = {}
    for i, ins in enumerate(k.instrs):
        for lab in ins.labels:
            where[lab] = i
    out = []
    for j, ins in enumerate(k.instrs):
        if ins.base == "bra" and ins.syms:
            i = where.get(ins.syms[-1])
            if i is not None and i <= j:
                out.append((i, j))
    return out


def _carried(flow: Flow, lo: int, hi: int) -> list[tuple[str, int, list[int]]]:
    """Loop-carried registers of the loop [lo, hi]: defined inside it and also before it (its start), each
    with the definition before the loop nearest to it and its definitions inside."""
    out = []
    for reg, ds in flow.defs.items():
        inside = [i for i in ds if lo <= i <= hi]
        before = [i for i in ds if i < lo]
        if inside and before:
            out.append((reg, max(before), inside))
    return out


def _grid_step(p: Poly) -> bool:
    """Whether a step is a constant times a grid size times a block size (every term such a product)."""
    if not p:
        return False
    for m, c in p.items():
        if c == 0 or len(m) != 2:
            return False
        if sum(1 for s in m if s in _GRID) != 1 or sum(1 for s in m if s in _BLOCK_SIZE) != 1:
            return False
    return True


def grid_strides(flow: Flow) -> int:
    """Loops with an induction variable started from the thread and block index and stepped by
    grid size x block size (module doc)."""
    k = flow.kernel
    tid = 0
    for n in ("tid.x", "tid.y", "tid.z", "lane"):
        tid |= flow.tags.bits.get(n, 0)
    block = flow.tags.bits.get("block", 0)
    if not tid or not block:
        return 0
    n = 0
    seen: set[tuple[int, int]] = set()
    for lo, hi in _loops(k):
        if (lo, hi) in seen:
            continue
        seen.add((lo, hi))
        for reg, init, updates in _carried(flow, lo, hi):
            start = k.instrs[init]
            mask = 0
            for r in start.srcs:
                mask |= flow.taint.get(r, 0)
            for r in start.operands[1:]:
                if r.startswith("%tid") or r == "%laneid":
                    mask |= tid
                elif r.startswith("%ctaid"):
                    mask |= block
            if not (mask & tid and mask & block):
                continue
            poly = Affine(flow)
            poly.memo[reg] = {(_SELF,): 1}
            begin = poly._eval(start, reg) or {}
            if any(_stride(poly, k.instrs[u], reg, begin, u) for u in updates):
                n += 1
                break
    return n


def _stride(poly: Affine, ins: Instr, reg: str, start: Poly, at: int) -> bool:
    """Whether one update of a loop-carried register adds a grid stride to its own value: a product of a
    grid size and a block size (times a constant), or along x a constant times the grid size where the
    start is that constant times the block index plus the thread index (a block size fixed at compile time:
    ``i = blockIdx.x * BS + threadIdx.x; i += BS * gridDim.x``)."""
    if len(ins.dests) != 1 or ins.base not in ("add", "sub", "mov", "mad"):
        return False
    got = poly._eval(ins, reg)
    if got is None or got.get((_SELF,)) != 1:
        return False
    step = padd(got, {(_SELF,): 1}, -1)
    if _grid_step(step):
        return True
    if len(step) == 1:
        [(m, c)] = step.items()
        if m == ("%nctaid.x",):          # along x, where the thread index is the lane's
            return start.get(("%ctaid.x",)) == c and ("tid.x",) in start
        # a step the evaluator keeps opaque (a quotient, a product of more sizes): its definitions
        if ins.base == "add" and len(m) == 1 and m[0].startswith("?"):
            other = next((o for o in ins.operands[1:] if o.startswith("%") and poly.operand(o) == step), None)
            return other is not None and _grid_product(poly.flow, other, at)
    return False


def _grid_product(flow: Flow, reg: str, at: int) -> bool:
    """Whether a register, as read at instruction ``at``, is computed from grid and block sizes alone by
    products, shifts and quotients (``gridDim.x * blockDim.x * gridDim.y * blockDim.y``, cooperative groups'
    ``grid.size()``, ``gridDim.x * blockDim.x / 32``), both kinds present. A register defined more than once is
    read at its last definition before the reading one."""
    leaves: set[str] = set()

    def walk(r: str, before: int, d: int) -> bool:
        ds = [i for i in flow.defs.get(r, []) if i < before]
        if not ds or d > 12:
            return False
        at = max(ds)
        ins = flow.kernel.instrs[at]
        if ins.base not in ("mov", "cvt", "mul", "shl", "shr", "div") or ".f" in ins.op or ".hi" in ins.op:
            return False
        for o in ins.operands[1:]:
            if o in _GRID or o in _BLOCK_SIZE:
                leaves.add(o[:-2])
            elif imm(o) is not None or o == "WARP_SZ":
                continue
            elif not (o.startswith("%") and walk(o, at, d + 1)):
                return False
        return True

    return walk(reg, at, 0) and leaves == {"%nctaid", "%ntid"}


class _LoopAffine(Affine):
    """``Affine`` with each register defined more than once (a loop variable, a value a branch sets) kept
    as its own symbol ``L%r`` instead of its first definition, so a loop's row index keeps its coefficient."""

    def of(self, reg: str) -> Poly:
        ds = self.flow.defs.get(reg)
        if ds and len(ds) > 1 and reg not in self.memo:
            self.memo[reg] = {("L" + reg,): 1}
        return super().of(reg)


def _shared_accesses(flow: Flow) -> Iterator[tuple[Instr, set[str], str]]:
    """(instruction, shared arrays, address operand) of every shared-memory access: loads, stores, ldmatrix,
    stmatrix and the destination of cp.async."""
    for ins in flow.kernel.instrs:
        if ins.op.startswith("cp.async") and "shared" in ins.op and ins.operands and ins.operands[0].startswith("["):
            operand = ins.operands[0]
        elif (is_load(ins) or is_store(ins)) and state_space(ins.op) in ("shared", "generic"):
            operand = next((o for o in ins.operands if o.startswith("[")), None)
            if operand is None:
                continue
        else:
            continue
        targets = flow.addr_shared(ins)
        if targets:
            yield ins, targets, operand


def _pitch_kind(c: int) -> str | None:
    """How a row pitch in bytes breaks the banks' power of two: "odd" (an odd number of 4-byte words, 9 or
    more: 33, 65, 81 floats), "skew" (a power of two of 8 words or more plus a few words: 36 or 40 floats,
    24 halves of a 16-half row, 72 floats), else None (a power of two, or too far from one)."""
    if c <= 0 or c % 4:
        return None
    w = c // 4
    if w % 2 and w >= 17:
        return "odd"
    a = 1 << (w.bit_length() - 1)
    p = w - a
    return "skew" if a >= 8 and 0 < p <= min(16, a // 2) else None


def shared_paddings(flow: Flow) -> int:
    """Shared arrays addressed with a padded row pitch (module doc)."""
    poly = _LoopAffine(flow)
    stores: dict[str, list[Poly]] = {}
    loads: dict[str, list[Poly]] = {}
    odd: set[str] = set()
    skew: dict[str, set[int]] = {}
    pitched: dict[tuple[tuple[str, ...], int], set[str]] = {}
    for ins, targets, operand in _shared_accesses(flow):
        p = poly.address(operand)
        for s in targets:
            (stores if is_store(ins) or ins.base == "cp" else loads).setdefault(s, []).append(p)
        if ins.base == "wmma":          # a fragment's rows are the warp's lanes, its stride operand their pitch
            pitch = _wmma_pitch(poly, ins)
            if pitch is not None and _pitch_kind(pitch):
                odd |= set(targets)
        for m, c in p.items():
            if not m or any(x.startswith("@") for x in m) or not _lane_varying(m):
                continue
            if not any(_thread_dependent(o) for o in p if o and o != m):
                pitched.setdefault((m, c), set()).update(targets)
                continue              # (only the thread's own row here: counts where other rows are reached)
            kind = _pitch_kind(c)
            if kind == "odd":
                odd |= set(targets)
            elif kind == "skew":
                for s in targets:
                    skew.setdefault(s, set()).add(c)
    for (m, c), arrays in pitched.items():
        kind = _pitch_kind(c)
        for s in arrays:
            # a row the thread picks by its own index in every access is a private row (a per-thread window,
            # a list), not a tile's row read across the lanes
            if kind is None or not any(_thread_dependent(o) and (o, k) != (m, c)
                                       for p in stores.get(s, []) + loads.get(s, []) for o, k in p.items()):
                continue
            if kind == "odd":
                odd.add(s)
            else:
                skew.setdefault(s, set()).add(c)
    halo = set()
    for s, pitches in skew.items():
        for ld in loads.get(s, []):
            here = {c for m, c in ld.items() if m and c in pitches}
            if not here:
                continue
            for st in stores.get(s, []):
                d = padd(ld, st, -1)     # or read a row or a column before the slot the thread stored
                if d and set(d) == {()} and -4 * max(here) < d[()] < 0:
                    halo.add(s)
    return len(odd | (set(skew) - halo))


_WMMA_ELEMENT = {"f16": 2, "bf16": 2, "tf32": 4, "f32": 4, "s32": 4, "f64": 8, "s8": 1, "u8": 1}


def _wmma_pitch(poly: Affine, ins: Instr) -> int | None:
    """The row pitch in bytes of a ``wmma.load`` / ``wmma.store``: its stride operand (in elements, a
    constant) times the element size of its type."""
    size = next((_WMMA_ELEMENT[p] for p in reversed(ins.op.split(".")) if p in _WMMA_ELEMENT), None)
    if size is None or len(ins.operands) < 3 or ins.operands[-1].startswith("["):
        return None
    stride = poly.operand(ins.operands[-1])
    if set(stride) != {()}:
        return None
    return stride[()] * size


def _thread_dependent(m: tuple[str, ...]) -> bool:
    """Whether a monomial depends on a thread index (any dimension, its bits, an opaque value of it)."""
    return any(x.startswith(("tid.", "%tid.", "~")) for x in m)


def _lane_varying(m: tuple[str, ...]) -> bool:
    """Whether a monomial varies across a warp's lanes (the x thread index, its low bits or small groups, an
    opaque value computed from it)."""
    return any(x.startswith(("tid.", "~")) for x in m)


def _partner_distances(flow: Flow, poly: Affine) -> set[str]:
    """Registers holding one bit, the distance to a partner element: a loop's halving or doubling stride
    (``j >>= 1``, ``k <<= 1``), a power of two shifted by a loop counter (``1 << s``), and their copies. A
    sorting network or a butterfly XORs an index with one (``i ^ j``); a swizzle XORs a field of row bits."""
    k = flow.kernel
    out: set[str] = set()
    for reg, ds in flow.defs.items():
        for i in ds:
            ins = k.instrs[i]
            if ins.base not in ("shl", "shr") or len(ins.operands) != 3:
                continue
            one, amount = poly.operand(ins.operands[1]), imm(ins.operands[2])
            value = one.get(()) if set(one) == {()} else None
            if value is not None and value > 0 and value & (value - 1) == 0 and amount is None:
                out.add(reg)                                  # 1 << s
            elif len(ds) > 1 and amount is not None and depends_on(flow, ins.operands[1], reg):
                out.add(reg)                                  # j >>= 1 in a loop
    changed = True
    while changed:
        changed = False
        for ins in k.instrs:
            if ins.base in ("mov", "cvt", "shl", "shr") and len(ins.dests) == 1 and ins.dests[0] not in out \
                    and ins.srcs and all(r in out for r in ins.srcs):
                out.add(ins.dests[0])
                changed = True
    return out


def shared_swizzles(flow: Flow) -> int:
    """Shared addresses computed through an XOR of two indices (module doc)."""
    k = flow.kernel
    data = flow.tags.bits.get("G", 0)
    for n, b in flow.tags.bits.items():
        if n.startswith(("S:", "U:")):
            data |= b
    strides = None
    poly = Affine(flow)
    xors = []
    for ins in k.instrs:
        if ins.base != "xor" or len(ins.dests) != 1 or len(ins.operands) != 3 or ins.op.endswith(".pred"):
            continue
        a, b = ins.operands[1], ins.operands[2]
        if not (a.startswith("%") and b.startswith("%")):
            continue
        mask = flow.taint.get(a, 0) | flow.taint.get(b, 0)
        if mask & data:
            continue
        if any(not _varies(poly.operand(o)) for o in (a, b)):
            continue
        if strides is None:
            strides = _partner_distances(flow, poly)
        if a in strides or b in strides:
            continue
        if not (_bit_field(flow, a) or _bit_field(flow, b) or (_thread_index(flow, a) and _thread_index(flow, b))):
            continue          # (an index XOR-ed with a stride it was given, a parameter: a partner, not row bits)
        xors.append(ins.dests[0])
    n = _descriptor_swizzles(flow)
    if not xors:
        return n
    reach = derived(flow, set(xors))
    arrays: set[str] = set()
    for ins, targets, _operand in _shared_accesses(flow):
        if any(r in reach for r in ins.addr_regs):
            arrays |= targets
    return n + len(arrays)


_SWIZZLE_BITS = 3 << 62           # a wgmma shared-memory descriptor's layout type: 128, 64 or 32-byte swizzle


def _descriptor_swizzles(flow: Flow) -> int:
    """wgmma operands whose shared-memory descriptor sets a swizzle mode (bits 62-63, OR-ed or added in as a
    constant), counted per instruction form."""
    k = flow.kernel
    found: set[str] = set()
    for ins in k.instrs:
        if not ins.op.startswith("wgmma.mma_async"):
            continue
        descs = [o for o in ins.operands[1:] if o.startswith("%rd")]
        todo, seen = list(descs), set(descs)
        while todo and len(seen) < 64:
            for i in flow.defs.get(todo.pop(), []):
                d = k.instrs[i]
                if d.base in ("or", "add", "mov") and any((imm(o) or 0) & _SWIZZLE_BITS
                                                          for o in d.operands[1:] if imm(o) is not None):
                    found.add(ins.op)
                for r in d.srcs:
                    if r not in seen:
                        seen.add(r)
                        todo.append(r)
    return len(found)


_FIELD_OPS = ("and", "shr", "shl", "bfe", "rem")


def _through_copies(flow: Flow, reg: str) -> Instr | None:
    """The instruction a register's value comes from, through moves and conversions (one definition each)."""
    for _ in range(6):
        ds = flow.defs.get(reg, [])
        if len(ds) != 1:
            return None
        ins = flow.kernel.instrs[ds[0]]
        if ins.base in ("mov", "cvt") and len(ins.operands) == 2 and ins.operands[1].startswith("%") \
                and ins.operands[1] in flow.defs:
            reg = ins.operands[1]
            continue
        return ins
    return None


def _bit_field(flow: Flow, reg: str) -> bool:
    """Whether a value is a field of bits cut from an index: masked, shifted or a remainder by a constant
    (``row & 7``, ``(row & 3) << 3``, ``addr >> 7``)."""
    ins = _through_copies(flow, reg)
    return ins is not None and ins.base in _FIELD_OPS and len(ins.operands) >= 3 \
        and any(imm(o) is not None for o in ins.operands[2:])


def _thread_index(flow: Flow, reg: str) -> bool:
    """Whether a value is a thread index as read (``threadIdx.x``, ``threadIdx.y``, the lane)."""
    ins = _through_copies(flow, reg)
    return ins is not None and ins.base == "mov" and len(ins.operands) == 2 \
        and ins.operands[1].startswith(("%tid.", "%laneid"))


def _varies(p: Poly) -> bool:
    """Whether a value is not a constant."""
    return any(m for m in p)


def layout_loop_facts(flow: Flow) -> dict[str, int]:
    """This module's facts of one analysed kernel."""
    return {"grid_stride": grid_strides(flow), "shared_padding": shared_paddings(flow),
            "shared_swizzle": shared_swizzles(flow)}
