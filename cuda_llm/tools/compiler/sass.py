"""What the compiled kernels execute, read from their machine code (SASS), once per build.

The speed-of-light bound needs to know which arithmetic units a candidate uses: a tensor-core GEMM is
bounded by the tensor-core peak of its input type, an FFMA loop by the fp32 peak. Words in the source
(``wmma``, ``tf32``, a comment) say nothing reliable about that; the instructions ptxas emitted do.
``cuobjdump -sass`` lists them (it calls ``nvdisasm`` for recent architectures); parsing is pure.

Tensor-core instructions by generation: ``HMMA`` (fp16/bf16/tf32, sm_70+), ``IMMA`` (int8/int4),
``DMMA`` (fp64), ``BMMA`` (1-bit), Hopper's warpgroup ``HGMMA``/``IGMMA``/``QGMMA`` (fp8)/``BGMMA``,
Blackwell's ``UTC*MMA`` (tcgen05) and ``QMMA``/``OMMA``. ``HFMA2.MMA`` is *not* a tensor-core
instruction: it is a packed-half FMA issued on another pipe, and ptxas also uses it to move constants
(``HFMA2.MMA R7, -RZ, RZ, 1.875, 0``).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

from cuda_llm.results import SassSummary

CUOBJDUMP_ENV = "CUDA_LLM_CUOBJDUMP"

# "/*0040*/   @!P0 HMMA.16816.F32.BF16 R16, R4.reuse, R12, RZ ;"  -> "HMMA.16816.F32.BF16", operands
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?(?P<op>[A-Z][A-Z0-9_]*(?:\.[\w.]+)?)(?P<rest>[^;]*);")

_TENSOR_BASES = ("HMMA", "HGMMA", "IMMA", "IGMMA", "QGMMA", "QMMA", "OMMA", "DMMA", "BMMA", "BGMMA")
_PACKED_HALF = ("HFMA2", "HMUL2", "HADD2")


def tensor_kind(opcode: str) -> str | None:
    """The input data type of a tensor-core instruction (``fp16``, ``bf16``, ``tf32``, ``fp8``, ``int8``,
    ``fp64``, ``int1``, ``fp4``), or None for any other instruction."""
    parts = opcode.upper().split(".")
    base, mods = parts[0], set(parts[1:])
    if base.startswith("UTC") and base.endswith("MMA"):        # Blackwell tcgen05: UTCHMMA, UTCQMMA...
        base = base[3:]
    if base not in _TENSOR_BASES:
        return None
    if base in ("HMMA", "HGMMA"):
        if "TF32" in mods:
            return "tf32"
        if "BF16" in mods:
            return "bf16"
        return "fp16"
    if base in ("IMMA", "IGMMA"):
        return "int4" if any(m in mods for m in ("S4", "U4")) else "int8"
    if base in ("QGMMA", "QMMA"):
        return "fp8"
    if base == "OMMA":
        return "fp4"
    if base == "DMMA":
        return "fp64"
    return "int1"                                               # BMMA, BGMMA


def _is_packed_half_arith(opcode: str, operands: str) -> bool:
    parts = opcode.split(".")
    if parts[0] not in _PACKED_HALF:
        return False
    if "F32" in parts[1:]:                 # HADD2.F32 R8, -RZ, R4.H0_H0: a half -> float conversion
        return False
    ops = [o.strip() for o in operands.split(",")]
    if len(ops) >= 3 and ops[1] == "-RZ" and ops[2] == "RZ":   # HFMA2.MMA R7, -RZ, RZ, 1.875, 0: a move
        return False
    return True


_GLOBAL_ACCESS = ("LDG", "STG", "LDGSTS")
_WIDTH_MODS = {"128": 16, "64": 8, "U8": 1, "S8": 1, "U16": 2, "S16": 2}


def global_access_width(opcode: str) -> int | None:
    """Bytes per thread of a global load, store or cp.async (``LDG.E.128`` 16, ``LDG.E`` 4, ``LDG.E.U8`` 1),
    or None for any other instruction."""
    parts = opcode.upper().split(".")
    if parts[0] not in _GLOBAL_ACCESS:
        return None
    return next((_WIDTH_MODS[m] for m in parts[1:] if m in _WIDTH_MODS), 4)


# The instruction classes a prompt's SASS summary counts (the coder has no disassembler): the tensor-core
# generations, CUDA-core math, the copy paths (LDG, LDGSTS = cp.async, UTMALDG/UBLKCP = TMA), shared memory,
# synchronization (BAR, SYNCS = mbarrier, WARPGROUP = wgmma fences), shuffles, atomics, local memory.
MIX_CLASSES: dict[str, tuple[str, ...]] = {
    "HGMMA": ("HGMMA",), "HMMA": ("HMMA",), "IMMA": ("IMMA", "IGMMA"), "FFMA": ("FFMA",),
    "FADD/FMUL": ("FADD", "FMUL"), "HFMA2": ("HFMA2", "HMUL2", "HADD2"), "MUFU": ("MUFU",),
    "LDG": ("LDG",), "STG": ("STG",), "LDGSTS": ("LDGSTS",), "UTMALDG": ("UTMALDG", "UBLKCP", "UTMAPF"),
    "UTMASTG": ("UTMASTG",), "LDS": ("LDS", "LDSM"), "STS": ("STS",), "BAR": ("BAR",), "SYNCS": ("SYNCS",),
    "WARPGROUP": ("WARPGROUP",), "SHFL": ("SHFL",), "ATOM": ("ATOM", "ATOMG", "ATOMS", "RED", "REDG"),
    "LDL/STL": ("LDL", "STL"),
}
_CLASS_OF = {b: c for c, bases in MIX_CLASSES.items() for b in bases}
_BRANCH = re.compile(r"^\s*/\*(?P<at>[0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?BRA(?:\.\w+)*\s+(?:`?\(?)?(?:0x)?(?P<to>[0-9a-f]+)\b")
_ADDRESS = re.compile(r"^\s*/\*(?P<at>[0-9a-f]{4,})\*/")
MAX_LOOPS = 6


def mix_class(opcode: str) -> str | None:
    """The summary class of an opcode (``HGMMA.64x128x16.F32`` -> HGMMA), or None for one not counted."""
    base = opcode.split(".", 1)[0]
    if base == "HFMA2" and ".MMA" in opcode:      # HFMA2.MMA: a move on the MMA pipe, often a constant
        return None
    return _CLASS_OF.get(base)


def innermost_loops(text: str) -> list[dict[str, int]]:
    """Per innermost loop of each function of a ``cuobjdump -sass`` listing (a backward branch whose body
    holds no other backward branch), the counts of the MIX_CLASSES in its body; the largest MAX_LOOPS by
    counted instructions, loops counting nothing left out. Pure."""
    loops: list[dict[str, int]] = []
    for func in re.split(r"\n\s*(?:\.section|Function\s*:)", text):
        body: list[tuple[int, str | None]] = []
        branches: list[tuple[int, int]] = []
        for line in func.splitlines():
            m = _INSTRUCTION.match(line)
            a = _ADDRESS.match(line)
            if not m or not a:
                continue
            at = int(a.group("at"), 16)
            body.append((at, mix_class(m.group("op"))))
            b = _BRANCH.match(line)
            if b:
                to = int(b.group("to"), 16)
                if to < at:                              # backward: a loop (BRA to itself is the trailing trap)
                    branches.append((to, at))
        inner = [(lo, hi) for lo, hi in branches
                 if not any((lo2, hi2) != (lo, hi) and lo <= lo2 and hi2 <= hi for lo2, hi2 in branches)]
        for lo, hi in inner:
            counts: dict[str, int] = {}
            for at, cls in body:
                if lo <= at <= hi and cls is not None:
                    counts[cls] = counts.get(cls, 0) + 1
            if counts:
                loops.append(counts)
    loops.sort(key=lambda c: -sum(c.values()))
    return loops[:MAX_LOOPS]


def summarize_sass(text: str) -> SassSummary:
    """Instruction counts of a ``cuobjdump -sass`` listing (all kernels of the object together), by base
    mnemonic and by full opcode (the feature detectors' SASS rules read the latter)."""
    opcodes: dict[str, int] = {}
    ops: dict[str, int] = {}
    tensor: dict[str, int] = {}
    packed = 0
    widths: dict[int, int] = {}
    for line in text.splitlines():
        m = _INSTRUCTION.match(line)
        if not m:
            continue
        op = m.group("op")
        base = op.split(".", 1)[0]
        opcodes[base] = opcodes.get(base, 0) + 1
        ops[op] = ops.get(op, 0) + 1
        kind = tensor_kind(op)
        if kind is not None:
            tensor[kind] = tensor.get(kind, 0) + 1
        elif _is_packed_half_arith(op, m.group("rest")):
            packed += 1
        if (width := global_access_width(op)) is not None:
            widths[width] = widths.get(width, 0) + 1
    return SassSummary(opcodes=opcodes, ops=ops, tensor=tensor, packed_half=packed, global_widths=widths,
                       loops=innermost_loops(text))


# ------------------------------------------------------------------------------------------ the tool
def _wheel_bins() -> list[Path]:
    """bin folders of NVIDIA's pip wheels (``nvidia-cuda-cuobjdump`` installs ``nvidia/cu13/bin``)."""
    try:
        import nvidia  # noqa: PLC0415 - optional namespace package of NVIDIA's wheels
    except ImportError:
        return []
    return [b for root in map(Path, getattr(nvidia, "__path__", [])) for b in sorted(root.glob("cu*/bin"))]


@functools.lru_cache(maxsize=1)
def cuobjdump_path() -> str | None:
    """$CUDA_LLM_CUOBJDUMP, cuobjdump on PATH, beside nvcc, in the toolkit, or from NVIDIA's pip wheel."""
    env = os.environ.get(CUOBJDUMP_ENV)
    if env:
        return shutil.which(env)
    found = shutil.which("cuobjdump")
    if found:
        return found
    places: list[Path] = []
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    places.append(Path(os.path.realpath(nvcc)).parent / "cuobjdump")
    for k in ("CUDA_HOME", "CUDA_PATH"):
        if k in os.environ:
            places.append(Path(os.environ[k]) / "bin" / "cuobjdump")
    places += [b / "cuobjdump" for b in _wheel_bins()]
    return next((str(p) for p in places if os.access(p, os.X_OK)), None)


def dump_sass(binary: str | Path, *, timeout_s: float = 120.0) -> str | None:
    """The SASS listing of a .so/.cubin, or None when cuobjdump is missing or fails (never raises)."""
    tool = cuobjdump_path()
    if tool is None:
        return None
    env = dict(os.environ)
    nvdisasm = Path(tool).parent / "nvdisasm"          # cuobjdump needs nvdisasm for sm_90a and newer
    if nvdisasm.exists():
        env["PATH"] = f"{nvdisasm.parent}{os.pathsep}{env.get('PATH', '')}"
    try:
        proc = subprocess.run([tool, "-sass", str(binary)], capture_output=True, text=True, timeout=timeout_s, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout


def read_sass(binary: str | Path) -> SassSummary | None:
    """The instruction summary of a built candidate, or None when its machine code cannot be read."""
    text = dump_sass(binary)
    return summarize_sass(text) if text is not None else None
