"""Run directory, trace, report and console progress: what a person and a resumed run find on disk."""

from __future__ import annotations

import io
import os
import re
import stat
import subprocess
import sys
import threading

import pytest

from cuda_llm.report.progress import ConsoleProgress
from cuda_llm.report.markdown import CandidateSummary, RoundSummary, RunSummary, final_table, write_report
from cuda_llm.runs.rundir import RunDir, RunNotFoundError
from cuda_llm.runs.trace import open_trace, read_trace
from cuda_llm.results import CompileResult, EvalResult, Status, TimingResult


def result(cid: str, ms: float = 0.5, log: str = "ptxas info: Used 32 registers") -> EvalResult:
    timing = TimingResult(sizes={"n": 1024}, median_ms=ms, min_ms=ms, mean_ms=ms, iqr_ms=0.01, rse=0.005,
                          samples_ms=[ms] * 3, repetitions=3, stop_reason="rse")
    return EvalResult(task="gelu", candidate=cid, source_hash="ab12", status=Status.ok,
                      compile=CompileResult(ok=True, arch="sm_90", source_hash="ab12", log=log),
                      timing=timing, baseline_ms=1.0)


# -- RunDir
def test_create_names_and_lays_out_the_run(tmp_path):
    rd = RunDir.create(tmp_path / "runs", "softmax")
    assert re.fullmatch(r"\d{8}-\d{6}-softmax-[0-9a-f]{4}", rd.run_id)
    assert rd.root == tmp_path / "runs" / rd.run_id
    assert all((rd.root / d).is_dir() for d in ("candidates", "prompts", "answers"))
    assert (rd.trace_path.name, rd.checkpoint_path.name, rd.config_path.name, rd.best_path.name,
            rd.report_path.name) == ("trace.jsonl", "checkpoint.sqlite", "config.json", "best.cu", "report.md")
    other = RunDir.create(tmp_path / "runs", "/some/folder/my task/")
    assert other.run_id != rd.run_id and "-my-task-" in other.run_id
    with pytest.raises(FileExistsError, match="resume"):
        RunDir.create(tmp_path / "runs", "softmax", run_id=rd.run_id)


def test_open_by_id_path_prefix_latest_and_clear_error(tmp_path):
    runs = tmp_path / "runs"
    with pytest.raises(RunNotFoundError, match="no runs in .*cuda-llm optimize"):
        RunDir.open("nope", runs)
    a = RunDir.create(runs, "gelu", run_id="20260101-000000-gelu-aaaa")
    b = RunDir.create(runs, "gelu", run_id="20260102-000000-gelu-bbbb")
    for rd in (a, b):
        rd.save_config({"task": "gelu"})
    assert RunDir.open(a.run_id, runs).root == a.root
    assert RunDir.open(str(b.root), tmp_path / "elsewhere").root == b.root.resolve()
    assert RunDir.open("20260101", runs).run_id == a.run_id
    assert RunDir.open("latest", runs).run_id == b.run_id
    with pytest.raises(RunNotFoundError) as exc:
        RunDir.open("20260103-missing", runs)
    msg = str(exc.value)
    assert "20260103-missing" in msg and msg.index(b.run_id) < msg.index(a.run_id)  # newest first
    with pytest.raises(RunNotFoundError, match="matches 2 runs"):
        RunDir.open("2026010", runs)


def test_candidates_results_prompts_and_config_round_trip(tmp_path):
    rd = RunDir.create(tmp_path, "gelu")
    p = rd.write_candidate("r1c2", "__global__ void k() {}\n")
    assert p == rd.root / "candidates" / "r1c2.cu" and p.read_text().startswith("__global__")
    assert rd.read_result("r1c2") is None
    rd.write_result("r1c2", result("r1c2", 0.25))
    back = rd.read_result("r1c2")
    assert back is not None and back.median_ms == 0.25 and back.speedup == 4.0
    assert (rd.root / "candidates" / "r1c2.compile.log").read_text() == "ptxas info: Used 32 registers"
    (rd.root / "candidates" / "bad.json").write_text('{"task": "gelu", "cand')  # damaged: evaluate again
    assert rd.read_result("bad") is None
    with pytest.raises(ValueError, match="file name"):
        rd.write_candidate("../escape", "x")
    with pytest.raises(ValueError, match="inside the run directory"):
        rd.write_text("../outside.txt", "x")

    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    from cuda_llm.runs.rundir import exchange_name

    pp = rd.write_prompt(exchange_name("coder", "r1c0"), [SystemMessage(content="rules"), HumanMessage(content="write it")])
    rp = rd.write_answer(exchange_name("coder", "r1c0"), "```cuda\n...\n```")
    rd.write_answer(exchange_name("coder", "r1c0", 2), "second try")
    rd.write_answer(exchange_name("coder", "r1c01"), "another candidate's")
    assert pp == rd.root / "prompts" / "coder-r1c0.md"
    assert rp == rd.root / "answers" / "coder-r1c0.md"
    assert "## system\n\nrules" in pp.read_text() and "## human\n\nwrite it" in pp.read_text()
    assert rp.read_text() == "```cuda\n...\n```\n"
    assert "## ai" in rd.write_prompt(exchange_name("critic", "r1c0"), [AIMessage(content="hm")]).read_text()
    assert [n for n, _, _ in rd.exchanges("r1c0")] == ["coder-r1c0", "coder-r1c0-2", "critic-r1c0"]
    with pytest.raises(ValueError, match="file name"):
        exchange_name("coder", "../x")

    rd.save_config({"task": "gelu", "limits": {"rounds": 3}, "path": tmp_path})
    assert rd.load_config() == {"task": "gelu", "limits": {"rounds": 3}, "path": str(tmp_path)}
    rd.config_path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        rd.load_config()


def test_write_text_is_atomic_and_leaves_no_temporary_files(tmp_path):
    rd = RunDir.create(tmp_path, "gelu")
    rd.write_text("rounds/r1/history.json", "old")
    rd.write_text("rounds/r1/history.json", "new")
    folder = rd.root / "rounds" / "r1"
    assert (folder / "history.json").read_text() == "new" and [p.name for p in folder.iterdir()] == ["history.json"]


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)], ids=["022", "027", "077"])
def test_files_get_the_mode_the_umask_gives(tmp_path, umask, mode):
    """A teammate or a web server reads the morning report: written files follow the umask like `open` does
    (the atomic write's temporary file starts owner-only)."""
    from cuda_llm.paths import current_umask

    old = os.umask(umask)
    try:
        assert current_umask() == umask
        rd = RunDir.create(tmp_path, "softmax")
        written = [rd.write_text("report.html", "<html></html>"), rd.save_config({"task": "softmax"}),
                   rd.write_candidate("r1c0", "// kernel"), write_report(rd, summary())]
        with open(tmp_path / "plain.txt", "w") as f:    # what an ordinary write gives, for comparison
            f.write("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode) == mode
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in written} == {p.name: oct(mode) for p in written}


# -- trace
def test_trace_events_and_nodes(tmp_path):
    path = tmp_path / "run" / "trace.jsonl"
    with open_trace(path) as tr:
        tr.event("run_start", task="gelu", limits={"rounds": 2}, where=tmp_path, status=Status.ok, event="clash")
        with tr.node("plan", round=1) as extra:
            extra["candidates"] = 4
        with pytest.raises(RuntimeError):
            with tr.node("code", candidate="c1"):
                raise RuntimeError("nvcc vanished")
    evs = read_trace(path)
    assert [e["event"] for e in evs] == ["run_start", "node_start", "node_end", "node_start", "node_end"]
    assert all(re.match(r"\d{4}-\d\d-\d\dT", e["timestamp"]) for e in evs)
    assert evs[0]["limits"] == {"rounds": 2} and evs[0]["where"] == str(tmp_path) and evs[0]["status"] == "ok"
    assert evs[0]["field_event"] == "clash"
    assert evs[2]["node"] == "plan" and evs[2]["ok"] and evs[2]["candidates"] == 4 and evs[2]["duration_s"] >= 0
    assert evs[4]["ok"] is False and "nvcc vanished" in evs[4]["error"] and evs[4]["candidate"] == "c1"
    assert list(evs[0])[:2] == ["timestamp", "event"]


def test_trace_survives_kill_9_and_a_torn_line(tmp_path):
    path = tmp_path / "trace.jsonl"
    code = (
        "import os, signal, sys\n"
        "from cuda_llm.runs.trace import open_trace\n"
        f"tr = open_trace({str(path)!r})\n"
        "for i in range(3):\n"
        "    tr.event('step', i=i)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert proc.returncode == -9
    assert [e["i"] for e in read_trace(path)] == [0, 1, 2]
    with open(path, "a") as f:  # a write cut short by the kill
        f.write('{"timestamp": "2026-01-01T00:00:00Z", "event": "st')
    assert len(read_trace(path)) == 3
    with open_trace(path) as tr:  # the resumed run starts on a fresh line
        tr.event("run_resume")
    assert [e["event"] for e in read_trace(path)] == ["step", "step", "step", "run_resume"]
    assert read_trace(tmp_path / "missing.jsonl") == []


def test_trace_parallel_writers_and_listener(tmp_path):
    seen: list[dict] = []
    tr = open_trace(tmp_path / "t.jsonl", listeners=[seen.append])
    tr.add_listener(lambda ev: 1 / 0)  # a broken listener never stops the run
    threads = [threading.Thread(target=lambda k=k: [tr.event("x", k=k, j=j, pad="y" * 500) for j in range(50)])
               for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tr.close()
    evs = read_trace(tmp_path / "t.jsonl")
    assert len(evs) == 400 and len(seen) == 400
    assert len((tmp_path / "t.jsonl").read_text().splitlines()) == 400
    with pytest.raises(ValueError, match="closed"):
        tr.event("late")


# -- report and progress
def summary() -> RunSummary:
    return RunSummary(
        task="softmax", run_id="20260101-000000-softmax-abcd", device="NVIDIA H100 80GB HBM3", baseline_ms=2.0,
        best_candidate="r2c1", best_ms=0.5, stop_reason="plateau", best_pct_of_sol=63.5, seconds=3725,
        rounds=[
            RoundSummary(index=1, candidates=[
                CandidateSummary(id="r1c1", parent="baseline", features=["coalescing"], status="ok", median_ms=1.0,
                                 speedup=2.0, message="passed 12/12"),
                CandidateSummary(id="r1c2", parent="baseline", features=["smem_tiling", "vector_loads"],
                                 status="compile_error", message="kernel.cu(12): error: identifier | undefined")]),
            RoundSummary(index=2, candidates=[
                CandidateSummary(id="r2c1", parent="r1c1", features=["warp_shuffle"], status="ok", median_ms=0.5,
                                 speedup=4.0)], note="repair 1"),
        ],
        tokens_by_role={"planner": 1200, "coder": 15000, "critic": 800},
    )


def test_report_and_final_table(tmp_path):
    rd = RunDir.create(tmp_path, "softmax")
    path = write_report(rd, summary())
    assert path == rd.report_path
    md = path.read_text()
    for text in ("softmax", "NVIDIA H100", "plateau", "0.5000 ms", "4.00x", "63.5%", "**r2c1**", "warp_shuffle",
                 "compile_error", "identifier \\| undefined", "| coder | 15,000 |", "| total | 17,000 |",
                 "repair 1", "1h02m05s", "2 round(s), 2 passed"):
        assert text in md, text
    table = final_table(summary())
    assert "r2c1 *" in table and "smem_tiling, vector_loads" in table and "coder 15,000" in table
    assert "plateau" in table and "    1  r1c1       baseline" in table
    empty = final_table(RunSummary(task="gelu", run_id="x"))
    assert "(no candidates)" in empty and "none (no candidate beat the baseline)" in empty
    assert "not finished (continue with `cuda-llm resume x`)" in empty and "Best's profile" not in empty
    profiled = summary().model_copy(update={"best_profile": "memory-bound: DRAM 91% of peak"})
    assert "Best's profile:    memory-bound: DRAM 91% of peak" in final_table(profiled)


@pytest.mark.parametrize("best, line", [
    ({"profile": "DRAM 91% of peak, 4 sectors/request", "bottleneck": "memory-bound"},
     "memory-bound: DRAM 91% of peak, 4 sectors/request"),
    ({"profile": "memory-bound: DRAM 91%", "bottleneck": "memory-bound"}, "memory-bound: DRAM 91%"),
    ({"profile": "no profile: ncu is not installed", "bottleneck": "unknown"}, ""),
    ({"profile": "SM 80%", "bottleneck": "unknown"}, "SM 80%"),
    ({}, ""),
])
def test_bestprofile_line(best, line):
    from cuda_llm.report.summary import profile_line

    assert profile_line(best) == line


def test_console_progress_lines():
    out = io.StringIO()
    now = [100.0]
    pr = ConsoleProgress(out, clock=lambda: now[0])
    pr.start("RUN1", "softmax")
    pr.baseline(2.0)
    pr.round_start(1, [["coalescing"], []])
    now[0] += 75
    pr.on_event({"event": "evaluation", "candidate": "r1c1", "status": "ok", "median_ms": 1.0,
                 "speedup_over_parent": 2.0, "note": ""})
    pr.on_event({"event": "evaluation", "candidate": "r1c2", "status": "compile_error", "median_ms": None,
                 "note": "kernel.cu(3): error: expected a ;\n" + "x" * 300})
    pr.on_event({"event": "decision", "kind": "selection", "replaced": True, "candidate": "r1c1", "candidate_ms": 1.0})
    pr.on_event({"event": "llm_call", "role": "coder", "candidate": "r1c0", "latency_s": 12.34, "input_tokens": 1500,
                 "output_tokens": 700})
    pr.on_event({"event": "profile", "candidate": "r1c1", "bottleneck": "memory-bound", "summary": "dram 80%"})
    pr.on_event({"event": "decision", "kind": "stop", "reason": "plateau", "text": "no gain for 3 rounds"})
    pr.round_end(1, 1.0, 2.0, 1, 2, "plateau")  # the stop is not repeated
    lines = out.getvalue().splitlines()
    assert lines[0] == "[      0s] run RUN1: optimizing softmax"
    assert "r1c0: coalescing; r1c1: free choice" in lines[2]
    assert lines[3] == "[   1m15s]   r1c1: ok, 1.000 ms, 2.00x vs parent"
    assert "expected a ;" in lines[4] and len(lines[4]) < 160
    assert lines[5].endswith("new best: r1c1 at 1.000 ms (2.00x over the baseline)")
    assert lines[6].endswith("llm coder r1c0: 12.3 s, 1,500 in / 700 out")      # no limits given: no budget
    assert lines[7].endswith("profile r1c1: memory-bound: dram 80%")
    assert lines[8].endswith("stopping: plateau (no gain for 3 rounds)")
    assert "round 1 done: 1/2 passed; best 1.000 ms (2.00x over the baseline)" in lines[9]
    assert len(lines) == 10


def test_progress_budget_and_eta():
    out = io.StringIO()
    now = [0.0]
    pr = ConsoleProgress(out, clock=lambda: now[0])
    pr.start("RUN1", "softmax", limits={"time_budget_s": 3600, "token_budget": 1_000_000, "max_rounds": 4},
             elapsed_s=600, tokens=200_000)
    pr.round_start(2, [[]])
    now[0] = 300                                   # a round of 5 minutes; 2 rounds left after it
    pr.on_event({"event": "llm_call", "role": "coder", "latency_s": 1, "input_tokens": 40_000, "output_tokens": 10_000})
    pr.on_event({"event": "llm_call", "role": "coder", "cached": True, "input_tokens": 9, "output_tokens": 9})
    pr.on_event({"event": "evaluation", "candidate": "r2c0", "status": "ok", "median_ms": 1.0})
    pr.round_end(2, 1.0, 2.0, 1, 1)
    assert out.getvalue().splitlines()[-2].endswith("r2c0: ok, 1.000 ms  [15m00s/1h00m00s, 250k/1M tokens]")
    last = out.getvalue().splitlines()[-1]
    assert "time 15m00s/1h00m00s, tokens 250k/1M, ETA <= 10m00s" in last
    assert "replayed" in out.getvalue().splitlines()[-3]
    assert "llm coder: 1.0 s, 40,000 in / 10,000 out  [15m00s/1h00m00s, 250k/1M tokens]" in out.getvalue()


def test_make_progress_picks_the_display():
    from cuda_llm.report.progress import LiveProgress, make_progress

    assert make_progress(quiet=True) is None
    assert type(make_progress(stream=io.StringIO())) is ConsoleProgress   # a log: plain lines

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    live = make_progress(stream=tty)
    assert isinstance(live, LiveProgress)
    live.start("RUN1", "softmax", limits={"time_budget_s": 60})
    live.baseline(2.0)
    live.finish(None)
    assert "naive baseline: 2.000 ms" in tty.getvalue()
