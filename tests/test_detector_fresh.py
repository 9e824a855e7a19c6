"""The fresh strong-model corpus, both batches (tests/detector_corpus_fresh/, tests/detector_corpus_fresh2/): each
manifest and its files agree on every label, the label corrections name real kernels and features with a reason,
every file's build is recorded, and the detectors hold their reading there, labels as written and corrected (the
readings are in docs/features.md: the first batch's first, taken before any detector was changed for it, was
precision 0.94 / recall 0.87 as written; the second batch, written after the fixes made on the first and held
out, read 0.92 / 0.92 as written once)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from cuda_llm.feature_db import load_catalogue
from cuda_llm.feature_db.detector_eval import detect_kernel, load_corpus

FRESH = Path(__file__).parent / "detector_corpus_fresh"
FRESH2 = Path(__file__).parent / "detector_corpus_fresh2"
# batch 1, after the fixes made on it (no longer held out): as written 0.96 / 0.95, corrected 0.99 / 0.95;
# batch 2, held out, its one reading: as written 0.92 / 0.92, corrected 0.99 / 0.92
FLOORS = {FRESH: {"as written": (0.95, 0.94), "corrected": (0.98, 0.94)},
          FRESH2: {"as written": (0.91, 0.91), "corrected": (0.98, 0.91)}}
BATCHES = pytest.mark.parametrize("folder", [FRESH, FRESH2], ids=["batch1", "batch2"])
# features a fix was written for on this corpus: found in every kernel labelled with them, and nowhere else
FIXED = ("block_rasterization", "decoupled_lookback_scan", "double_buffering", "persistent_kernel", "readonly_cache",
         "bank_conflict_padding", "radix_sort")


def _corrected(labels: dict[str, frozenset[str]], known: set[str], folder: Path) -> dict[str, frozenset[str]]:
    fixes = tomllib.loads((folder / "corrections.toml").read_text())
    out = dict(labels)
    for name, fix in fixes.items():
        assert name in labels, name
        assert fix["reason"].strip(), name
        add, remove = frozenset(fix.get("add", ())), frozenset(fix.get("remove", ()))
        assert (add or remove) and (add | remove) <= known, name
        assert not add & labels[name] and remove <= labels[name], name      # a correction changes a label
        out[name] = (labels[name] | add) - remove
    return out


@BATCHES
def test_the_manifest_and_the_files_agree(folder):
    manifest = tomllib.loads((folder / "manifest.toml").read_text())
    files = {p.stem: p.read_text() for p in folder.glob("*.cu")}
    assert set(manifest) == set(files) and len(files) == 24
    for name, text in files.items():
        labels = re.search(r"^// features: (.*)$", text, re.M).group(1).split(", ")
        assert sorted(labels) == sorted(manifest[name]["labels"]), name
        assert ("// arch: sm_90a" in text) == (manifest[name]["arch"] == "sm_90a"), name
        assert manifest[name]["task"], name


@BATCHES
def test_the_detectors_hold_their_reading_on_the_fresh_corpus(folder):
    catalogue = load_catalogue()
    known = {f.id for f in catalogue}
    kernels = load_corpus(folder, known)
    assert all(k.build is not None for k in kernels), "record the builds: benchmarks/record_detector_artifacts.py"
    found = {k.name: detect_kernel(k, catalogue) for k in kernels}
    written = {k.name: k.labels for k in kernels}
    for reading, labels in (("as written", written), ("corrected", _corrected(written, known, folder))):
        tp = sum(len(labels[n] & found[n]) for n in labels)
        fp = sum(len(found[n] - labels[n]) for n in labels)
        fn = sum(len(labels[n] - found[n]) for n in labels)
        precision, recall = tp / (tp + fp), tp / (tp + fn)
        floor_p, floor_r = FLOORS[folder][reading]
        assert precision >= floor_p and recall >= floor_r, (reading, precision, recall)
        for fid in FIXED if folder == FRESH else ():
            assert all((fid in labels[n]) == (fid in found[n]) for n in labels), (reading, fid)
