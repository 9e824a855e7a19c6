"""Telling which catalogue features a candidate uses, from its source and its compile report.

Detectors are data (rules in each feature's TOML, "(A and B) or C" through rule groups); this module only
evaluates them. Comments and string literals are blanked before matching, so a comment that says "no
tensor cores here" does not count; inline-PTX strings are matched separately (rule scope "asm"). How
well they do is measured on a labelled corpus (detector_eval.py, tests/detector_corpus/).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from cuda_llm.feature_db.model import Detector, Feature, ResourceRule, RuleGroup, SourceRule
from cuda_llm.results import KernelResources

_ASM_START = re.compile(r"\b(?:asm|__asm__|__asm)\s*(?:volatile|__volatile__)?\s*\(")


@dataclass(frozen=True)
class SourceViews:
    code: str   # comments and string/char literals blanked (newlines kept)
    asm: str    # the string literals inside asm(...) statements, one per line


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
    return SourceViews(code="".join(out), asm="\n".join(asm_parts))


@lru_cache(maxsize=512)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _resource_value(k: KernelResources, name: str) -> int:
    if name == "spill_bytes":
        return k.spill_store_bytes + k.spill_load_bytes
    return int(getattr(k, name))


_OPS = {
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
}


def rule_matches(rule: SourceRule | ResourceRule | RuleGroup, views: SourceViews,
                 kernels: Sequence[KernelResources]) -> bool:
    if isinstance(rule, RuleGroup):
        return all(rule_matches(r, views, kernels) for r in rule.all_of) and \
            not any(rule_matches(r, views, kernels) for r in rule.none_of)
    if isinstance(rule, SourceRule):
        text = views.code if rule.scope == "code" else views.asm
        if rule.min_count == 1:
            return _regex(rule.source).search(text) is not None
        return sum(1 for _ in _regex(rule.source).finditer(text)) >= rule.min_count
    op = _OPS[rule.op]
    return any(op(_resource_value(k, rule.resource), rule.value) for k in kernels)


def detector_matches(detector: Detector, views: SourceViews, kernels: Sequence[KernelResources]) -> bool:
    if detector.any_of and not any(rule_matches(r, views, kernels) for r in detector.any_of):
        return False
    if not all(rule_matches(r, views, kernels) for r in detector.all_of):
        return False
    return not any(rule_matches(r, views, kernels) for r in detector.none_of)


def detect_features(
    source: str, kernels: Sequence[KernelResources] = (), features: Iterable[Feature] | None = None
) -> set[str]:
    """Ids of the catalogue features this candidate uses (source rules, and compile-report rules when
    ``kernels`` from ptxas are given)."""
    if features is None:
        from cuda_llm.feature_db.catalogue import load_catalogue

        features = load_catalogue()
    views = split_source(source)
    kernels = list(kernels)
    return {f.id for f in features if detector_matches(f.detector, views, kernels)}
