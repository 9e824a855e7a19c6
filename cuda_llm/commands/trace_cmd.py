"""`cuda-llm trace RUN_ID`: a run's trace as a readable timeline, optionally filtered or followed live."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cuda_llm.commands import one_line_errors
from cuda_llm.report.timeline import EVENTS as EVENT_NAMES
from cuda_llm.report.timeline import render
from cuda_llm.runs.replay import replay_line
from cuda_llm.runs.run_info import lock_holder
from cuda_llm.runs.rundir import RunDir, RunNotFoundError

HELP = "show a run's trace as a timeline: LLM calls, candidates, measurements, decisions"
DESCRIPTION = """Print runs/<id>/trace.jsonl as one line per event: seconds since the run started, the round, the
event, and what happened (who was asked, which kernel passed how fast, why the best changed or not,
why the run stopped). Node start/end lines are left out unless --nodes.

Filters combine: --round 2 --events evaluation,decision; --candidate r2c1 follows one kernel from the
plan to its measurement. --follow keeps printing new events while the run goes on (Ctrl-C to stop
watching; the run itself is not touched). Notes, summaries and errors are cut to fit a line; --full prints
them whole (wrapped under the description). For every field of every event, read the JSON lines directly
(e.g. with jq).

--otel URL sends the run to an OpenTelemetry backend instead of printing it: its graph nodes, LLM calls
(prompts, answers, tokens) and tool calls (compile, evaluate, profile, tune, with their times and verdicts)
as spans in the OpenInference conventions over OTLP/HTTP, to open in Phoenix (`phoenix serve`, then
http://localhost:6006) or any OTLP backend. Needs the otel extra: pip install 'cuda-llm[otel]'.
$CUDA_LLM_OTEL_ENDPOINT is the default URL; `optimize`, `resume` and `batch` take --otel too, to send a run
as it goes.

Examples:
  cuda-llm trace latest --round 2 --events evaluation,decision
  cuda-llm trace latest --full
  cuda-llm trace latest --otel http://localhost:6006"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    p.add_argument("run_id", help="run id, unique prefix, 'latest', or a run folder")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where runs are kept (default ./runs)")
    p.add_argument("--round", type=int, help="only this round")
    p.add_argument("--candidate", help="only events about this candidate (e.g. r2c1)")
    p.add_argument("--events", help=f"comma-separated event names: {', '.join(EVENT_NAMES)}")
    p.add_argument("--nodes", action="store_true", help="also node start/end lines (with durations)")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new events until the run ends")
    p.add_argument("--full", action="store_true", help="print notes, summaries and errors whole, not cut to a line")
    p.add_argument("--otel", metavar="URL", nargs="?", const="", default=None,
                   help="send the run as OpenTelemetry spans (OpenInference) to this OTLP/HTTP endpoint, e.g. "
                        "http://localhost:6006 for Phoenix (default: $CUDA_LLM_OTEL_ENDPOINT)")


def run(args: argparse.Namespace) -> int:
    # the trace reader (structlog, rich): imported on use, off the `--help` start-up
    from cuda_llm.runs.trace import read_trace

    kinds = tuple(filter(None, (args.events or "").split(",")))
    unknown = [k for k in kinds if k not in EVENT_NAMES]
    if unknown:
        print(f"cuda-llm trace: unknown event name(s) {', '.join(unknown)}; known: {', '.join(EVENT_NAMES)}",
              file=sys.stderr)
        return 2
    try:
        rundir = RunDir.open(args.run_id, args.runs_dir)
    except RunNotFoundError as exc:
        print(f"cuda-llm trace: {exc}", file=sys.stderr)
        return 2

    if args.otel is not None:
        return _export(rundir, args.otel)
    if replay_line(rundir):
        print(f"# {replay_line(rundir)}", flush=True)
    filters = dict(kinds=kinds, round_=args.round, candidate=args.candidate, nodes=args.nodes,
                   root=str(rundir.root), full=args.full)
    shown = 0
    try:
        while True:
            events = read_trace(rundir.trace_path)
            lines = render(events, **filters).splitlines() if events else []
            for line in lines[shown:]:
                print(line, flush=True)
            shown = max(shown, len(lines))
            if not args.follow or lock_holder(rundir.root) is None:
                break
            time.sleep(1.0)
    except KeyboardInterrupt:
        return 0
    if not shown and not args.follow:
        print(f"(no matching events in {rundir.trace_path})", file=sys.stderr)
    return 0


def _export(rundir: RunDir, url: str) -> int:
    """The run's trace.jsonl as spans, sent to ``url`` (or $CUDA_LLM_OTEL_ENDPOINT)."""
    import os

    # the exporter (the OpenTelemetry SDK, an extra): imported on use
    from cuda_llm.runs.otel_export import OTEL_ENV, OtelUnavailable, export_run, traces_url

    url = url or os.environ.get(OTEL_ENV, "")
    if not url:
        print(f"cuda-llm trace: --otel needs a URL (e.g. http://localhost:6006 for Phoenix) or ${OTEL_ENV}",
              file=sys.stderr)
        return 2
    try:
        target = traces_url(url)
        result = export_run(rundir.root, rundir.run_id, endpoint=url)
    except OtelUnavailable as exc:
        print(f"cuda-llm trace: {exc}", file=sys.stderr)
        return 2
    if result.failed:
        print(f"cuda-llm trace: {result.failed} of {result.spans} spans of run {rundir.run_id} could not be sent to "
              f"{target} (is the backend running? Phoenix: `phoenix serve`)", file=sys.stderr)
        return 1
    print(f"sent run {rundir.run_id} to {target}: {result.spans} spans (graph nodes, LLM calls, tool calls)")
    return 0
