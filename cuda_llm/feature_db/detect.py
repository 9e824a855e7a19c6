"""Telling which catalogue features a candidate uses, from its source and its compile report.

Detectors are data (rules in each feature's TOML, "(A and B) or C" through rule groups); this module only
evaluates them. Comments and string literals are blanked before matching, so a comment that says "no
tensor cores here" does not count; inline-PTX strings are matched separately (rule scope "asm"). How
well they do is measured on a labelled corpus (detector_eval.py, tests/detector_corpus/).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from cuda_llm.feature_db.catalogue import load_catalogue
from cuda_llm.feature_db.model import Detector, Feature, FlowRule, ResourceRule, RuleGroup, SassRule, SourceRule
from cuda_llm.feature_db.source_views import SourceViews, kernel_views, split_source  # noqa: F401 - split_source re-exported
from cuda_llm.results import KernelResources, SassSummary

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


def _sass_count(pattern: str, sass: SassSummary) -> int:
    rx = _regex(pattern)
    return sum(n for op, n in sass.ops.items() if rx.match(op))


def rule_matches(rule: SourceRule | ResourceRule | SassRule | FlowRule | RuleGroup, views: SourceViews,
                 kernels: Sequence[KernelResources], sass: SassSummary | None = None) -> bool:
    if isinstance(rule, RuleGroup):
        return all(rule_matches(r, views, kernels, sass) for r in rule.all_of) and \
            not any(rule_matches(r, views, kernels, sass) for r in rule.none_of)
    if isinstance(rule, SourceRule):
        if rule.scope == "asm":
            texts = [views.asm]
        elif rule.scope == "file":
            texts = [views.file or views.code]
        else:
            texts = [views.code, views.expanded] if views.expanded else [views.code]
        rx = _regex(rule.source)
        if rule.min_count == 1:
            return any(rx.search(t) is not None for t in texts)
        return any(sum(1 for _ in rx.finditer(t)) >= rule.min_count for t in texts)
    if isinstance(rule, SassRule):
        return sass is not None and _sass_count(rule.sass, sass) >= rule.min_count
    if isinstance(rule, FlowRule):
        return sass is not None and sass.flow.get(rule.flow, 0) >= rule.min_count
    op = _OPS[rule.op]
    if rule.resource == "kernels":
        return bool(kernels) and op(len(kernels), rule.value)
    return any(op(_resource_value(k, rule.resource), rule.value) for k in kernels)


def detector_matches(detector: Detector, views: SourceViews, kernels: Sequence[KernelResources],
                     sass: SassSummary | None = None) -> bool:
    if detector.any_of and not any(rule_matches(r, views, kernels, sass) for r in detector.any_of):
        return False
    if not all(rule_matches(r, views, kernels, sass) for r in detector.all_of):
        return False
    return not any(rule_matches(r, views, kernels, sass) for r in detector.none_of)


def detect_features(
    source: str, kernels: Sequence[KernelResources] = (), features: Iterable[Feature] | None = None,
    sass: SassSummary | None = None,
) -> set[str]:
    """Ids of the catalogue features this candidate uses: source rules one kernel at a time (a feature is
    found when its detector fires on some kernel), compile-report rules when ``kernels`` from ptxas are
    given, machine-code rules when the build's ``sass`` summary is given."""
    if features is None:
        features = load_catalogue()
    kernels = list(kernels)
    found: set[str] = set()
    views = kernel_views(source)
    for f in features:
        if any(detector_matches(f.detector, v, kernels, sass) for v in views):
            found.add(f.id)
    return found
