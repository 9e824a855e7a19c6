"""Per-kernel resources from ptxas's ``-Xptxas -v`` report: registers, shared memory, spills, stack.

The registers and spills decide occupancy and whether a candidate is starved of registers, so the
profiler critic and the feature detectors read them. Parsing is pure; demangling calls ``c++filt``
(or ``cu++filt``) once for all names when one is installed and keeps mangled names otherwise.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess

from cuda_llm.results import KernelResources

_ENTRY = re.compile(r"ptxas info\s*:\s*Compiling entry function '([^']+)'")
_PROPS = re.compile(r"ptxas info\s*:\s*Function properties for (\S+)")
_FRAME = re.compile(
    r"(\d+) bytes stack frame,\s*(\d+) bytes spill stores,\s*(\d+) bytes spill loads"
)
_USED = re.compile(r"ptxas info\s*:\s*Used (\d+) registers(.*)")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM0 = re.compile(r"(\d+) bytes cmem\[0\]")
_CUMULATIVE_STACK = re.compile(r"(\d+) bytes cumulative stack size")


def parse_ptxas(log: str, *, demangle: bool = True) -> list[KernelResources]:
    """Every kernel (entry function) that ptxas compiled, in the order of the report.

    Handles the nvcc 13 layout (``Used N registers, used B barriers, S bytes smem``) and the older one
    with ``bytes cmem[0]``. Device functions that are not entries are ignored.
    """
    kernels: list[dict] = []
    current: dict | None = None
    props_for_current = False
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = {"name": m.group(1)}
            kernels.append(current)
            props_for_current = False
            continue
        m = _PROPS.search(line)
        if m:
            props_for_current = current is not None and m.group(1) == current["name"]
            continue
        m = _FRAME.search(line)
        if m:
            if props_for_current and current is not None:
                current["stack_bytes"] = int(m.group(1))
                current["spill_store_bytes"] = int(m.group(2))
                current["spill_load_bytes"] = int(m.group(3))
            props_for_current = False
            continue
        m = _USED.search(line)
        if m and current is not None:
            current["registers"] = int(m.group(1))
            rest = m.group(2)
            if s := _SMEM.search(rest):
                current["shared_bytes"] = int(s.group(1))
            if c := _CMEM0.search(rest):
                current["constant_bytes"] = int(c.group(1))
            if st := _CUMULATIVE_STACK.search(rest):
                current["stack_bytes"] = max(current.get("stack_bytes", 0), int(st.group(1)))
    names = demangle_names([k["name"] for k in kernels]) if demangle else [k["name"] for k in kernels]
    return [KernelResources(**{**k, "name": n}) for k, n in zip(kernels, names)]


@functools.lru_cache(maxsize=1)
def _demangler() -> str | None:
    return shutil.which("cu++filt") or shutil.which("c++filt")


def demangle_names(names: list[str]) -> list[str]:
    """Readable names (``gelu_kernel(float const*, float*, int)``); mangled ones kept if no demangler."""
    tool = _demangler()
    mangled = [n for n in names if n.startswith("_Z")]
    if not tool or not mangled:
        return list(names)
    try:
        out = subprocess.run(
            [tool], input="\n".join(mangled) + "\n", capture_output=True, text=True, timeout=10
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return list(names)
    if len(out) != len(mangled):
        return list(names)
    table = {m: _tidy(d) for m, d in zip(mangled, out)}
    return [table.get(n, n) for n in names]


def _tidy(name: str) -> str:
    """Drop the ``void `` return type that demanglers print for template kernels."""
    return name[5:] if name.startswith("void ") else name
