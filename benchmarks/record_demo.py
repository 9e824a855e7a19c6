"""The recorded run that `cuda-llm demo` installs: a run folder trimmed into the package's data.

    python benchmarks/record_demo.py from-run RUN_DIR [--out cuda_llm/runs/recorded/NAME] [--roles planner=model,...]
    python benchmarks/record_demo.py from-figures [--out cuda_llm/runs/recorded/softmax]

from-run: a real run's folder, as a GPU machine left it (benchmarks/manual_run.py --runs-dir DIR, which
needs no LLM endpoint: its coder answers are benchmarks/manual_answers/softmax). Keeps what every view
reads (config, trace, the newest checkpoint, candidates, prompts, answers, profiles, critiques, rounds,
best.cu) and drops the rest (builds, caches, Nsight Compute reports, pending prompts, the lock).

from-figures: where no such folder has been recorded yet, the same manual-coder softmax run is driven
here through the real graph (real prompts, real nvcc builds and SASS, the rule-based planner and critic),
with every measurement taken from the H100 figures the repository recorded (RECORDED below, each with
where it comes from) instead of a GPU. What was not recorded (per-case results, timing samples, the
candidates' Nsight Compute profiles) stays absent. Needs nvcc; no GPU, no endpoint.

Both write OUT/recording.json: what the recording is, where each figure comes from and who played each role
(--roles: the run's providers cannot tell a model answering the manual provider's prompt files from a
person); `cuda-llm demo` shows it with the run, and `cuda-llm demo --list` lists every folder under
cuda_llm/runs/recorded/ (a new recording is dropped in there under a name of its own).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cuda_llm.measure.evaluator import ToolsMixin  # noqa: E402
from cuda_llm.runs.replay import RECORDING_FILE  # noqa: E402

DEFAULT_OUT = ROOT / "cuda_llm" / "runs" / "recorded" / "softmax"
ANSWERS = ROOT / "benchmarks" / "manual_answers" / "softmax"
KEPT = ("config.json", "trace.jsonl", "checkpoint.sqlite", "best.cu", "best_so_far.cu", "report.md",
        "candidates/*.cu", "candidates/*.json", "candidates/*.compile.log", "critiques/*.json", "profiles/*.json",
        "prompts/*.md", "answers/*.md", "rounds/*/*.json", "tuning/*.json")
RESULTS_DOC = "docs/results-h100.md, \"The second-generation judge, Hopper builds and a manual run\" (2026-11-23)"
NCU_DOC = "tests/fixtures/ncu/softmax.csv (Nsight Compute 2025.3.1, H100 80GB HBM3; tests/fixtures/ncu/README.md)"

# The H100 figures of the manual-coder softmax run (3 rounds, the answers in benchmarks/manual_answers/softmax),
# as docs/results-h100.md recorded them; ms are medians at the benchmark shape (rows=16384, cols=4096).
RECORDED: dict[str, Any] = {
    "device": {"name": "NVIDIA H100 80GB HBM3", "arch": "sm_90", "compute_capability": [9, 0], "sm_count": 132,
               "driver_version": "580.159.04", "l2_bytes": 50 * 2**20, "peak_bandwidth_gbs": 3001.0,
               "peak_fp32_gflops": 60000.0, "peak_fp16_tc_gflops": 931000.0, "peak_tf32_tc_gflops": 478000.0,
               "tensor_peak_method": "wgmma sm_90a"},
    "ms": {"baseline": 1.8737, "r1c0": 0.3983, "r2c0": 0.2964, "r3c0": 0.1923},
    "final": {"r3c0": 0.1900, "baseline": 1.8737},
    "sources": {
        "device": f"{RESULTS_DOC}: the machine line and its measured peaks (copy 3001 GB/s, fp32 FMA 60.0 TFLOP/s, "
                  "wgmma fp16 931 and tf32 478 TFLOP/s)",
        "r1c0, r2c0, r3c0 median ms": f"{RESULTS_DOC}: the run's table (0.3983, 0.2964, 0.1923 ms)",
        "final check": f"{RESULTS_DOC}: \"r3c0 re-validated on fresh inputs, 0.1900 ms against the naive 1.8737 ms "
                       "in the same run\"",
        "baseline median ms": f"{RESULTS_DOC}: the naive 1.8737 ms of the same run's final check",
        "baseline profile": NCU_DOC,
        "kernels": "benchmarks/manual_answers/softmax/r1.cu, r2.cu, r3.cu (the run's hand-written answers)",
    },
    "not_recorded": "per-case results, timing samples (each timing shows its median only), the candidates' "
                    "Nsight Compute profiles, the rule-based planner's feature choices of that day, the run's "
                    "clock (the trace's times and the run's time are those of the replay)",
}


# ------------------------------------------------------------------------------------------- trimming
def trim_run(src: Path, out: Path, recording: dict[str, Any]) -> Path:
    """Copy the files every view reads from run folder ``src`` into ``out`` (replaced), keep only the newest
    checkpoint, and write recording.json."""
    src = Path(src).resolve()
    if not (src / "checkpoint.sqlite").is_file() or not (src / "trace.jsonl").is_file():
        raise SystemExit(f"record_demo: {src} is not a run folder with a checkpoint and a trace")
    if "replay" in json.loads((src / "config.json").read_text()):
        raise SystemExit(f"record_demo: {src} is itself a replay (`cuda-llm demo`), not a run measured on a GPU")
    if out.exists():
        shutil.rmtree(out)
    for pattern in KEPT:
        for f in sorted(src.glob(pattern)):
            if f.is_file():
                target = out / f.relative_to(src)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, target)
    if (out / "best.cu").is_file():   # a finished run's views read best.cu; best_so_far.cu is the same file
        (out / "best_so_far.cu").unlink(missing_ok=True)
    _newest_checkpoint_only(out / "checkpoint.sqlite")
    recording = {"run_id": src.name, "root": str(src), **recording}
    (out / RECORDING_FILE).write_text(json.dumps(recording, indent=1) + "\n")
    return out


def _newest_checkpoint_only(db: Path) -> None:
    """The views read the newest checkpoint alone: drop the older ones (and their writes) and compact."""
    con = sqlite3.connect(db)
    try:
        row = con.execute("SELECT checkpoint_id FROM checkpoints ORDER BY checkpoint_id DESC LIMIT 1").fetchone()
        if row:
            con.execute("DELETE FROM checkpoints WHERE checkpoint_id != ?", row)
            con.execute("DELETE FROM writes WHERE checkpoint_id != ?", row)
            con.execute("UPDATE checkpoints SET parent_checkpoint_id = NULL")
        con.commit()
        con.execute("VACUUM")
    finally:
        con.close()


# ------------------------------------------------------------------------------------ from figures
class RecordedFigures(ToolsMixin):
    """An Evaluator whose measurements are RECORDED's H100 figures: builds, SASS, the roofline and the rule
    diagnosis are the real tools' (ToolsMixin); a kernel with no recorded figure is reported as not run."""

    def __init__(self) -> None:
        from cuda_llm.results import DeviceInfo

        self._tools = ToolsMixin()
        self.arch = self._tools.arch = "sm_90"
        self.device = self._tools.device = DeviceInfo(**RECORDED["device"])

    def build(self, loaded: Any, source: str, candidate_id: str) -> Any:
        return self._tools.build(loaded, source, candidate_id)

    def analyze(self, *args: Any, **kwargs: Any) -> Any:
        return self._tools.analyze(*args, **kwargs)

    def toolchain(self) -> dict[str, str]:
        return self._tools.toolchain()

    def _timed(self, loaded: Any, source: str, candidate_id: str, ms: float | None, where: str) -> Any:
        from cuda_llm.results import Status, TimingResult, ValidationResult
        from cuda_llm.tools.bounds.speed_of_light import pct_of_sol, sol_ms

        res = self.build(loaded, source, candidate_id)
        if res.status != Status.ok:
            return res
        if ms is None:
            return res.model_copy(update={"status": Status.runtime_error, "message": f"no figure was recorded for "
                                          f"{candidate_id}: it was not measured in this replay"})
        task = loaded.task
        sizes = dict(task.benchmark)
        sol = sol_ms(task, sizes, self.device, sass=res.compile.sass if res.compile else None)
        timing = TimingResult(sizes=sizes, median_ms=ms, min_ms=ms, mean_ms=ms, iqr_ms=0.0, rse=0.0, samples_ms=[ms],
                              repetitions=1, stop_reason="recorded", sol_ms=sol, pct_of_sol=pct_of_sol(sol, ms))
        return res.model_copy(update={
            "status": Status.ok, "timing": timing, "device": self.device.name,
            "validation": ValidationResult(passed=True, cases=[]),
            "message": f"passed on the H100 (recorded: {where}); {ms:.4f} ms"})

    def evaluate(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> Any:
        cid = candidate_id.removesuffix("-confirm")
        ms = RECORDED["ms"].get(cid)
        return self._timed(loaded, source, candidate_id, ms, RECORDED["sources"]["r1c0, r2c0, r3c0 median ms"])

    def baseline(self, loaded: Any) -> Any:
        source = Path(loaded.task.baseline_path).read_text()
        return self._timed(loaded, source, "baseline", RECORDED["ms"]["baseline"],
                           RECORDED["sources"]["baseline median ms"])

    def profile(self, loaded: Any, source: str, candidate_id: str, work_dir: Path, result: Any) -> Any:
        from cuda_llm.tools.profile.ncu_parse import profile_from_text
        from cuda_llm.tools.profile.profile_models import ProfileResult

        if candidate_id == "baseline":
            text = (ROOT / "tests" / "fixtures" / "ncu" / "softmax.csv").read_text()
            return profile_from_text(text)
        return ProfileResult(available=False, reason="no Nsight Compute profile of this kernel was recorded")

    def final_check(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> tuple[Any, Any]:
        where = RECORDED["sources"]["final check"]
        cand = self._timed(loaded, source, candidate_id, RECORDED["final"].get(candidate_id), where)
        base = self._timed(loaded, Path(loaded.task.baseline_path).read_text(), "baseline",
                           RECORDED["final"]["baseline"], where)
        if base.timing is not None:
            cand = cand.model_copy(update={"baseline_ms": base.timing.median_ms})
        return cand, base


def from_figures(out: Path, rounds: int = 3) -> Path:
    """Drive the manual-coder softmax run through the graph with RecordedFigures; trim it into ``out``."""
    from cuda_llm.agents.settings import load_settings
    from cuda_llm.runs.answer_folder import answer_file, coder_answer
    from cuda_llm.graph.manual import pending_prompts, write_answer
    from cuda_llm.graph.run import RunOptions, resume_run, start_run
    from cuda_llm.graph.state import Limits

    work = Path(tempfile.mkdtemp(prefix="cuda-llm-record-demo-"))
    ev = RecordedFigures()
    settings = load_settings({"coder_provider": "manual", "planner_provider": "rules", "critic_provider": "rules"},
                             env={})
    opts = RunOptions(limits=Limits(n_candidates=1, max_rounds=rounds, plateau_rounds=rounds),
                      runs_dir=work / "runs", stats_path=work / "stats.sqlite", learn=False, arch="sm_90")
    outcome = start_run("softmax", settings, opts, evaluator=ev, handle_signals=False)
    for _ in range(4 * rounds):
        if not outcome.waiting:
            break
        root = work / "runs" / outcome.run_id
        for w in pending_prompts(root):
            src = answer_file(ANSWERS, w.name)
            if src is None:
                raise SystemExit(f"record_demo: no hand-written answer for {w.name} ({w.prompt})")
            write_answer(root, w.name, coder_answer(src.name, src.read_text()))
        outcome = resume_run(outcome.run_id, work / "runs", evaluator=ev, handle_signals=False)
    if not outcome.finished:
        raise SystemExit(f"record_demo: the run did not finish: {outcome.model_dump_json(exclude={'table'})}")
    recording = {
        "kind": "replayed figures",
        "summary": "a 3-round softmax run with hand-written coder answers (benchmarks/manual_answers/softmax), the "
                   "rule-based planner and critic, driven through the graph with the H100's recorded figures in "
                   "place of a GPU (benchmarks/record_demo.py from-figures)",
        "device": RECORDED["device"]["name"],
        "sources": RECORDED["sources"],
        "not_recorded": RECORDED["not_recorded"],
    }
    return trim_run(work / "runs" / outcome.run_id, out, recording)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    fr = sub.add_parser("from-run", help="trim a real run folder into the demo data")
    fr.add_argument("run_dir", type=Path)
    fr.add_argument("--device", default="", help="the GPU the run was measured on (default: the run's own trace)")
    fr.add_argument("--roles", default="", metavar="ROLE=WHO,...",
                    help="who played each role, e.g. planner=model,coder=model,critic=model (default: the providers)")
    ff = sub.add_parser("from-figures", help="drive the manual softmax run with the H100's recorded figures")
    for q in (fr, ff):
        q.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = p.parse_args(argv)
    if args.mode == "from-run":
        device = args.device or _device_of(args.run_dir)
        out = trim_run(args.run_dir, args.out, {
            "kind": "recorded run",
            "summary": f"a run measured on {device}: every figure is that GPU's (benchmarks/record_demo.py from-run)",
            "device": device, "sources": {"every figure": f"the run {args.run_dir.name} on {device}"},
            "not_recorded": "builds, caches and Nsight Compute report files (the profiles' figures are kept)",
            **({"roles": dict(kv.split("=", 1) for kv in args.roles.split(",") if "=" in kv)} if args.roles else {})})
    else:
        out = from_figures(args.out)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"recorded {out} ({size / 1024:.0f} KiB)")
    return 0


def _device_of(run_dir: Path) -> str:
    for line in (Path(run_dir) / "trace.jsonl").read_text().splitlines():
        ev = json.loads(line)
        if ev.get("event") in ("run_start", "baseline") and ev.get("device"):
            return str(ev["device"])
    return "a GPU"


if __name__ == "__main__":
    sys.exit(main())
