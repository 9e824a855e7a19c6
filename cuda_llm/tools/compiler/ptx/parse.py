"""PTX text into kernels and instructions (``nvcc -ptx`` or ``-keep``): the statement and operand regexes,
``Instr``/``Kernel``/``Module``, ``parse_ptx`` and ``parse_instruction``. Pure logic."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_DEBUG = re.compile(r"^\s*\.(?:loc|file)\b[^\n]*$|^\s*\.section\b[\s\S]*", re.M)   # -lineinfo / -G directives
_SHARED_DECL = re.compile(r"\.shared\s+(?:\.align\s+\d+\s+)?(?:\.\w+\s+)*?([A-Za-z_$][\w$]*)\s*(?:\[|;)")
_ENTRY = re.compile(r"\.entry\s+([\w$]+)")
_FUNC_START = re.compile(r"(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(?:entry|func)\b")
_STMT = re.compile(r"^(?:@(!?)(%?[\w$]+)\s+)?([a-z][\w.:]*)\s*(.*)$", re.S)
_LABEL = re.compile(r"^([\w$]+)\s*:\s*")
_REG = re.compile(r"%[A-Za-z_][\w$]*(?:\.[xyzw]\b)?")
_IDENT = re.compile(r"(?<![%\w.$])([A-Za-z_$][\w$]*)")
IMM = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|\d+)")
_NO_DEST = frozenset({"st", "red", "bar", "barrier", "bra", "ret", "exit", "prefetch", "prefetchu", "membar",
                      "fence", "call", "trap", "brkpt", "cp", "stmatrix", "setmaxnreg", "griddepcontrol",
                      "pmevent", "nanosleep", "cp.async", "tensormap", "multimem", "discard", "applypriority",
                      "createpolicy_noop", "st.async", "red.async", "wgmma.fence", "wgmma.commit_group",
                      "wgmma.wait_group"})


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


def registers(text: str) -> list[str]:
    return _REG.findall(text)


def _address(operand: str) -> tuple[tuple[str, ...], tuple[str, ...], int]:
    inner = operand.strip()[1:-1]
    head = inner.split(",", 1)[0]              # [tensorMap, {coords}]: the first part is the address
    regs = tuple(registers(head))
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
    syms = tuple(s for s in _IDENT.findall(joined) if not IMM.fullmatch(s)) if _HAS_IDENT.search(joined) else ()
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


def imm(text: str) -> int | None:
    t = text.strip()
    if IMM.fullmatch(t):
        return int(t, 0)
    return None
