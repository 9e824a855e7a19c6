"""Credit follows the detectors (feature_db/recredit.py): a statistics database learned by a real graph run
(scripted model, real nvcc, invented timings) is re-credited from its run directory after its events were
made to look as older detectors left them; `cuda-llm features --recredit` and `--run` on it."""

from __future__ import annotations

import pytest

from cuda_llm.cli import main
from cuda_llm.feature_db import StatsStore, load_catalogue
from cuda_llm.feature_db.recredit import best_credit, recredit

WARP_SOFTMAX = """// variant: warp
#include <cuda_runtime.h>
#include <math.h>

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float* xr = x + (size_t)row * cols;
    float m = -INFINITY;
    for (int c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.0f;
    for (int c = lane; c < cols; c += 32) s += expf(xr[c] - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    for (int c = lane; c < cols; c += 32) y[(size_t)row * cols + c] = expf(xr[c] - m) / s;
}

extern "C" void solve(const float* x, float* y, int rows, int cols) {
    softmax_rows<<<(rows + 3) / 4, 128>>>(x, y, rows, cols);
}
"""


def _copy(db, dst):
    """A copy of the learned database (through SQLite's backup: the WAL's pages included)."""
    import sqlite3

    src, out = sqlite3.connect(db), sqlite3.connect(dst)
    src.backup(out)
    src.close()
    out.close()
    return StatsStore(dst)


def _cells(store: StatsStore) -> dict:
    return {(r.feature, r.category, r.arch, r.model): (r.tries, r.compiled, r.passed, r.n_rewards,
                                                       round(r.mean_reward, 9), r.asked, r.complied)
            for r in store.all(by_model=True)}


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
    """A run directory and the statistics database the run wrote (the scripted model's figures)."""
    from fake_gpu_evaluator import FakeGpuEvaluator, coder_answer, critic_answer, plan_answer, softmax_source
    from scripted_chat_model import ScriptedChatModel, detect_role

    from cuda_llm.graph.run import RunOptions, start_run
    from cuda_llm.graph.state import Limits

    tmp = tmp_path_factory.mktemp("recredit")
    mp = pytest.MonkeyPatch()
    mp.setenv("CUDA_LLM_CACHE", str(tmp / "cache"))

    def respond(messages):
        role = detect_role(messages)
        if role == "planner":
            return plan_answer(2)
        if role == "critic":
            return critic_answer()
        text = "\n".join(str(m.content) for m in messages)
        return coder_answer(WARP_SOFTMAX if "`r1c0`" in text else softmax_source("v6"))

    model = ScriptedChatModel(respond=respond)
    ev = FakeGpuEvaluator({"baseline": 10.0, "warp": 2.0, "v6": 6.0})
    opts = RunOptions(limits=Limits(n_candidates=2, max_rounds=1), runs_dir=tmp / "runs", stats_path=tmp / "stats.sqlite")
    out = start_run("softmax", None, opts, evaluator=ev, model_factory=lambda role: model, handle_signals=False)
    mp.undo()
    assert out.finished
    return tmp / "runs", tmp / "stats.sqlite", out.root.name


def test_rebuilding_from_the_event_log_gives_the_same_counts(learned, tmp_path):
    _, db, _ = learned
    store = _copy(db, tmp_path / "s.sqlite")
    before = _cells(store)
    assert before and store.rebuild(store.events()) == store.n_events()
    assert _cells(store) == before


def test_recredit_restores_what_old_detectors_got_wrong_and_keeps_what_it_cannot_see(learned, tmp_path):
    runs, db, run_id = learned
    store = _copy(db, tmp_path / "s.sqlite")
    fresh = _cells(store)
    events = store.events()
    (warp,) = [e for e in events if e.key and e.key.split("/")[1] == "r1c0"]
    assert "warp_shuffle" in warp.features
    # As an older detector left it: the shuffles missed, tiling wrongly credited; plus an event of a run that
    # is gone and one recorded before events had keys.
    old = warp.model_copy(update={"features": sorted(set(warp.features) - {"warp_shuffle"} | {"smem_tiling"})})
    gone = warp.model_copy(update={"id": None, "key": "20200101-000000-softmax-dead/r1c0/abc"})
    unkeyed = warp.model_copy(update={"id": None, "key": None})
    store.rebuild([old if e is warp else e for e in events] + [gone, unkeyed])
    assert _cells(store) != fresh

    report = recredit(store, runs)
    assert report.kept == 2 and report.redetected == len(events) and report.added == 0
    assert report.changed == [warp.key]
    assert report.gained["warp_shuffle"] == 1 and report.gained["smem_tiling"] == -1
    # the run's own events are back to what the run learned; the two it cannot see count as they were
    store_only_run = tmp_path / "only.sqlite"
    only = StatsStore(store_only_run)
    only.rebuild([e for e in store.events() if e.key and e.key.startswith(run_id)])
    assert _cells(only) == fresh
    assert store.n_events() == len(events) + 2
    # idempotent
    again = recredit(store, runs)
    assert again.changed == [] and all(v == 0 for v in again.gained.values())


def test_credit_follows_a_changed_detector(learned, tmp_path):
    """Without a shuffle detector in the catalogue, a re-credit takes the shuffles' try away."""
    runs, db, _ = learned
    store = _copy(db, tmp_path / "s.sqlite")
    assert any(r.tries for r in store.all() if r.feature == "warp_shuffle")
    report = recredit(store, runs, features=[f for f in load_catalogue() if f.id != "warp_shuffle"])
    assert report.gained.get("warp_shuffle") == -1
    assert all(r.tries == 0 for r in store.all() if r.feature == "warp_shuffle")


def test_features_cli_recredits_and_shows_a_runs_best_kernel(learned, tmp_path, capsys):
    runs, db, run_id = learned
    copy = _copy(db, tmp_path / "s.sqlite").path
    assert main(["features", "--db", str(copy), "--recredit", str(runs)]) == 0
    out = capsys.readouterr().out
    assert "re-credited" in out and "0 changed" in out

    bc = best_credit(runs, run_id)
    assert bc.best == "r1c0" and [s.candidate for s in bc.lineage] == ["r1c0"]
    assert {"warp_shuffle", "warp_per_row", "coalesced_access"} <= set(bc.credited) <= set(bc.detected_now)
    assert main(["features", "--db", str(copy), "--run", run_id, "--runs-dir", str(runs)]) == 0
    out = capsys.readouterr().out
    assert f"run {run_id}: best kernel r1c0" in out and "warp_shuffle" in out
    assert main(["features", "--db", str(copy), "--run", "no-such-run", "--runs-dir", str(runs)]) == 2
