"""The public corpus's manifest (tests/detector_corpus_public/): labels are catalogue ids, the halves follow
the fixed split rule, every kernel names its source. With the mirrors at hand ($CUDA_LLM_PUBLIC_MIRROR),
the written files load as a corpus with the manifest's labels. No detector runs here: the held-out half
is scored by the benchmark, never tuned on."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from cuda_llm.feature_db import load_catalogue
from cuda_llm.feature_db.detector_eval import load_corpus

HERE = Path(__file__).parent / "detector_corpus_public"
_spec = importlib.util.spec_from_file_location("public_corpus", HERE / "materialize.py")
materialize = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = materialize                 # pydantic resolves the models' annotations there
_spec.loader.exec_module(materialize)

ENTRIES = materialize.load_manifest()
IDS = {f.id for f in load_catalogue()}


def test_the_corpus_is_big_and_labelled_with_catalogue_ids():
    assert len(ENTRIES) >= 48
    unknown = {e.name: sorted(set(e.labels) - IDS) for e in ENTRIES if set(e.labels) - IDS}
    assert not unknown
    assert all(len(set(e.labels)) == len(e.labels) for e in ENTRIES)
    assert len({e.name for e in ENTRIES}) == len(ENTRIES)


def test_the_halves_follow_the_split_rule_and_are_balanced_per_kind():
    materialize.check(ENTRIES)
    for batch in {e.batch for e in ENTRIES}:      # each batch is split among its own kernels
        own = [e for e in ENTRIES if e.batch == batch]
        per_kind = Counter((e.kind, e.half) for e in own)
        for kind in {e.kind for e in own}:
            assert abs(per_kind[(kind, "tune")] - per_kind[(kind, "heldout")]) <= 1, (batch, kind)
        halves = Counter(e.half for e in own)
        assert abs(halves["tune"] - halves["heldout"]) <= 1, batch


def test_a_half_that_breaks_the_rule_is_refused():
    moved = [e.model_copy(update={"half": "heldout" if e.half == "tune" else "tune"}) if i == 0 else e
             for i, e in enumerate(ENTRIES)]
    with pytest.raises(SystemExit, match="split rule"):
        materialize.check(moved)


def test_a_later_batch_never_moves_an_earlier_kernel():
    before = materialize.split_rule(ENTRIES)
    added = ENTRIES[0].model_copy(update={"name": "aaa_added_later", "batch": max(e.batch for e in ENTRIES) + 1})
    after = materialize.split_rule([*ENTRIES, added])
    assert all(after[n] == h for n, h in before.items())


def test_every_kernel_names_its_source():
    for e in ENTRIES:
        assert re.fullmatch(r"[0-9a-f]{40}", e.commit), e.name
        assert e.licence.split(" ", 1)[0] in {"MIT", "BSD-2-Clause", "BSD-3-Clause", "Apache-2.0", "GPL-3.0", "LGPL-3.0"}, e.name   # SPDX id (where the file is)
        assert e.parts and all(1 <= a <= b for p in e.parts for a, b in p.lines), e.name
        assert e.case and e.kind, e.name


@pytest.mark.skipif(not os.environ.get("CUDA_LLM_PUBLIC_MIRROR"), reason="needs the repositories' mirrors")
def test_the_written_files_load_with_the_manifest_labels(tmp_path):
    materialize.main(["--mirror", os.environ["CUDA_LLM_PUBLIC_MIRROR"], "--out", str(tmp_path)])
    written = {k.name: k for half in materialize.HALVES for k in load_corpus(tmp_path / half, IDS)}
    assert {n: set(k.labels) for n, k in written.items()} == {e.name: set(e.labels) for e in ENTRIES}


def test_retired_batches_are_tuning_data_and_later_heldout_halves_are_held_out():
    first, held = ENTRIES[0], materialize.FIRST_HELD_OUT_BATCH
    assert materialize.scored_as(first.model_copy(update={"half": "heldout", "batch": held - 1})) == "tune"
    assert materialize.scored_as(first.model_copy(update={"half": "heldout", "batch": held})) == "heldout"
    assert materialize.scored_as(first.model_copy(update={"half": "tune", "batch": held})) == "tune"
    assert all(materialize.scored_as(e) == "tune" for e in ENTRIES if e.batch < held)


def test_writing_again_removes_the_files_the_manifest_no_longer_names(tmp_path, monkeypatch):
    monkeypatch.setattr(materialize, "source_text", lambda entry, mirror: "__global__ void k() {}")
    (tmp_path / "tune").mkdir()
    (tmp_path / "tune" / "renamed_away.cu").write_text("// old")
    moved = next(e for e in ENTRIES if e.half == "heldout")
    (tmp_path / "tune" / f"{moved.name}.cu").write_text("// was in the other half")
    materialize.main(["--mirror", str(tmp_path), "--out", str(tmp_path)])
    assert not (tmp_path / "tune" / "renamed_away.cu").exists()
    assert not (tmp_path / "tune" / f"{moved.name}.cu").exists() and (tmp_path / "heldout" / f"{moved.name}.cu").exists()
    assert len(list(tmp_path.glob("*/*.cu"))) == len(ENTRIES)


def _bench():
    spec = importlib.util.spec_from_file_location("detector_bench", HERE.parents[1] / "benchmarks" / "detector_bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_benchmark_says_the_held_out_set_is_empty_without_a_later_batch(tmp_path, capsys):
    batch1 = [e for e in ENTRIES if e.batch == 1]
    for e in batch1[:2]:
        (tmp_path / e.half).mkdir(exist_ok=True)
        (tmp_path / e.half / f"{e.name}.cu").write_text("// features: none\n__global__ void k(float *x) { x[0] = 1.f; }\n")
    rc = _bench().main(["--corpora", "tune,heldout", "--public", str(tmp_path), "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "tuning data" in out and "2 kernels" in out
    assert "held-out set: empty" in out and "held-out set: empty" in (tmp_path / "out" / "detector.md").read_text()


def test_the_benchmark_refuses_a_file_the_manifest_does_not_name(tmp_path):
    (tmp_path / "tune").mkdir()
    (tmp_path / "tune" / "not_in_the_manifest.cu").write_text("// features: none\n__global__ void k() {}\n")
    with pytest.raises(SystemExit, match="not in manifest.toml"):
        _bench().main(["--corpora", "tune", "--public", str(tmp_path), "--out", str(tmp_path / "out")])


def test_the_held_out_table_takes_the_batches_asked_for_and_never_names_its_misses(tmp_path, capsys):
    # a held-out kernel of the first batch still held out and one of a retired batch, written with no code: every
    # label is a miss; the retired one is tuning data, never in the held-out table
    held, retired = materialize.FIRST_HELD_OUT_BATCH, materialize.FIRST_HELD_OUT_BATCH - 1
    picked = {b: next(e for e in ENTRIES if e.batch == b and e.half == "heldout" and e.labels) for b in (held, retired)}
    (tmp_path / "heldout").mkdir()
    for e in picked.values():
        (tmp_path / "heldout" / f"{e.name}.cu").write_text(
            f"// features: {', '.join(e.labels)}\n__global__ void k(float *x) {{ x[0] = 1.f; }}\n")
    bench = _bench()
    bench.main(["--corpora", "heldout", "--public", str(tmp_path), "--out", str(tmp_path / "o"), "--held-out-batches", str(held)])
    out = capsys.readouterr().out
    assert f"heldout halves of batch {held}): 1 kernels" in out
    assert picked[held].name not in out and "(not named)" in out
    bench.main(["--corpora", "heldout", "--public", str(tmp_path), "--out", str(tmp_path / "o"), "--held-out-names"])
    out = capsys.readouterr().out
    assert "batches still held out): 1 kernels" in out and picked[held].name in out
    assert picked[retired].name not in out
