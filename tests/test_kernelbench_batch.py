"""A KernelBench batch on the CPU, as benchmarks/kernelbench_batch.py drives it on the GPU machine: KernelBench-style
module files (two that import, one random one the importer refuses) imported inside `cuda-llm batch` into the
runs folder, a manual coder answered through the pending prompt files, rule planner and critic, a pool of two
test GPUs; the batch stops with prompts pending, `--resume` continues every answered run, the table counts the
refusal with the importer's reason, and a second batch does not import again. Needs the torch extra.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent

MODULE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {body}


N = 1024


def get_inputs():
    return [torch.rand(N)]


def get_init_inputs():
    return []
"""


def _modules(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "1_Scale.py").write_text(MODULE.format(body="x * 2.0"))
    (folder / "2_Shift.py").write_text(MODULE.format(body="x + 1.0"))
    (folder / "3_Noise.py").write_text(MODULE.format(body="x + torch.rand_like(x)"))
    return folder


def ms_of(variant: str) -> float:
    m = re.search(r"r(\d+)c(\d+)", variant)
    return {1: 6.0, 2: 4.0}.get(int(m.group(1)), 3.0) + 0.5 * int(m.group(2)) if m else 8.0


def _pool(work: Path) -> Any:
    from sleeping_gpu_evaluator import SleepingGpuEvaluator

    from cuda_llm.measure.gpu_pool import EvaluatorSlot, GpuPool

    class WithCompile(SleepingGpuEvaluator):
        """The baseline is eager (10 ms) with torch.compile beside it (5 ms), as the GPU evaluator reports."""

        def baseline(self, loaded: Any) -> Any:
            res = super().baseline(loaded)
            return res.model_copy(update={"library_ms": 5.0})

        def final_check(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> Any:
            cand, base = super().final_check(loaded, source, candidate_id, work_dir)
            return cand, base.model_copy(update={"library_ms": 4.4})    # compile again, beside the kernel

    slots = [EvaluatorSlot(WithCompile(str(i), {"baseline": 10.0}, span_log=work / "spans.jsonl", sleep_s=0.05,
                                       ms_of=ms_of), str(i)) for i in range(2)]
    return GpuPool(slots, arch="sm_90", device=None)


def _batch(work: Path, *argv: str) -> int:
    from cuda_llm import cli as cli_mod
    from cuda_llm.commands import batch_cmd

    batch_cmd.make_pool_override = lambda: _pool(work)
    try:
        return cli_mod.main(["batch", *argv, "--runs-dir", str(work / "runs"), "--quiet", "--no-learn"])
    finally:
        batch_cmd.make_pool_override = None


def _answer_all(runs: Path) -> int:
    """Every pending coder prompt answered with the task's naive kernel, marked with its candidate name."""
    from cuda_llm.graph.manual import pending_prompts

    n = 0
    for run in sorted(p for p in runs.iterdir() if (p / "pending").is_dir()):
        naive = Path(json.loads((run / "config.json").read_text())["task"], "naive.cu").read_text()
        for w in pending_prompts(run):
            cand = w.name.split("-", 1)[1]
            w.answer.parent.mkdir(parents=True, exist_ok=True)
            w.answer.write_text(f"```cuda\n// variant: {cand}\n{naive}```\n")
            n += 1
    return n


ROLES = ["--coder", "manual", "--planner", "rules", "--critic", "rules", "--rounds", "2", "--candidates", "2",
         "--plateau-rounds", "2", "--time-budget", "1h", "--token-budget", "1M", "--parallel", "2"]


def test_kernelbench_batch_with_a_manual_coder_refusals_and_resume(tmp_path, monkeypatch, capsys):
    from cuda_llm.graph.batch import load_state, open_batch
    from cuda_llm.tasks import torch_import

    monkeypatch.setenv("CUDA_LLM_IMPORTED", str(tmp_path / "runs" / "imported"))
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))
    folder = _modules(tmp_path / "kb")
    derived: list[str] = []
    real = torch_import.derive
    monkeypatch.setattr(torch_import, "derive", lambda path, *a, **k: (derived.append(Path(path).name), real(path, *a, **k))[1])

    assert _batch(tmp_path, str(folder), *ROLES) == 3          # waiting on the coder's prompts
    err = capsys.readouterr().err
    assert "noise: refused at import" in err.lower() or "3_noise" in err.lower(), err
    root = open_batch("latest", tmp_path / "runs")
    state = load_state(root)
    by = {t.name: t for t in state.tasks}
    assert len(by) == 3
    refused = [t for t in state.tasks if t.status == "refused"]
    assert len(refused) == 1 and "random" in refused[0].detail.lower(), refused
    waiting = [t for t in state.tasks if t.status == "waiting"]
    assert len(waiting) == 2
    # the imported tasks live in the runs folder, and the runs say where relative to it
    for t in waiting:
        cfg = json.loads((tmp_path / "runs" / t.run_id / "config.json").read_text())
        assert cfg["task_in_runs"].startswith("imported/")
    assert sorted(derived) == ["1_Scale.py", "2_Shift.py", "3_Noise.py"]

    rounds = 0
    while True:
        n = _answer_all(tmp_path / "runs")
        if n == 0:
            break
        assert n == 4, n                       # 2 problems x 2 candidates per round
        rounds += 1
        rc = _batch(tmp_path, "--resume", "latest")
        assert rc in (0, 3)
        if rc == 0:
            break
    assert rounds == 2 and rc == 0
    state = load_state(root)
    assert [t.status for t in state.tasks if t.status != "refused"] == ["finished", "finished"]
    md = (root / "table.md").read_text()
    assert "refused" in md and "different outputs" in md
    # KernelBench's table: the best kernel r2c0 at 4.032 ms, eager 10.08 ms and compile 4.4 ms from the final check
    assert "coder was a model playing the manual provider" in md
    assert "fast_p over eager:   fast_0 100%, fast_1 100%, fast_1.5 100%, fast_2 100%" in md
    assert "fast_p over compile: fast_0 100%, fast_1 100%, fast_1.5 0%, fast_2 0%" in md
    assert "over eager 2.50x, over torch.compile 1.09x" in md and "1 refused at import" in md
    assert re.search(r"\| 1_Scale.py \| yes \|  \| 4.032 \| 10.08 \| 4.400 \| 2.50x \| 1.09x \| [01] \| 6.048 \| 1.50x \| 2 \| finished \|", md), md
    assert "Lost to torch.compile" not in md          # both beat compile
    kb = json.loads((root / "kernelbench.json").read_text())
    assert kb["summary"]["refused"] == 1 and kb["summary"]["manual_coder"] is True
    assert [p["correct"] for p in kb["problems"]] == [True, True, False]
    page = (root / "batch.html").read_text()
    assert 'id="kb-sorted-plot"' in page and 'id="coder-note"' in page
    # one geometric mean on the page and in table.md: the KernelBench table's, never the runs' own baselines'
    for text in (md, page):
        assert len(re.findall(r"[Gg]eometric mean speedup", text)) == 2, text   # the headline and the table's line
        assert "Geometric mean speedup: 2.50x over eager, 1.09x over torch.compile" in text.replace(
            "</td><td>", ": ")

    # what the driver reads on the CPU side (benchmarks/kernelbench_batch.py pending / table), from the package:
    # nothing pending, and what each candidate cost
    from cuda_llm.graph.manual import pending_prompts
    from cuda_llm.report.candidate_cost import candidate_costs, cost_table

    runs = [d for d in (tmp_path / "runs").iterdir() if (d / "trace.jsonl").is_file()]
    assert runs and all(pending_prompts(d) == [] for d in runs)
    cost = cost_table(candidate_costs(runs))
    # 2 problems x 4 candidates: the first of each, then 3 later ones each, every one a few test-GPU jobs
    assert re.search(r"later ones: median [0-9.]+ s, max [0-9.]+ s, 6 of 6 within the 20 s target", cost), cost
    assert "| kb_1_scale |" in cost

    # a second batch over the same folder imports nothing again, and counts the refusal from its record
    derived.clear()
    assert _batch(tmp_path, str(folder), *ROLES) == 3
    assert derived == []
    capsys.readouterr()


def test_sample_rule_takes_the_next_number():
    from cuda_llm.tasks import kernelbench_sample as rule

    files = {n: f"{n}_P.py" for n in range(1, 31)}
    small = rule.Estimate(tensor_bytes=1 << 20, flops=1e9)
    big = rule.Estimate(tensor_bytes=8 << 30, flops=0)
    est: dict[int, Any] = {n: small for n in files}
    est[7] = big                                   # too large: passed over
    refusing = {"19_P.py": "random"}
    picks = rule.choose(1, files, est, lambda f: refusing.get(f), offset=6, k=12)
    assert [p.target for p in picks] == [6, 18, 30]
    assert [p.number for p in picks] == [6, 18, 30]
    picks = rule.choose(1, files, est, lambda f: refusing.get(f), offset=7, k=12)
    # 7 too large -> 8 (not held back at level 1? 8 is: kept for the independent check) -> 9
    assert picks[0].number == 9 and picks[0].passed_over[0].startswith("7: tensors")
    assert "8: kept for the independent check" in picks[0].passed_over
    # 19 refused at import: counted once, the next number taken
    assert picks[1].number == 20 and any("refused at import: random" in w for w in picks[1].passed_over)
    assert len(picks) == 2
    # past the last file the rule wraps to 1
    picks = rule.choose(2, {1: "1_A.py", 2: "2_B.py", 3: "3_C.py"}, {1: small, 2: small, 3: big}, lambda f: None,
                        offset=3, k=12)
    assert [p.number for p in picks] == [1]
