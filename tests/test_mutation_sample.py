"""A small mutation run in every test run: the named mutants (bugs once missed) and two dozen mutants recorded
as killed by the full run (benchmarks/mutation_results/), drawn with a fixed seed across the modules, each
against the test that killed it. A weakened or deleted test lets one survive and fails here; the full run
(docs/mutation.md) stays a benchmark."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_named_mutants_and_a_sample_of_killed_mutants_stay_killed():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "mutation_bench.py"), "--named",
                        "--sample", "24", "--seed", "7"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "named: 12 mutants, 12 killed" in out, out[-4000:]
    assert "sample: 24 mutants, 0 survived" in out, out[-4000:]
