"""`cuda-llm trace`: the timeline of a run's events (pure formatting and filters), and the command on a
real finished run (scripted LLM, real nvcc, GPU timings set by the test)."""

from __future__ import annotations

import json
import re

import pytest

from cuda_llm.cli import main
from cuda_llm.report.timeline import DECISIONS, EVENTS as KNOWN_EVENTS, describe, render, select

T = "2026-11-23T01:00:{:02d}.000000Z"
EVENTS = [
    {"timestamp": T.format(0), "event": "run_start", "task": "softmax", "device": "NVIDIA H100", "arch": "sm_90",
     "limits": {"max_rounds": 3, "n_candidates": 2}},
    {"timestamp": T.format(1), "event": "node_start", "node": "plan"},
    {"timestamp": T.format(2), "event": "decision", "kind": "features", "round": 1, "by": "planner",
     "candidates": {"r1c0": ["warp_shuffle"], "r1c1": ["vector_loads", "grid_stride_loop"]}},
    {"timestamp": T.format(3), "event": "llm_call", "role": "coder", "input_tokens": 1200, "output_tokens": 300,
     "latency_s": 4.25, "candidate": "r1c0", "response": "/runs/x/answers/coder-r1c0.md"},
    {"timestamp": T.format(5), "event": "evaluation", "candidate": "r1c0", "round": 1, "status": "ok",
     "median_ms": 0.2482, "speedup_over_parent": 7.5, "note": "passed 9/9 cases"},
    {"timestamp": T.format(6), "event": "evaluation", "candidate": "r1c1", "round": 1, "status": "compile_error",
     "median_ms": None, "note": "kernel.cu(12): error: identifier \"x\" is undefined"},
    {"timestamp": T.format(7), "event": "evaluation", "candidate": "r1c0-confirm", "round": 1, "status": "ok",
     "median_ms": 0.2490},
    {"timestamp": T.format(8), "event": "decision", "kind": "selection", "round": 1, "candidate": "r1c0",
     "replaced": True, "why": "confirmed", "best_before": "baseline", "best_before_ms": 1.86, "candidate_ms": 0.2482},
    {"timestamp": T.format(9), "event": "node_end", "node": "select", "duration_s": 0.5},
    {"timestamp": T.format(10), "event": "round_end", "round": 1, "best": "r1c0", "best_ms": 0.2482, "speedup": 7.5,
     "passed": 1, "candidates": 2, "plateau_count": 0, "tokens": 12345},
    {"timestamp": T.format(11), "event": "llm_call", "role": "planner", "input_tokens": 900, "output_tokens": 50,
     "latency_s": 1.0, "cached": True, "response": "/runs/x/answers/planner-r2.md"},
    {"timestamp": T.format(12), "event": "decision", "kind": "stop", "round": 2, "reason": "plateau", "text": "no gain"},
    {"timestamp": T.format(13), "event": "run_end", "finished": True, "stop_reason": "plateau", "best": "r1c0",
     "best_ms": 0.2482},
]


def test_every_event_reads_as_one_line():
    text = render(EVENTS, root="/runs/x")
    lines = text.splitlines()
    assert len(lines) == len(EVENTS) - 2                     # node start/end left out by default
    assert lines[0].startswith("    +0.0s") and "softmax on NVIDIA H100 (sm_90): up to 3 rounds x 2 candidates" in lines[0]
    assert "r1c0 warp_shuffle; r1c1 vector_loads, grid_stride_loop" in text
    assert "coder: 1,200 in / 300 out, 4.2 s  answers/coder-r1c0.md" in text          # path relative to the run
    assert "r1c0 ok 0.2482 ms (7.50x over parent): passed 9/9 cases" in text
    assert "r1c1 compile_error -: kernel.cu(12): error" in text
    assert "r1c0 0.2482 ms replaces baseline 1.860 ms: confirmed" in text
    assert "round 1: best r1c0 0.2482 ms (7.50x), 1/2 passed, plateau 0, 12,345 tokens" in text
    assert "(cached)" in text and "stop: plateau (no gain)" in text
    assert lines[-1].endswith("finished: plateau; best r1c0 0.2482 ms") and "+13.0s" in lines[-1]
    assert len(render(EVENTS, nodes=True).splitlines()) == len(EVENTS)
    assert "select 0.50 s" in render(EVENTS, nodes=True)


def test_filters_by_round_candidate_and_event_name():
    # the cached planner call after round 1 ended still belongs to round 1 (the last round named)
    assert [ev["event"] for _, ev in select(EVENTS, round_=2)] == ["decision", "run_end"]
    about = [ev.get("candidate") or ev.get("kind") or ev["event"] for _, ev in select(EVENTS, candidate="r1c0")]
    assert about == ["features", "r1c0", "r1c0", "r1c0-confirm", "r1c0", "round_end", "run_end"]   # its LLM call too
    assert {ev["event"] for _, ev in select(EVENTS, kinds=("evaluation",))} == {"evaluation"}
    assert select([], kinds=("evaluation",)) == []


def test_unknown_fields_and_events_do_not_break_the_line():
    assert describe({"event": "something_new", "a": 1, "b": {"c": [1, 2]}}) == "a 1; b c 1, 2"
    assert describe({"event": "decision", "kind": "odd", "x": 2}) == "odd: x 2"
    assert render([{"event": "baseline", "status": "ok", "median_ms": 1.0, "timestamp": "garbage"}]).endswith(
        "naive baseline ok 1.000 ms")


@pytest.mark.slow
def test_trace_command_on_a_finished_run(tmp_path, tmp_path_factory, monkeypatch, capsys):
    from fake_gpu_evaluator import softmax_source
    from test_graph_loop import run, shared_cache

    monkeypatch.setenv("CUDA_LLM_CACHE", str(shared_cache(tmp_path_factory)))
    out, _, _ = run(tmp_path, [softmax_source(v) for v in ("v5", "v6", "v2", "v3")], max_rounds=2)
    runs = str(tmp_path / "runs")
    assert main(["trace", "latest", "--runs-dir", runs]) == 0
    text = capsys.readouterr().out
    assert "run_start" in text and "decision/selection" in text and "finished: max_rounds; best r2c0" in text
    assert str(out.root) not in text                       # paths are shown relative to the run folder
    assert main(["trace", out.run_id[:22], "--runs-dir", runs, "--round", "2", "--events", "evaluation"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(" r2  evaluation " in line for line in lines)
    assert main(["trace", "latest", "--runs-dir", runs, "--events", "evaluations"]) == 2
    assert "unknown event name(s) evaluations" in capsys.readouterr().err
    assert main(["trace", "nope", "--runs-dir", runs]) == 2
    # --follow on a run nobody is driving prints what there is and returns
    assert main(["trace", "latest", "--runs-dir", runs, "--follow", "--events", "run_end"]) == 0
    assert capsys.readouterr().out.count("run_end") == 1


@pytest.mark.slow
def test_the_events_a_real_run_writes_read_truthfully(tmp_path, tmp_path_factory, monkeypatch):
    """A real graph run (scripted model, real nvcc, timings set by the test): r1c0 builds and passes; r1c1 does
    not build after its fix turn and is repaired. The timeline is read from the trace that run wrote, so a field
    renamed on either side fails here."""
    from fake_gpu_evaluator import softmax_source
    from test_graph_loop import run, shared_cache

    monkeypatch.setenv("CUDA_LLM_CACHE", str(shared_cache(tmp_path_factory)))
    k = {"r1c0": softmax_source("v5"), "r1c1": softmax_source("v6", broken=True), "r1c1f1": softmax_source("v3")}
    out, _, _ = run(tmp_path, k, max_rounds=1, max_repairs=1, compile_fix_turns=1)
    events = [json.loads(line) for line in (out.root / "trace.jsonl").read_text().splitlines()]
    assert {e["event"] for e in events} <= set(KNOWN_EVENTS)
    assert {e["kind"] for e in events if e["event"] == "decision"} <= set(DECISIONS)
    status = {e["candidate"]: e["status"] for e in events if e["event"] == "evaluation"}
    assert status["r1c0"] == "ok" and status["r1c1"] == "compile_error" and status["r1c1f1"] == "ok"
    lines = {e["candidate"]: describe(e) for e in events if e["event"] == "candidate"}
    assert lines["r1c0"].startswith("r1c0 (parent baseline, ") and lines["r1c0"].endswith("): builds")
    assert lines["r1c1"].endswith("): written after 1 fix turn")   # its last source was never checked
    assert ", repair of r1c1): " in lines["r1c1f1"]
    text = render(events, root=str(out.root), nodes=True)
    assert "r1c1 compile_error, back to the coder: " in text and "repair attempt 1 for r1c1" in text
    assert "r1c0 detected (credited): " in text and "parents for round 1: r1c0 from baseline (best: " in text
    assert "r1c1 compile_error -" in text and "r1c0 ok 5.040 ms (2.00x over parent)" in text
    # decisions and all other events are sentences, never Python literals
    assert not re.search(r"[{}]|\['|': |None", text), text
    # every file the run wrote has the mode the umask gives (report.md, config.json, best_so_far.cu... not 0600)
    from cuda_llm.paths import current_umask

    modes = {p.name: p.stat().st_mode & 0o777 for p in out.root.rglob("*") if p.is_file()}
    assert {"config.json", "best_so_far.cu", "best.cu", "report.md", "trace.jsonl"} <= set(modes)
    assert {n: oct(m) for n, m in modes.items() if m != 0o666 & ~current_umask()} == {}
