"""Detector benchmark: precision and recall of every catalogue detector on the labelled corpus
(tests/detector_corpus/*.cu) and the labelled naive baselines (tests/detector_corpus/baselines.toml).
CPU only. Writes bench-out/detector.md and prints the table.

    python benchmarks/detector_bench.py [--out bench-out] [--corpus tests/detector_corpus]

A feature passes at precision and recall >= 0.9 (the bar the credit needs: a feature is credited only
where its detector finds it). Misses are named so a wrong detector can be fixed, or a wrong label.
"""

from __future__ import annotations

import argparse
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BAR = 0.9


def baseline_kernels(corpus_dir: Path, known: set[str]):
    """The naive baselines as corpus kernels, labelled by baselines.toml."""
    from cuda_llm.feature_db.detector_eval import CorpusKernel
    from cuda_llm.tasks import load_all

    labels = tomllib.loads((corpus_dir / "baselines.toml").read_text())
    out = []
    for lt in load_all():
        lab = frozenset(labels.get(lt.task.name, ()))
        if lab - known:
            raise SystemExit(f"baselines.toml: {lt.task.name}: unknown feature ids {sorted(lab - known)}")
        path = Path(lt.task.baseline_path)
        out.append(CorpusKernel(name=f"baseline:{lt.task.name}", path=path, labels=lab, source=path.read_text()))
    return out


def main(argv: list[str] | None = None) -> int:
    from cuda_llm.feature_db import load_catalogue
    from cuda_llm.feature_db.detector_eval import load_corpus, score
    from cuda_llm.report.formats import fmt_fixed, md_table, render_table

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out")
    ap.add_argument("--corpus", type=Path, default=ROOT / "tests" / "detector_corpus")
    a = ap.parse_args(argv)

    catalogue = load_catalogue()
    known = {f.id for f in catalogue}
    t0 = time.perf_counter()
    corpus = load_corpus(a.corpus, known)
    kernels = corpus + baseline_kernels(a.corpus, known)
    scores = score(kernels, catalogue)
    seconds = time.perf_counter() - t0

    rows, failing = [], []
    for s in scores:
        ok = s.support > 0 and (s.precision or 0) >= BAR and (s.recall or 0) >= BAR
        if not ok:
            failing.append(s.feature)
        misses = ", ".join([f"FP {n}" for n in s.false_positives] + [f"FN {n}" for n in s.false_negatives]) or "-"
        rows.append([s.feature, s.support, s.tp, s.fp, s.fn, fmt_fixed(s.precision, 2), fmt_fixed(s.recall, 2),
                     "yes" if ok else "NO", misses])
    headers = ["feature", "support", "TP", "FP", "FN", "precision", "recall", f">= {BAR}", "misses"]
    head = (f"{len(corpus)} corpus kernels + {len(kernels) - len(corpus)} naive baselines, {len(catalogue)} detectors, "
            f"{seconds:.2f} s; {len(scores) - len(failing)}/{len(scores)} features at precision and recall >= {BAR}")
    print(head)
    print(render_table(headers, rows, align="lrrrrrrll"))
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "detector.md").write_text(f"# Detector precision and recall\n\n{head}\n\n"
                                       + md_table(headers, [[str(c) for c in r] for r in rows]) + "\n")
    if failing:
        print(f"below the bar: {', '.join(failing)}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
