"""What a build says that the coder cannot see, in a few lines: the instruction mix of the machine code
(tensor-core generation, CUDA-core math, copy paths, barriers, per innermost loop), the ptxas messages that
cost speed (wgmma serialized, spills, local memory), and what changed between a parent's build and a
child's (kernels, launch shapes, registers, shared memory, new and gone instructions). The model writing
the next kernel has no disassembler and sees no ptxas output of an earlier build; post-mortems and prompts
carry these lines. Pure: built from CompileResult-like facts and sources.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, Field

from cuda_llm.results import KernelResources, SassSummary
from cuda_llm.tools.compiler.sass import MIX_CLASSES, mix_class

MAX_WARNINGS = 4
MAX_LINE = 220

# ptxas messages worth a line of the next prompt: each costs speed silently (the build succeeds)
_SERIALIZED = re.compile(r"\((C75\d\d)\)[^:]*:\s*(.*wgmma.*serializ.*)", re.I)
_PERF_LOSS = re.compile(r"(\(C\d{4}\))?\s*Potential Performance Loss:?\s*(.*)", re.I)
_LOCAL = re.compile(r"(\d+) bytes? (?:of )?(?:lmem|local memory)", re.I)


class BuildView(BaseModel):
    """One build as these summaries read it (a CompileResult's kernels, SASS summary and log, and the
    source its launches are read from)."""

    kernels: list[KernelResources] = Field(default_factory=list)
    sass: SassSummary | None = None
    log: str = ""
    warnings: list[str] = Field(default_factory=list)
    source: str = ""

    @classmethod
    def of(cls, compile_result: object | None, source: str = "") -> "BuildView":
        """From a CompileResult (None: the source alone)."""
        if compile_result is None:
            return cls(source=source)
        return cls(kernels=list(getattr(compile_result, "kernels", []) or []),
                   sass=getattr(compile_result, "sass", None), log=str(getattr(compile_result, "log", "") or ""),
                   warnings=list(getattr(compile_result, "warnings", []) or []), source=source)


def _short(text: str, n: int = MAX_LINE) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n - 3].rstrip() + "..."


def mix(sass: SassSummary | None) -> dict[str, int]:
    """Instruction counts by summary class (sass.MIX_CLASSES), from the whole object's opcodes."""
    out: dict[str, int] = {}
    if sass is None:
        return out
    for op, n in (sass.ops or sass.opcodes).items():
        c = mix_class(op)
        if c is not None:
            out[c] = out.get(c, 0) + n
    return out


def _counts(c: dict[str, int]) -> str:
    order = list(MIX_CLASSES)
    return ", ".join(f"{k} {c[k]}" for k in sorted(c, key=order.index) if c[k])


def sass_lines(sass: SassSummary | None) -> list[str]:
    """The instruction mix in words: the whole code, then its innermost loops (where the time goes)."""
    if sass is None:
        return []
    m = mix(sass)
    if not m:
        return []
    lines = ["instruction mix (SASS, all kernels): " + _counts(m)]
    tensor = ", ".join(f"{k} {v}" for k, v in sorted(sass.tensor.items()) if v)
    if tensor:
        gen = "wgmma (HGMMA)" if m.get("HGMMA") else "mma.sync (HMMA)" if m.get("HMMA") else "tensor cores"
        lines[0] += f"; tensor-core instructions by input type: {tensor}, issued as {gen}"
    for i, loop in enumerate(sass.loops, 1):
        lines.append(f"innermost loop {i}: " + _counts(loop))
    return lines


def notable_warnings(view: BuildView) -> list[str]:
    """The ptxas messages that cost speed without failing the build: wgmma serialized (C7510, C7515...),
    other 'Potential Performance Loss' notes, spills, local memory and stack frames, one line each."""
    out: list[str] = []
    for line in view.log.splitlines() + list(view.warnings):
        if (m := _SERIALIZED.search(line)) is not None:
            text = f"ptxas ({m.group(1)}): {_short(m.group(2), 150)} - the warpgroup MMAs wait for each other, far below the wgmma rate"
        elif (m := _PERF_LOSS.search(line)) is not None and "Performance Loss" in line:
            text = f"ptxas {m.group(1) or ''}: Potential Performance Loss: {m.group(2)}".replace("  ", " ")
        elif (m := _LOCAL.search(line)) is not None and "ptxas" in line.lower():
            text = f"ptxas: {m.group(0)}: local memory is DRAM-backed, far slower than registers"
        else:
            continue
        text = _short(text, 300)
        if text not in out:
            out.append(text)
    for k in view.kernels:
        if k.spills:
            out.append(f"{_kname(k.name)}: {k.spill_store_bytes} B spill stores, {k.spill_load_bytes} B spill loads at "
                       f"{k.registers} registers (register pressure: local-memory traffic in the loop)")
        elif k.stack_bytes:
            out.append(f"{_kname(k.name)}: {k.stack_bytes} B stack frame (local memory: an array indexed at run "
                       "time, or a call)")
    return out[:MAX_WARNINGS + len(view.kernels)]


def _kname(name: str) -> str:
    return name.split("(", 1)[0]


_LAUNCH = re.compile(r"(\w+)\s*(?:<[^<>;]*>)?\s*<<<\s*([^;]*?)\s*>>>")


def launch_shapes(source: str) -> list[str]:
    """The launch configurations written in a source (``kernel<<<grid, 256, smem>>>``), one per site."""
    return [f"{m.group(1)}<<<{' '.join(m.group(2).split())}>>>" for m in _LAUNCH.finditer(source or "")]


def _kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} B"


def build_diff(parent: BuildView, child: BuildView, *, min_change: float = 0.25) -> list[str]:
    """What changed from the parent's build to the child's, one line per kind of change: kernels, launch
    shapes, registers, static shared memory, spills, instruction classes that appeared or vanished or moved
    by more than ``min_change`` (a share). Empty when nothing notable changed or nothing is known."""
    out: list[str] = []
    pk = {_kname(k.name): k for k in parent.kernels}
    ck = {_kname(k.name): k for k in child.kernels}
    if pk and ck and set(pk) != set(ck):
        new, gone = sorted(set(ck) - set(pk)), sorted(set(pk) - set(ck))
        out.append(f"kernels: {len(pk)} -> {len(ck)}" + (f"; new: {', '.join(new)}" if new else "")
                   + (f"; gone: {', '.join(gone)}" if gone else ""))
    pl, cl = launch_shapes(parent.source), launch_shapes(child.source)
    if cl and pl != cl:
        out.append(_short("launches: " + "; ".join(pl or ["?"]) + " -> " + "; ".join(cl)))
    if pk and ck:
        def total(ks: Iterable[KernelResources], attr: str) -> int:
            return max((getattr(k, attr) for k in ks), default=0)
        for attr, label, fmt in (("registers", "registers per thread (max)", str), ("shared_bytes",
                                 "static shared memory (max)", _kib)):
            a, b = total(pk.values(), attr), total(ck.values(), attr)
            if a != b:
                out.append(f"{label}: {fmt(a)} -> {fmt(b)}")
        sp = sum(k.spill_store_bytes + k.spill_load_bytes for k in ck.values())
        if sp and not sum(k.spill_store_bytes + k.spill_load_bytes for k in pk.values()):
            out.append(f"spills: none -> {sp} B")
    pm, cm = mix(parent.sass), mix(child.sass)
    if pm or cm:
        new = {k: v for k, v in cm.items() if v and not pm.get(k)}
        gone = {k: v for k, v in pm.items() if v and not cm.get(k)}
        moved = {k: (pm[k], cm[k]) for k in cm if pm.get(k) and cm[k]
                 and abs(cm[k] - pm[k]) > min_change * max(pm[k], cm[k]) and k in _MOVES}
        if new:
            out.append("new instructions: " + _counts(new))
        if gone:
            out.append("instructions gone: " + _counts(gone))
        if moved:
            out.append("instruction counts: " + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in moved.items()))
    return out


_MOVES = ("HGMMA", "HMMA", "FFMA", "LDGSTS", "UTMALDG", "BAR", "SYNCS", "LDL/STL", "LDS", "STS", "ATOM")


def diff_text(lines: Sequence[str], limit: int = 420) -> str:
    return _short("; ".join(lines), limit) if lines else ""
