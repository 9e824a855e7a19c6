"""A run as OpenTelemetry spans in the OpenInference conventions: the demo's trace through the SDK's in-memory
exporter (what each span carries, against the trace and the run's files), a live run followed as it writes
its trace and received over real OTLP/HTTP by a small local server, `cuda-llm trace --otel` and `--otel`'s
one-line errors, and once against a real local Phoenix (skipped where Phoenix is not installed: it runs in
this interpreter, or in the one $CUDA_LLM_PHOENIX_PYTHON names)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="needs the otel extra: pip install 'cuda-llm[otel]'")

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from cuda_llm.cli import main  # noqa: E402
from cuda_llm.runs import otel_export  # noqa: E402
from cuda_llm.runs.otel_export import LiveExport, export_run  # noqa: E402
from cuda_llm.runs.trace import read_trace  # noqa: E402


@pytest.fixture
def demo_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    runs = tmp_path / "runs"
    assert main(["demo", "--runs-dir", str(runs)]) == 0
    capsys.readouterr()
    (root,) = runs.iterdir()
    return root


def _by_id(spans):
    return {s.context.span_id: s for s in spans}


def _parent(span, index):
    return index.get(span.parent.span_id) if span.parent is not None else None


def test_the_demo_as_openinference_spans(demo_run):
    mem = InMemorySpanExporter()
    result = export_run(demo_run, demo_run.name, exporter=mem)
    spans = mem.get_finished_spans()
    events = read_trace(demo_run / "trace.jsonl")
    index = _by_id(spans)
    assert result.spans == len(spans) > 20 and result.failed == 0
    kinds = {s.attributes["openinference.span.kind"] for s in spans}
    assert kinds == {"CHAIN", "LLM", "TOOL"}
    (root,) = [s for s in spans if s.parent is None]
    assert root.attributes["session.id"] == demo_run.name and root.status.is_ok
    last_end = [e for e in events if e["event"] == "run_end"][-1]
    assert json.loads(root.attributes["output.value"])["best"] == last_end["best"] not in (None, "baseline")
    assert len({s.context.trace_id for s in spans}) == 1
    assert all(_parent(s, index) is not None for s in spans if s is not root)     # one tree, no orphan
    # graph nodes: one CHAIN span per node_start, its duration the node's
    nodes = [e for e in events if e["event"] == "node_start"]
    chains = [s for s in spans if s.attributes["openinference.span.kind"] == "CHAIN" and s is not root]
    assert sorted(s.name for s in chains) == sorted(e["node"] for e in nodes)
    # LLM calls: the prompt and answer files, the tokens, the latency
    calls = [e for e in events if e["event"] == "llm_call"]
    llm = {s.name: s for s in spans if s.attributes["openinference.span.kind"] == "LLM"}
    assert len(llm) == len(calls)
    for e in calls:
        s = llm[f"{e['role']} {e['candidate']}"]
        a = s.attributes
        prompt = (demo_run / "prompts" / Path(e["prompt"]).name).read_text()
        assert a["llm.input_messages.0.message.role"] == "system" and a["llm.input_messages.1.message.role"] == "user"
        assert a["input.value"] == prompt and "llm.input_messages.2.message.role" not in a
        assert prompt.replace("## system\n\n", "").startswith(a["llm.input_messages.0.message.content"])
        assert prompt.rstrip().endswith(a["llm.input_messages.1.message.content"])
        assert a["llm.output_messages.0.message.content"] == (demo_run / "answers" / Path(e["response"]).name).read_text()
        assert a["llm.token_count.prompt"] == e["input_tokens"] and a["llm.token_count.completion"] == e["output_tokens"]
        assert a["llm.token_count.total"] == e["input_tokens"] + e["output_tokens"]
        assert a["llm.model_name"] == e["model"]
        assert abs((s.end_time - s.start_time) / 1e9 - e["latency_s"]) < 1e-3
        assert _parent(s, index).name == "code"
    # tools: every evaluation with its verdict, its time from the GPU job that ran it, its build inside it
    tools = [s for s in spans if s.attributes["openinference.span.kind"] == "TOOL"]
    evaluate = {s.name: s for s in tools if s.attributes["tool.name"] == "evaluate"}
    for e in (e for e in events if e["event"] == "evaluation"):
        s = evaluate[f"evaluate {e['candidate']}"]
        assert s.attributes["cuda_llm.verdict"] == e["status"]
        assert json.loads(s.attributes["output.value"])["median_ms"] == e["median_ms"]
    job = next(e for e in events if e["event"] == "gpu_job" and e["kind"] == "evaluate" and e["candidate"] == "r1c0")
    s = evaluate["evaluate r1c0"]
    assert abs((s.end_time - s.start_time) / 1e9 - (job["end"] - job["start"])) < 0.01
    compile_r1c0 = next(t for t in tools if t.name == "compile r1c0")
    assert _parent(compile_r1c0, index) is s and compile_r1c0.attributes["cuda_llm.verdict"] == "ok"
    profiles = {e["candidate"]: e["bottleneck"] for e in events if e["event"] == "profile"}
    for t in (t for t in tools if t.attributes["tool.name"] == "profile"):
        assert t.attributes["cuda_llm.verdict"] == profiles[t.name.split()[1]]
    assert any(t.attributes["tool.name"] == "final_check" for t in tools)
    # decisions: events on the node they were taken in
    selections = [ev for s in chains for ev in s.events if ev.name == "decision/selection"]
    assert len(selections) == sum(e["event"] == "decision" and e.get("kind") == "selection" for e in events) > 0


def test_a_failed_node_is_an_error_span(tmp_path):
    trace = tmp_path / "trace.jsonl"
    lines = [{"timestamp": "2026-01-01T00:00:00Z", "event": "run_start", "task": "t"},
             {"timestamp": "2026-01-01T00:00:01Z", "event": "node_start", "node": "code"},
             {"timestamp": "2026-01-01T00:00:03Z", "event": "node_end", "node": "code", "ok": False,
              "error": "LLMError: endpoint down"},
             {"timestamp": "2026-01-01T00:00:04Z", "event": "run_end", "finished": False, "error": "endpoint down"}]
    trace.write_text("".join(json.dumps(x) + "\n" for x in lines))
    mem = InMemorySpanExporter()
    export_run(tmp_path, "r1", exporter=mem)
    spans = {s.name: s for s in mem.get_finished_spans()}
    code = spans["code"]
    assert not code.status.is_ok and "endpoint down" in code.status.description
    assert (code.end_time - code.start_time) == 2_000_000_000
    assert not spans["cuda-llm run t"].status.is_ok


def test_a_live_run_is_followed_as_it_writes(demo_run, monkeypatch):
    """The live exporter follows trace.jsonl as it grows and gives what the finished run's export gives."""
    monkeypatch.setattr(otel_export, "FOLLOW_EVERY_S", 0.05)
    lines = (demo_run / "trace.jsonl").read_text().splitlines(keepends=True)
    whole = InMemorySpanExporter()
    export_run(demo_run, demo_run.name, exporter=whole)
    (demo_run / "trace.jsonl").write_text("")
    mem = InMemorySpanExporter()
    live = LiveExport(demo_run, demo_run.name, exporter=mem)
    half = len(lines) // 2
    with open(demo_run / "trace.jsonl", "a") as f:
        f.writelines(lines[:half])
        f.write(lines[half][:20])                  # a line being written: not read until it is whole
        f.flush()
        deadline = time.monotonic() + 10
        while not mem.get_finished_spans() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mem.get_finished_spans(), "no span while the run was going"
        f.write(lines[half][20:])
        f.writelines(lines[half + 1:])
    result = live.stop()
    assert result.failed == 0
    assert sorted(s.name for s in mem.get_finished_spans()) == sorted(s.name for s in whole.get_finished_spans())


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver: decodes each ExportTraceServiceRequest and keeps its spans."""

    spans: list = []

    def do_POST(self):  # noqa: N802
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        body = self.rfile.read(int(self.headers["Content-Length"]))
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        for rs in req.resource_spans:
            res = {a.key: a.value.string_value for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for sp in ss.spans:
                    attrs = {a.key: a.value.string_value or a.value.int_value for a in sp.attributes}
                    type(self).spans.append((res, sp.name, attrs))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()
        self.wfile.write(b"")

    def log_message(self, *args):
        pass


@pytest.fixture
def collector():
    _Collector.spans = []
    server = HTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Collector.spans
    server.shutdown()


def test_trace_otel_sends_a_finished_run_over_otlp_http(demo_run, collector, capsys):
    url, got = collector
    rc = main(["trace", demo_run.name, "--runs-dir", str(demo_run.parent), "--otel", url])
    out = capsys.readouterr().out
    assert rc == 0 and f"{url}/v1/traces" in out
    n = int(out.split(": ", 1)[1].split(" spans")[0])
    assert len(got) == n > 20
    assert {res["openinference.project.name"] for res, _, _ in got} == {"cuda-llm"}
    assert {a["openinference.span.kind"] for _, _, a in got} == {"CHAIN", "LLM", "TOOL"}


@pytest.mark.slow
def test_optimize_otel_sends_a_live_run(tmp_path, collector, capsys, monkeypatch):
    """A real graph run (scripted model, the GPU double, real nvcc) with --otel's variable set: its spans
    reach the OTLP/HTTP receiver while it runs and when it ends."""
    from fake_gpu_evaluator import FakeGpuEvaluator, coder_answer, plan_answer, softmax_source
    from scripted_chat_model import ScriptedChatModel, detect_role

    from cuda_llm.graph.run import RunOptions, start_run
    from cuda_llm.graph.state import Limits

    url, got = collector
    monkeypatch.setenv(otel_export.OTEL_ENV, url)
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))

    def respond(messages):
        return plan_answer(1) if detect_role(messages) == "planner" else coder_answer(softmax_source("v2"))

    out = start_run("softmax", None, RunOptions(limits=Limits(n_candidates=1, max_rounds=1), runs_dir=tmp_path / "runs",
                                                learn=False, profile=False),
                    evaluator=FakeGpuEvaluator({"baseline": 10.0, "v2": 2.0}),
                    model_factory=lambda role: ScriptedChatModel(respond=respond), handle_signals=False)
    assert out.finished
    names = [name for _, name, _ in got]
    assert "cuda-llm run softmax" in names and "evaluate r1c0" in names and "compile r1c0" in names
    llm = [a for _, _, a in got if a["openinference.span.kind"] == "LLM"]
    assert llm and all(a["llm.token_count.total"] > 0 for a in llm)
    assert all(a["session.id"] == out.run_id for _, _, a in got)


def test_otel_errors_are_one_line(demo_run, capsys, monkeypatch):
    rd = ["--runs-dir", str(demo_run.parent)]
    assert main(["trace", demo_run.name, *rd, "--otel", "localhost:6006"]) == 2
    err = capsys.readouterr().err
    assert "not an OTLP/HTTP endpoint" in err and len(err.strip().splitlines()) == 1
    monkeypatch.delenv(otel_export.OTEL_ENV, raising=False)
    assert main(["trace", demo_run.name, *rd, "--otel"]) == 2
    assert "needs a URL" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["optimize", "softmax", "--otel", "nope"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--otel" in err and len(err.strip().splitlines()) == 1
    # nothing listens on this port: said, not hidden
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(otel_export, "EXPORT_TIMEOUT_S", 1)
    assert main(["trace", demo_run.name, *rd, "--otel", f"http://127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err
    assert "could not be sent" in err and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------------- Phoenix
def _phoenix_python() -> str | None:
    env = os.environ.get("CUDA_LLM_PHOENIX_PYTHON")
    if env:
        return env if shutil.which(env) or Path(env).is_file() else None
    try:
        import phoenix.server.main  # noqa: F401
    except ImportError:
        return None
    import sys

    return sys.executable


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


@pytest.mark.skipif(_phoenix_python() is None, reason="needs arize-phoenix (pip install arize-phoenix), or "
                                                      "$CUDA_LLM_PHOENIX_PYTHON naming a Python that has it")
def test_a_finished_run_appears_in_a_local_phoenix(demo_run, tmp_path, capsys):
    port, grpc = _free_port(), _free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(tmp_path / "phoenix"), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(grpc)}
    server = subprocess.Popen([_phoenix_python(), "-m", "phoenix.server.main", "serve"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base}/healthz", timeout=2).read()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "Phoenix did not start"
                time.sleep(0.5)
        assert main(["trace", demo_run.name, "--runs-dir", str(demo_run.parent), "--otel", base]) == 0
        n = int(capsys.readouterr().out.split(": ", 1)[1].split(" spans")[0])
        spans: list = []
        while time.monotonic() < deadline:
            spans, cursor = [], None
            while True:
                try:
                    page = _get(f"{base}/v1/projects/cuda-llm/spans?limit=1000" + (f"&cursor={cursor}" if cursor else ""))
                except urllib.error.HTTPError as exc:     # 404 until the first spans have made the project
                    if exc.code != 404:
                        raise
                    break
                spans += page["data"]
                cursor = page.get("next_cursor")
                if not cursor:
                    break
            if len(spans) >= n:
                break
            time.sleep(0.5)
        assert len(spans) == n
        assert {s["span_kind"] for s in spans} == {"CHAIN", "LLM", "TOOL"}
        llm = [s for s in spans if s["span_kind"] == "LLM"]
        assert all("llm.input_messages" in json.dumps(s["attributes"]) for s in llm)
        assert all(s["attributes"]["session.id"] == demo_run.name for s in spans)
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_prompt_file_reads_as_its_messages():
    from cuda_llm.runs.otel_export import prompt_messages
    from cuda_llm.runs.rundir import render_messages

    text = render_messages([{"role": "system", "content": "rules\n## not a role"}, {"role": "human", "content": "go"},
                            {"role": "ai", "content": "ok"}])
    assert prompt_messages(text) == [("system", "rules\n## not a role"), ("user", "go"), ("assistant", "ok")]
    assert prompt_messages("plain text") == [("user", "plain text")] and prompt_messages("") == []
