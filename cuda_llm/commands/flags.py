"""The flags several commands share and the checks of their values: durations, counts and token budgets, the LLM
and role settings, the budgets and stop rules, the search, the GPUs and the tool stages (optimize, resume, batch,
tune, eval and doctor read them here, so one mistake is worded the same way on every command).

Imported while `cuda-llm --help` builds every parser: what it imports is already loaded there (graph.run for
``Keep``) or small (the GPU list and device count parsers).
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from cuda_llm.graph.run import Keep, gpus_text
from cuda_llm.graph.stage_plugins import StageError, parse_stage_spec
from cuda_llm.graph.state import Limits
from cuda_llm.measure.gpu_pool import check_gpus, parse_gpus
from cuda_llm.tools.device import device_probe
from cuda_llm.tools.harness.timing_budget import TimingBudget

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$", re.I)
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """'90', '90s', '45m', '8h', '1.5h' -> seconds."""
    m = _DURATION.match(str(text))
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration; write e.g. 600, 45m or 8h")
    return float(m.group(1)) * _UNITS[m.group(2).lower()]


def parse_threshold(text: str) -> float:
    """'2%' or '0.02' -> 0.02."""
    t = str(text).strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a threshold; write e.g. 2% or 0.02") from None
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: the threshold must be between 0% and 100%")
    return v


def parse_sol_target(text: str) -> float | None:
    """'95%', '95' or '0.95' -> 0.95; '0' or 'off' -> None (never stop on speed of light)."""
    t = str(text).strip().lower()
    if t in ("0", "0%", "off", "none"):
        return None
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        v = -1.0
    if v > 1.25 and not t.endswith("%"):
        v /= 100                  # "95" is a percentage
    if not 0 < v <= 1.25:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share of speed of light; write e.g. 95% or 0.95, or off")
    return v


def parse_count(noun: str, minimum: int = 1, maximum: int | None = None) -> Callable[[str], int]:
    """A whole number of ``noun`` within bounds; every command words the same mistake the same way
    (`--rounds -1` on optimize, resume and batch)."""
    span = f"{minimum} to {maximum}" if maximum is not None else f"{minimum} or more"

    def parse(text: str) -> int:
        try:
            v = int(str(text).strip())
        except ValueError:
            v = None
        if v is None or v < minimum or (maximum is not None and v > maximum):
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of {noun}: give {span}")
        return v
    return parse


def parse_tokens(text: str) -> int:
    """'2000000', '2M', '500k' -> tokens."""
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$", str(text))
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a token count; write e.g. 500k or 2M")
    return int(float(m.group(1)) * {"": 1, "k": 1_000, "m": 1_000_000}[m.group(2).lower()])


ROLE_NAMES = ("planner", "coder", "critic")
_PER_ROLE = ("model", "temperature", "max_tokens", "reasoning_effort", "extra_body")


def parse_temperature(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a temperature; write e.g. 0.7") from None
    if not 0 <= v <= 2:
        raise argparse.ArgumentTypeError(f"{text!r}: a temperature lies between 0 and 2")
    return v


def parse_positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give at least 1")
    return v


def add_role_arguments(p: argparse.ArgumentParser) -> None:
    """--planner / --coder / --critic PROVIDER: who plays each role; and --otel, where the roles' calls and the
    tools' verdicts go as they happen (every command that runs roles takes both: optimize, resume, batch)."""
    g = p.add_argument_group("who plays each role (llm: an OpenAI-compatible endpoint; manual: you answer prompt "
                             "files; rules: no model)")
    g.add_argument("--planner", choices=("llm", "manual", "rules"), help="the planner (rules: the feature bandit)")
    g.add_argument("--coder", choices=("llm", "manual"), help="the coder")
    g.add_argument("--critic", choices=("llm", "manual", "rules"), help="the critic (rules: the rule-based diagnosis)")
    t = p.add_argument_group("tracing")
    t.add_argument("--otel", metavar="URL", action=OtelAction,
                   help="also send the run, as it goes, as OpenTelemetry spans (OpenInference: graph nodes, LLM "
                        "calls, tool calls) to this OTLP/HTTP endpoint, e.g. http://localhost:6006 for Phoenix "
                        "(or $CUDA_LLM_OTEL_ENDPOINT; needs pip install 'cuda-llm[otel]')")


class OtelAction(argparse.Action):
    """--otel URL: checked at once (an http(s) URL, the otel extra installed), then made this process's
    $CUDA_LLM_OTEL_ENDPOINT, which the run lifecycle reads for every run it drives (one run, a resume, each
    task of a batch)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        # the exporter's checks (no OpenTelemetry import unless --otel is given)
        from cuda_llm.runs.otel_export import OTEL_ENV, OtelUnavailable, check_available, traces_url

        try:
            traces_url(str(values))
            check_available()
        except OtelUnavailable as exc:
            parser.error(f"--otel: {exc}")
        os.environ[OTEL_ENV] = str(values)
        setattr(namespace, self.dest, values)


def add_llm_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("LLM")
    g.add_argument("--model", help="model for every role (or CUDA_LLM_MODEL)")
    g.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 (or OPENAI_BASE_URL)")
    g.add_argument("--api-key", help="API key (better: OPENAI_API_KEY in the environment)")
    g.add_argument("--timeout", type=float, dest="timeout_s", metavar="SECONDS", help="per request (default 300)")
    g.add_argument("--temperature", type=parse_temperature, help="for every role (default: the server's)")
    g.add_argument("--max-tokens", type=parse_positive_int, help="answer budget for every role; a cut-off answer is "
                   "asked again with twice as much")
    g.add_argument("--reasoning-effort", help="for reasoning models, e.g. low, medium, high")
    g.add_argument("--extra-body", metavar="JSON", help="extra request fields, e.g. '{\"top_k\": 20}'")
    g.add_argument("--config", type=Path, help="a cuda-llm.toml other than ./cuda-llm.toml")
    r = p.add_argument_group("LLM per role (override the settings above for one role)")
    for role in ROLE_NAMES:
        r.add_argument(f"--{role}-model", help=f"model for the {role} only")
        r.add_argument(f"--{role}-temperature", type=parse_temperature, metavar="T")
        r.add_argument(f"--{role}-max-tokens", type=parse_positive_int, metavar="N")
        r.add_argument(f"--{role}-reasoning-effort", metavar="EFFORT")
        r.add_argument(f"--{role}-extra-body", metavar="JSON")
    r.add_argument("--coder-temperatures", metavar="T1,T2,...",
                   help="one temperature per candidate of a round, in turn, e.g. 0.2,0.6,1.0")
    add_role_arguments(p)


def llm_cli(args: argparse.Namespace) -> dict:
    keys = ["model", "base_url", "api_key", "timeout_s", "temperature", "max_tokens", "reasoning_effort", "extra_body",
            "config", "coder_temperatures"]
    keys += [f"{role}_{k}" for role in ROLE_NAMES for k in _PER_ROLE]
    out = {k: getattr(args, k, None) for k in keys if getattr(args, k, None) is not None}
    for role in ROLE_NAMES:   # --coder manual -> coder_provider
        if getattr(args, role, None):
            out[f"{role}_provider"] = getattr(args, role)
    return out


def add_budget_arguments(p: argparse.ArgumentParser, *, batch: bool = False) -> None:
    """Budgets and stop rules; for a batch the time and token budgets are the whole batch's."""
    b = p.add_argument_group("budgets and stop rules" + (" (per task, but the time and token budgets are the "
                                                         "whole batch's)" if batch else ""))
    b.add_argument("--rounds", type=parse_count("rounds"), default=10, help="maximum rounds (default 10)")
    b.add_argument("--candidates", type=parse_count("candidates", 1, 16), default=4, help="candidates per round, written in parallel (default 4)")
    b.add_argument("--time-budget", type=parse_duration, default=8 * 3600.0,
                   help=("wall-clock budget of the whole batch, shared out as tasks start, e.g. 8h (default 8h)" if batch
                         else "wall-clock budget, e.g. 45m or 8h (default 8h)"))
    b.add_argument("--token-budget", type=parse_tokens, default=10_000_000 if batch else 2_000_000,
                   help=("tokens over all tasks and roles, shared out as tasks start (default 10M)" if batch
                         else "tokens over all roles (default 2M)"))
    b.add_argument("--plateau-rounds", type=parse_count("rounds"), default=3, help="stop after this many rounds without progress (default 3)")
    b.add_argument("--plateau-threshold", type=parse_threshold, default=0.02,
                   help="what counts as progress: best latency better by more than this (default 2%%)")
    b.add_argument("--max-repairs", type=parse_count("repair attempts", 0), default=2,
                   help="repair attempts per round for failed candidates: all of them when nothing passed, else "
                        "those whose features are new to the run (default 2)")
    b.add_argument("--compile-fixes", type=parse_count("compile-fix turns", 0), default=2,
                   help="build errors sent back to the coder, in its conversation, before a candidate is "
                        "evaluated (default 2)")
    b.add_argument("--reserve", type=parse_duration, default=120.0,
                   help="time kept back from the budget for the final validation (default 120s)")
    b.add_argument("--max-no-code", type=parse_count("answers", 0), default=8,
                   help="halt after this many coder answers in a row without usable code (default 8; 0: never)")
    b.add_argument("--max-endpoint-errors", type=parse_count("failed calls", 0), default=3,
                   help="halt after this many failed calls of one role in a row (default 3; 0: never)")
    b.add_argument("--sol-target", type=parse_sol_target, default=0.95,
                   help="stop once the best kernel reaches this share of speed of light (default 95%%; off: never)")
    b.add_argument("--max-failed-rounds", type=parse_count("rounds"), default=3,
                   help="stop after this many rounds in a row in which no candidate passed (default 3)")


def add_search_arguments(p: argparse.ArgumentParser) -> None:
    s = p.add_argument_group("search")
    s.add_argument("--refine-turns", type=parse_count("turns", 0, 3), default=0,
                   help="more turns of each coder on its own passing candidate in a round (default 0)")
    s.add_argument("--free-slots", type=parse_count("slots", 0), default=1,
                   help="candidates per round with no assigned features: the coder takes the best next step it "
                        "sees in the evidence, and the features it used are credited (default 1; 0: none)")
    s.add_argument("--inspirations", type=parse_count("kernels", 0, 2), default=1,
                   help="kernels of other approaches shown to each coder, 0-2 (default 1)")
    s.add_argument("--tune-evals", type=parse_count("points"), default=16,
                   help="timed points per candidate that declares tunables (default 16)")
    s.add_argument("--tune-time", type=parse_duration, default=300.0,
                   help="seconds of tuning per candidate that declares tunables (default 300s)")


def parse_stage_arg(text: str) -> str:
    """'NAME' or 'NAME:POSITION' as written (the stage is imported once the flags are read)."""
    try:
        parse_stage_spec(text)
    except StageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text.strip()


def parse_gpus_arg(text: str) -> list[int] | None:
    try:
        return parse_gpus(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_gpu_arguments(g: Any, *, resumable: bool = False) -> None:
    """--arch, --eval-time, --gpus: how and where candidates are measured. ``resumable``: without --gpus a
    resumed batch keeps the GPUs it was started with (``Keep.SAVED``; a new one takes all)."""
    g.add_argument("--arch", help="GPU architecture, e.g. sm_90 (default: the device's)")
    g.add_argument("--eval-time", type=parse_duration, default=10.0, help="timing budget per candidate (default 10s)")
    g.add_argument("--gpus", type=parse_gpus_arg, default=Keep.SAVED if resumable else None, metavar="0,1,2,3",
                   help="the GPUs to measure on, one evaluation worker each, a round's candidates side by side "
                        "(indices among the visible GPUs; default: all" +
                        ("; a resumed batch: the ones it was started with)" if resumable else ")"))


def timing_budget(args: argparse.Namespace) -> TimingBudget:
    """The timing budget of every candidate the command measures: where ``--eval-time`` (tune's
    ``--eval-time-budget``, both ``args.eval_time``) becomes a TimingBudget; its other fields keep the product's
    defaults."""
    return TimingBudget(time_budget_s=args.eval_time)


def check_gpus_arg(gpus: list[int] | None, *, what: str = "--gpus", preflight: bool = True) -> str | None:
    """None when every GPU of ``gpus`` is visible here, else what is wrong (checked before anything starts;
    ``what`` names where the choice came from, as check_gpus words it). Where no device is visible at all a
    command with a preflight lets it say so in its own words; one without (tune) is told here."""
    count = device_probe.cuda_device_count()     # looked up on use: tests show this machine n GPUs
    if count == 0 and (preflight or gpus is None):
        return None
    try:
        check_gpus(gpus, count, what=what)
    except ValueError as exc:
        return str(exc)
    return None


def saved_gpus_problem(saved: list[int] | None, given: Any, whose: str, command: str) -> str | None:
    """What is wrong with the GPUs a resumed run or batch will measure on (those given now, else its saved
    ones), in the preflight's words; a saved choice this machine cannot honour says how to choose others."""
    if given is not Keep.SAVED:
        return check_gpus_arg(given)
    bad = check_gpus_arg(saved, what=f"the GPUs {whose} was started with (--gpus {gpus_text(saved)})")
    return None if bad is None else f"{bad}; give `{command} --gpus ...` to measure on others (all: --gpus all)"


def limits_from_args(args: argparse.Namespace) -> Limits | str:
    """The Limits the budget flags say, or what is wrong with them."""
    try:
        limits = Limits(max_rounds=args.rounds, n_candidates=args.candidates, time_budget_s=args.time_budget,
                        token_budget=args.token_budget, plateau_rounds=args.plateau_rounds,
                        plateau_threshold=args.plateau_threshold, reserve_s=args.reserve, max_repairs=args.max_repairs,
                        max_no_code=args.max_no_code, max_endpoint_errors=args.max_endpoint_errors,
                        compile_fix_turns=args.compile_fixes,
                        sol_target=args.sol_target, max_failed_rounds=args.max_failed_rounds,
                        refine_turns=args.refine_turns, free_slots=args.free_slots, inspirations=args.inspirations,
                        tune_evals=args.tune_evals,
                        tune_seconds=args.tune_time)
    except ValidationError as exc:
        bad = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        return f"bad budget: {bad} (see `cuda-llm {args.command} --help`)"
    if limits.reserve_s >= limits.time_budget_s:
        return (f"--reserve {limits.reserve_s:g}s leaves nothing of --time-budget {limits.time_budget_s:g}s; "
                "give a larger budget or a smaller reserve")
    return limits
