"""Measuring the detectors on a labelled corpus: precision and recall per feature. Pure but for reading files.

A corpus is a folder of small .cu files, each starting with its labels:

    // features: smem_tiling, register_blocking        (or "// features: none")
    // arch: sm_90a                                     (optional: the target it compiles for)
    // case: what the kernel is, and which trap it sets

The labels list every catalogue feature the kernel uses, by the definitions in docs/features.md; every
other feature counts as absent. tests/detector_corpus/ is the project's corpus, tests/detector_corpus_public/
(tune/ and heldout/) kernels from public repositories; benchmarks/detector_bench.py prints the tables and
tests/test_detector_corpus.py holds the detectors the credit depends on to them.

What nvcc builds from each kernel (the ptxas report and the SASS opcode counts) is recorded once by
benchmarks/record_detector_artifacts.py under tests/fixtures/detector_artifacts/, so the build rules of the
detectors are scored too, without a compiler; a kernel without a recorded build is scored on its source.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel

from cuda_llm.feature_db.detect import detect_features
from cuda_llm.feature_db.model import Feature
from cuda_llm.results import KernelResources, SassSummary

ARTIFACTS_ROOT = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "detector_artifacts"

_FEATURES = re.compile(r"^//\s*features:\s*(.*)$", re.M)
_ARCH = re.compile(r"^//\s*arch:\s*(\S+)", re.M)


class CorpusError(ValueError):
    """A corpus file without labels, or labelled with ids the catalogue does not have."""


class Artifacts(BaseModel):
    """What nvcc built from one corpus kernel: the ptxas report, the SASS opcode counts and the facts of the
    PTX's dataflow (empty in a recording made before they were read)."""

    arch: str
    nvcc: str = ""
    kernels: list[KernelResources]
    ops: dict[str, int]
    flow: dict[str, int] = {}

    def sass(self) -> SassSummary:
        opcodes: dict[str, int] = {}
        for op, n in self.ops.items():
            base = op.split(".", 1)[0]
            opcodes[base] = opcodes.get(base, 0) + n
        return SassSummary(opcodes=opcodes, ops=self.ops, flow=self.flow)


class CorpusKernel(BaseModel):
    name: str
    path: Path
    labels: frozenset[str]
    arch: str = "sm_90"
    source: str
    build: Artifacts | None = None     # recorded build (None: scored on the source alone)


def artifacts_dir(corpus: Path) -> Path:
    """Where a corpus folder's recorded builds live: tests/fixtures/detector_artifacts/<its path under
    tests/, '/' as '__'>, or <folder>/build for a corpus outside the repository's tests/."""
    corpus = Path(corpus).resolve()
    tests = ARTIFACTS_ROOT.parents[1]
    try:
        rel = corpus.relative_to(tests)
    except ValueError:
        return corpus / "build"
    return ARTIFACTS_ROOT / "__".join(rel.parts)


def recorded_build(folder: Path, name: str) -> Artifacts | None:
    """The recorded build of one corpus kernel (benchmarks/record_detector_artifacts.py), or None."""
    path = artifacts_dir(folder) / f"{name}.json"
    return Artifacts.model_validate_json(path.read_text()) if path.is_file() else None


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
                                arch=arch.group(1) if arch else "sm_90", build=recorded_build(folder, path.stem)))
    if not out:
        raise CorpusError(f"{folder}: no .cu files")
    return out


def detect_kernel(k: CorpusKernel, features: Sequence[Feature], *, builds: bool = True) -> set[str]:
    """The features found in one corpus kernel: from its source, and from its recorded build when there
    is one and ``builds``."""
    if builds and k.build is not None:
        return detect_features(k.source, k.build.kernels, features, sass=k.build.sass())
    return detect_features(k.source, (), features)


def score(corpus: Sequence[CorpusKernel], features: Sequence[Feature], *, builds: bool = True) -> list[FeatureScore]:
    """Precision and recall of every feature's detector over the corpus (with the recorded builds unless
    ``builds`` is False: then the source rules alone)."""
    found = {k.name: detect_kernel(k, features, builds=builds) for k in corpus}
    scores = []
    for f in sorted(features, key=lambda f: f.id):
        tp = [k.name for k in corpus if f.id in k.labels and f.id in found[k.name]]
        fp = [k.name for k in corpus if f.id not in k.labels and f.id in found[k.name]]
        fn = [k.name for k in corpus if f.id in k.labels and f.id not in found[k.name]]
        scores.append(FeatureScore(feature=f.id, tp=len(tp), fp=len(fp), fn=len(fn), false_positives=fp,
                                   false_negatives=fn))
    return scores


class Totals(BaseModel):
    """Micro-averaged precision and recall over every (kernel, feature) pair of a corpus."""

    tp: int
    fp: int
    fn: int

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None


def totals(scores: Sequence[FeatureScore]) -> Totals:
    return Totals(tp=sum(s.tp for s in scores), fp=sum(s.fp for s in scores), fn=sum(s.fn for s in scores))
