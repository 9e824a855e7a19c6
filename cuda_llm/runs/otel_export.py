"""A run's trace as OpenTelemetry spans in the OpenInference conventions, sent over OTLP/HTTP, so a run opens
in Phoenix (local, offline) or any OTLP backend (Langfuse, Jaeger, a collector) beside other LangChain and
LangGraph traces.

The spans come from the events of trace.jsonl, read in order by one builder (``SpanBuilder``): a finished run
(`cuda-llm trace RUN --otel URL`) and a live one (`optimize --otel URL`, which follows the file as the run
appends to it) go through the same code. What becomes what:

  the run (one session of it)   CHAIN span, session.id = the run id; its outcome as output.value
  a graph node (plan, code...)  CHAIN span, from node_start to node_end; an error is an ERROR status
  an LLM call                   LLM span: llm.model_name, llm.input_messages (the prompt file),
                                llm.output_messages (the answer file), llm.token_count.prompt/completion/total
  a measurement                 TOOL spans named by tool.name: evaluate (the verdict, the median, the note;
                                its time from the GPU job that ran it), compile (inside it, from the build's
                                result), profile (the diagnosis), tune, head_to_head, final_check
  a decision (features, selection, critique, stop...)  an event on the node span it was taken in

The OpenTelemetry SDK and the OTLP exporter are the ``otel`` extra; the rest of cuda-llm never imports this
module unless asked to export.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

from cuda_llm.runs.trace import read_trace

OTEL_ENV = "CUDA_LLM_OTEL_ENDPOINT"
INSTALL_HINT = "pip install 'cuda-llm[otel]' (the OpenTelemetry SDK and its OTLP/HTTP exporter)"
PROJECT = "cuda-llm"          # Phoenix files spans under the resource's openinference.project.name
MAX_TEXT = 200_000            # a prompt or answer longer than this is cut (a backend may refuse huge attributes)
FOLLOW_EVERY_S = 1.0
EXPORT_TIMEOUT_S = 10         # per OTLP request: a backend that is down costs this much, then is reported

# OpenInference semantic conventions (openinference-semantic-conventions), written out so that the
# exporter needs only the OpenTelemetry SDK
SPAN_KIND = "openinference.span.kind"
INPUT_VALUE, INPUT_MIME = "input.value", "input.mime_type"
OUTPUT_VALUE, OUTPUT_MIME = "output.value", "output.mime_type"
LLM_MODEL, LLM_PROVIDER = "llm.model_name", "llm.provider"
LLM_INPUT, LLM_OUTPUT = "llm.input_messages", "llm.output_messages"
TOKENS_PROMPT, TOKENS_COMPLETION, TOKENS_TOTAL = ("llm.token_count.prompt", "llm.token_count.completion",
                                                  "llm.token_count.total")
TOOL_NAME, TOOL_PARAMETERS = "tool.name", "tool.parameters"
SESSION_ID, METADATA = "session.id", "metadata"
JSON_MIME, TEXT_MIME = "application/json", "text/plain"
TOOL_EVENTS = ("evaluation", "baseline", "profile", "tune", "final", "compile_fix")


class OtelUnavailable(RuntimeError):
    """The otel extra is not installed, or the endpoint is not an http(s) URL."""


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of ``endpoint``: http://localhost:6006 -> http://localhost:6006/v1/traces (a
    URL that already ends in /v1/traces stays)."""
    url = endpoint.strip()
    if not url.startswith(("http://", "https://")):
        raise OtelUnavailable(f"{endpoint!r} is not an OTLP/HTTP endpoint; give a URL such as http://localhost:6006 "
                              f"(Phoenix) or http://localhost:4318 (a collector)")
    url = url.rstrip("/")
    return url if url.endswith("/v1/traces") else url + "/v1/traces"


def check_available() -> None:
    """OtelUnavailable (saying what to install) when the SDK or the OTLP exporter is missing."""
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        raise OtelUnavailable(f"exporting spans needs the otel extra: {INSTALL_HINT}") from None


def _ns(ev: dict[str, Any]) -> int:
    try:
        return int(datetime.fromisoformat(str(ev["timestamp"]).replace("Z", "+00:00")).timestamp() * 1e9)
    except (KeyError, ValueError):
        return time.time_ns()


def _value(v: Any) -> Any:
    """An attribute value OpenTelemetry takes: a primitive, a list of strings, or JSON text."""
    if isinstance(v, (str, bool, int, float)):
        return v
    if isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
        return list(v)
    return json.dumps(v, default=str)


_ROLE_HEADER = re.compile(r"^## (system|human|user|ai|assistant|tool)\n", re.M)
_ROLES = {"human": "user", "ai": "assistant"}     # LangChain's message types as OpenInference roles


def prompt_messages(text: str) -> list[tuple[str, str]]:
    """A prompt file (rundir.render_messages: one ``## role`` section per message) as (role, content) pairs;
    a file without sections is one user message."""
    heads = list(_ROLE_HEADER.finditer(text))
    if not heads or heads[0].start() != 0:
        return [("user", text)] if text else []
    out = []
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        out.append((_ROLES.get(m.group(1), m.group(1)), text[m.end():end].strip("\n")))
    return out


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f"\n[... {len(text) - MAX_TEXT} more characters]"


class SpanBuilder:
    """Trace events, fed in the order the run wrote them, as spans of ``tracer`` (an OpenTelemetry tracer).
    A span is ended as soon as its last event is seen; ``close`` ends what is still open (a run that stopped
    or is still going) at the last event's time."""

    def __init__(self, tracer: Any, run_root: Path | str, run_id: str = ""):
        self.tracer = tracer
        self.root = Path(run_root)
        self.run_id = run_id or self.root.name
        self.run_span: Any = None
        self.nodes: list[tuple[str, Any]] = []            # the open node spans, innermost last
        self.jobs: dict[str, list[dict[str, Any]]] = {}   # GPU jobs per candidate, waiting for their verdict
        self.last_ns = 0
        self.spans = 0
        self.outcome: dict[str, Any] = {}

    # -- the span tree
    def _ctx(self) -> Any:
        from opentelemetry import trace

        parent = self.nodes[-1][1] if self.nodes else self.run_span
        return trace.set_span_in_context(parent) if parent is not None else None

    def _start(self, name: str, kind: str, start_ns: int, attributes: dict[str, Any] | None = None,
               parent: Any = None) -> Any:
        from opentelemetry import trace

        ctx = trace.set_span_in_context(parent) if parent is not None else self._ctx()
        attrs = {SPAN_KIND: kind, SESSION_ID: self.run_id}
        attrs.update({k: _value(v) for k, v in (attributes or {}).items() if v is not None})
        self.spans += 1
        return self.tracer.start_span(name, context=ctx, start_time=start_ns, attributes=attrs)

    def _ensure_run(self, ev: dict[str, Any], ns: int) -> None:
        if self.run_span is not None:
            return
        task = ev.get("task") or ""
        what = "run" if ev.get("event") == "run_start" else "run (resumed)"
        self.run_span = self._start(f"cuda-llm {what} {task}".strip(), "CHAIN", ns, {
            INPUT_VALUE: json.dumps({"run_id": self.run_id, **{k: ev.get(k) for k in ("task", "device", "arch",
                                                                                       "limits", "next")
                                                                if ev.get(k) is not None}}, default=str),
            INPUT_MIME: JSON_MIME, "cuda_llm.run_id": self.run_id})

    # -- events
    def feed(self, ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        ns = _ns(ev)
        self.last_ns = max(self.last_ns, ns)
        self._ensure_run(ev, ns)
        if kind == "node_start":
            self.nodes.append((str(ev.get("node")), self._start(str(ev.get("node")), "CHAIN", ns, {
                "cuda_llm.round": ev.get("round")})))
        elif kind == "node_end":
            self._end_node(ev, ns)
        elif kind == "llm_call":
            self._llm(ev, ns)
        elif kind == "gpu_job" and ev.get("kind") == "head_to_head":    # no verdict event of its own
            self._job(ev, ns)
        elif kind == "gpu_job":
            self.jobs.setdefault(str(ev.get("candidate")), []).append(ev)
        elif kind in TOOL_EVENTS:
            self._tool(ev, ns)
        elif kind in ("decision", "credit", "error", "warning", "waiting", "round_end", "llm_error"):
            target = self.nodes[-1][1] if self.nodes else self.run_span
            name = f"{kind}/{ev['kind']}" if kind == "decision" else str(kind)
            target.add_event(name, {k: _value(v) for k, v in ev.items() if k not in ("timestamp", "event")
                                    and v is not None}, timestamp=ns)
        elif kind == "run_end":
            self.outcome = {k: ev.get(k) for k in ("finished", "stop_reason", "best", "best_ms", "error", "halt")
                            if ev.get(k) not in (None, "")}
            if ev.get("finished") or ev.get("error") or ev.get("interrupted"):
                self.close()

    def _end_node(self, ev: dict[str, Any], ns: int) -> None:
        from opentelemetry.trace import Status, StatusCode

        name = str(ev.get("node"))
        at = next((i for i in range(len(self.nodes) - 1, -1, -1) if self.nodes[i][0] == name), None)
        if at is None:
            return
        _, span = self.nodes.pop(at)
        if ev.get("error"):
            span.set_status(Status(StatusCode.ERROR, str(ev["error"])[:500]))
        if ev.get("waiting"):
            span.set_attribute("cuda_llm.waiting", True)    # a manual role asked and the run paused here
        span.end(end_time=ns)

    def _file(self, path: Any, folder: str) -> str:
        """A prompt or answer the event names (a path as the run wrote it, relative to where it ran)."""
        if not path:
            return ""
        for p in (Path(str(path)), self.root / folder / Path(str(path)).name):
            try:
                if p.is_file():
                    return _cut(p.read_text(errors="replace"))
            except OSError:
                continue
        return ""

    def _llm(self, ev: dict[str, Any], ns: int) -> None:
        start = ns - int(float(ev.get("latency_s") or 0.0) * 1e9)
        prompt, answer = self._file(ev.get("prompt"), "prompts"), self._file(ev.get("response"), "answers")
        tin, tout = int(ev.get("input_tokens") or 0), int(ev.get("output_tokens") or 0)
        model = str(ev.get("model") or "")
        attrs = {
            LLM_MODEL: model, LLM_PROVIDER: "manual" if model.startswith("manual") else None,
            f"{LLM_OUTPUT}.0.message.role": "assistant", f"{LLM_OUTPUT}.0.message.content": answer,
            INPUT_VALUE: prompt, INPUT_MIME: TEXT_MIME, OUTPUT_VALUE: answer, OUTPUT_MIME: TEXT_MIME,
            TOKENS_PROMPT: tin, TOKENS_COMPLETION: tout, TOKENS_TOTAL: tin + tout,
            METADATA: {k: ev.get(k) for k in ("role", "candidate", "call_id", "cached", "kind", "cutoff_retries")
                       if ev.get(k) is not None},
        }
        for i, (role, content) in enumerate(prompt_messages(prompt)):
            attrs[f"{LLM_INPUT}.{i}.message.role"] = role
            attrs[f"{LLM_INPUT}.{i}.message.content"] = content
        span = self._start(f"{ev.get('role')} {ev.get('candidate') or ''}".strip(), "LLM", start, attrs)
        span.end(end_time=ns)

    def _window(self, cid: str, kinds: Iterable[str], ns: int, prefix: bool = False) -> tuple[int, int]:
        """The time the GPU spent on ``cid`` (its jobs since the last verdict), else the event's instant."""
        jobs = []
        for key in list(self.jobs):
            if key == cid or (prefix and key.startswith(cid + "-")):
                jobs += [j for j in self.jobs[key] if j.get("kind") in kinds]
                self.jobs[key] = [j for j in self.jobs[key] if j.get("kind") not in kinds]
        starts = [int(float(j["start"]) * 1e9) for j in jobs if isinstance(j.get("start"), (int, float))]
        ends = [int(float(j["end"]) * 1e9) for j in jobs if isinstance(j.get("end"), (int, float))]
        return (min(starts), max(ends)) if starts and ends else (ns, ns)

    def _tool(self, ev: dict[str, Any], ns: int) -> None:
        kind = ev["event"]
        cid = str(ev.get("candidate") or "baseline")
        if kind in ("evaluation", "baseline"):
            start, end = self._window(cid, ("evaluate", "baseline"), ns)
            verdict = {k: ev.get(k) for k in ("status", "median_ms", "interval_ms", "speedup_over_parent", "cached",
                                              "note") if ev.get(k) is not None}
            span = self._start(f"evaluate {cid}", "TOOL", start, {
                TOOL_NAME: "evaluate", TOOL_PARAMETERS: {"candidate": cid, "features": ev.get("features") or []},
                INPUT_VALUE: cid, OUTPUT_VALUE: json.dumps(verdict, default=str), OUTPUT_MIME: JSON_MIME,
                "cuda_llm.verdict": str(ev.get("status")), "cuda_llm.median_ms": ev.get("median_ms")})
            self._compile(cid, start, span)
            span.end(end_time=max(end, start))
            return
        if kind == "profile":
            start, end = self._window(cid, ("profile",), ns)
            out = {k: ev.get(k) for k in ("bottleneck", "summary", "suggested", "available") if ev.get(k) is not None}
            name, tool = f"profile {cid}", "profile"
        elif kind == "tune":
            start, end = self._window(cid, ("evaluate", "tune"), ns, prefix=True)
            out = {k: ev.get(k) for k in ("summary", "best", "evaluations", "invalid", "space", "sampler")
                   if ev.get(k) is not None}
            name, tool = f"tune {cid}", "tune"
        elif kind == "final":
            start, end = self._window(cid, ("final_check",), ns)
            out = {k: ev.get(k) for k in ("status", "ms", "baseline_ms", "speedup", "pct_of_sol", "sol_ms")
                   if ev.get(k) is not None}
            name, tool = f"final check {cid}", "final_check"
        else:   # compile_fix: the coder's own compile check sent a candidate back
            start = end = ns
            out = {k: ev.get(k) for k in ("status", "note") if ev.get(k) is not None}
            name, tool = f"compile check {cid}", "compile"
        span = self._start(name, "TOOL", start, {TOOL_NAME: tool, INPUT_VALUE: cid,
                                                 OUTPUT_VALUE: json.dumps(out, default=str), OUTPUT_MIME: JSON_MIME,
                                                 "cuda_llm.verdict": str(out.get("status") or out.get("bottleneck")
                                                                         or "")})
        span.end(end_time=max(end, start))

    def _job(self, ev: dict[str, Any], ns: int) -> None:
        """A GPU job that no verdict event follows (the head-to-head re-measure): its own TOOL span."""
        start = int(float(ev["start"]) * 1e9) if isinstance(ev.get("start"), (int, float)) else ns
        end = int(float(ev["end"]) * 1e9) if isinstance(ev.get("end"), (int, float)) else ns
        out = {k: ev.get(k) for k in ("status", "gpu", "seconds", "queued_s", "error") if ev.get(k) is not None}
        span = self._start(f"{ev.get('kind')} {ev.get('candidate')}", "TOOL", start, {
            TOOL_NAME: str(ev.get("kind")), INPUT_VALUE: str(ev.get("candidate")),
            OUTPUT_VALUE: json.dumps(out, default=str), OUTPUT_MIME: JSON_MIME,
            "cuda_llm.verdict": str(ev.get("status") or "")})
        span.end(end_time=max(end, start))

    def _compile(self, cid: str, start: int, parent: Any) -> None:
        """The build inside an evaluation, from the candidate's result file (its seconds and verdict)."""
        path = self.root / "candidates" / f"{cid}.json"
        try:
            comp = (json.loads(path.read_text()).get("compile") or {}) if path.is_file() else {}
        except (OSError, ValueError):
            comp = {}
        if not comp:
            return
        seconds = float(comp.get("seconds") or 0.0)
        out = {"ok": comp.get("ok"), "arch": comp.get("arch"), "cached": comp.get("cached"),
               "errors": (comp.get("errors") or "")[:4000]}
        span = self._start(f"compile {cid}", "TOOL", start, {
            TOOL_NAME: "compile", INPUT_VALUE: cid, OUTPUT_VALUE: json.dumps(out, default=str), OUTPUT_MIME: JSON_MIME,
            "cuda_llm.verdict": "ok" if comp.get("ok") else "compile_error", "cuda_llm.seconds": seconds},
            parent=parent)
        span.end(end_time=start + int(seconds * 1e9))

    def close(self) -> None:
        """End every open span at the last event's time (the run span with the run's outcome)."""
        from opentelemetry.trace import Status, StatusCode

        end = self.last_ns or time.time_ns()
        while self.nodes:
            _, span = self.nodes.pop()
            span.end(end_time=end)
        if self.run_span is not None:
            self.run_span.set_attribute(OUTPUT_VALUE, json.dumps(self.outcome, default=str))
            self.run_span.set_attribute(OUTPUT_MIME, JSON_MIME)
            if self.outcome.get("error"):
                self.run_span.set_status(Status(StatusCode.ERROR, str(self.outcome["error"])[:500]))
            elif self.outcome.get("finished"):
                self.run_span.set_status(Status(StatusCode.OK))
            self.run_span.end(end_time=end)
            self.run_span = None


# ------------------------------------------------------------------------------------------- export
class _Recording:
    """A span exporter that remembers whether every export succeeded (so a command can say it failed)."""

    def __init__(self, inner: Any):
        self.inner, self.failed = inner, 0

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        result = self.inner.export(spans)
        if result != SpanExportResult.SUCCESS:
            self.failed += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        flush = getattr(self.inner, "force_flush", None)
        return flush(timeout_millis) if callable(flush) else True


def provider(endpoint: str | None = None, exporter: Any = None) -> tuple[Any, _Recording]:
    """A tracer provider sending to ``endpoint`` over OTLP/HTTP (or to ``exporter``: tests pass the SDK's
    InMemorySpanExporter), with the resource Phoenix files the spans under."""
    check_available()
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=traces_url(endpoint or ""), timeout=EXPORT_TIMEOUT_S)
        wrapped = _Recording(exporter)
        processor: Any = BatchSpanProcessor(wrapped)
    else:
        wrapped = _Recording(exporter)
        processor = SimpleSpanProcessor(wrapped)
    tp = TracerProvider(resource=Resource.create({"service.name": PROJECT, "openinference.project.name": PROJECT}))
    tp.add_span_processor(processor)
    return tp, wrapped


class ExportResult:
    def __init__(self, spans: int, failed: int):
        self.spans, self.failed = spans, failed


def export_run(run_root: Path | str, run_id: str = "", *, endpoint: str | None = None,
               exporter: Any = None) -> ExportResult:
    """Every event of a run's trace.jsonl as spans, sent and flushed; how many, and how many failed to send."""

    tp, sink = provider(endpoint, exporter)
    builder = SpanBuilder(tp.get_tracer("cuda_llm"), run_root, run_id)
    for ev in read_trace(Path(run_root) / "trace.jsonl"):
        builder.feed(ev)
    builder.close()
    tp.force_flush()
    tp.shutdown()
    return ExportResult(builder.spans, sink.failed)


class LiveExport:
    """Follows a run's trace.jsonl while the run appends to it (from the size it has now: this session's
    events) and sends each span as soon as it ends; ``stop`` reads the rest, ends what is open and flushes."""

    def __init__(self, run_root: Path | str, run_id: str = "", *, endpoint: str | None = None, exporter: Any = None):
        self.path = Path(run_root) / "trace.jsonl"
        self.offset = self.path.stat().st_size if self.path.exists() else 0
        self.tp, self.sink = provider(endpoint, exporter)
        self.builder = SpanBuilder(self.tp.get_tracer("cuda_llm"), run_root, run_id)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="otel-export", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with self._lock:
            try:
                with open(self.path, "rb") as f:
                    f.seek(self.offset)
                    data = f.read()
            except OSError:
                return
            done = data.rfind(b"\n") + 1       # whole lines only: the last may still be being written
            self.offset += done
            for line in data[:done].splitlines():
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if isinstance(ev, dict):
                    self.builder.feed(ev)

    def _loop(self) -> None:
        while not self._stop.wait(FOLLOW_EVERY_S):
            self._read()

    def stop(self) -> ExportResult:
        self._stop.set()
        self._thread.join(timeout=10)
        self._read()
        self.builder.close()
        self.tp.force_flush()
        self.tp.shutdown()
        return ExportResult(self.builder.spans, self.sink.failed)


def live_export_from_env(run_root: Path | str, run_id: str = "") -> LiveExport | None:
    """A LiveExport to $CUDA_LLM_OTEL_ENDPOINT (which `--otel URL` sets), or None when it is not set."""
    endpoint = os.environ.get(OTEL_ENV, "").strip()
    return LiveExport(run_root, run_id, endpoint=endpoint) if endpoint else None
