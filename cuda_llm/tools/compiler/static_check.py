"""Static checks on the source: the entry point has the task's exact signature, no library does the
work, and no host-side trick (forking, sleeping, reading files, host threads, ending the process, raw
system calls, persisting-L2 settings) games the harness.

They run twice. ``check_source`` reads the text as written, before compiling: a candidate refused there
costs no compile and no GPU time. ``check_preprocessed`` reads the host pass of the preprocessor output
that the build keeps (``nvcc -keep``: ``<name>.cpp4.ii``), restricted to the lines that came from the
candidate's own file and numbered as in that file, so macros and token pasting (``sys##tem``) hide
nothing. The linked object's symbols are checked after that (symbols.py).

Comments and string literals are blanked first (line structure kept), so nothing fires on a comment that
mentions cuBLAS or on a printf text; the rules that read strings on purpose (the driver entry point's
name, inline assembly) read the unblanked text. Pure text analysis: no compiler, no task files read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cuda_llm.tasks.model import Task
from cuda_llm.results import StaticIssue


# ------------------------------------------------------------------------------------------ stripping
def strip_comments(source: str, *, strings: bool = True) -> str:
    """Blank out comments (and, if ``strings``, the contents of string and character literals), keeping
    every newline so that line numbers stay right. ``extern "C"`` keeps its ``"C"``."""
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        nxt = source[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = source.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and nxt == "*":
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", source[i:j]))
            i = j
        elif c == "R" and nxt == '"' and (i == 0 or not (source[i - 1].isalnum() or source[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', source[i:])
            if m:
                end = source.find(")" + m.group(1) + '"', i)
                j = n if end < 0 else end + len(m.group(1)) + 2
                out.append(_blank_literal(source[i:j], strings))
                i = j
            else:
                out.append(c)
                i += 1
        elif c in "\"'":
            if c == "'" and i > 0 and source[i - 1].isalnum() and (i + 1 < n and source[i + 1].isalnum()):
                out.append(c)   # digit separator 1'000'000
                i += 1
                continue
            j = i + 1
            while j < n and source[j] != c and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            j = min(j + 1, n)
            literal = source[i:j]
            out.append(literal if literal in ('"C"', '"C++"') else _blank_literal(literal, strings))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _blank_literal(literal: str, strings: bool) -> str:
    if not strings or len(literal) < 2:
        return literal
    q = literal[-1] if literal[-1] in "\"'" else literal[0]
    inner = re.sub(r"[^\n]", " ", literal[1:-1])
    return literal[0] + inner + q


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


# ------------------------------------------------------------------------------------------ rules
@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    what: str
    advice: str


_LIB_ADVICE = "write the computation as your own CUDA kernels; the harness refuses libraries that do the work"
FORBIDDEN_LIBRARIES: tuple[_Rule, ...] = (
    _Rule(re.compile(r"\bcublas\w*"), "cuBLAS", _LIB_ADVICE),
    _Rule(re.compile(r"\bcudnn\w*"), "cuDNN", _LIB_ADVICE),
    _Rule(re.compile(r"\bthrust\s*::\s*\w+"), "thrust", _LIB_ADVICE),
    _Rule(re.compile(r"\bcub\s*::\s*Device\w*"), "device-wide CUB",
          _LIB_ADVICE + " (block- and warp-level cub::Block*/cub::Warp* are allowed)"),
    _Rule(re.compile(r"\bcutlass\s*::\s*\w+\s*::\s*device\b(\s*::\s*\w+)?"), "CUTLASS device-level operators", _LIB_ADVICE),
    _Rule(re.compile(r"\bcufft\w*"), "cuFFT", _LIB_ADVICE),
    _Rule(re.compile(r"\bcusparse\w*"), "cuSPARSE", _LIB_ADVICE),
    _Rule(re.compile(r"\bcusolver\w*"), "cuSOLVER", _LIB_ADVICE),
)
_FORBIDDEN_HEADER = re.compile(
    r"^[ \t]*#[ \t]*include[ \t]*[<\"](?P<h>(cublas\w*|cudnn\w*|cufft\w*|cusparse\w*|cusolver\w*)(\.h|\.hpp)?"
    r"|thrust/[^>\"]+|cub/device/[^>\"]+|cutlass/\w+/device/[^>\"]+)[>\"]",
    re.M,
)

_SLEEP = "solve must return as soon as its work is queued; spin-waits and sleeps distort the timing"
_FILES = "all inputs arrive as device pointers; do not read or write files"
_PROC = "do the work in CUDA kernels launched from solve; starting processes or programs is not allowed"
HOST_TRICKS: tuple[_Rule, ...] = (
    _Rule(re.compile(r"\b(v?fork|posix_spawnp?)\s*\("), "process creation", _PROC),
    _Rule(re.compile(r"(?<![.>\w])(std\s*::\s*)?system\s*\("), "system()", _PROC),
    _Rule(re.compile(r"\bpopen\s*\("), "popen()", _PROC),
    _Rule(re.compile(r"\bexec(l|lp|le|v|vp|vpe|ve)\s*\("), "exec*()", _PROC),
    _Rule(re.compile(r"(?<![.>\w])(u|nano)?sleep\s*\("), "sleep", _SLEEP),
    _Rule(re.compile(r"\bthis_thread\s*::\s*sleep_(for|until)\b"), "std::this_thread::sleep", _SLEEP),
    _Rule(re.compile(r"\b(fopen|freopen|fdopen|mmap|openat|creat)\s*\("), "file access", _FILES),
    _Rule(re.compile(r"(?<![.>\w])(::\s*)?open\s*\("), "open()", _FILES),
    _Rule(re.compile(r"\b(std\s*::\s*)?[io]?fstream\b"), "file streams", _FILES),
    _Rule(re.compile(r"\b(secure_)?getenv\s*\(|\bsetenv\s*\("), "environment variables",
          "solve must depend only on its arguments; do not read the environment"),
    _Rule(re.compile(r"\bdl(open|sym)\s*\("), "dynamic loading",
          "do not load other libraries; the harness refuses code it cannot see"),
    _Rule(re.compile(r"(?<![.>\w])(signal|sigaction|kill)\s*\("), "signals",
          "do not install signal handlers or send signals; a crash must be reported, not hidden"),
    _Rule(re.compile(r"\bstd\s*::\s*(thread|jthread|async)\b|\bpthread_create\s*\("), "host threads",
          "solve must queue all its work before it returns; no host threads"),
    _Rule(re.compile(r"\bcudaDeviceReset\s*\("), "cudaDeviceReset()",
          "never reset the device: the harness owns the CUDA context"),
    _Rule(re.compile(r"__attribute__\s*\(\(\s*(constructor|destructor)"), "load-time constructors",
          "do not run code when the library is loaded; do everything inside solve"),
    _Rule(re.compile(r"(?<![.>\w])(std\s*::\s*|::\s*)?(exit|_exit|_Exit|quick_exit|abort|atexit|at_quick_exit)\s*\("),
          "ending the process",
          "return from solve instead (on bad input just return); a launch error is reported by the harness "
          "through cudaGetLastError"),
    _Rule(re.compile(r"(?<![.>\w])syscall\s*\(|\bSYS_\w+"), "raw system calls",
          "a candidate makes no system calls of its own; use the CUDA runtime"),
    _Rule(re.compile(r"\b(socket|connect|getaddrinfo|gethostbyname)\s*\("), "network access",
          "a candidate computes on the GPU only; no sockets"),
    _Rule(re.compile(r"\b_?Py(Run|Eval|Object|Import|Dict|List|Long|Float|Unicode|Bytes|Tuple|Module|Err|Sys|"
                     r"GILState|Thread|Capsule|Code|Frame|Interpreter|Mem|Type|Callable|Exc|Gen|Iter|Number|"
                     r"Sequence|Mapping|Set|Bool|Config|Status|Weakref|_)\w*"), "the Python C API",
          "a candidate must never reach into the process that loads it; compute in CUDA kernels only"),
    _Rule(re.compile(r"\bcuda(IpcOpenMemHandle|IpcGetMemHandle|LibraryLoadData|LibraryLoadFromFile)\b"),
          "CUDA calls outside the contract",
          "no other processes' memory and no code loaded at run time; write the kernels in this file"),
)

_L2 = ("the harness resets persisting-L2 state before every timed call and measures with a cold L2; "
       "do not raise the persisting-L2 limit or set access-policy windows (use ld.global.L2::evict_last or "
       "__ldg/__ldcs cache hints in the kernel instead)")
L2_RULES: tuple[_Rule, ...] = (
    _Rule(re.compile(r"\b(cudaLimitPersistingL2CacheSize|CU_LIMIT_PERSISTING_L2_CACHE_SIZE)\b"),
          "the persisting-L2 limit", _L2),
    _Rule(re.compile(r"\b(cudaCtxResetPersistingL2Cache|cuCtxResetPersistingL2Cache|cuCtxSetLimit)\b"),
          "persisting-L2 control", _L2),
    _Rule(re.compile(r"\b(accessPolicyWindow|cuda(Stream|Launch|KernelNode)AttributeAccessPolicyWindow|"
                     r"CU_\w*ATTRIBUTE_ACCESS_POLICY_WINDOW|cudaAccessProperty(Persisting|Streaming|Normal)|"
                     r"CU_ACCESS_PROPERTY_\w+|cudaAccessPolicyWindow|CUaccessPolicyWindow)\b"),
          "an access-policy window", _L2),
)
# cudaDeviceSetLimit may set these; any other limit (the persisting-L2 size, or a number) is refused
SAFE_LIMITS = {"cudaLimitStackSize", "cudaLimitPrintfFifoSize", "cudaLimitMallocHeapSize",
               "cudaLimitDevRuntimeSyncDepth", "cudaLimitDevRuntimePendingLaunchCount", "cudaLimitMaxL2FetchGranularity"}
_SET_LIMIT = re.compile(r"\bcudaDeviceSetLimit\s*\(\s*([^,()]*(?:\([^()]*\))?[^,()]*)\s*,")

# The driver functions a candidate may fetch with cudaGetDriverEntryPoint(ByVersion) / cuGetProcAddress:
# the TMA descriptor encoders (no -lcuda is linked; this is how a tensor map is made).
ALLOWED_DRIVER_ENTRY_POINTS = {"cuTensorMapEncodeTiled", "cuTensorMapEncodeIm2col", "cuTensorMapEncodeIm2colWide",
                               "cuTensorMapReplaceAddress", "cuGetErrorString", "cuGetErrorName"}
_ENTRY_POINT = re.compile(r"\b(cudaGetDriverEntryPoint(?:ByVersion)?|cuGetProcAddress(?:_v2)?)\s*\(\s*(\"(?:[^\"\\]|\\.)*\"(?:\s*\"(?:[^\"\\]|\\.)*\")*|[^,)]*)")

# Host inline assembly that makes system calls or emits raw bytes (PTX in device code never does either),
# and asm labels that rename a declaration to another symbol (``void quit(int) __asm__("exit");``).
_ASM = re.compile(r"\b(?:__asm__|__asm|asm)\b\s*(?:volatile|__volatile__|goto|inline|\s)*\(\s*((?:\"(?:[^\"\\]|\\.)*\"\s*)+)")
_ASM_FORBIDDEN = re.compile(r"\bsyscall\b|\bsysenter\b|\bint\s*\$?(0x80|128)\b|\bsvc\b|"
                            r"\.(byte|word|short|long|quad|inst|incbin|ascii|asciz|string|octa)\b")
_ASM_LABEL = re.compile(r"\)\s*(?:__asm__|__asm|asm)\s*\(\s*\"([A-Za-z_.$][\w.$@]*)\"\s*\)")
_INCLUDE_PATH = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"](?P<p>/[^>\"]*|[^>\"]*\.\.[^>\"]*)[>\"]", re.M)


# ------------------------------------------------------------------------------------------ checks
def check_source(source: str, task: Task, *, allow_libraries: bool = False) -> list[StaticIssue]:
    """Everything wrong with a candidate that can be seen without compiling it; [] when it is fine.

    ``allow_libraries`` is for the library yardsticks (``library.cu``) that call cuBLAS on purpose.
    """
    no_comments = strip_comments(source, strings=False)
    code = strip_comments(source, strings=True)
    issues: list[StaticIssue] = []
    issues += check_signature(code, task)
    if not allow_libraries:
        issues += _forbidden_headers(no_comments)
        issues += _scan(code, FORBIDDEN_LIBRARIES, "forbidden-library")
    issues += _scan(code, HOST_TRICKS, "host-trick")
    issues += _scan(code, L2_RULES, "l2-persistence")
    issues += _string_rules(no_comments)
    issues += [StaticIssue(rule="include", line=_line_of(no_comments, m.start()),
                           message=f"#include \"{m.group('p')}\": include only the CUDA toolkit's and the C++ "
                                   f"standard headers; the candidate is this one file")
               for m in _INCLUDE_PATH.finditer(no_comments)]
    return sorted(issues, key=lambda i: i.line or 0)


def _string_rules(text: str) -> list[StaticIssue]:
    """Rules that read string literals: the driver entry point's name, inline assembly, asm labels, and
    the limit passed to cudaDeviceSetLimit. ``text`` has comments blanked, strings kept."""
    issues: list[StaticIssue] = []
    code = strip_comments(text, strings=True)
    for m in _SET_LIMIT.finditer(code):
        limit = re.sub(r"\s+", "", m.group(1))
        if limit not in SAFE_LIMITS:
            issues.append(StaticIssue(
                rule="l2-persistence", line=_line_of(code, m.start()),
                message=f"cudaDeviceSetLimit({limit}, ...): only {', '.join(sorted(SAFE_LIMITS))} may be set; {_L2}"))
    for m in _ENTRY_POINT.finditer(text):
        arg = m.group(2).strip()
        names = re.findall(r'"((?:[^"\\]|\\.)*)"', arg)
        name = "".join(names) if names else None
        if name in ALLOWED_DRIVER_ENTRY_POINTS:
            continue
        shown = f'"{name}"' if name is not None else (arg or "a computed name")
        issues.append(StaticIssue(
            rule="driver-entry-point", line=_line_of(text, m.start()),
            message=(f"{m.group(1)}({shown}, ...): only the TMA descriptor functions may be fetched from the driver, "
                     f"by their literal name ({', '.join(sorted(ALLOWED_DRIVER_ENTRY_POINTS))}); other driver calls "
                     f"are outside the candidate contract")))
    for m in _ASM.finditer(text):
        body = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1)))
        body = re.sub(r"\\[ntrvf]", " ", body)          # C escapes separate instructions
        bad = _ASM_FORBIDDEN.search(body)
        if bad:
            issues.append(StaticIssue(
                rule="host-asm", line=_line_of(text, m.start()),
                message=(f"inline assembly with `{bad.group(0)}`: raw system calls and raw instruction bytes are not "
                         f"allowed; device code uses PTX instructions, host code calls the CUDA runtime")))
    for m in _ASM_LABEL.finditer(text):
        issues.append(StaticIssue(
            rule="host-asm", line=_line_of(text, m.start()),
            message=(f'asm label "{m.group(1)}": renaming a declaration to another symbol is not allowed; '
                     f"call functions by their own names")))
    return issues


# ------------------------------------------------------------------------------------------ preprocessed
_LINEMARKER = re.compile(r'^#(?:line)?\s*(\d+)\s+"((?:[^"\\]|\\.)*)"')


def own_lines(preprocessed: str, filename: str) -> dict[int, str]:
    """The preprocessor output that came from ``filename`` itself, by its line number there (text that
    macros expanded on a line stays on that line; lines from included headers are left out)."""
    out: dict[int, str] = {}
    ours = False
    line = 1
    for text in preprocessed.splitlines():
        m = _LINEMARKER.match(text)
        if m:
            line = int(m.group(1))
            path = m.group(2)
            ours = path == filename or path.endswith("/" + filename)
            continue
        if ours and text.strip():
            out[line] = f"{out[line]} {text}" if line in out else text
        line += 1
    return out


def check_preprocessed(preprocessed: str, filename: str) -> list[StaticIssue]:
    """The source rules on the candidate's own lines after preprocessing (host pass): what a macro, an
    include trick or token pasting spelled is seen as the compiler saw it. Signature rules are not rerun
    (the raw check already placed the entry point); ``forbidden-library`` issues are dropped by the caller
    in ``--library`` mode."""
    lines = own_lines(preprocessed, filename)
    if not lines:
        return []
    text = "\n".join(lines.get(i, "") for i in range(1, max(lines) + 1))
    code = strip_comments(text, strings=True)
    issues: list[StaticIssue] = []
    issues += _scan(code, FORBIDDEN_LIBRARIES, "forbidden-library")
    issues += _scan(code, HOST_TRICKS, "host-trick")
    issues += _scan(code, L2_RULES, "l2-persistence")
    issues += _string_rules(text)
    for i in issues:
        i.message += " (seen after preprocessing)"
    return sorted(issues, key=lambda i: i.line or 0)


def _without_preprocessor(code: str) -> str:
    return re.sub(r"^[ \t]*#.*$", lambda m: " " * len(m.group(0)), code, flags=re.M)


def _forbidden_headers(no_comments: str) -> list[StaticIssue]:
    return [
        StaticIssue(
            rule="forbidden-library",
            line=_line_of(no_comments, m.start()),
            message=f"#include <{m.group('h')}>: this library would do the work; {_LIB_ADVICE}",
        )
        for m in _FORBIDDEN_HEADER.finditer(no_comments)
    ]


def _without_includes(code: str) -> str:
    return re.sub(r"^[ \t]*#[ \t]*include\b.*$", lambda m: " " * len(m.group(0)), code, flags=re.M)


def _scan(code: str, rules: tuple[_Rule, ...], rule_name: str) -> list[StaticIssue]:
    """One issue per distinct offending name, at its first line (macros are scanned too, includes not)."""
    code = _without_includes(code)
    issues: list[StaticIssue] = []
    seen: set[str] = set()
    for rule in rules:
        for m in rule.pattern.finditer(code):
            name = re.sub(r"\s+", "", m.group(0)).rstrip("(")
            if name in seen:
                continue
            seen.add(name)
            issues.append(
                StaticIssue(rule=rule_name, line=_line_of(code, m.start()), message=f"{name} ({rule.what}): {rule.advice}")
            )
    issues.sort(key=lambda i: i.line or 0)
    return issues


# ------------------------------------------------------------------------------------------ signature
_TYPE_WORDS = {
    "const", "volatile", "unsigned", "signed", "int", "long", "short", "char", "float", "double", "bool",
    "void", "struct", "__half", "half", "__nv_bfloat16", "size_t",
}
_ALIASES = {"half": "__half", "int32_t": "int", "uint8_t": "unsigned char", "uint32_t": "unsigned int", "int64_t": "long long",
            "uint64_t": "unsigned long long", "uint": "unsigned int"}
_RESTRICT = {"__restrict__", "__restrict", "restrict"}
_NOT_DEFINITION = {"return", "else", "do", "case", "goto", "throw", "new", "delete", "sizeof", "co_return"}


@dataclass
class _Occurrence:
    line: int
    prefix: str        # declaration specifiers before the name
    params: str        # text between the parentheses
    definition: bool   # followed by a body
    in_extern_c_block: bool


def check_signature(code: str, task: Task) -> list[StaticIssue]:
    """The entry point must be defined once as ``extern "C" void <entry>(<exactly the task's types>)``."""
    want = [canonical_type(p.c_decl) for p in task.params]
    occ = _occurrences(_expand_simple_macros(code), task.entry)
    declared_c = any("extern" in o.prefix and '"C"' in o.prefix or o.in_extern_c_block for o in occ)
    definitions = [o for o in occ if o.definition]
    if not definitions:
        what = "is declared but never defined" if occ else "is not defined"
        return [StaticIssue(
            rule="missing-entry", line=occ[0].line if occ else None,
            message=f"the entry point {task.entry} {what}; define it as: {task.signature} {{ ... }}",
        )]
    best: list[StaticIssue] | None = None
    for o in definitions:
        problems = _definition_problems(o, want, task, declared_c)
        if not problems:
            return []
        if best is None:
            best = problems
    return best or []


def _definition_problems(o: _Occurrence, want: list[str], task: Task, declared_c: bool) -> list[StaticIssue]:
    out: list[StaticIssue] = []
    expect = f"the task needs exactly: {task.signature}"

    def issue(msg: str) -> None:
        out.append(StaticIssue(rule="signature", line=o.line, message=f"{task.entry}: {msg}; {expect}"))

    words = re.findall(r"[A-Za-z_]\w*", o.prefix)
    if {"__global__", "__device__"} & set(words) and "__host__" not in words:
        issue("the entry point must be a host function that launches kernels, not a __global__ or __device__ function")
    if "static" in words:
        issue("'static' hides the symbol from the harness; remove it")
    if not (declared_c or ("extern" in words and '"C"' in o.prefix)):
        issue('it is not extern "C", so its name is mangled and the harness cannot find it; put extern "C" in front')
    ret = [w for w in words if w not in _SPECIFIERS]
    if ret != ["void"] or "*" in o.prefix:
        returned = " ".join(ret) + ("*" if "*" in o.prefix else "")
        issue(f"it must return void, not {returned or 'nothing declared'}")
    got_params = _split_params(o.params)
    got = [canonical_type(p) for p in got_params]
    if got == ["void"] or got == [""]:
        got = []
    if got != want:
        if len(got) == len(want) and sorted(got) == sorted(want):
            issue(f"its parameters are in the wrong order ({', '.join(got)}); the harness passes ({', '.join(want)})")
        elif len(got) != len(want):
            issue(f"it takes {len(got)} parameter(s) ({', '.join(got) or 'none'}), the task passes {len(want)}")
        else:
            for idx, (g, w) in enumerate(zip(got, want), 1):
                if g != w:
                    name = task.params[idx - 1].name
                    issue(f"parameter {idx} ({name}) is `{g}`, it must be `{w}`")
    return out


_SPECIFIERS = {"extern", "C", "inline", "__inline__", "__forceinline__", "__host__", "__global__", "__device__",
               "static", "__attribute__", "visibility", "default", "used", "noinline", "__noinline__",
               "__launch_bounds__", "template", "typename", "constexpr"}


def _occurrences(code: str, entry: str) -> list[_Occurrence]:
    """Every place where ``entry(`` is declared or defined (calls are skipped)."""
    clean = _without_preprocessor(code)
    blocks = _extern_c_blocks(clean)
    found: list[_Occurrence] = []
    for m in re.finditer(rf"\b{re.escape(entry)}\s*\(", clean):
        start = m.start()
        # declaration specifiers: back to the previous ; { } or start
        k = start - 1
        while k >= 0 and clean[k] not in ";{}":
            k -= 1
        prefix = clean[k + 1:start]
        if not prefix.strip() or re.search(r"[=(),.!?<>+\-/%|^~\[\]]\s*$", prefix.replace("->", ".")) and "extern" not in prefix:
            continue
        last = re.findall(r"[A-Za-z_]\w*|\*|&", prefix)
        if not last or last[-1] in _NOT_DEFINITION:
            continue
        # the parameter list up to the matching parenthesis
        depth, j = 0, m.end() - 1
        while j < len(clean):
            if clean[j] == "(":
                depth += 1
            elif clean[j] == ")":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        params = clean[m.end():j]
        rest = clean[j + 1:j + 400]
        body = re.match(r"\s*(noexcept\b\s*)?(__attribute__\s*\(\(.*?\)\)\s*)?(\{)", rest, re.S)
        found.append(_Occurrence(
            line=_line_of(clean, start), prefix=prefix, params=params, definition=body is not None,
            in_extern_c_block=any(a <= start < b for a, b in blocks),
        ))
    return found


_OBJECT_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(?![\w(])[ \t]*(.*)$", re.M)


def _expand_simple_macros(code: str) -> str:
    """Substitute object-like macros (``#define EXPORT extern "C"``) so that the entry point is seen as the
    compiler sees it. Function-like macros are left alone. Replacements keep the text on one line."""
    macros = {m.group(1): m.group(2).strip() for m in _OBJECT_MACRO.finditer(code) if "\\" not in m.group(2)}
    if not macros:
        return code
    body = _without_preprocessor(code)
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, macros)) + r")\b")
    for _ in range(3):   # nested macros, bounded
        body, n = pattern.subn(lambda m: macros[m.group(1)], body)
        if not n:
            break
    return body


def _extern_c_blocks(code: str) -> list[tuple[int, int]]:
    spans = []
    for m in re.finditer(r'\bextern\s*"C"\s*\{', code):
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        spans.append((m.end(), j))
    return spans


def _split_params(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()] or [""]


def canonical_type(decl: str) -> str:
    """The type of one parameter declaration, spelled one way: ``float const * __restrict__ x`` ->
    ``const float*``. Parameter names, ``__restrict__`` and top-level const are ignored."""
    decl = re.sub(r"=.*$", "", decl)                       # default arguments
    tokens = re.findall(r"[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*|\*|&|\[|\]", decl)
    tokens = [re.sub(r"\s+", "", t) for t in tokens if t not in _RESTRICT]
    array = "[" in tokens
    tokens = [t for t in tokens if t not in ("[", "]") and not t.isdigit()]
    # drop the parameter name: a trailing identifier after a complete type
    if len(tokens) >= 2 and re.match(r"[A-Za-z_]", tokens[-1]) and tokens[-1] not in _TYPE_WORDS | {"const", "volatile"}:
        if any(t in _TYPE_WORDS or t == "*" or t == "&" or t in _ALIASES for t in tokens[:-1]) or re.match(r"[A-Za-z_]", tokens[-2]):
            tokens = tokens[:-1]
    if array:
        tokens.append("*")
    levels: list[list[str]] = [[]]
    for t in tokens:
        if t in ("*", "&"):
            levels.append([t])
        else:
            levels[-1].append(t)
    base = levels[0]
    # const on a by-value parameter is not part of the function's type
    const = [q for q in ("const", "volatile") if q in base] if len(levels) > 1 else []
    words = [_ALIASES.get(w, w) for w in base if w not in ("const", "volatile")]
    words = " ".join(words).split()
    if words and words[0] in ("unsigned", "signed") and len(words) == 1:
        words.append("int")
    if words[:1] == ["signed"]:
        words = words[1:]
    if "int" in words and any(w in words for w in ("long", "short")):
        words.remove("int")
    type_name = " ".join(const + words)
    pointers = ""
    for lvl_i, lvl in enumerate(levels[1:], 1):
        quals = [q for q in ("const", "volatile") if q in lvl[1:]]
        top = lvl_i == len(levels) - 1
        pointers += lvl[0] + ("" if top or not quals else " " + " ".join(quals) + " ")
    return (type_name + pointers).strip()
