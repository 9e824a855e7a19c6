"""Condense an nvcc log into what an LLM needs to fix the code: the first errors, each with its line
number and the offending source line (with nvcc's caret when it printed one), and how many were left out.

A raw nvcc log repeats itself, points into temporary files and buries the cause under notes; the coder
repairs a kernel better from five clear errors than from two hundred lines. Pure text processing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cuda_llm.tools.compiler.ptxas import demangle_names

# kernel.cu(12): error: identifier "x" is undefined      (EDG front end; also "error #20-D:")
_EDG = re.compile(r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?P<sev>error|catastrophic error|fatal error)(?: #[\w-]+)?: (?P<msg>.*)$")
# kernel.cu:2:10: fatal error: x.h: No such file or directory  (host compiler)
_GCC = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>error|fatal error): (?P<msg>.*)$")
_PTXAS = re.compile(r"^(?P<tool>ptxas|nvlink|nvcc|fatbinary)\s+(?P<sev>error|fatal)\s*:\s*(?P<msg>.*)$", re.I)
# ptxas /tmp/x/r3c1.ptx, line 28; error   : Instruction 'wgmma.fence' not supported on .target 'sm_90'
_PTX_ERROR = re.compile(r"^ptxas\s+(?P<file>\S+?\.ptx),\s*line\s+(?P<line>\d+);\s*(?P<sev>error|fatal)\s*:\s*(?P<msg>.*)$", re.I)
_PTX_ABORTED = re.compile(r"^ptxas\s+fatal\s*:\s*Ptx assembly aborted due to errors", re.I)
_PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)")
_PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]+)"')
_UNDEF = re.compile(r"undefined reference to [`'](?P<sym>[^'`]+)'")
_IN_FUNCTION = re.compile(r"in function [`'](?P<fn>[^'`]+)'")
_INSTANTIATION = re.compile(r"^\s*detected during.*$")
_MANGLED = re.compile(r"_Z\w+")
_NOISE = re.compile(
    r"^\s*(\d+ errors? detected in the compilation|Remark: The warnings can be suppressed|compilation terminated|"
    r"collect2: error: ld returned|ptxas info|\d+ bytes stack frame|Compile time)"
)


@dataclass
class _Error:
    where: str                      # "kernel.cu:12" or "ptxas" or "link"
    message: str
    line: int | None = None         # line in the candidate source
    shown_line: str | None = None   # the source line as the compiler echoed it
    caret: int | None = None        # column of the caret in shown_line
    context: list[str] = field(default_factory=list)

    def key(self) -> tuple:
        return (self.where, self.message)


def condense_errors(log: str, source: str, *, max_errors: int = 5, filename: str = "kernel.cu",
                    ptx: str | None = None) -> str:
    """The first ``max_errors`` distinct errors of a failed compile, readable on their own.

    Each error names ``filename:line``, quotes the source line and puts a caret under the column the
    compiler pointed at. Linker errors (undefined references) say which call lacks a definition. Errors
    of ptxas in inline PTX keep the instruction and the message ("Instruction 'wgmma.fence' not supported
    on .target 'sm_90'"), placed on the candidate's line through the ``.loc`` directives of ``ptx`` (the
    PTX that nvcc kept; -lineinfo writes them) when it is given. When nothing in the log looks like an
    error (a crash of the compiler), the log's last lines are returned.
    """
    src_lines = source.splitlines()
    errors = _parse(log.splitlines(), filename, src_lines, ptx_lines=_ptx_line_map(ptx, filename) if ptx else {})
    if any(e.where != "ptxas" or "aborted due to errors" not in e.message for e in errors):
        errors = [e for e in errors if not (e.where == "ptxas" and "aborted due to errors" in e.message)]
    seen: set[tuple] = set()
    unique: list[_Error] = []
    for e in errors:
        if e.key() not in seen:
            seen.add(e.key())
            unique.append(e)
    if not unique:
        tail = [ln for ln in log.splitlines() if ln.strip() and not _NOISE.match(ln)][-15:]
        return "\n".join(tail)
    parts = [_render(e, src_lines) for e in unique[:max_errors]]
    more = len(unique) - max_errors
    if more > 0:
        parts.append(f"({more} more error{'s' if more != 1 else ''} not shown; fix these first)")
    return "\n".join(parts)


def _same_file(path: str, filename: str) -> bool:
    return path == filename or path.endswith("/" + filename)


def _ptx_line_map(ptx: str, filename: str) -> dict[int, int]:
    """PTX line -> candidate source line, from the ``.loc`` directive in force at each PTX line."""
    files = {m.group(1) for m in map(_PTX_FILE.match, ptx.splitlines()) if m and _same_file(m.group(2), filename)}
    out: dict[int, int] = {}
    current: int | None = None
    for n, text in enumerate(ptx.splitlines(), 1):
        m = _PTX_LOC.match(text)
        if m:
            current = int(m.group(2)) if m.group(1) in files and int(m.group(2)) > 0 else None
            continue
        if current is not None:
            out[n] = current
    return out


_INLINE_PTX_ADVICE = {
    "not supported on .target": "the instruction needs another target (sm_90a-only instructions such as wgmma and "
                                "setmaxnreg need the sm_90a build; see the build rules)",
}


def _parse(lines: list[str], filename: str, src_lines: list[str], ptx_lines: dict[int, int] | None = None) -> list[_Error]:
    out: list[_Error] = []
    pending_function: str | None = None
    i = 0
    while i < len(lines):
        ln = lines[i]
        m = _PTX_ERROR.match(ln.strip())
        if m:
            msg = m.group("msg").strip()
            line_no = (ptx_lines or {}).get(int(m.group("line")))
            where = f"{filename}:{line_no}" if line_no else "ptxas"
            hint = next((h for k, h in _INLINE_PTX_ADVICE.items() if k in msg), None)
            text = f"{msg} (in the PTX, from inline assembly or code on this line)" if line_no else f"{msg} (PTX line {m.group('line')})"
            if hint:
                text += f"; {hint}"
            out.append(_Error(where=where, message=text, line=line_no))
            i += 1
            continue
        m = _EDG.match(ln) or _GCC.match(ln)
        if m:
            path = m.group("file").strip()
            line_no = int(m.group("line"))
            ours = _same_file(path, filename)
            where = f"{filename}:{line_no}" if ours else f"{path}:{line_no}"
            err = _Error(where=where, message=m.group("msg").strip(), line=line_no if ours else None)
            col = m.groupdict().get("col")
            i += 1
            i = _read_echo(lines, i, err, col, gcc=_GCC.match(ln) is not None)
            while i < len(lines) and _INSTANTIATION.match(lines[i]):
                err.context.append(lines[i].strip())
                i += 1
            out.append(err)
            continue
        m = _UNDEF.search(ln)
        if m:
            sym = m.group("sym")
            fn = _IN_FUNCTION.search(ln)
            fn_name = fn.group("fn") if fn else pending_function
            out.append(_undefined(sym, fn_name, filename, src_lines))
            i += 1
            continue
        fn = _IN_FUNCTION.search(ln)
        if fn and "ld" in ln:
            pending_function = fn.group("fn")
            i += 1
            continue
        m = _PTXAS.match(ln.strip())
        if m:
            tool = m.group("tool").lower()
            msg = _MANGLED.sub(lambda mm: demangle_names([mm.group(0)])[0], m.group("msg").strip())
            out.append(_Error(where=tool, message=msg))
            i += 1
            continue
        if re.match(r"^\S*ld(\.\w+)?: .*error", ln) or ln.startswith("/usr/bin/ld:"):
            msg = ln.split(":", 1)[1].strip() if ":" in ln else ln
            if "in function" not in msg:
                out.append(_Error(where="link", message=msg))
        i += 1
    return out


def _read_echo(lines: list[str], i: int, err: _Error, col: str | None, *, gcc: bool) -> int:
    """Consume the source line and caret line that the compiler printed under an error."""
    if gcc:
        # "    2 | #include <x.h>" then "      |          ^~~~"
        if i < len(lines) and re.match(r"^\s*\d+ \| ", lines[i]):
            err.shown_line = lines[i].split(" | ", 1)[1]
            i += 1
            if i < len(lines) and re.match(r"^\s*\| ", lines[i]):
                caret_part = lines[i].split("| ", 1)[1]
                if "^" in caret_part:
                    err.caret = caret_part.index("^")
                i += 1
        elif col is not None:
            err.caret = int(col) - 1
        return i
    # EDG: the line indented by two spaces, then a line with only spaces and a caret
    if i + 1 < len(lines) and re.fullmatch(r"\s*\^\s*", lines[i + 1]) and lines[i].startswith("  "):
        err.shown_line = lines[i][2:]
        err.caret = max(lines[i + 1].index("^") - 2, 0)
        return i + 2
    return i


def _undefined(sym: str, fn_name: str | None, filename: str, src_lines: list[str]) -> _Error:
    """An undefined reference, located at the first line that calls the symbol."""
    base = sym.split("(", 1)[0].split("::")[-1].strip()
    line_no = None
    if base:
        call = re.compile(rf"\b{re.escape(base)}\s*(<[^;]*>)?\s*\(")
        decl = re.compile(rf"^\s*(extern\s*(\"C\"\s*)?)?(?!return\b)[A-Za-z_][\w:<>,\s*&]*?[\s*&]{re.escape(base)}\s*\(")
        hits = [n for n, text in enumerate(src_lines, 1) if call.search(text)]
        calls = [n for n in hits if not decl.match(src_lines[n - 1])]
        line_no = (calls or hits or [None])[0]
    where_fn = f" (called in {fn_name})" if fn_name else ""
    msg = (
        f"undefined reference to `{sym}`{where_fn}: it is declared but never defined; "
        f"define it in this file or stop calling it (no other object files or libraries are linked)"
    )
    if base.startswith("cuTensorMap") or base.startswith("cu") and base[2:3].isupper():
        msg = (f"undefined reference to `{sym}`{where_fn}: the CUDA driver library is not linked; fetch "
               f"{base} with cudaGetDriverEntryPointByVersion(\"{base}\", (void**)&fn, 12000, cudaEnableDefault, &q) "
               f"(see the build rules); only the TMA descriptor functions may be fetched")
    return _Error(where=f"{filename}:{line_no}" if line_no else "link", message=msg, line=line_no)


def _map_caret(shown: str, caret: int, text: str) -> int | None:
    """Move a caret from the compiler's echo of a line onto the source line. nvcc echoes the line after
    some macro expansion (``__global__`` becomes ``__attribute__((global))``), so match what follows the
    caret rather than the column."""
    suffix = shown[caret:].rstrip()
    if not suffix:
        return None
    pos = text.rstrip().rfind(suffix)
    return pos if pos >= 0 else None


def _render(e: _Error, src_lines: list[str]) -> str:
    head = f"{e.where}: error: {e.message}"
    out = [head]
    text = None
    caret = None
    if e.line is not None and 1 <= e.line <= len(src_lines):
        text = src_lines[e.line - 1]
        if e.shown_line is not None and e.shown_line.rstrip() == text.rstrip():
            caret = e.caret
        elif e.shown_line is not None and e.caret is not None:
            caret = _map_caret(e.shown_line, e.caret, text)
    elif e.shown_line is not None:
        text, caret = e.shown_line, e.caret
    if text is not None:
        gutter = str(e.line) if e.line is not None else ""
        width = max(len(gutter), 1)
        out.append(f"  {gutter:>{width}} | {text.rstrip()}")
        if caret is not None and caret >= 0:
            out.append(f"  {'':>{width}} | {' ' * caret}^")
    out.extend(f"    {c}" for c in e.context[:2])
    return "\n".join(out)


_WARN_EDG = re.compile(r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): warning(?: #[\w-]+)?: (?P<msg>.*)$")
_WARN_GCC = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:\d+:)? warning: (?P<msg>.*)$")
_WARN_TOOL = re.compile(r"^(?P<tool>ptxas|nvlink|nvcc)\s+warning\s*:\s*(?P<msg>.*)$", re.I)


def extract_warnings(log: str, *, filename: str = "kernel.cu", limit: int = 20) -> list[str]:
    """Distinct warnings, one line each (``kernel.cu:3: variable "t" was declared but never referenced``)."""
    found: list[str] = []
    for ln in log.splitlines():
        m = _WARN_EDG.match(ln) or _WARN_GCC.match(ln)
        if m:
            path = m.group("file").strip()
            name = filename if _same_file(path, filename) else path
            text = f"{name}:{m.group('line')}: {m.group('msg').strip()}"
        elif (t := _WARN_TOOL.match(ln.strip())) is not None:
            text = f"{t.group('tool').lower()}: {t.group('msg').strip()}"
        else:
            continue
        if text not in found:
            found.append(text)
        if len(found) >= limit:
            break
    return found
