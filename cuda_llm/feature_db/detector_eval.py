"""Measuring the detectors on a labelled corpus: precision and recall per feature. Pure but for reading files.

A corpus is a folder of small .cu files, each starting with its labels:

    // features: smem_tiling, register_blocking        (or "// features: none")
    // arch: sm_90a                                     (optional: the target it compiles for)
    // case: what the kernel is, and which trap it sets

The labels list every catalogue feature the kernel uses, by the definitions in docs/features.md; every
other feature counts as absent. tests/detector_corpus/ is the project's corpus; benchmarks/detector_bench.py
prints the table and tests/test_detector_corpus.py holds the detectors the credit depends on to it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel

from cuda_llm.feature_db.detect import detect_features
from cuda_llm.feature_db.model import Feature

_FEATURES = re.compile(r"^//\s*features:\s*(.*)$", re.M)
_ARCH = re.compile(r"^//\s*arch:\s*(\S+)", re.M)


class CorpusError(ValueError):
    """A corpus file without labels, or labelled with ids the catalogue does not have."""


class CorpusKernel(BaseModel):
    name: str
    path: Path
    labels: frozenset[str]
    arch: str = "sm_90"
    source: str


class FeatureScore(BaseModel):
    feature: str
    tp: int
    fp: int
    fn: int
    false_positives: list[str]     # kernel names
    false_negatives: list[str]

    @property
    def support(self) -> int:
        """Kernels that use the feature."""
        return self.tp + self.fn

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None


def load_corpus(folder: Path, known: Iterable[str] | None = None) -> list[CorpusKernel]:
    """Every labelled kernel of a folder, sorted by name; unknown feature ids are refused."""
    ids = set(known) if known is not None else None
    out = []
    for path in sorted(Path(folder).glob("*.cu")):
        text = path.read_text()
        m = _FEATURES.search(text)
        if m is None:
            raise CorpusError(f"{path}: no '// features: ...' line (list the features it uses, or 'none')")
        raw = [t.strip() for t in m.group(1).split(",") if t.strip()]
        labels = frozenset() if raw == ["none"] else frozenset(raw)
        if ids is not None and labels - ids:
            raise CorpusError(f"{path}: unknown feature ids {sorted(labels - ids)}")
        arch = _ARCH.search(text)
        out.append(CorpusKernel(name=path.stem, path=path, labels=labels, source=text,
                                arch=arch.group(1) if arch else "sm_90"))
    if not out:
        raise CorpusError(f"{folder}: no .cu files")
    return out


def score(corpus: Sequence[CorpusKernel], features: Sequence[Feature]) -> list[FeatureScore]:
    """Precision and recall of every feature's detector over the corpus (source rules only)."""
    found = {k.name: detect_features(k.source, (), features) for k in corpus}
    scores = []
    for f in sorted(features, key=lambda f: f.id):
        tp = [k.name for k in corpus if f.id in k.labels and f.id in found[k.name]]
        fp = [k.name for k in corpus if f.id not in k.labels and f.id in found[k.name]]
        fn = [k.name for k in corpus if f.id in k.labels and f.id not in found[k.name]]
        scores.append(FeatureScore(feature=f.id, tp=len(tp), fp=len(fp), fn=len(fn), false_positives=fp,
                                   false_negatives=fn))
    return scores
