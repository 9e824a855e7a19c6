"""A kernel template's integer parameters read as the values the file builds it with. Pure.

Why: a shared tile declared ``s[BM][BK + OFFSET]`` is padded or not by the instantiation (``kernel<..., 8>``
pads by 8; one that keeps the default ``OFFSET = 0`` does not). The detectors' canonical view writes such a
parameter as its value where the file fixes one: its single explicit instantiation or launch
(``template __global__ void k<128, 8>(...)``, ``k<128, 8><<<...>>>``), else the parameter's default.
"""

from __future__ import annotations

import re

_TEMPLATE_KERNEL = re.compile(r"\btemplate\s*<")
# what follows a template's parameter list when it declares a kernel (launch bounds before or after `void`)
_HEAD = re.compile(r"\s*(?:__global__\b(?:[^;{(]|\([^()]*\))*?\bvoid|void\b[^;{(]*?__global__)\s+"
                   r"(?:__launch_bounds__\s*\([^()]*\)\s*)?([A-Za-z_]\w*)\s*\(")
_INT = re.compile(r"^\s*(?:\(\s*\w+\s*\)\s*)?(-?\d+)[uUlL]*\s*$")
_NON_TYPE = re.compile(r"^(?:const\s+)?(?:unsigned\s+int|unsigned|int|size_t|uint\w*|int\w*_t|long|short|bool|auto)"
                       r"\s+(?:const\s+)?([A-Za-z_]\w*)\s*(?:=\s*(.+))?$", re.S)


def _close(text: str, i: int, open_c: str, close_c: str) -> int:
    """Index just past the bracket closing the one at ``i`` (len(text) when unbalanced)."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == open_c:
            depth += 1
        elif text[j] == close_c:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def split_top_level(text: str, brackets: str = "([{") -> list[str]:
    """``text`` split at the commas outside any of ``brackets`` (opening ones; their closing partners are
    matched too), each part stripped: the arguments of a call (``([{``) or of a template (``(<[{``)."""
    closing = brackets.translate(str.maketrans("(<[{", ")>]}"))
    out, depth, cur = [], 0, []
    for c in text:
        if c in brackets:
            depth += 1
        elif c in closing:
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    out.append("".join(cur).strip())
    return out


def _split(text: str) -> list[str]:
    return [a for a in split_top_level(text, "(<[{") if a]


def _instantiations(code: str, name: str, skip: tuple[int, int]) -> set[tuple[str, ...]]:
    """The template argument lists ``name`` is instantiated or launched with outside its definition."""
    found = set()
    for m in re.finditer(r"(?<![\w.])" + re.escape(name) + r"\s*<", code):
        if skip[0] <= m.start() < skip[1] or code.startswith("<<<", m.end() - 1):
            continue
        end = _close(code, m.end() - 1, "<", ">")
        after = code[end:end + 8].lstrip()
        if after.startswith("(") or after.startswith("<<<"):
            found.add(tuple(_split(code[m.end():end - 1])))
    return found


def instantiate_templates(code: str) -> str:
    """``code`` with each ``__global__`` template's integer parameters written as their values inside its
    definition, where the file fixes them (one distinct instantiation, or the default); unchanged otherwise."""
    edits: list[tuple[int, int, str]] = []
    for m in _TEMPLATE_KERNEL.finditer(code):
        params_end = _close(code, m.end() - 1, "<", ">")
        head = _HEAD.match(code, params_end, params_end + 400)
        if head is None:
            continue
        name = head.group(1)
        paren = head.end() - 1
        brace = _close(code, paren, "(", ")")
        while brace < len(code) and code[brace] not in "{;":
            brace += 1
        if brace >= len(code) or code[brace] == ";":
            continue
        end = _close(code, brace, "{", "}")
        args = _instantiations(code, name, (m.start(), end))
        chosen = next(iter(args)) if len(args) == 1 else ()
        if len(args) > 1:
            continue
        values: dict[str, str] = {}
        for i, p in enumerate(_split(code[m.end():params_end - 1])):
            pm = _NON_TYPE.match(p)
            if pm is None:
                continue
            given = chosen[i] if i < len(chosen) else pm.group(2)
            lit = _INT.match(given) if given else None
            if lit is not None:
                values[pm.group(1)] = lit.group(1)
        if values:
            edits.append((params_end, end, re.sub(
                r"(?<![\w.])(" + "|".join(map(re.escape, values)) + r")\b", lambda v, table=values: table[v.group(1)],
                code[params_end:end])))
    for start, end, text in reversed(edits):
        code = code[:start] + text + code[end:]
    return code
