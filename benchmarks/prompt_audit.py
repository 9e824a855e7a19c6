"""Prompt audit: what the planner, the coder and the critic are shown, in a scripted run of softmax and sgemm.

    python benchmarks/prompt_audit.py [--tasks softmax,sgemm] [--rounds 4] [--candidates 2] [--out bench-out]
                                      [--evaluator scripted|gpu]

The LLM is scripted (benchmarks/scripted_answers.py, scripted here: a plan, kernels with a compile error
fixed in the coder's conversation and a wrong answer repaired, critiques); the compiles (nvcc), the roofline
and the rule-based diagnosis are real. With --evaluator scripted (the default, any machine) the timings and
Nsight Compute profiles are invented and the device is an H100 as measured; with --evaluator gpu they are
measured on this machine's GPU. The output says which.

Prints, per task, each role's prompt size in tokens (characters / 4) per round, and the checklist of
issue 12 item 1 (is each piece of evidence in the prompts, and no held-out size); writes every rendered
prompt to OUT/prompt-audit/<task>/<role>-<label>[-<turn>].md and the tables to OUT/prompt_audit.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from langchain_core.messages import AIMessage, BaseMessage  # noqa: E402

from cuda_llm.measure.evaluator import ToolsMixin  # noqa: E402
from cuda_llm.results import (  # noqa: E402
    CaseResult, DeviceInfo, EvalResult, Status, TimingResult, ValidationResult,
)

H100 = DeviceInfo(name="NVIDIA H100 80GB HBM3", arch="sm_90", compute_capability=(9, 0), sm_count=132,
                  max_threads_per_block=1024, max_shared_per_block=49152, max_shared_per_block_optin=232448,
                  max_shared_per_sm=233472, registers_per_block=65536, registers_per_sm=65536, l2_bytes=50 * 2**20,
                  memory_bytes=80 * 2**30, peak_bandwidth_gbs=2999.0, peak_fp32_gflops=60300.0)

# per task: the features the planner hands out in turn; the idea each candidate is given
PLANS = {
    "softmax": ["warp_shuffle", "vector_loads", "block_reduction_tree", "loop_unrolling", "tma_bulk_copy",
                "cp_async", "persistent_kernel", "fast_math_intrinsics"],
    "sgemm": ["smem_tiling", "register_blocking", "vector_loads", "double_buffering", "cp_async", "tma_bulk_copy",
              "thread_block_clusters", "loop_unrolling"],
}
IDEA = ("{f} for {task}: one block computes a tile of the output, each thread keeps its part of the working set "
        "in registers, the launch fills all 132 SMs with at least four waves, and sizes that are not multiples of the "
        "tile take a guarded tail; the data is read from DRAM once and reused from shared memory and registers "
        "(round {r}, candidate {c}).")


def audit_model(task: str, n: int, records: list[dict]) -> Any:
    """The scripted LLM of this audit (benchmarks/scripted_answers.py): answers by role and appends each call to
    ``records`` with the label the graph gives it (the candidate, or the round for the planner)."""
    from scripted_answers import ScriptedBenchModel, audit_kernel, coder_answer, critic_answer, plan_answer

    from cuda_llm.runs.llm_cache import current_call_label

    def planner(text: str) -> str:
        r, feats = int(re.search(r"Round (\d+)\.", text).group(1)), PLANS[task]
        chosen = [feats[(r * n + c) % len(feats)] for c in range(n)]
        ideas = [IDEA.format(f=f, task=task, r=r, c=c) for c, f in enumerate(chosen)]
        return plan_answer(n, tuple(chosen), ideas=ideas,
                           rationale="spread the round over the bottleneck the critic named")

    def critic(text: str) -> str:
        ids = re.findall(r"^- ([a-z0-9_]+): ", text.split("Feature catalogue", 1)[-1], re.M)
        return critic_answer(tuple(ids[:2]), bottleneck="memory-bound" if task == "softmax" else "compute-bound",
                             evidence=["DRAM throughput = 41% of peak", "warp stall mix = long_scoreboard 61%"],
                             change="keep the row (tile) in registers and read it once",
                             expected_gain="1.5-2x: DRAM at 41% of peak", summary="the kernel re-reads its input")

    def coder(text: str, turn: int) -> str:
        cid = re.search(r"Write candidate `r(\d+)c(\d+)(?:f(\d+))?`", text)
        r, c, f = int(cid.group(1)), int(cid.group(2)), int(cid.group(3) or 0)
        if f:                                      # a repair: the fixed kernel
            name = f"r{r}c{c}-fixed"
        elif r == 1 and c == n - 1:                # the last candidate of round 1 gives a wrong answer
            name = "wrong"
        else:
            name = f"r{r}c{c}"
        broken = r == 1 and c == 0 and turn == 1   # round 1's first answer does not build: a compile-fix turn
        return coder_answer(audit_kernel(task, name, broken=broken, size=r + c), note="Plan: as asked.")

    def respond(role: str | None, messages: list[BaseMessage]) -> str:
        if role is None:
            raise ValueError("prompt audit: a call from none of the planner, the coder and the critic")
        text = "\n".join(str(m.content) for m in messages)
        turn = sum(isinstance(m, AIMessage) for m in messages) + 1
        records.append({"role": role, "label": current_call_label() or "call", "turn": turn,
                        "chars": sum(len(str(m.content)) for m in messages), "text": _as_markdown(messages)})
        return planner(text) if role == "planner" else critic(text) if role == "critic" else coder(text, turn)

    return ScriptedBenchModel(respond=respond)


def _as_markdown(messages: list[BaseMessage]) -> str:
    return "\n".join(f"## {m.type}\n\n{m.content}\n" for m in messages)


def _baseline_ms(loaded: Any) -> float:
    """The naive baseline's invented time, as the H100 measured it for softmax and sgemm."""
    return {"softmax": 1.877, "sgemm": 79.658}.get(loaded.task.name, 10.0)


class ScriptedEvaluator(ToolsMixin):
    """Real builds, roofline and diagnosis (ToolsMixin); invented timings and profiles, on an H100's facts."""

    def __init__(self, arch: str = "sm_90"):
        self.arch, self.device = arch, H100

    def _ms(self, loaded: Any, name: str | None) -> float | None:
        base = _baseline_ms(loaded)
        if name is None or name == "wrong":
            return None
        if name.endswith("-fixed"):
            return base / 2.5
        m = re.fullmatch(r"r(\d+)c(\d+)", name)
        return base / (1.5 + int(m.group(1)) * 0.7 + int(m.group(2)) * 0.1) if m else base

    def _measure(self, loaded: Any, source: str, cid: str, baseline: bool = False) -> EvalResult:
        from scripted_answers import variant_of

        from cuda_llm.tools.bounds.speed_of_light import sol_ms

        built = self.build(loaded, source, cid)
        if built.status != Status.ok:
            return built.model_copy(update={"message": "compilation failed: " + (built.compile.errors if built.compile else "")})
        name = "baseline" if baseline else variant_of(source)
        cases = [CaseResult(sizes=s, held_out=h, passed=True) for s, h in loaded.task.all_cases()]
        ms = _baseline_ms(loaded) if baseline else self._ms(loaded, name)
        if ms is None:
            cases[-1] = CaseResult(sizes=cases[-1].sizes, held_out=True, passed=False, kind="wrong_values",
                                   reason="max abs error 0.5 > tolerance", max_abs_err=0.5, first_bad_index=[0, 3],
                                   expected=0.25, got=0.75)
            return built.model_copy(update={"status": Status.wrong_answer, "message": "wrong answer",
                                            "validation": ValidationResult(passed=False, cases=cases)})
        samples = [ms * (1 + d) for d in (0.0, 0.002, 0.004, 0.006, 0.01, 0.012, 0.015, 0.02)]
        sol = sol_ms(loaded.task, dict(loaded.task.benchmark), self.device)
        timing = TimingResult(sizes=dict(loaded.task.benchmark), median_ms=samples[4], min_ms=ms, mean_ms=ms * 1.01,
                              iqr_ms=ms * 0.01, rse=0.003, samples_ms=samples, repetitions=len(samples),
                              stop_reason="rse", sol_ms=sol, pct_of_sol=100 * sol / samples[4] if sol else None)
        return built.model_copy(update={"status": Status.ok, "message": f"passed; {samples[4]:.4f} ms",
                                        "validation": ValidationResult(passed=True, cases=cases), "timing": timing})

    def evaluate(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> EvalResult:
        return self._measure(loaded, source, candidate_id)

    def baseline(self, loaded: Any) -> EvalResult:
        return self._measure(loaded, Path(loaded.task.baseline_path).read_text(), "baseline", baseline=True)

    def profile(self, loaded: Any, source: str, candidate_id: str, work_dir: Path, result: EvalResult) -> Any:
        from cuda_llm.tools.profile.profile_models import KernelMetrics, ProfileResult, StallReason

        k = KernelMetrics(name="kernel", duration_ns=(result.median_ms or 1.0) * 1e6, sm_throughput_pct=22.0,
                          memory_throughput_pct=44.0, dram_throughput_pct=41.0,
                          dram_bytes=2.05 * loaded.task.bytes_at(dict(loaded.task.benchmark)),
                          achieved_occupancy_pct=31.5, theoretical_occupancy_pct=50.0, occupancy_limiter="registers",
                          registers_per_thread=72.0, global_load_sectors=3.2e7, global_load_requests=1.0e6,
                          stalls=[StallReason(reason="long_scoreboard", per_issue=3.1, share_pct=61.0),
                                  StallReason(reason="barrier", per_issue=0.9, share_pct=18.0)],
                          block_size=256, grid_size=2048, waves_per_sm=1.94)
        return ProfileResult(available=True, kernels=[k], duration_ms=result.median_ms,
                             sizes=dict(loaded.task.benchmark))

    def final_check(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> tuple[EvalResult, EvalResult]:
        cand, base = self._measure(loaded, source, candidate_id), self.baseline(loaded)
        return cand.model_copy(update={"baseline_ms": base.median_ms}), base


# ------------------------------------------------------------------ the checklist of issue 12, item 1
CHECKS: dict[str, list[tuple[str, str]]] = {
    "coder": [
        ("speed of light at the benchmark shape (ms)", r"Speed of light at the benchmark sizes: [0-9.]+ ms"),
        ("the parent's % of speed of light", r"this kernel runs at [0-9.]+% of it"),
        ("the critic's summary of the parent", r"Review of `[^`]+` by the (critic|rule-based diagnosis)"),
        ("the critic's evidence with metric values", r"Evidence:\n- .*= "),
        ("the one change the critic recommends", r"Recommended change: "),
        ("the expected gain", r"Expected gain: "),
        ("the planner's whole idea", r"the data is read from DRAM once and reused from shared memory and registers"),
        ("the parent's ptxas resources", r"Resource usage \(ptxas\):\n- .*registers"),
        ("stall mix", r"warp stall mix = "),
        ("sectors per request", r"sectors of 32 B per warp request"),
        ("DRAM bytes against the minimum", r"DRAM bytes = .* vs the task's minimum"),
        ("occupancy and its limiter", r"occupancy = .* theoretical(, limited by|, nothing limits it)"),
        ("waves", r"waves per SM = "),
        ("threads, blocks and warp schedulers per SM", r"resident threads .* resident blocks, 4 warp schedulers"),
        ("shared memory reserved per block", r"of shared memory per block is reserved"),
        ("CUDA and PTX versions", r"Toolchain: CUDA \d+\.\d+.*PTX ISA \d+\.\d+"),
        ("the exact nvcc command", r"nvcc\S* -arch=sm_\d+"),
        ("what the timer measures", r"host work inside it included"),
        ("the pointers' alignment", r"256-byte aligned"),
        ("how the inputs are distributed", r"How the input values are drawn"),
    ],
    "critic": [
        ("the whole source judged", r"Source of `r\d+c\d+`:\n```cuda\n// audit:"),
        ("the diff against its own parent", r"Change from its parent `[^`]+`:\n```diff\n---"),
        ("the whole roofline (pct_of_sol, limiter)", r"pct_of_sol = .*limiter = "),
        ("the catalogue filtered by the task", r"Feature catalogue, features that apply to this task"),
        ("what was tried and how it ended", r"What was tried so far and how it ended:\n- r\d"),
    ],
    "planner": [
        ("posterior mean and tries per feature", r"(expected to close [+-][0-9]+% of the headroom to speed of light "
                                                  r"\(posterior mean, failures counted\); tried|; untried)"),
        ("the critic's recommendations in the offer", r"recommended now by the critic"),
        ("the whole critique", r"Recommended change: "),
    ],
}


def checklist(records: list[dict], held_out: list[str], last_round: int) -> list[tuple[str, str, bool]]:
    """(role, item, present in that role's prompts of the last round) and the held-out check over all."""
    rows = []
    for role, items in CHECKS.items():
        texts = [r["text"] for r in records if r["role"] == role and _round(r["label"]) == last_round]
        for item, pattern in items:
            rows.append((role, item, any(re.search(pattern, t, re.S if "\n" not in pattern else 0) for t in texts)))
    leaked = [h for h in held_out for r in records if h in r["text"]]
    rows.append(("all", "no held-out size in any prompt", not leaked))
    return rows


def _round(label: str) -> int:
    m = re.match(r"r(\d+)", label)
    return int(m.group(1)) if m else 0


def audit_task(task: str, args: argparse.Namespace, out: Path) -> dict:
    from cuda_llm.measure.evaluator import GpuEvaluator
    from cuda_llm.graph.run import RunOptions, start_run
    from cuda_llm.graph.state import Limits
    from cuda_llm.tasks import load_task

    loaded = load_task(task)
    records: list[dict] = []
    model = audit_model(task, args.candidates, records)
    evaluator = ScriptedEvaluator() if args.evaluator == "scripted" else GpuEvaluator()
    with tempfile.TemporaryDirectory(prefix="prompt-audit-") as runs:
        opts = RunOptions(limits=Limits(n_candidates=args.candidates, max_rounds=args.rounds, plateau_rounds=args.rounds + 1,
                                        max_repairs=1, compile_fix_turns=1), runs_dir=Path(runs), learn=False)
        outcome = start_run(loaded, None, opts, evaluator=evaluator, model_factory=lambda role: model,
                            handle_signals=False)
    folder = out / "prompt-audit" / task
    folder.mkdir(parents=True, exist_ok=True)
    for r in records:
        name = f"{r['role']}-{r['label']}" + (f"-{r['turn']}" if r["turn"] > 1 else "")
        (folder / f"{name}.md").write_text(r["text"])
    sizes: dict[tuple[int, str], list[int]] = {}
    for r in records:
        sizes.setdefault((_round(r["label"]), r["role"]), []).append(r["chars"] // 4)
    held = [", ".join(f"{k}={v}" for k, v in s.items()) for s in loaded.task.held_out]
    return {"task": task, "rounds": outcome.rounds, "finished": outcome.finished, "best": outcome.best.get("id"),
            "sizes": {f"{k[0]}:{k[1]}": v for k, v in sorted(sizes.items())},
            "checklist": checklist(records, held, outcome.rounds), "folder": str(folder)}


def render(results: list[dict], args: argparse.Namespace) -> str:
    from cuda_llm.report.formats import md_table

    how = ("a scripted run: canned LLM answers, invented timings and Nsight Compute profiles on an H100's measured "
           "facts; real nvcc builds, roofline and rule-based diagnosis" if args.evaluator == "scripted" else
           "a scripted run: canned LLM answers; timings and profiles measured on this machine's GPU")
    lines = [f"# Prompt audit ({how})", "",
             f"{args.candidates} candidates per round, {args.rounds} rounds; tokens = characters / 4 (the whole "
             "conversation of each call). Round 0 is set-up (the critic's review of the naive baseline).", ""]
    for res in results:
        lines += [f"## {res['task']} (best {res['best']}, {res['rounds']} rounds)", ""]
        rows = []
        for key, toks in res["sizes"].items():
            r, role = key.split(":")
            rows.append([r, role, str(len(toks)), f"{max(toks):,}", f"{sum(toks):,}"])
        lines += [md_table(["round", "role", "calls", "largest prompt (tokens)", "all prompts (tokens)"], rows), ""]
        lines += [md_table(["role", "evidence (issue 12, item 1)", "in the last round's prompts"],
                                 [[role, item, "yes" if ok else "NO"] for role, item, ok in res["checklist"]]), ""]
        lines += [f"Rendered prompts: {res['folder']}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", default="softmax,sgemm")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--candidates", type=int, default=2)
    p.add_argument("--evaluator", choices=("scripted", "gpu"), default="scripted")
    p.add_argument("--out", type=Path, default=ROOT / "bench-out")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("CUDA_LLM_CACHE", str(args.out / "cache"))
    results = [audit_task(t.strip(), args, args.out) for t in args.tasks.split(",") if t.strip()]
    text = render(results, args)
    (args.out / "prompt_audit.md").write_text(text)
    (args.out / "prompt_audit.json").write_text(json.dumps(results, indent=1))
    print(text)
    missing = [(r["task"], role, item) for r in results for role, item, ok in r["checklist"] if not ok]
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
