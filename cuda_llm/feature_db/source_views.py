"""The texts the source rules of the detectors read: a candidate's code with comments and literals blanked,
its inline-PTX strings, one kernel at a time, as written and with the file's own macros expanded. Pure.

Why one kernel at a time: a rule such as "a row loaded, reduced and written in one pass" must not be
satisfied by pieces of four different kernels. Each kernel's view is the whole file with every *other*
kernel's body blanked (positions kept), so device functions, globals, macros and host code stay visible.

Why macros expanded too: candidates hide structure behind ``#define`` (``#define LOAD(i) tile[ty][i] =
A[...]``). The rules see both texts; a rule fires when it matches either (rules written against names
such as ``STAGES`` keep working on the unexpanded text).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from cuda_llm.feature_db.template_args import instantiate_templates, split_top_level

_ASM_START = re.compile(r"\b(?:asm|__asm__|__asm)\s*(?:volatile|__volatile__)?\s*\(")


@dataclass(frozen=True)
class SourceViews:
    code: str   # comments and string/char literals blanked (newlines kept)
    asm: str    # the string literals inside asm(...) statements, one per line
    expanded: str = ""   # ``code`` with the file's own macros expanded ("" when no macro changes it)
    file: str = ""       # the whole file's ``code`` (scope "file"); "" means ``code`` is the whole file


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def split_source(source: str) -> SourceViews:
    """One pass over the source: blank comments and literals; collect asm string contents."""
    out: list[str] = []
    asm_parts: list[str] = []
    i, n = 0, len(source)
    asm_depth = 0       # paren depth while inside asm( ... )
    while i < n:
        c = source[i]
        if source.startswith("//", i):
            j = source.find("\n", i)
            j = n if j < 0 else j
            out.append(_blank(source[i:j]))
            i = j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(_blank(source[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and source[j] != c and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            j = min(j + 1, n)
            if c == '"' and asm_depth > 0:
                asm_parts.append(source[i + 1 : j - 1])
            out.append(c + _blank(source[i + 1 : j - 1]) + (c if j - 1 > i else ""))
            i = j
        else:
            if asm_depth == 0:
                m = _ASM_START.match(source, i)
                if m and (i == 0 or not (source[i - 1].isalnum() or source[i - 1] == "_")):
                    asm_depth = 1
                    out.append(m.group(0))
                    i = m.end()
                    continue
            elif c == "(":
                asm_depth += 1
            elif c == ")":
                asm_depth -= 1
            out.append(c)
            i += 1
    # Adjacent literals ("cp.async" ".cg...") form one string; join the parts of one statement loosely.
    return SourceViews(code=drop_inactive_branches("".join(out)), asm="\n".join(asm_parts))


# ------------------------------------------------------------------------------------------ conditionals
_COND = re.compile(r"^[ \t]*#[ \t]*(ifdef|ifndef|if|elif|else|endif)\b(.*)$")
_DEFINED = re.compile(r"^\s*(!)?\s*defined\s*\(?\s*([A-Za-z_]\w*)\s*\)?\s*$")
_DEFINES = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", re.M)


def _condition(kind: str, rest: str, defined: set[str]) -> bool | None:
    """Whether a conditional's branch is compiled: True, False, or None when it depends on what the file
    cannot tell (a predefined or command-line macro, an expression)."""
    rest = rest.strip()
    if kind in ("ifdef", "ifndef"):
        name = rest.split()[0] if rest.split() else ""
        if not name or name.startswith("__"):
            return None
        return (name in defined) == (kind == "ifdef")
    if rest == "0":
        return False
    m = _DEFINED.match(rest)
    if m is None or m.group(2).startswith("__"):
        return None
    return (m.group(2) in defined) != bool(m.group(1))


def drop_inactive_branches(code: str) -> str:
    """``code`` with the branches of ``#ifdef X`` / ``#if defined(X)`` / ``#if 0`` that are not compiled
    blanked (lines kept): X is defined when the file #defines it, never by the command line, since a
    candidate is built without -D flags. A condition the file cannot decide (``__CUDA_ARCH__``, an
    expression) keeps every branch. Why: a file that typedefs its element type in ``#if defined(ENABLE_BF16)``
    does not use bfloat16 when built as it is."""
    if "#" not in code:
        return code
    defined = set(_DEFINES.findall(code))
    lines = code.split("\n")
    stack: list[tuple[bool, bool | None]] = []     # (this branch compiled, some earlier branch taken; None: unknown)
    out = []
    for line in lines:
        m = _COND.match(line)
        active = all(s[0] for s in stack)
        if m is None:
            out.append(line if active else _blank(line))
            continue
        kind, rest = m.group(1), m.group(2)
        if kind in ("ifdef", "ifndef", "if"):
            c = _condition(kind, rest, defined)
            stack.append((c is not False, None if c is None else c))
        elif kind == "elif" and stack:
            taken = stack[-1][1]
            c = _condition("if", rest, defined)
            if taken is None or c is None:
                stack[-1] = (True, None)
            else:
                stack[-1] = (not taken and c, taken or c)
        elif kind == "else" and stack:
            taken = stack[-1][1]
            stack[-1] = (True, None) if taken is None else (not taken, True)
        elif kind == "endif" and stack:
            stack.pop()
        out.append(line)
    return "\n".join(out)



# ------------------------------------------------------------------------------------------ kernels
_GLOBAL = re.compile(r"\b__global__\b")


def _match_paren(text: str, i: int, open_c: str, close_c: str) -> int:
    """Index just past the bracket that closes the one at ``i`` (len(text) when unbalanced)."""
    depth = 0
    for j in range(i, len(text)):
        c = text[j]
        if c == open_c:
            depth += 1
        elif c == close_c:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def kernel_bodies(code: str) -> list[tuple[int, int]]:
    """(start, end) of every ``__global__`` function definition's body ``{...}`` in blanked code."""
    out: list[tuple[int, int]] = []
    pos = 0
    while (m := _GLOBAL.search(code, pos)) is not None:
        paren = code.find("(", m.end())
        if paren < 0:
            break
        after = _match_paren(code, paren, "(", ")")
        k = after
        while k < len(code) and code[k] not in "{;":
            k += 1
        if k >= len(code) or code[k] == ";":          # a declaration, not a definition
            pos = max(k, m.end())
            continue
        end = _match_paren(code, k, "{", "}")
        out.append((k, end))
        pos = end
    return out


# ------------------------------------------------------------------------------------------ macros
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(\([^)]*\))?[ \t]*((?:.*\\\n)*.*)$", re.M)
_IDENT = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class _Macro:
    params: tuple[str, ...] | None     # None: object-like
    body: str


def _macros(code: str) -> dict[str, _Macro]:
    out: dict[str, _Macro] = {}
    for m in _DEFINE.finditer(code):
        body = re.sub(r"\\\n", " ", m.group(3)).strip()
        params = None
        if m.group(2) is not None:
            params = tuple(p.strip() for p in m.group(2)[1:-1].split(",") if p.strip())
        out[m.group(1)] = _Macro(params, body)
    return out


def _split_args(text: str) -> list[str]:
    return split_top_level(text)


def _substitute(macro: _Macro, args: list[str]) -> str:
    table = dict(zip(macro.params or (), args))
    body = re.sub(r"#\s*(\w+)", lambda m: m.group(1), macro.body.replace("##", ""))
    return _IDENT.sub(lambda m: table.get(m.group(0), m.group(0)), body)


def expand_macros(code: str, passes: int = 3) -> str:
    """``code`` (comments and literals already blanked) with its own ``#define``s expanded where used; the
    definitions themselves blanked. An expansion stays on the line of its use (line numbers drift only by
    what a macro's body spans). Includes are not followed: header macros stay as written."""
    macros = _macros(code)
    if not macros:
        return ""
    text = re.sub(r"^[ \t]*#.*(?:\\\n.*)*$", lambda m: re.sub(r"[^\n]", " ", m.group(0)), code, flags=re.M)
    names = re.compile(r"\b(" + "|".join(map(re.escape, sorted(macros, key=len, reverse=True))) + r")\b")
    for _ in range(passes):
        out: list[str] = []
        pos, changed = 0, False
        for m in names.finditer(text):
            if m.start() < pos:
                continue
            macro = macros[m.group(1)]
            if macro.params is None:
                out += [text[pos:m.start()], macro.body]
                pos, changed = m.end(), True
                continue
            k = m.end()
            while k < len(text) and text[k] in " \t":
                k += 1
            if k >= len(text) or text[k] != "(":
                continue
            close = _match_paren(text, k, "(", ")")
            args = _split_args(text[k + 1:close - 1])
            out += [text[pos:m.start()], _substitute(macro, args)]
            pos, changed = close, True
        out.append(text[pos:])
        text = "".join(out)
        if not changed:
            break
    return text


# ------------------------------------------------------------------------------------------ spellings
_INT_TYPE = r"(?:const\s+)?(?:unsigned\s+int|unsigned\s+long(?:\s+long)?|unsigned|uint\w*|u?int(?:32|64)_t|size_t|long\s+long|long|auto|short|int)"
# a scalar declared with a brace initializer (``size_t const row{blockIdx.y * T + ty};``, ``for (size_t k{0U};``)
_BRACE_INIT = re.compile(r"(?<![\w:.>])((?:const\s+|constexpr\s+)?(?:" + _INT_TYPE + r"|float|double)(?:\s+const)?)\s+"
                         r"([A-Za-z_]\w*)\s*\{([^{};]*)\}(?=\s*[;,])")
_LOOP_TYPE = re.compile(r"\bfor\s*\(\s*" + _INT_TYPE + r"\s+(?=\w+\s*=)")
_CAST = r"(?:\(\s*(?:int|unsigned|uint\w*|int\w*_t)\s*\)\s*|static_cast\s*<\s*\w+\s*>\s*)?"
_LANE = _CAST + r"threadIdx\.x\s*(?:%\s*(?:16|32|64|128|256|[A-Za-z_]\w*|\([^()]*\))|&\s*(?:15|31|63|127|255|0x[137]?[fF]{1,2}|\(\s*\w+\s*-\s*1\s*\)|\w*(?:MASK|mask|WARP|warp)\w*))"
_LANE_OF_TX = re.compile(r"(?<![\w\])])\(\s*" + _LANE + r"\s*\)|" + _LANE)
# a thread's column in a tile loaded cooperatively, pass by pass: ``(threadIdx.x + i * NUM_THREADS) % WIDTH``
_ROW_POSITION = re.compile(r"\(\s*threadIdx\.x\s*\+\s*[\w.]+\s*\*\s*[\w.]+\s*\)\s*%\s*(?:[A-Za-z_]\w*|\d+)\b")
_CAST_TX = re.compile(r"(?:\(\s*(?:int|unsigned|uint\w*|int\w*_t)\s*\)\s*|static_cast\s*<\s*\w+\s*>\s*)(?:\(\s*threadIdx\.x\s*\)|threadIdx\.x\b)")


_RANK = re.compile(r"\b\w+\s*\.\s*thread_rank\s*\(\s*\)")
_GROUP_RANK = re.compile(r"\b\w+\s*\.\s*meta_group_rank\s*\(\s*\)")
_GROUP_COUNT = re.compile(r"\b\w+\s*\.\s*meta_group_size\s*\(\s*\)")
_WARP_SIZE = re.compile(r"\b\w*warp\w*\s*\.\s*(?:size|num_threads)\s*\(\s*\)", re.I)
_DECL = re.compile(r"(?:\b" + _INT_TYPE + r"(?:\s+const)?\s+|,\s*)(\w+)\s*=\s*([^;,{}]*)(?=[;,])")
# the x thread index as an additive term of an expression: not scaled, divided or shifted
_VEC = r"(?:[248]|16|\w+::size|x128|\w*VEC\w*|\w*PACK\w*)\b"
_UNIT_TX = re.compile(r"(?:^|[+(]\s*)threadIdx\.x(?!\s*\)*\s*(?:\*(?!\s*" + _VEC + r")|[/%&^|]|>>|<<))")
_SCALED_TX = re.compile(r"(?:[*/%&^|]|>>|<<)\s*\(*\s*threadIdx\.x|threadIdx\.x[^()]*\)\s*(?:[/%&^|]|>>|<<|\*(?!\s*" + _VEC + r"))")
# the declared name, past qualifiers and alignment attributes (``alignas(alignof(float4))``, ``__align__(16)``)
# a variable that holds the y or z thread index as it is (``int ty = threadIdx.y;``)
_PURE_YZ = re.compile(r"(?:\b" + _INT_TYPE + r"\s+|,\s*)(\w+)\s*=\s*threadIdx\.([yz])\s*(?=[;,])")
_SHARED_NAME = re.compile(r"__shared__(?:[^;()]|\((?:[^()]|\([^()]*\))*\))*?\b([A-Za-z_]\w*)\s*\[")


def _replace_uses(text: str, start: int, name: str, index: str = "threadIdx.x") -> str:
    """``name`` read after ``start`` written as ``index`` (assignments to it are left alone), up to where the
    name is declared again (``for (int i = 1; ...)`` after ``int i = threadIdx.x``: another variable)."""
    again = re.compile(r"\b" + _INT_TYPE + r"(?:\s+const)?\s+" + re.escape(name) + r"\b").search(text, start)
    end = again.start() if again else len(text)
    tail = re.sub(r"(?<![\w.])" + re.escape(name) + r"\b(?!\s*(?:[-+*/%&|^]|<<|>>)?=[^=])", index, text[start:end])
    return text[:start] + tail + text[end:]


_DEVICE_FN = re.compile(r"__device__[^;{}()]*?\b([A-Za-z_]\w*)\s*\(([^()]*)\)\s*(?:const\s*)?\{")


def _param_names(params: str) -> list[str]:
    names = []
    for p in _split_args(params):
        m = re.search(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*$", p.split("=")[0])
        names.append(m.group(1) if m else "")
    return names


def _holds_tx(expr: str) -> bool:
    """An argument that holds the x thread index as an unscaled term (``threadIdx.x``, ``threadIdx.x - half *
    N``: a thread's index within its part of a split block), as a variable declared so is read."""
    return "threadIdx.x" in expr and bool(_UNIT_TX.search(expr)) and not _SCALED_TX.search(expr)


def _through_parameters(text: str) -> str:
    """A device function's parameter that every call passes the x thread index to (``loadFromGmem(...,
    innerColB)`` with ``innerColB`` an alias, or an expression holding it as an unscaled term) read as
    ``threadIdx.x`` in its body: helpers that take the thread's column keep their accesses visible."""
    for m in reversed(list(_DEVICE_FN.finditer(text))):   # from the end: a rewrite moves only what follows
        name, names = m.group(1), _param_names(m.group(2))
        calls = [c for c in re.finditer(r"\b" + re.escape(name) + r"\s*(?:<[^;(){}]*>)?\s*\(", text)
                 if c.start() != m.start(1)]
        if not calls or not names:
            continue
        args = [_split_args(text[c.end():_match_paren(text, c.end() - 1, "(", ")") - 1]) for c in calls]
        fixed = [i for i in range(len(names)) if names[i]
                 and all(len(a) == len(names) and _holds_tx(a[i]) for a in args)]
        if not fixed:
            continue
        body_start = m.end() - 1
        body_end = _match_paren(text, body_start, "{", "}")
        body = text[body_start:body_end]
        for i in fixed:
            body = re.sub(r"(?<![\w.])" + re.escape(names[i]) + r"\b(?!\s*(?:[-+*/%&|^]|<<|>>)?=[^=])", "threadIdx.x", body)
        text = text[:body_start] + body + text[body_end:]
    return text


def _x_aliases(text: str) -> str:
    """The x thread index's casts, lanes and row positions, and the variables holding it as an unscaled term,
    written as ``threadIdx.x`` (a few passes: an alias of an alias)."""
    for _ in range(3):
        text = _CAST_TX.sub("threadIdx.x", text)
        text = _LANE_OF_TX.sub("threadIdx.x", text)
        text = _ROW_POSITION.sub("threadIdx.x", text)
        changed = False
        for m in list(_DECL.finditer(text)):
            name, expr = m.group(1), m.group(2).strip()
            if name == "threadIdx" or "threadIdx.x" not in expr:
                continue
            if _UNIT_TX.search(expr) and not _SCALED_TX.search(expr):
                new = _replace_uses(text, m.end(), name)
                changed |= new != text
                text = new
        if not changed:
            break
    return text


def canonical(code: str) -> str:
    """The usual spellings of what the rules look for, written one way:

    - a scalar's brace initializer (``size_t const i{expr};``) as ``= expr``; loop counters of any integer
      type (``uint``, ``size_t``, ``auto``) as ``int``;
    - a warp tile's ``meta_group_rank()`` as ``(threadIdx.x / 32)``, its ``meta_group_size()`` as
      ``(blockDim.x / 32)``, its ``size()`` as ``32``;
    - the x thread index through a cast, a lane (``threadIdx.x % 32``, ``& 31``, a half warp ``% 16``), a
      thread's column in a tile loaded pass by pass (``(threadIdx.x + i * NUM_THREADS) % W``), a cooperative group's
      ``thread_rank()``, or a variable that holds it as an unscaled term (``const int tx = threadIdx.x``,
      ``int col = blockIdx.x * TILE + threadIdx.x``, ``for (int i = lane; ...)``; its later reads) as
      ``threadIdx.x``, so "consecutive threads on consecutive addresses" reads as a subscript or an
      address with ``threadIdx.x`` as an unscaled term;
    - a variable that holds the y (or z) thread index as it is (``int ty = threadIdx.y``) read as it;
    - a device function's parameter that every call passes the x thread index to, read as ``threadIdx.x``
      in its body;
    - shared arrays renamed ``__sm_<name>`` (declaration and uses), so a rule about global accesses can
      leave them out.

    Declarations are kept as written, so rules that follow a variable by name still work."""
    text = _BRACE_INIT.sub(lambda m: f"{m.group(1)} {m.group(2)} = {m.group(3).strip()}", code)
    text = _LOOP_TYPE.sub("for (int ", text)
    text = _RANK.sub("threadIdx.x", text)
    text = _GROUP_RANK.sub("(threadIdx.x / 32)", text)
    text = _GROUP_COUNT.sub("(blockDim.x / 32)", text)
    text = _WARP_SIZE.sub("32", text)
    text = _x_aliases(text)
    for m in reversed(list(_PURE_YZ.finditer(text))):
        text = _replace_uses(text, m.end(), m.group(1), f"threadIdx.{m.group(2)}")
    through = _through_parameters(text)
    if through != text:                 # a helper's parameter now reads as the index: follow its aliases too
        text = _x_aliases(through)
    for name in dict.fromkeys(_SHARED_NAME.findall(text)):
        text = re.sub(r"(?<![\w.])" + re.escape(name) + r"\b", "__sm_" + name, text)
    return text


# ------------------------------------------------------------------------------------------ views
def drop_unused_macros(text: str) -> str:
    """``text`` with the ``#define``s (a body, not a bare flag) that nothing in it uses blanked, positions kept.
    Why: a file that defines ``HALF2(v)`` or a ``cp.async.bulk`` wrapper and never calls it compiles to
    nothing of it, so its body must not count as the kernel using it. A macro used only inside another unused
    macro is unused too. Read per kernel view, so a macro only another kernel calls does not count either."""
    code = split_source(text).code
    spans = {}
    for m in _DEFINE.finditer(code):
        if m.group(3).strip():
            spans.setdefault(m.group(1), []).append((m.start(), m.end()))
    if not spans:
        return text
    unused: set[str] = set()
    while True:
        dead = [s for n in unused for s in spans[n]]
        found = set()
        for name, own in spans.items():
            if name in unused:
                continue
            rest = [s for s in own + dead]
            uses = (u.start() for u in re.finditer(r"(?<![\w.])" + re.escape(name) + r"\b", code))
            if not any(not any(a <= p < b for a, b in rest) for p in uses):
                found.add(name)
        if not found:
            break
        unused |= found
    for name in unused:
        for a, b in spans[name]:
            text = text[:a] + _blank(text[a:b]) + text[b:]
    return text


def _views_of(text: str, whole_code: str | None) -> SourceViews:
    v = split_source(drop_unused_macros(text))
    expanded = canonical(instantiate_templates(expand_macros(v.code) or v.code))
    return SourceViews(code=v.code, asm=v.asm, expanded="" if expanded == v.code else expanded,
                       file=whole_code or "")


@lru_cache(maxsize=64)
def kernel_views(source: str) -> tuple[SourceViews, ...]:
    """One view per ``__global__`` kernel (the file with the other kernels' bodies blanked), or one view of
    the whole file when it defines at most one kernel (cached: a candidate and its parent are read often)."""
    whole = split_source(source)
    bodies = kernel_bodies(whole.code)
    if len(bodies) <= 1:
        return (_views_of(source, None),)
    out = []
    for i in range(len(bodies)):
        parts, pos = [], 0
        for j, (s, e) in enumerate(bodies):
            if j == i:
                continue
            parts += [source[pos:s], "{", _blank(source[s + 1:e - 1]), "}"]
            pos = e
        parts.append(source[pos:])
        out.append(_views_of("".join(parts), whole.code))
    return tuple(out)
