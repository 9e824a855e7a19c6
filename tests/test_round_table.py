"""The per-round table of benchmarks/agent_bench.py, read from a real run's report data: the conv2d run that
`cuda-llm demo` installs (recorded on an H100; its coder was a model answering the prompt files)."""

from __future__ import annotations

import argparse
import json

import pytest

from cuda_llm.report.round_table import RoundRow, gain_after_first, round_rows, round_table


@pytest.fixture(scope="module")
def conv2d(tmp_path_factory):
    from cuda_llm.commands import report_cmd
    from cuda_llm.runs.replay import install

    runs = tmp_path_factory.mktemp("runs")
    rundir = install(runs, "conv2d")
    p = argparse.ArgumentParser()
    report_cmd.add_arguments(p)
    return runs, rundir.run_id, p


def test_rounds_of_the_recorded_conv2d_run(conv2d, capsys):
    from cuda_llm.commands import report_cmd

    runs, run_id, p = conv2d
    assert report_cmd.run(p.parse_args([run_id, "--runs-dir", str(runs), "--json"])) == 0
    data = json.loads(capsys.readouterr().out)
    rows = round_rows(data)
    assert [r.round for r in rows] == [1, 2, 3] and all(r.passed == r.candidates == 2 for r in rows)
    ok = [c for c in data["candidates"] if c.get("status") == "ok" and c.get("median_ms")]
    for r in rows:     # the best so far: the fastest passing kernel of this round or an earlier one
        assert r.best_ms == min(c["median_ms"] for c in ok if c["round"] <= r.round)
    assert rows[-1].best_ms <= rows[0].best_ms and rows[0].naive_ms == data["summary"]["baseline_ms"]
    assert rows[-1].sol_pct is not None
    text = round_table({"conv2d": rows})
    assert f"| conv2d | 1 | 2/2 | {rows[0].best_ms:.4f} | {rows[0].best} |" in text
    assert f"{gain_after_first(rows):.1f}%" in text


def test_the_gain_and_the_ratios():
    rows = [RoundRow(round=1, best_ms=0.4, library_ms=0.2, naive_ms=8.0), RoundRow(round=2, best_ms=0.2)]
    assert gain_after_first(rows) == pytest.approx(100.0)
    assert rows[0].ratio(rows[0].library_ms) == pytest.approx(0.5) and rows[0].ratio(rows[0].naive_ms) == 20.0
    assert gain_after_first([RoundRow(round=1)]) is None and gain_after_first([]) is None
    assert "| t | 1 | 0/0 | - | - | - | - | - |" in round_table({"t": [RoundRow(round=1)]})
