"""The judge end to end without a GPU: the real worker loop (worker_loop.serve) runs in a real child process
on a NumPy test device (tests/numpy_device_worker.py), with candidates written in NumPy
(tests/numpy_kernels/). Everything the parent does is real: the session, the transport, the checker, the
input sets, the timing schedule, the clock cross-check and the verdict. The same tricks on the GPU, as
CUDA files, are in tests/test_harness_gpu.py."""

from __future__ import annotations

import fcntl

import re
import shutil
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest

from cuda_llm.results import Status
from cuda_llm.tasks import load_task
from cuda_llm.tools.harness.evaluate import EvalOptions, run_compiled
from cuda_llm.tools.harness.timing_budget import TimingBudget

HERE = Path(__file__).parent
KERNELS = HERE / "numpy_kernels"
WORKER = [sys.executable, str(HERE / "numpy_device_worker.py")]
BENCH_N = 200_003


@pytest.fixture(scope="module")
def gelu_small(tmp_path_factory) -> Path:
    """gelu with a benchmark shape a CPU handles in milliseconds."""
    folder = tmp_path_factory.mktemp("tasks") / "gelu"
    shutil.copytree(load_task("gelu").task.folder, folder)
    toml = (folder / "task.toml").read_text()
    (folder / "task.toml").write_text(re.sub(r"\[benchmark\]\s*\nn = \d+", f"[benchmark]\nn = {BENCH_N}", toml))
    return folder


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path_factory.getbasetemp() / "session-cache"))


FAST_BUDGET = dict(time_budget_s=2.0, min_reps=6, max_reps=24, min_time_s=0.0)
FAST = dict(timeout_s=60.0, seed=3)


def options(**kw) -> EvalOptions:
    """FAST with ``kw``: the timing knobs among them go into the budget, the rest are EvalOptions fields."""
    timing = {k: kw.pop(k) for k in list(kw) if k in TimingBudget.model_fields}
    return EvalOptions(**{**FAST, **kw}, budget=TimingBudget(**{**FAST_BUDGET, **timing}))


def judge(folder: Path, kernel: str, tmp_path: Path, worker=WORKER, **kw):
    loaded = load_task(folder)
    src = KERNELS / f"{kernel}.py"
    opts = options(**kw)
    res = run_compiled(loaded, str(src), source=src.read_text(), options=opts, work_dir=tmp_path / "work",
                       candidate=kernel, worker_argv=worker)
    print(f"{kernel}: {res.status.value}: {res.message}")
    return res


def test_an_honest_kernel_passes_and_every_set_is_checked(gelu_small, tmp_path, monkeypatch):
    from cuda_llm.tools.harness import judge as judge_mod

    kept = []                                    # the Judge kept alive: what it holds must be released by run()
    real_run = judge_mod.Judge.run
    monkeypatch.setattr(judge_mod.Judge, "run", lambda self: kept.append(self) or real_run(self))
    res = judge(gelu_small, "gelu_ok", tmp_path)
    assert res.status == Status.ok, res.message
    assert res.validation.passed and len(res.validation.cases) == 9       # 5 shown, 2 held out, 2 scaled to the ends
    scaled = [c for c in res.validation.cases if c.scale]
    assert [c.held_out for c in scaled] == [True, True] and "2^" in scaled[0].scale
    assert res.timing.every_call_checked is True
    assert res.revalidation is not None and res.revalidation.passed
    t = res.timing
    assert t is not None and t.sizes == {"n": BENCH_N} and 6 <= t.repetitions <= 24
    from cuda_llm.tools.harness.worker_protocol import EvaluateResponse
    resp = EvaluateResponse.model_validate_json((tmp_path / "work" / "eval_result.json").read_text())
    assert resp.clock is not None and resp.clock.issues == [] and resp.clock.calls == t.repetitions
    assert resp.clock.parent_blank_ms is not None and resp.clock.parent_call_ms is not None
    # the comparison library's cache entry is held in use while the evaluation runs, and released at its end
    from cuda_llm import cache_store
    from cuda_llm.tools.harness import device_compare
    with open(cache_store._lock_file(Path(device_compare.build(None)).parent), "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)      # raises BlockingIOError while still held
    assert kept[0].pool._shutdown and kept[0].checker._jobs._shutdown    # its threads stopped
    assert not kept[0]._verified and not kept[0].exchange.exists()           # its kept outputs and files gone
    assert resp.costs["checker_s"] > 0 and "worker_start_s" in resp.costs
    assert (tmp_path / "work" / "worker_stderr.log").read_text().count("[gpu-worker]") >= 7


def test_outputs_at_the_benchmark_shape_equal_to_a_checked_one_are_not_checked_again(gelu_small, tmp_path,
                                                                                     monkeypatch):
    """Six outputs at the benchmark shape (first call, one kept per timed set, the last, fresh inputs after),
    on four input sets: the ones bit for bit equal to an output of their set that passed skip the float check."""
    from cuda_llm.tools.harness import validate

    sizes: list[int] = []
    real = validate.compare_output
    monkeypatch.setattr(validate, "compare_output", lambda name, got, *a, **k: sizes.append(got.size) or
                        real(name, got, *a, **k))
    res = judge(gelu_small, "gelu_ok", tmp_path)
    assert res.status == Status.ok, res.message
    at_bench = sizes.count(BENCH_N)
    assert 4 <= at_bench < 6, sizes


@pytest.mark.parametrize("kernel", ["gelu_memo_pointer", "gelu_memo_sampled"])
def test_a_memo_replays_an_answer_and_fails(gelu_small, tmp_path, kernel):
    """Correct on every correctness case (fresh buffers each), but inside the timing loop the same buffers
    get other contents: the kept output of some call holds another set's answer."""
    res = judge(gelu_small, kernel, tmp_path)
    assert res.status == Status.wrong_answer, res.message
    assert res.validation.passed
    bad = res.revalidation.first_failure()
    assert bad is not None and bad.kind in ("replay", "wrong_values"), bad
    assert "at the benchmark shape" in res.message
    if kernel == "gelu_memo_pointer":
        assert bad.kind == "replay" and "match the reference of input set" in res.message


def test_the_verdict_is_not_in_the_worker(gelu_small, tmp_path):
    """A candidate that rewrites the validator, the checker and the poison inside the worker process and
    writes nothing: the parent still sees unwritten outputs."""
    res = judge(gelu_small, "gelu_tamper", tmp_path)
    assert res.status == Status.wrong_answer, res.message
    assert res.validation.first_failure().kind in ("wrong_values", "unwritten")
    assert res.timing is None and res.revalidation is None        # a failed validation is never timed


def test_forged_event_times_are_caught_by_the_parents_clock(gelu_small, tmp_path):
    res = judge(gelu_small, "gelu_forged_time", tmp_path, max_reps=12)
    assert res.status == Status.suspect, res.message
    assert "judge's clock" in res.message and "more than the same loop without solve()" in res.message
    # timed again (a busy host can disagree once), and forged again: the second timing is as suspect
    assert res.timing.doubts == ["clock"] and res.timing.retimed_because.startswith("timing 1 disagreed")
    assert (tmp_path / "work" / "eval_result-attempt1.json").exists() and "timed 2 times" in res.message


@contextmanager
def busy_parent(threads: int = 2):
    """Python threads that keep this process's GIL busy, as the GPU pool's other evaluations and a run's coders
    do: the thread that reads the worker's events then reads them late, in bunches."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(10_000))
    pool = [threading.Thread(target=spin, daemon=True) for _ in range(threads)]
    for t in pool:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in pool:
            t.join()


def test_the_parents_clock_sees_each_call_even_while_the_parent_is_busy(gelu_small, tmp_path):
    """The events carry the kernel's send times (tools/harness/event_channel.py): read late, they still say when each
    call ended. Stamped when read, the busy parent saw a call cost 0.0-0.7 ms against 6.5 ms of events, and a
    kernel that reported its calls twice as fast as they ran passed (below)."""
    from cuda_llm.tools.harness.worker_protocol import EvaluateResponse

    # two retries: a 2-core host that other work loads can push one honest timing outside the margin now and
    # then (a mutation run saw it); a parent that stamped events when read would fail all three
    with busy_parent():
        res = judge(gelu_small, "gelu_ok", tmp_path, max_reps=12, clock_retries=2)
    assert res.status == Status.ok, res.message
    clock = EvaluateResponse.model_validate_json((tmp_path / "work" / "eval_result.json").read_text()).clock
    assert clock.issues == [] and clock.parent_solve_ms == pytest.approx(clock.event_median_ms, rel=0.3)


def test_a_twice_too_fast_timing_is_caught_while_the_parent_is_busy(gelu_small, tmp_path):
    with busy_parent():
        res = judge(gelu_small, "gelu_forged_2x", tmp_path, max_reps=12, clock_retries=0)
    assert res.status == Status.suspect, res.message
    assert res.timing.doubts == ["clock"] and "more than the same loop without solve()" in res.message


def test_one_clock_disagreement_is_timed_again_and_a_clean_timing_passes(gelu_small, tmp_path):
    """A host that stalls outside the events once (the first session only): the judge times again with
    fresh inputs, and the clean second timing is the verdict, with the first one's doubt kept."""
    for f in ("gelu_clock_noise_once.py", "gelu_ok.py", "forge_times.py"):
        shutil.copy(KERNELS / f, tmp_path / f)
    loaded = load_task(gelu_small)
    src = tmp_path / "gelu_clock_noise_once.py"
    run = dict(source=src.read_text(), work_dir=tmp_path / "work", worker_argv=WORKER)
    # up to 3 retries: a clean session on this busy CPU can itself land outside the margin now and then
    res = run_compiled(loaded, str(src), options=options(max_reps=12, clock_retries=3), **run)
    assert res.status == Status.ok, res.message
    assert res.timing.doubts == [] and "disagreed with the judge's clock" in res.timing.retimed_because
    assert re.search(r"timed [2-4] times", res.message) and (tmp_path / "work" / "eval_result-attempt1.json").exists()
    # with retiming off, the same first session is the verdict
    (tmp_path / "gelu_clock_noise_once.stalled").unlink()
    res = run_compiled(loaded, str(src), options=options(max_reps=12, clock_retries=0), **run)
    assert res.status == Status.suspect and res.timing.doubts == ["clock"] and res.timing.retimed_because is None


def test_the_candidate_ending_the_process_is_a_runtime_error_that_says_so(gelu_small, tmp_path):
    res = judge(gelu_small, "gelu_exit", tmp_path)
    assert res.status == Status.runtime_error, res.message
    assert "the candidate ended the worker process in solve()" in res.message and "exit code 7" in res.message
    assert "sizes n=1" in res.message
    assert res.validation is not None and res.validation.cases[-1].kind == "worker_exit"


def test_an_abort_on_a_held_out_shape_names_neither_its_size_nor_its_index(gelu_small, tmp_path):
    res = judge(gelu_small, "gelu_abort_held_out", tmp_path)
    assert res.status == Status.runtime_error, res.message
    assert "signal 6 (SIGABRT)" in res.message and "a held-out case" in res.message
    assert not re.search(r"\b7\b", res.message.replace("signal 6", "")), res.message
    from cuda_llm.tools.harness.failure_text import describe, note
    for text in (describe(res, full=True), note(res)):
        assert not re.search(r"n=7\b|\b1048579\b", text), text


def test_an_exit_in_the_timing_loop_says_where(gelu_small, tmp_path):
    res = judge(gelu_small, "gelu_exit_timing", tmp_path)
    assert res.status == Status.runtime_error, res.message
    assert "during the timed calls" in res.message and "exit code 0" in res.message


def test_a_wrong_first_call_at_the_benchmark_shape_stops_the_worker(gelu_small, tmp_path):
    res = judge(gelu_small, "gelu_skip_benchmark", tmp_path, time_budget_s=30.0, max_reps=100000, min_reps=100000)
    assert res.status == Status.wrong_answer, res.message
    assert "on the first call" in res.message and res.timing is None, res.message   # no timed loop after it


def test_a_wrong_call_inside_the_loop_stops_the_repeated_timings(gelu_small, tmp_path):
    """Once a kept output of the loop fails its check the verdict is decided: the worker is stopped instead
    of timing the wrong kernel again (the repeats), and the message still names the first wrong call."""
    res = judge(gelu_small, "gelu_memo_pointer", tmp_path, timing_repeats=4, min_reps=400, max_reps=400)
    assert res.status == Status.wrong_answer and "at the benchmark shape on timed call" in res.message, res.message
    log = (tmp_path / "work" / "worker_stderr.log").read_text()
    assert "timing: repeat" not in log, log[-2000:]              # stopped at the first wrong call, never repeated
    honest = judge(gelu_small, "gelu_ok", tmp_path / "honest", timing_repeats=4, min_reps=400, max_reps=400)
    assert honest.status == Status.ok, honest.message
    assert "timing: repeat 4 of 4" in (tmp_path / "honest" / "work" / "worker_stderr.log").read_text()


def test_working_on_the_first_call_only_fails(gelu_small, tmp_path):
    res = judge(gelu_small, "gelu_first_call_only", tmp_path)
    assert res.status == Status.wrong_answer, res.message
    assert "timed call" in res.message or "after" in res.message


def test_an_input_used_as_scratch_in_the_loop_is_seen(gelu_small, tmp_path):
    res = judge(gelu_small, "gelu_mutates_input", tmp_path)
    assert res.status == Status.wrong_answer, res.message
    assert res.revalidation.first_failure().kind == "input_modified"


def test_a_hang_is_a_timeout_with_the_phase(gelu_small, tmp_path):
    res = judge(gelu_small, "gelu_hang", tmp_path, timeout_s=4.0)
    assert res.status == Status.timeout, res.message
    assert "in solve() during validation, the case at sizes n=31" in res.message


def test_input_sets_are_copied_from_the_host_when_the_device_is_full(gelu_small, tmp_path):
    res = judge(gelu_small, "gelu_memo_pointer", tmp_path, worker=[*WORKER, "--free-memory", "0"])
    assert res.status == Status.wrong_answer, res.message
    res = judge(gelu_small, "gelu_ok", tmp_path, worker=[*WORKER, "--free-memory", "0"])
    assert res.status == Status.ok, res.message


def test_a_hang_is_killed_at_the_limit_of_one_call_and_the_message_names_it(gelu_small, tmp_path):
    """The evaluation's limit is 60 s; one call may run 1.5 s: the hang in validation costs seconds, not 60."""
    res = judge(gelu_small, "gelu_hang", tmp_path, timeout_s=60.0, call_limit_s=1.5)
    assert res.status == Status.timeout, res.message
    assert "ran longer than the limit for one call, 1.5 s" in res.message
    assert "in solve() during validation, the case at sizes n=31" in res.message
    assert res.seconds < 20, res.seconds


def test_a_hang_inside_the_timed_loop_is_killed_at_the_limit_derived_from_the_naive_kernel(gelu_small, tmp_path):
    """No explicit limit: the naive kernel's 100 ms at the benchmark shape gives max(1 s, 20 x 100 ms) = 2 s (the
    NumPy kernel's larger validation cases take most of a second on a busy machine)."""
    res = judge(gelu_small, "gelu_hang_timed", tmp_path, timeout_s=60.0, naive_ms=100.0)
    assert res.status == Status.timeout, res.message
    assert "2 s, max(1 s, 20x the naive kernel's 100 ms at the benchmark shape)" in res.message
    assert "during the timed calls" in res.message and res.seconds < 25, (res.seconds, res.message)


def test_an_honest_kernel_passes_under_the_limit_of_one_call(gelu_small, tmp_path):
    res = judge(gelu_small, "gelu_ok", tmp_path, call_limit_s=2.0)
    assert res.status == Status.ok, res.message
