"""`cuda-llm demo` on a machine with no GPU and no endpoint: it installs the recorded run under a new id, and
`runs`, `report` (Markdown, HTML, JSON), `show`, `trace` and `export` work on it and say it is a replay.
The recorded runs carry the H100's figures (cuda_llm/runs/recorded/*/recording.json says where each
comes from); nothing here measures anything."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_llm.cli import main
from cuda_llm.report.formats import fmt_ms

ROOT = Path(__file__).resolve().parents[1]
MAX_PAGE_BYTES = 2_000_000


@pytest.fixture
def demo(tmp_path, capsys, monkeypatch):
    """The demo run, installed into tmp_path/runs (no GPU is looked for: CUDA_VISIBLE_DEVICES is empty)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    runs = tmp_path / "runs"
    t0 = time.monotonic()
    assert main(["demo", "--runs-dir", str(runs)]) == 0
    seconds = time.monotonic() - t0
    out = capsys.readouterr().out
    (run_id,) = [p.name for p in runs.iterdir()]
    assert f"installed run {run_id}" in out and "REPLAY" in out and f"cuda-llm report {run_id}" in out
    return runs, run_id, seconds


def _cli(capsys, *args: str) -> tuple[int, str]:
    rc = main(list(args))
    return rc, capsys.readouterr().out


def _recorded():
    """The shipped recording as a run folder of its own: what the installed copy must show."""
    from cuda_llm.runs.replay import DEFAULT_RECORDING, RECORDED_DIR
    from cuda_llm.runs.run_info import run_info
    from cuda_llm.runs.rundir import RunDir

    class Recorded(RunDir):    # the recording keeps the recorded run's id in its checkpoint
        def __init__(self, root):
            super().__init__(root)
            self.run_id = json.loads((Path(root) / "recording.json").read_text())["run_id"]

    return run_info(Recorded(RECORDED_DIR / DEFAULT_RECORDING))


def test_the_demo_is_a_finished_run_under_its_own_id(demo, capsys):
    from cuda_llm.runs.run_info import run_info
    from cuda_llm.runs.rundir import RunDir

    runs, run_id, seconds = demo
    assert seconds < 30 and "-replay-" in run_id
    info, recorded = run_info(RunDir(runs / run_id)), _recorded()
    assert info.state == "finished" and info.rounds == recorded.rounds >= 1 and info.best_id == recorded.best_id
    assert info.best_id not in (None, "baseline") and info.best_ms == recorded.best_ms > 0
    assert info.baseline_ms == recorded.baseline_ms > info.best_ms            # the recorded GPU's figures
    assert info.replay.startswith("REPLAY") and "NVIDIA H100" in info.replay
    with sqlite3.connect(runs / run_id / "checkpoint.sqlite") as con:     # the checkpoint answers to the new id
        assert {r[0] for r in con.execute("SELECT thread_id FROM checkpoints")} == {run_id}
    config = json.loads((runs / run_id / "config.json").read_text())
    assert config["replay"]["sources"] and config["options"]["runs_dir"] == str(runs)
    # a second demo names the copy already there (no identical second run); --again installs another
    assert main(["demo", "--runs-dir", str(runs)]) == 0
    assert f"already installed as run {run_id}" in capsys.readouterr().out
    assert [p.name for p in runs.iterdir()] == [run_id]
    assert main(["demo", "--runs-dir", str(runs), "--again"]) == 0
    capsys.readouterr()
    assert len(list(runs.iterdir())) == 2


def test_runs_with_no_runs_folder_points_at_the_demo(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)                       # outside a project: no ./runs
    assert main(["runs"]) == 0
    out = capsys.readouterr().out
    assert "no runs" in out and "cuda-llm demo" in out and "cuda-llm optimize TASK" in out
    assert main(["runs", "--runs-dir", "elsewhere"]) == 2      # a --runs-dir given by hand that is not there
    err = capsys.readouterr().err
    assert "wrong --runs-dir?" in err and "cuda-llm demo" in err and len(err.strip().splitlines()) == 1


def test_runs_report_show_and_trace_say_replay(demo, capsys):
    runs, run_id, _ = demo
    rd = ["--runs-dir", str(runs)]
    rc, out = _cli(capsys, "runs", *rd)
    assert rc == 0 and f"{_recorded().task} (REPLAY)" in out and "nothing here was measured on this machine" in out
    best = _recorded().best_id
    rc, out = _cli(capsys, "report", run_id, *rd)
    assert rc == 0 and out.startswith("Replay:") and f"{best} *" in out
    assert "**Replay**: REPLAY" in (runs / run_id / "report.md").read_text()
    rc, out = _cli(capsys, "report", run_id, *rd, "--json")
    assert rc == 0 and json.loads(out)["summary"]["replay"].startswith("REPLAY")
    rc, out = _cli(capsys, "show", run_id, "baseline", *rd)
    assert rc == 0 and out.startswith("REPLAY")
    profile = out.split("== profile", 1)[1].split("== ", 1)[0]
    assert re.search(r"DRAM throughput +[\d.]+%", profile) and re.search(r"DRAM bytes +[\d.]+ MB", profile)
    assert re.search(r"duration +[\d.]+ us", profile)
    assert "{" not in profile                                              # a table, not JSON
    rc, out = _cli(capsys, "show", run_id, best, *rd, "--json")
    assert rc == 0 and json.loads(out)["replay"].startswith("REPLAY")
    rc, out = _cli(capsys, "trace", run_id, *rd)
    assert rc == 0 and out.splitlines()[0].startswith("# REPLAY") and best in out


def test_the_html_report_of_the_demo(demo, capsys):
    runs, run_id, _ = demo
    rc, _ = _cli(capsys, "report", run_id, "--runs-dir", str(runs), "--html")
    page_path = runs / run_id / "report.html"
    page = page_path.read_text()
    assert rc == 0 and page_path.stat().st_size < MAX_PAGE_BYTES
    assert 'id="replay"' in page and "plotly.js (basic - minified)" in page
    assert '<table class="prof">' in page and re.search(r"<td>DRAM throughput</td><td>[\d.]+%</td>", page)
    assert '"available": true' not in page                                  # the profile is no JSON dump
    # the critic a sentence a line: the verdict, then what to try next, never run together
    assert "<div>Next: " in page and "unused Next:" not in page


@pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/bin/nvcc").exists(), reason="needs nvcc")
def test_export_of_the_demo_says_replay(demo, tmp_path, capsys):
    runs, run_id, _ = demo
    rc, out = _cli(capsys, "export", run_id, "--runs-dir", str(runs), "--torch", str(tmp_path / "exp"), "--arch", "sm_90")
    assert rc == 0 and "REPLAY" in out
    readme = (tmp_path / "exp" / "README.md").read_text()
    assert "REPLAY" in readme and (tmp_path / "exp" / "kernel.so").is_file()
    assert "built for **sm_90a**" in readme and "built for sm_90 " not in readme     # the arch as built
    assert "compute_80,code=sm_80" in readme                                          # and for another GPU
    # the README's rebuild line, exactly as written, from a copy of the folder elsewhere with no kernel.so
    line = readme.split("## Rebuild", 1)[1].split("```bash\n", 1)[1].split("\n```", 1)[0]
    assert "-keep" not in line and line.startswith("nvcc ") and "sm_90a" in line
    copy = tmp_path / "elsewhere" / "kernel"
    shutil.copytree(tmp_path / "exp", copy)
    (copy / "kernel.so").unlink()
    from cuda_llm.tools.compiler.compile import nvcc_path
    env = {"PATH": f"{Path(nvcc_path()).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(["bash", "-c", line], cwd=copy, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (copy / "kernel.so").stat().st_size > 0 and not (copy / "nvcc-keep").exists()


def test_a_replay_cannot_be_resumed(demo, capsys):
    runs, run_id, _ = demo
    assert main(["resume", run_id, "--runs-dir", str(runs), "--rounds", "+1"]) == 2
    err = capsys.readouterr().err
    assert "is a replay" in err and f"cuda-llm optimize {_recorded().task}" in err and len(err.strip().splitlines()) == 1


def test_an_unknown_recording_is_one_line(tmp_path, capsys):
    assert main(["demo", "--runs-dir", str(tmp_path / "runs"), "--recording", "nope"]) == 2
    err = capsys.readouterr().err
    assert "no recorded run 'nope'" in err and "softmax" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("name", ["conv2d", "softmax"])
def test_the_recording_names_where_each_figure_comes_from(name):
    from cuda_llm.runs.replay import RECORDED_DIR, RECORDING_FILE

    rec = json.loads((RECORDED_DIR / name / RECORDING_FILE).read_text())
    assert rec["device"].startswith("NVIDIA H100") and rec["sources"] and rec["not_recorded"]
    if rec["kind"] == "replayed figures":     # figures driven through the graph: each result names its source
        for res in (RECORDED_DIR / name / "candidates").glob("r*c*.json"):
            assert "recorded: docs/results-h100.md" in json.loads(res.read_text())["message"], res.name
    for name in rec["sources"].values():
        for path in ("docs/results-h100.md", "tests/fixtures/ncu/softmax.csv", "benchmarks/manual_answers/softmax",
                     "benchmarks/agent_answers/conv2d"):
            if path in name:
                assert (ROOT / path).exists(), path


def test_the_recorder_trims_a_run_folder(demo, tmp_path):
    """benchmarks/record_demo.py from-run: what every view reads, the newest checkpoint only."""
    runs, run_id, _ = demo
    out = tmp_path / "rec"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "record_demo.py"), "from-run", str(runs / run_id), "--out", str(out)]
    refused = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "is itself a replay" in refused.stderr
    config = json.loads((runs / run_id / "config.json").read_text())
    del config["replay"]                       # from here on, as a run folder the GPU machine left
    (runs / run_id / "config.json").write_text(json.dumps(config))
    (runs / run_id / "cache" / "eval").mkdir(parents=True)
    (runs / run_id / "cache" / "eval" / "x.json").write_text("{}")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (out / "checkpoint.sqlite").is_file() and (out / "trace.jsonl").is_file() and not (out / "cache").exists()
    best = _recorded().best_id
    assert (out / "candidates" / f"{best}.cu").is_file() and (out / "prompts" / f"coder-{best}.md").is_file()
    rec = json.loads((out / "recording.json").read_text())
    assert rec["kind"] == "recorded run" and rec["run_id"] == run_id and rec["root"] == str((runs / run_id).resolve())
    with sqlite3.connect(out / "checkpoint.sqlite") as con:
        assert con.execute("SELECT count(*) FROM checkpoints").fetchone()[0] == 1


def test_critique_lines_keep_sentences_apart():
    from cuda_llm.report.candidate_view import critique_lines

    lines = critique_lines("memory-bound", "one thread per row leaves bandwidth unused", ["vector_loads"])
    assert lines == ["memory-bound: one thread per row leaves bandwidth unused.", "Next: vector_loads."]
    lines = critique_lines("latency-bound", "Stalls on loads. Occupancy is 6%.", [])
    assert lines == ["latency-bound: Stalls on loads.", "Occupancy is 6%."]
    assert critique_lines(None, "", ["a", "b"]) == ["Next: a, b."]


def test_show_sections_trace_full_and_whole_notes(demo, capsys):
    """Long output stays readable: show summarises the timing samples (every one only in --section timings,
    ten a line), prints one section alone, trace --full and report.md cut nothing."""
    runs, run_id, _ = demo
    rd = ["--runs-dir", str(runs)]
    best = _recorded().best_id
    rc, out = _cli(capsys, "show", run_id, best, *rd)
    timing = out.split("== timing\n", 1)[1].split("\n\n", 1)[0]
    assert rc == 0 and re.search(r"\d+ samples, [\d.]+ to [\d.]+ ms", timing) and "samples (ms" not in timing
    assert not any(len(re.findall(r"\d\.\d{4}", line)) > 10 for line in out.splitlines())   # no line of samples
    assert "--section" in out.splitlines()[-1]
    rc, timings = _cli(capsys, "show", run_id, best, *rd, "--section", "timings")
    sample_lines = timings.split("in the order timed):\n", 1)[1].splitlines()
    n = int(re.search(r"(\d+) samples", out).group(1))
    assert rc == 0 and sum(len(line.split(", ")) for line in sample_lines) == n and max(map(len, sample_lines)) < 100
    rc, source = _cli(capsys, "show", run_id, best, *rd, "--section", "source")
    assert rc == 0 and source == (runs / run_id / "candidates" / f"{best}.cu").read_text().rstrip() + "\n"
    assert main(["show", run_id, best, *rd, "--section", "nope"]) == 2
    err = capsys.readouterr().err
    assert "no section 'nope'" in err and "timings" in err and len(err.strip().splitlines()) == 1
    # a note the timeline cuts to a line is whole with --full
    rc, cut = _cli(capsys, "trace", run_id, *rd)
    rc2, full = _cli(capsys, "trace", run_id, *rd, "--full")
    assert rc == rc2 == 0 and cut.count("...") > full.count("...")
    flat = " ".join(full.split())
    for ev in (json.loads(line) for line in (runs / run_id / "trace.jsonl").read_text().splitlines()):
        if ev.get("event") == "decision" and ev.get("kind") == "critique":
            assert " ".join(ev["summary"].split()) in flat
    # report.md: every candidate's note whole
    assert main(["report", run_id, *rd]) == 0
    capsys.readouterr()
    md = (runs / run_id / "report.md").read_text()
    for r in range(1, _recorded().rounds + 1):
        for c in json.loads((runs / run_id / "rounds" / f"r{r}" / "candidates.json").read_text()):
            assert " ".join(c["note"].split()) in md


def test_one_number_one_word_across_md_html_and_show(demo, capsys):
    """report.md, report.html and `show` of the demo's best kernel give the same figures and words: its time at
    the final re-check and in its round (each named), its speed of light, its features (detected beside
    asked) and its bottleneck (the diagnosis; the task's bound and the roof named as what they are)."""
    import html as html_mod

    runs, run_id, _ = demo
    rd = ["--runs-dir", str(runs)]
    best = _recorded().best_id
    assert main(["report", run_id, *rd, "--html"]) == 0
    capsys.readouterr()
    md = (runs / run_id / "report.md").read_text()
    page = html_mod.unescape(re.sub(r"<[^>]+>", " ", (runs / run_id / "report.html").read_text().split("<script>")[0]
                                    + (runs / run_id / "report.html").read_text().split("</script>", 1)[1]))
    page = " ".join(page.split())
    rc, show = _cli(capsys, "show", run_id, best, *rd)
    assert rc == 0

    head = {m.group(1): m.group(2) for m in re.finditer(r"^- \*\*(.+?)\*\*: (.*)$", md, re.M)}
    final_ms = re.match(rf"{best}: ([\d.]+) ms", head["Best"]).group(1)
    round_ms = re.search(r"its round's timing, the table's figure: ([\d.]+) ms", head["Best"]).group(1)
    assert "final re-check" in head["Best"] and final_ms != round_ms
    row = next(line for line in md.splitlines() if f"**{best}**" in line).split(" | ")
    assert row[5] == round_ms                                                    # the table: the round's timing
    assert re.search(rf"final: +{re.escape(final_ms)} ms at the final re-check", show)
    assert f"{round_ms} ms in its round" in show
    assert " ".join(head["Best"].split()) in page                               # the HTML's header: the same words
    # the speed of light: one figure, one format, wherever the headline names it
    sols = set(re.findall(r"([\d.]+) ms", head["Speed of light"].split(" is larger than")[0].split(": the task")[0]))
    assert len(sols) == 1, head["Speed of light"]
    assert " ".join(head["Speed of light"].split()) in page
    # features: the detected ones beside the asked ones, the same text in all three
    feats = row[3]
    assert feats.startswith("detected: ") and "asked: " in feats and feats != "-"
    assert f"features:  {feats}" in show and feats in page
    # the bottleneck: the diagnosis's word everywhere, the other views named
    word = head["Bottleneck"].split(" ", 1)[0]
    diagnosis = show.split("== diagnosis\n", 1)[1]
    assert diagnosis.startswith(f"{word}:") and "(the diagnosis of" in head["Bottleneck"]
    assert "the task declares itself" in head["Bottleneck"] and "roof" in head["Bottleneck"]
    assert " ".join(head["Bottleneck"].split()) in page
    roof = show.split("roofline: ", 1)[1].splitlines()[0]
    assert "-limited" not in roof and "the bound is the" in roof


def test_the_plot_draws_the_headline_bound(demo, capsys):
    """The plot's speed-of-light line, its legend and the sentence under it are the headline's figure."""
    runs, run_id, _ = demo
    assert main(["report", run_id, "--runs-dir", str(runs), "--html"]) == 0
    capsys.readouterr()
    page = (runs / run_id / "report.html").read_text()
    md = (runs / run_id / "report.md").read_text()
    sol = re.search(r"\*\*Speed of light\*\*: [\d.]+% of the bound \(([\d.]+) ms", md).group(1)
    assert f"speed of light {sol} ms" in page and f'id="sol-basis">Speed of light {sol} ms' in page
    assert "<br><sup>Speed of light" not in page          # no three-line subtitle running into the axis


def test_demo_list_names_each_recording_and_who_played_each_role(capsys):
    assert main(["demo", "--list"]) == 0
    out = capsys.readouterr().out
    assert "conv2d (default)\n  planner: rules, coder: model, critic: rules" in out
    assert "softmax\n  planner: rules, coder: hand-written answers, critic: rules" in out


def test_a_recording_dropped_in_is_listed_and_installed_by_name(tmp_path, capsys, monkeypatch):
    """A second recorded run folder (as benchmarks/record_demo.py writes one) joins the registry: by
    $CUDA_LLM_DEMOS, or given as a path; its roles come from its recording.json."""
    from cuda_llm.runs.replay import RECORDED_DIR

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    extra = tmp_path / "demos" / "softmax-agents"
    shutil.copytree(RECORDED_DIR / "softmax", extra)
    rec = json.loads((extra / "recording.json").read_text())
    rec["roles"] = {"planner": "model", "coder": "model", "critic": "model"}
    (extra / "recording.json").write_text(json.dumps(rec))
    monkeypatch.setenv("CUDA_LLM_DEMOS", str(tmp_path / "demos"))
    assert main(["demo", "--list"]) == 0
    assert "softmax-agents\n  planner: model, coder: model, critic: model" in capsys.readouterr().out
    runs = tmp_path / "runs"
    assert main(["demo", "softmax-agents", "--runs-dir", str(runs)]) == 0
    out = capsys.readouterr().out
    assert "Roles: planner: model, coder: model, critic: model" in out
    (run,) = runs.iterdir()
    assert json.loads((run / "config.json").read_text())["replay"]["recording"] == "softmax-agents"
    monkeypatch.delenv("CUDA_LLM_DEMOS")
    assert main(["demo", str(extra), "--runs-dir", str(runs)]) == 0          # a path: the same copy, found again
    assert f"already installed as run {run.name}" in capsys.readouterr().out
    assert main(["demo", "softmax-agents", "--runs-dir", str(runs)]) == 2    # gone from the registry: one line
    err = capsys.readouterr().err
    assert "no recorded run 'softmax-agents'" in err and len(err.strip().splitlines()) == 1


def test_demo_live_plays_the_progress_display_back(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    runs = tmp_path / "runs"
    t0 = time.monotonic()
    assert main(["demo", "--live", "--speed", "100000", "--runs-dir", str(runs)]) == 0
    cap = capsys.readouterr()
    (run,) = runs.iterdir()
    lines = cap.err.splitlines()
    assert time.monotonic() - t0 < 30 and f"run {run.name}: optimizing conv2d" in cap.err
    recorded = _recorded()
    assert sum(line.split("] ", 1)[-1].startswith(f"round {r}: ") for line in lines for r in range(1, 4)) == recorded.rounds
    assert any(f"new best: {recorded.best_id} at" in line for line in lines)
    rows = [c for r in range(1, recorded.rounds + 1)
            for c in json.loads((run / "rounds" / f"r{r}" / "candidates.json").read_text())]
    round_ms = next(c["ms"] for c in rows if c["id"] == recorded.best_id)
    assert lines[-2].split("] ", 1)[1] == f"finished (max_rounds); best {recorded.best_id} at {fmt_ms(round_ms)} ms in its round"
    assert any(f"final re-check of {recorded.best_id}: ok, {fmt_ms(recorded.best_ms)} ms" in line for line in lines)
    assert "the wait is left out of the replay" in cap.err and "installed run" in cap.out
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--live", "--speed", "0"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "above 0" in err and len(err.strip().splitlines()) == 1


def test_the_replay_keeps_the_recorded_pace():
    """Waits are the recorded gaps over the speed (capped), without the pauses between sessions; the stamps
    are the recorded run's active time."""
    import io

    from cuda_llm.report.progress import ConsoleProgress
    from cuda_llm.report.progress_replay import RecordedClock, replay

    ev = [{"timestamp": "2026-01-01T00:00:00Z", "event": "run_start", "run_id": "r", "task": "t", "limits": {}},
          {"timestamp": "2026-01-01T00:00:10Z", "event": "baseline", "median_ms": 2.0, "label": "naive"},
          {"timestamp": "2026-01-01T00:00:20Z", "event": "run_end", "finished": False},
          {"timestamp": "2026-01-01T05:00:00Z", "event": "run_resume"},
          {"timestamp": "2026-01-01T05:01:00Z", "event": "evaluation", "candidate": "r1c0", "status": "ok",
           "median_ms": 1.0},
          {"timestamp": "2026-01-01T05:01:30Z", "event": "run_end", "finished": True, "stop_reason": "max_rounds",
           "best": "r1c0", "best_ms": 1.0}]
    waits: list[float] = []
    clock = RecordedClock()
    out = io.StringIO()
    replay(ev, ConsoleProgress(out, clock=clock), clock, speed=10, sleep=waits.append, max_wait_s=5)
    assert waits == [1.0, 1.0, 5.0, 3.0]               # 10 s, 10 s, 60 s (capped at 5), 30 s; the 5 h pause: none
    text = out.getvalue()
    assert "[     10s] naive baseline: 2.000 ms" in text and "[   1m50s] finished (max_rounds)" in text
