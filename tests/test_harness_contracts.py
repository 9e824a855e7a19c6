"""The judge's data path at the edges a mutation run found unpinned (docs/mutation.md): the checker's
verdicts and its thread pools, the comparison's blocks and maxima, the benchmark sets' files and cache.
Pure NumPy, no torch, no GPU, each test well under a second."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from cuda_llm.tasks.loader import load_task
from cuda_llm.tools.harness import checker, validate
from cuda_llm.tools.harness.checker import Checker, Expectation, RawCall, check_call
from cuda_llm.tools.harness.worker_protocol import GUARD_BYTE, GUARD_BYTES


# ---------------------------------------------------------------- tools.harness.checker
def _gelu():
    task = load_task("gelu").task
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    ref = np.tanh(x.astype(np.float64))
    return task, x, ref


def _two_outputs():
    """gelu with a second output z (same shape and tolerance): a call is checked output by output."""
    task = load_task("gelu").task
    y = next(p for p in task.params if p.name == "y")
    z = y.model_copy(update={"name": "z"})
    params = [*task.params[:2], z, *task.params[2:]]
    return task.model_copy(update={"params": params, "tolerance": {**task.tolerance, "z": task.tolerance["y"]}})


def test_a_verdict_keeps_the_calls_own_facts_and_defaults():
    task, x, ref = _gelu()
    exp = Expectation(sizes={"n": 64}, expected={"y": ref}, inputs={"x": x})
    r = check_call(task, exp, RawCall(outputs={"y": ref.astype(np.float32)}))
    assert r.passed and r.held_out is False and r.seconds == 0.0 and r.sizes == {"n": 64}
    r = check_call(task, Expectation(sizes={"n": 64}, expected={"y": ref}, inputs={"x": x}, held_out=True),
                   RawCall(outputs={"y": ref.astype(np.float32)}), seconds=0.25)
    assert r.passed and r.held_out is True and r.seconds == 0.25


def test_every_failure_kind_is_a_failed_case():
    task, x, ref = _gelu()
    exp = Expectation(sizes={"n": 64}, expected={"y": ref}, inputs={"x": x})
    good = ref.astype(np.float32)
    guards = np.full((2, GUARD_BYTES), GUARD_BYTE, dtype=np.uint8)
    assert check_call(task, exp, RawCall(outputs={"y": good}, guards=guards.reshape(-1))).passed   # flat guards too
    guards[0, -1] = 0                                                  # past the end of x
    r = check_call(task, exp, RawCall(outputs={"y": good}, guards=guards.reshape(-1)))
    assert r.passed is False and r.kind == "overrun" and r.output == "x" and "64 elements" in r.reason
    changed = x.copy()
    changed[5] = 9.0
    r = check_call(task, exp, RawCall(outputs={"y": good}, inputs_after={"x": changed}))
    assert r.passed is False and r.kind == "input_modified" and r.first_bad_index == [5]
    r = check_call(task, exp, RawCall(outputs={}))
    assert r.passed is False and r.kind == "size"


def test_every_output_is_checked_not_only_the_first():
    task = _two_outputs()
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    ref = np.tanh(x.astype(np.float64))
    exp = Expectation(sizes={"n": 64}, expected={"y": ref, "z": ref}, inputs={"x": x},
                      others=[("input set S0", {"y": ref, "z": -ref}, 0.0)])
    good = ref.astype(np.float32)
    assert check_call(task, exp, RawCall(outputs={"y": good, "z": good})).passed
    r = check_call(task, exp, RawCall(outputs={"y": good, "z": np.zeros_like(good)}))
    assert not r.passed and r.output == "z" and r.kind == "wrong_values"
    r = check_call(task, exp, RawCall(outputs={"y": good, "z": -good}))    # z is S0's answer
    assert not r.passed and r.output == "z" and r.kind == "replay"


def test_the_reference_slack_widens_the_tolerance_of_the_check_and_of_the_replay_test():
    task, x, ref = _gelu()
    atol, rtol = checker.tolerance(task, next(p for p in task.outputs), {"n": 64})
    off = (ref + np.sign(ref) * (atol + 3 * rtol * np.abs(ref))).astype(np.float32)   # outside rtol, inside 4 x rtol
    off[np.abs(ref) < 0.1] = ref[np.abs(ref) < 0.1]
    strict = Expectation(sizes={"n": 64}, expected={"y": ref}, inputs={"x": x})
    assert not check_call(task, strict, RawCall(outputs={"y": off})).passed
    slack = Expectation(sizes={"n": 64}, expected={"y": ref}, inputs={"x": x}, rel_slack=4 * rtol)
    assert check_call(task, slack, RawCall(outputs={"y": off})).passed
    # the replay test: another set's reference, matched only within that set's own slack
    other = Expectation(sizes={"n": 64}, expected={"y": -ref}, inputs={"x": x}, label="input set S1",
                        others=[("input set S0", {"y": ref}, 4 * rtol)])
    r = check_call(task, other, RawCall(outputs={"y": off}))
    assert r.kind == "replay" and "input set S0" in r.reason
    other.others = [("input set S0", {"y": ref}, 0.0)]
    assert check_call(task, other, RawCall(outputs={"y": off})).kind == "wrong_values"


def test_the_checkers_pools_follow_the_cpus(monkeypatch):
    monkeypatch.setattr(checker.os, "cpu_count", lambda: 32)
    c = Checker()
    assert (c._jobs._max_workers, c._blocks._max_workers, c.busy_s) == (4, 8, 0.0)
    c.close()
    monkeypatch.setattr(checker.os, "cpu_count", lambda: None)        # unknown: one thread each
    c = Checker()
    assert (c._jobs._max_workers, c._blocks._max_workers) == (1, 1)
    c.close()
    c = Checker(threads=3)
    assert (c._jobs._max_workers, c._blocks._max_workers) == (3, 3)
    c.close()
    c = Checker(threads=6)
    assert (c._jobs._max_workers, c._blocks._max_workers) == (4, 6)
    c.close()


def test_the_checker_runs_jobs_with_the_block_pool_and_counts_their_time():
    c = Checker(threads=2)
    seen = []

    def job(blocks):
        seen.append(blocks)
        time.sleep(0.02)
        return sum(blocks.map(lambda v: v * 2, [1, 2, 3]))

    assert not c.has("a") and not c.done("a")
    fut = c.submit("a", job)
    assert c.has("a") and not c.has("b")
    assert fut.result(timeout=5) == 12 and c.result("a") == 12 and c.done("a")
    assert c.busy_s >= 0.02 and c.busy_s < 5
    before = c.busy_s
    c.submit("b", lambda blocks: 1).result(timeout=5)
    assert c.busy_s >= before          # summed, never reset or subtracted
    c.close()
    with pytest.raises(RuntimeError):  # both pools are shut down
        c.submit("c", lambda blocks: 1)
    with pytest.raises(RuntimeError):
        seen[0].submit(lambda: 1)


def test_closing_the_checker_waits_for_the_running_check_and_drops_the_queued_ones():
    c = Checker(threads=1)                      # one job at a time: the second waits in the queue
    release, finished = threading.Event(), []

    def slow(blocks):
        release.wait(5)
        time.sleep(0.05)
        finished.append("slow")
        return 1

    c.submit("slow", slow)
    queued = c.submit("queued", lambda blocks: finished.append("queued"))
    closer = threading.Thread(target=c.close)
    closer.start()
    time.sleep(0.05)
    release.set()
    closer.join(5)
    assert finished == ["slow"] and queued.cancelled()


# ---------------------------------------------------------------- tools.harness.bench_data
@pytest.fixture()
def small_gelu(tmp_path, monkeypatch):
    """gelu at a benchmark size of 5003, in a folder of its own, with a cache root of its own."""
    import re
    import shutil

    from cuda_llm import cache_store

    root = tmp_path / "cache"
    monkeypatch.setenv("CUDA_LLM_CACHE", str(root))
    monkeypatch.delenv(cache_store.MAX_GB_ENV, raising=False)
    monkeypatch.delenv(cache_store.CONFIG_ENV, raising=False)
    root.mkdir()
    folder = tmp_path / "tasks" / "gelu"
    shutil.copytree(load_task("gelu").task.folder, folder)
    toml = (folder / "task.toml").read_text()
    (folder / "task.toml").write_text(re.sub(r"\[benchmark\]\s*\nn = \d+", "[benchmark]\nn = 5003", toml))
    return folder, root


def test_the_plan_times_three_sets_and_keeps_one_unseen():
    from cuda_llm.tools.harness import bench_data as bd

    indices = [i for i, *_ in bd.PLAN]
    assert sorted(indices) == [0, 1, 2, 3] and len(set(bd.SET_SEEDS)) == len(bd.SET_SEEDS) == 4
    assert sorted(bd.TIMED_SETS) == [0, 1, 2] and bd.POST_SET == 3 and bd.POST_SET not in bd.TIMED_SETS
    kinds = {i: (k, b, d) for i, k, b, d in bd.PLAN}
    assert kinds[1] == (bd.DERIVED, 0, 2) and kinds[3] == (bd.DERIVED, 2, 0)    # each derived from a timed fresh set
    assert kinds[0][0] == kinds[2][0] == bd.FRESH


def test_a_float64_reference_kept_as_float32_adds_its_rounding_to_rtol():
    from cuda_llm.tools.harness import bench_data as bd

    task = load_task("gelu").task
    y = task.outputs[0]
    ref64 = np.linspace(-2, 2, 101)
    r32, slack = bd.compact_reference(y, ref64)
    assert r32.dtype == np.float32 and 2.0 ** -24 <= slack <= 2.0 ** -22    # float32's rounding, no more
    assert np.all(np.abs(r32 - ref64) <= slack * np.abs(ref64))
    r16 = ref64.astype(np.float16)                                          # a narrower float: kept as it is
    same, slack = bd.compact_reference(y, r16)
    assert same.dtype == np.float16 and slack == 0.0
    ints = np.arange(10, dtype=np.int64)                                    # integers for a float output: kept
    same, slack = bd.compact_reference(y, ints)
    assert same.dtype == np.int64 and slack == 0.0
    big = np.array([1e300, 1.0])                                            # would overflow float32: kept
    with np.errstate(over="ignore"):
        same, slack = bd.compact_reference(y, big)
    assert same.dtype == np.float64 and slack == 0.0


def test_a_replay_fails_exactly_when_it_is_outside_the_tolerance():
    from cuda_llm.tools.harness import bench_data as bd

    loaded = load_task("gelu")
    ref = {"y": np.linspace(0.5, 2, 50)}
    assert bd.replay_fails(loaded, {"n": 50}, ref, ref) is False            # the same answer passes
    far = {"y": ref["y"] * 1.5}
    assert bd.replay_fails(loaded, {"n": 50}, far, ref) is True
    assert bd.replay_fails(loaded, {"n": 50}, far, ref, rel_slack=1.0) is False   # within a slack of 100%


def test_chunks_stay_inside_the_array_at_every_fraction():
    from cuda_llm.tools.harness import bench_data as bd

    p = next(q for q in load_task("gelu").task.inputs)
    base = np.arange(1000, dtype=np.float32)
    donor = -base
    for fraction in (2.0 ** -10, 0.1, 0.5, 1.0):
        c = bd.draw_chunks(p, base, donor, np.random.default_rng(3), fraction)
        assert c is not None and c.starts.size <= bd.MAX_CHUNKS
        assert np.all(np.diff(c.starts) >= c.length) and c.starts[-1] + c.length <= base.size, fraction
        assert c.values.size == c.count == c.starts.size * c.length
        assert c.count >= min(base.size, np.ceil(base.size * fraction)) * 0.9, fraction
        got = bd.apply_chunks(base, c)
        for s in c.starts:                                   # a donor's values at the same places
            assert np.array_equal(got[s:s + c.length], donor[s:s + c.length])


def test_made_sets_name_their_changed_part_and_start_from_nothing_changed():
    from cuda_llm.tools.harness import bench_data as bd

    loaded = load_task("gelu")
    said: list[str] = []
    sets, distinct = bd.make_sets(loaded, {"n": 4096}, said.append)
    assert distinct
    for i in (0, 2):
        assert sets[i].fraction == 0.0 and not sets[i].chunks
    for i in (1, 3):
        n = sum(c.count for c in sets[i].chunks.values())
        assert n > 0 and f"set S{i} derived from S{sets[i].base} ({n} elements changed)" in " ".join(said)
    s = bd.InputSet(index=0, kind=bd.FRESH, folder=None, expected={})
    assert s.rel_slack == 0.0 and s.fraction == 0.0 and s.base is None
    assert bd.BenchSets(sizes={}, sets={}, distinct=True, seconds=0.0).made == 0


def test_the_workers_plan_names_files_only_and_rebuilds_every_set(small_gelu):
    from pathlib import Path

    from cuda_llm import cache_store
    from cuda_llm.tools.harness import bench_data as bd

    folder, root = small_gelu
    loaded = load_task(folder)
    b = bd.prepare(loaded, {"n": 5003}, root)
    try:
        plan = b.plan()
        assert sorted(plan) == ["0", "1", "2", "3"]
        for i in ("0", "2"):
            assert plan[i]["kind"] == bd.FRESH and sorted(plan[i]["inputs"]) == ["x"]
            assert np.array_equal(np.load(plan[i]["inputs"]["x"]), b.full_inputs(int(i))["x"])
        for i, base in (("1", 0), ("3", 2)):
            assert plan[i]["kind"] == bd.DERIVED and plan[i]["base"] == base
            ch = plan[i]["chunks"]["x"]
            starts, values = np.load(ch["starts"]), np.load(ch["values"])
            assert values.size == starts.size * ch["length"]
            rebuilt = bd.apply_chunks(b.full_inputs(base)["x"], bd.Chunks(starts, ch["length"], values))
            assert np.array_equal(rebuilt, b.full_inputs(int(i))["x"])
            assert not np.array_equal(rebuilt, b.full_inputs(base)["x"])
        files = [f for s in plan.values() for f in [*s.get("inputs", {}).values(),
                                                     *[v for c in s.get("chunks", {}).values() for v in c.values()
                                                       if isinstance(v, str)]]]
        assert files and all(Path(f).exists() and not Path(f).name.startswith("ref_") for f in files)
        entry = Path(plan["0"]["inputs"]["x"]).parent
        assert cache_store.remove(entry) is False                # in use until closed
    finally:
        b.close()
    assert cache_store.remove(entry) is True                     # released by close
    assert bd.output_shapes(loaded, {"n": 7}) == {"y": ((7,), "float32")}


def test_the_entry_key_follows_the_tasks_files(small_gelu):
    from cuda_llm.tools.harness import bench_data as bd

    folder, _ = small_gelu
    k = bd.entry_key(load_task(folder), {"n": 5003}, 0)
    with open(folder / "reference.py", "a") as f:
        f.write("\n# changed\n")
    assert bd.entry_key(load_task(folder), {"n": 5003}, 0) != k


# ---------------------------------------------------------------- tools.harness.validate
def test_one_wrong_element_fails_and_an_empty_output_passes():
    r = validate.compare_output("y", np.array([2.0], np.float32), np.array([1.0]), (1e-5, 1e-4), is_float=True)
    assert not r["passed"] and r["kind"] == "wrong_values" and r["first_bad_index"] == [0]
    r = validate.compare_output("y", np.zeros(0, np.float32), np.zeros(0), (0.0, 0.0), is_float=True)
    assert r["passed"] and r["max_abs_err"] is None


def test_a_pass_costs_only_the_quick_pass_and_reports_the_error_maxima(monkeypatch):
    def no_diagnosis(*a, **k):
        raise AssertionError("the full diagnosis ran on an output that passes")

    monkeypatch.setattr(validate, "_failure_stats", no_diagnosis)
    want = np.array([0.5, 1.0, -2.0, 4.0])
    got = (want + np.array([0.0, 1e-6, -4e-6, 2e-6])).astype(np.float32)
    r = validate.compare_output("y", got, want, (1e-5, 1e-5), is_float=True)
    assert r["passed"]
    assert r["max_abs_err"] == pytest.approx(4e-6, rel=0.05) and r["max_rel_err"] == pytest.approx(2e-6, rel=0.05)


def test_a_failure_reports_the_relative_error_of_small_references():
    want = np.array([0.5, 0.25])
    r = validate.compare_output("y", np.array([0.6, 0.25], np.float32), want, (1e-5, 1e-5), is_float=True)
    assert not r["passed"] and r["max_abs_err"] == pytest.approx(0.1, rel=1e-5)
    assert r["max_rel_err"] == pytest.approx(0.2, rel=1e-5)       # 0.1 / 0.5, not 0.1 / 1


def test_an_integer_reference_equal_to_the_sentinel_is_not_an_unwritten_element():
    sentinel = validate.poison_value(np.int32)
    want = np.array([sentinel, 1, 2], np.int32)
    r = validate.compare_output("y", np.array([sentinel, 1, 5], np.int32), want, (0.0, 0.0), is_float=False)
    assert r["kind"] == "wrong_values" and r["first_bad_index"] == [2]
    r = validate.compare_output("y", np.array([sentinel, sentinel, 2], np.int32), want, (0.0, 0.0), is_float=False)
    assert r["kind"] == "unwritten" and r["first_bad_index"] == [1]


def test_differences_are_found_at_the_element_of_any_width():
    for dtype in (np.uint8, np.float16, np.float32, np.int64):
        a = np.zeros((2, 3), dtype)
        b = a.copy()
        b[1, 1] = 1
        assert validate.first_difference(a, b) == [1, 1], dtype
        assert validate.first_difference(a, a.copy()) is None and validate.unchanged(a, a.copy())
        assert not validate.unchanged(a, b)


def test_large_outputs_are_split_in_at_most_sixteen_parts(monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(validate, "CHUNK", 8)
    with ThreadPoolExecutor(2) as pool:
        parts = validate._over_blocks(lambda lo, hi: (lo, hi), 2000, pool)
    assert len(parts) == 16 and parts[0] == (0, 128) and parts[-1][1] == 2000


# ---------------------------------------------------------------- tools.harness.judge
def _judge(tmp_path):
    from cuda_llm.tools.harness.eval_options import EvalOptions
    from cuda_llm.tools.harness.judge import Judge

    return Judge(load_task("gelu"), str(tmp_path / "k.so"), EvalOptions(), seed=1, work=tmp_path)


def _held(entry) -> bool:
    """Does some open file of this process hold the cache entry's lock (cache_store.in_use)?"""
    import fcntl

    from cuda_llm import cache_store

    with open(cache_store._lock_file(entry), "a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return False


def test_the_comparison_library_is_held_in_use_and_built_again_when_its_file_is_gone(tmp_path, monkeypatch):
    from cuda_llm.tools.harness import device_compare

    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()                                  # the entry is there, its library already evicted
    new.mkdir()
    (new / "compare.so").write_bytes(b"\x7fELF")
    calls = []

    def build(arch, fresh=False):
        calls.append(fresh)
        return str((new if fresh else old) / "compare.so")

    monkeypatch.setattr(device_compare, "build", build)
    j = _judge(tmp_path)
    try:
        assert j._held_compare_lib() == str(new / "compare.so") and calls == [False, True]
        assert _held(new)
    finally:
        j._held.close()
        j.checker.close()
        j.pool.shutdown()
    assert not _held(new)
    (new / "compare.so").unlink()
    j = _judge(tmp_path)
    try:
        with pytest.raises(RuntimeError, match="removed from the cache"):
            j._held_compare_lib()
    finally:
        j._held.close()
        j.checker.close()
        j.pool.shutdown()


class _GoneSession:
    """A worker session whose process has ended: every wait for an event says so."""

    call_timed_out = False

    def __init__(self, rc, timed_out=False):
        self.rc, self.timed_out, self.sent = rc, timed_out, []

    def send(self, cmd):
        self.sent.append(cmd)

    def next_event(self, timeout):
        from cuda_llm.tools.harness.runner import WorkerGone

        raise WorkerGone(self.rc, self.timed_out)


def _ended_in_a_case(tmp_path, rc, timed_out=False):
    """A Judge whose worker ended after the first validation case was sent: (judge, the WorkerGone)."""
    from concurrent.futures import Future

    from cuda_llm.tools.harness.judge import _Case
    from cuda_llm.tools.harness.runner import WorkerGone

    j = _judge(tmp_path)
    j.session = _GoneSession(rc, timed_out)
    case = _Case(0, {"n": 7}, False, tmp_path, {}, Future())
    with pytest.raises(WorkerGone) as gone:
        j._validate([case], "validation", 60.0)
    j.checker.close()
    j.pool.shutdown()
    assert j.session.sent[0]["cmd"] == "case" and j.session.sent[0]["sizes"] == {"n": 7}
    return j, gone.value


def test_a_worker_that_ends_in_a_case_is_named_with_the_case_and_how_it_ended(tmp_path):
    import signal

    from cuda_llm.results import Status
    from cuda_llm.tools.harness.worker_protocol import EXIT_HARNESS

    j, gone = _ended_in_a_case(tmp_path, -int(signal.SIGSEGV))
    assert j.state.phase == "validation, the case at sizes n=7" and j.state.in_solve is False
    j._gone(gone)
    e = j.resp.error
    assert e.status == Status.runtime_error and e.stage == "validation"
    assert "ended the worker process during validation, the case at sizes n=7: signal 11 (SIGSEGV) " \
           "(a crash in its host code)" in e.message
    v = j.resp.validation
    assert not v.passed and len(v.cases) == 1 and v.cases[0].kind == "worker_exit" and v.cases[0].sizes == {"n": 7}
    j, gone = _ended_in_a_case(tmp_path, 5)                 # an exit code: no crash hint
    j._gone(gone)
    assert "exit code 5. solve() must return normally" in j.resp.error.message
    j, gone = _ended_in_a_case(tmp_path, EXIT_HARNESS)      # the worker's own failure code: the harness's
    j._gone(gone)
    assert j.resp.error is None and "without saying why" in j.resp.harness_error
    j, gone = _ended_in_a_case(tmp_path, None, timed_out=True)
    j._gone(gone)
    assert j.resp.error.status == Status.timeout and "killed after" in j.resp.error.message
    j = _judge(tmp_path)                                    # before the candidate was loaded: never the kernel's
    j.checker.close()
    j.pool.shutdown()
    from cuda_llm.tools.harness.runner import WorkerGone
    j._gone(WorkerGone(-9, False))
    assert j.resp.error is None and "before it loaded the candidate" in j.resp.harness_error


def test_every_calls_check_carries_each_sets_reference_and_tolerance(tmp_path):
    from types import SimpleNamespace

    from cuda_llm.tools.harness.eval_options import EvalOptions
    from cuda_llm.tools.harness.judge import Judge

    def bench(name, sizes):
        return SimpleNamespace(sizes=sizes, sets={s: SimpleNamespace(folder=None, expected={name: np.full(3, s)},
                                                                      rel_slack=0.5 * s) for s in (0, 1, 2)})

    for task, out, sizes, exact in (("histogram", "hist", {"n": 10, "bins": 3}, True), ("gelu", "y", {"n": 3}, False)):
        j = Judge(load_task(task), "k.so", EvalOptions(), seed=1, work=tmp_path)
        j.checker.close()
        j.pool.shutdown()
        j.bench, j.exchange = bench(out, sizes), tmp_path
        cc = j._call_check([0, 1, 2])
        assert cc.lib is None and [o.name for o in cc.outputs] == [out]
        o = cc.outputs[0]
        assert o.exact is exact and sorted(o.refs) == [0, 1, 2]
        atol, rtol = checker.tolerance(j.task, j.task.outputs[0], sizes)
        assert o.tol == {s: (atol, rtol + 0.5 * s) for s in (0, 1, 2)}
        for s in (0, 1, 2):
            assert np.array_equal(np.load(o.refs[s]), np.full(3, s))
    # a float output with no absolute tolerance is still compared as floats (within rtol), never exactly
    from cuda_llm.tasks.model import Tolerance

    gelu = load_task("gelu")
    j = Judge(gelu, "k.so", EvalOptions(), seed=1, work=tmp_path)
    j.checker.close()
    j.pool.shutdown()
    j.task = gelu.task.model_copy(update={"tolerance": {"y": Tolerance(atol=0, rtol=1e-4)}})
    j.bench, j.exchange = bench("y", {"n": 3}), tmp_path
    assert j._call_check([0, 1, 2]).outputs[0].exact is False


def test_a_wrong_timed_call_is_named_by_its_place_and_what_it_matched(tmp_path):
    from types import SimpleNamespace

    from cuda_llm.tools.harness.runner import Event

    j = _judge(tmp_path)
    j.checker.close()
    j.pool.shutdown()
    j.bench = SimpleNamespace(sizes={"n": 100})
    j._wrong(Event(ev="wrong", i=4, set=1, output="y", count=7, like=None, repeat=1))
    call, where, r = j._wrong_call
    assert (call, where) == (4, "on timed call 5 (input set S1)")
    assert not r.passed and r.kind == "wrong_values" and r.output == "y" and r.sizes == {"n": 100}
    assert r.reason.startswith("y: 7 of 100 elements outside tolerance")
    j._wrong(Event(ev="wrong", i=0, set=2, output="y", count=100, like=0, repeat=3))
    call, where, r = j._wrong_call
    assert where == "on timed call 1 of timing repeat 3 (input set S2)" and r.kind == "replay"
    assert "reference of input set S0" in r.reason and "(input set S2)" in r.reason


class _EndedSession:
    def __init__(self, rc):
        self.rc, self.stderr, self.stdout, self.seconds = rc, "worker log\n", "", 1.5

    def close(self):
        return self.rc


def test_a_worker_that_ends_badly_after_its_last_command_is_noted_only_without_timing(tmp_path):
    from cuda_llm.results import ValidationResult
    from cuda_llm.tools.harness.eval_options import EvalOptions
    from cuda_llm.tools.harness.judge import Judge

    def finish(rc, timing=False, error=None, passed=True):
        j = Judge(load_task("gelu"), "k.so", EvalOptions(timing=timing), seed=1, work=tmp_path)
        j.checker.close()
        j.pool.shutdown()
        j.session = _EndedSession(rc)
        j.resp.validation = ValidationResult(passed=passed, cases=[])
        j.resp.harness_error = error
        j._finish()
        assert (tmp_path / "worker_stderr.log").read_text() == "worker log\n" and j.state.costs["worker_s"] == 1.5
        return j.resp.notes

    assert finish(-6) == ["the worker ended with signal 6 (SIGABRT) after its last command"]
    assert finish(0) == [] and finish(None) == []
    assert finish(-6, timing=True) == [] and finish(-6, passed=False) == [] and finish(-6, error="x") == []


class _FaultSession(_GoneSession):
    def next_event(self, timeout):
        from cuda_llm.tools.harness.runner import Event

        return Event(ev="fault", message="an illegal memory access was encountered", cmd="case")


def test_a_cuda_fault_in_a_case_fails_that_case_with_the_fault(tmp_path):
    from concurrent.futures import Future

    from cuda_llm.results import Status
    from cuda_llm.tools.harness.judge import _Case, _Fault

    j = _judge(tmp_path)
    j.session = _FaultSession(None)
    with pytest.raises(_Fault) as fault:
        j._validate([_Case(0, {"n": 9}, True, tmp_path, {}, Future())], "validation", 60.0)
    j.checker.close()
    j.pool.shutdown()
    j._fault(fault.value.message)
    assert j.resp.error.status == Status.runtime_error and j.resp.error.stage == "validation"
    assert j.resp.error.message == "CUDA error during validation: an illegal memory access was encountered"
    case = j.resp.validation.cases[-1]
    assert not j.resp.validation.passed and case.kind == "cuda_error" and case.held_out and case.sizes == {"n": 9}


class _CaseSession(_GoneSession):
    """A worker that answers every case at once."""

    def next_event(self, timeout):
        from cuda_llm.tools.harness.runner import Event

        return Event(ev="case", i=len(self.sent) - 1, seconds=0.0)


def test_cases_are_sent_while_the_checks_of_earlier_ones_still_run(tmp_path):
    """Each case is checked in a thread as its data arrives: the next case never waits for that check."""
    from concurrent.futures import Future

    from cuda_llm.results import CaseResult
    from cuda_llm.tools.harness.judge import _Case

    j = _judge(tmp_path)
    all_sent = threading.Event()

    class Session(_CaseSession):
        def send(self, cmd):
            super().send(cmd)
            if len(self.sent) == 3:
                all_sent.set()

    j.session = Session(None)

    def slow_check(c, seconds):
        def run(pool):
            ok = all_sent.wait(2.0)                  # passes only if every case went out before any check ended
            return CaseResult(sizes=c.sizes, held_out=False, passed=ok, seconds=seconds)
        return run

    j._case_check = slow_check
    cases = [_Case(i, {"n": 5 + i}, False, tmp_path, {}, Future()) for i in range(3)]
    try:
        v = j._validate(cases, "validation", 0.0)
    finally:
        j.checker.close()
        j.pool.shutdown()
    assert [c["i"] for c in j.session.sent] == [0, 1, 2]
    assert v.passed and len(v.cases) == 3


def test_the_first_change_of_a_derived_input_is_the_first_of_either_kind(monkeypatch):
    from types import SimpleNamespace

    from cuda_llm.tools.harness.checker import _first_change

    base = np.arange(16, dtype=np.float32)
    chunks = SimpleNamespace(starts=[1, 8], length=2, values=np.array([50, 51, 80, 81], dtype=np.float32))
    given = base.copy()
    given[[1, 2, 8, 9]] = [50, 51, 80, 81]
    both = given.copy()
    both[9], both[0] = -1, -1                       # a wrong value in the second run, and a base change before it
    assert _first_change(base, both, chunks) == [0]
    both[0], both[12] = 0, -1                        # the base change after it: the run's comes first
    assert _first_change(base, both, chunks) == [9]
    past_first = given.copy()
    past_first[3] = -1                               # just past the end of the first run
    assert _first_change(base, past_first, chunks) == [3]
    same = SimpleNamespace(starts=[1], length=2, values=base[1:3].copy())   # a run that wrote the base's own values
    one = base.copy()
    one[5] = -1                                      # the only difference anywhere
    assert _first_change(base, one, same) == [5]
    monkeypatch.setattr(validate, "CHUNK", 4)        # blocks of 4: the base is scanned block by block
    assert _first_change(base, past_first, chunks) == [3]
    late = given.copy()
    late[13] = -1                                    # in the fourth block
    assert _first_change(base, late, chunks) == [13] and _first_change(base, given, chunks) is None


def test_the_absolute_tolerance_scales_with_the_inputs_only_where_asked():
    task, x, _ = _gelu()
    atol, _ = checker.tolerance(task, task.outputs[0], {"n": 4})
    zero = np.zeros(4)
    off = np.full(4, 1.5 * atol, np.float32)         # outside atol where the reference is 0 (rtol adds nothing)
    plain = Expectation(sizes={"n": 4}, expected={"y": zero}, inputs={"x": x[:4]})
    assert not check_call(task, plain, RawCall(outputs={"y": off})).passed
    scaled = Expectation(sizes={"n": 4}, expected={"y": zero}, inputs={"x": x[:4]}, atol_factor={"y": 4.0})
    assert check_call(task, scaled, RawCall(outputs={"y": off})).passed
    assert not check_call(task, scaled, RawCall(outputs={"y": off * 3})).passed


def test_closing_the_checker_waits_for_the_running_blocks_and_drops_the_queued_ones():
    c = Checker(threads=1)
    log = []

    def job(blocks):
        blocks.submit(lambda: (time.sleep(0.3), log.append(1)))
        blocks.submit(lambda: log.append(2))        # queued behind the first: one block thread
        return 0

    c.submit("j", job).result(timeout=5)
    c.close()
    assert log == [1]


def test_a_failure_spread_over_blocks_names_its_first_element_and_its_largest_error(monkeypatch):
    monkeypatch.setattr(validate, "CHUNK", 4)                # blocks of 4 elements
    want = np.zeros(12)
    got = np.zeros(12, np.float32)
    got[0], got[9] = 0.1, 0.5                               # the first block and the third
    r = validate.compare_output("y", got, want, (1e-3, 0.0), is_float=True)
    assert r["kind"] == "wrong_values" and r["first_bad_index"] == [0] and "2 of 12" in r["reason"]
    assert r["max_abs_err"] == pytest.approx(0.5)
    got[0] = 0.0
    r = validate.compare_output("y", got, want, (1e-3, 0.0), is_float=True)
    assert r["first_bad_index"] == [9] and r["max_abs_err"] == pytest.approx(0.5)


def test_integers_with_no_tolerance_are_compared_as_integers():
    big = np.array([2**60, 7], np.int64)
    off = np.array([2**60 + 1, 7], np.int64)                 # equal as float64, not as integers
    r = validate.compare_output("y", off, big, (0.0, 0.0), is_float=False)
    assert not r["passed"] and r["first_bad_index"] == [0]
    assert not validate.passes(off, big, (0.0, 0.0)) and validate.passes(big.copy(), big, (0.0, 0.0))
    assert validate.count_outside(off, big, 0.0, 0.0, exact=True) == 1
    small = np.array([3, 4], np.int16)                      # a dtype with no poison value: plainly wrong
    r = validate.compare_output("y", np.array([3, 5], np.int16), small, (0.0, 0.0), is_float=False)
    assert r["kind"] == "wrong_values" and r["first_bad_index"] == [1]


def test_the_replay_test_sees_a_difference_in_the_first_element():
    assert not validate.passes(np.array([5.0, 1.0], np.float32), np.array([4.0, 1.0]), (0.0, 0.0))
    assert not validate.passes(np.array([5, 1], np.int32), np.array([4, 1], np.int32), (0.0, 0.0))
    assert validate.passes(np.array([5, 1], np.int32), np.array([5, 1], np.int32), (0.0, 0.0))
    assert validate.passes(np.array([4.00001, 1.0], np.float32), np.array([4.0, 1.0]), (1e-3, 0.0))


def test_the_int64_poison_is_the_32_bit_sentinel_twice():
    assert validate.poison_word32(np.int64) == validate.INT_SENTINEL == validate.poison_word32(np.int32)
    p = validate.poisoned((3,), np.int64)
    assert p.dtype == np.int64 and validate.is_poison(p).all()
    assert (p.view(np.uint32) == validate.INT_SENTINEL).all()          # what memset_d32 of the word leaves
    assert int(p[0]) < 0 and int(p[0]) == validate.poison_value(np.int64)


def test_equal_integers_pass_without_the_full_diagnosis(monkeypatch):
    def no_diagnosis(*a, **k):
        raise AssertionError("the full diagnosis ran on an output that passes")

    monkeypatch.setattr(validate, "_failure_stats", no_diagnosis)
    ints = np.arange(10, dtype=np.int32)
    r = validate.compare_output("y", ints.copy(), ints, (0.0, 0.0), is_float=False)
    assert r["passed"] and r["max_abs_err"] == 0.0


def test_a_derived_set_grows_four_times_at_a_time_until_replays_fail(monkeypatch):
    from cuda_llm.tools.harness import bench_data as bd

    loaded = load_task("gelu")
    sizes = {"n": 4096}
    sets, _ = bd.make_sets(loaded, sizes)
    others = [sets[j] for j in (0, 2, 3)]
    monkeypatch.setattr(bd, "_replays_fail", lambda ld, sz, x, y: x.fraction >= 0.25)
    s, ok = bd._derive(loaded, sizes, 1, sets[0], sets[2], others, lambda m: None, start=2.0 ** -10)
    assert ok and s.fraction == 0.25 and s.index == 1 and s.base == 0
    monkeypatch.setattr(bd, "_replays_fail", lambda ld, sz, x, y: False)          # never different enough
    s, ok = bd._derive(loaded, sizes, 1, sets[0], sets[2], others, lambda m: None, start=0.5)
    assert not ok and s.fraction == 1.0                                         # stops at the whole input


def test_references_keep_their_own_slack_only():
    from cuda_llm.tools.harness import bench_data as bd

    y = load_task("gelu").task.outputs[0]
    same, slack = bd.compact_reference(y, np.ones(3, np.float32))              # already the output's dtype
    assert same.dtype == np.float32 and slack == 0.0
    tiny = np.array([1e-50, 1.0])                                              # below float32's range: kept
    same, slack = bd.compact_reference(y, tiny)
    assert same.dtype == np.float64 and slack == 0.0
    hist = load_task("histogram").task.outputs[0]                              # an int32 output
    cast, slack = bd.compact_reference(hist, np.array([1, 2, 3], np.int64))
    assert cast.dtype == np.int32 and slack == 0.0
    kept, slack = bd.compact_reference(hist, np.array([2**40], np.int64))      # would not fit: kept
    assert kept.dtype == np.int64 and slack == 0.0
    sets, _ = bd.make_sets(load_task("gelu"), {"n": 1000})
    assert all(s.rel_slack <= 2.0 ** -22 for s in sets.values())


def test_shuffled_rows_come_from_other_rows_of_the_same_input():
    from cuda_llm.tools.harness import bench_data as bd

    p = load_task("gelu").task.inputs[0].model_copy(update={"vary": "shuffle_rows"})
    base = np.arange(64 * 5, dtype=np.float32).reshape(64, 5)
    for fraction in (0.05, 0.5, 1.0):
        c = bd.draw_chunks(p, base, -base, np.random.default_rng(1), fraction)
        assert c is not None and c.length % 5 == 0 and c.values.size == c.count
        got = bd.apply_chunks(base, c)
        rows = {r.tobytes() for r in base}
        assert all(r.tobytes() in rows for r in got)                          # rows of base, never the donor's
        for s in c.starts:
            assert not np.array_equal(got.reshape(-1)[s:s + c.length], base.reshape(-1)[s:s + c.length])
    assert bd.draw_chunks(p, base[:1], -base[:1], np.random.default_rng(1), 1.0) is None   # one row: nothing to take
    plain = load_task("gelu").task.inputs[0]                                     # replaced values: element by element
    c = bd.draw_chunks(plain, base, -base, np.random.default_rng(1), 2.0 ** -10)
    assert c.length == 1


def test_the_sets_come_from_the_cache_held_until_closed_and_released_on_failure(small_gelu, monkeypatch):
    from cuda_llm import cache_store
    from cuda_llm.tools.harness import bench_data as bd

    folder, root = small_gelu
    loaded = load_task(folder)
    sizes = {"n": 5003}
    assert bd.entry_bytes(loaded, sizes) == 2 * 5003 * 4                     # x and y, float32; n is no buffer
    said: list[str] = []
    first = bd.prepare(loaded, sizes, root, said.append)
    first.close()
    assert first.made == 4 and 0 <= first.seconds < 60 and any("making the input sets" in m for m in said)
    said.clear()
    again = bd.prepare(loaded, sizes, root, said.append)
    entries = [Path(f).parent for f in again.plan()["0"]["inputs"].values()]
    try:
        assert again.made == 0 and not any("making" in m for m in said)
        assert cache_store.remove(entries[0]) is False                         # loaded from the cache: held
    finally:
        again.close()
    memory = bd.prepare(loaded, sizes, None)                                 # no cache: made here, kept in memory
    assert memory.made == 4 and sorted(memory.sets) == [0, 1, 2, 3] and memory.sets[0].folder is None
    assert 0 <= memory.seconds < 60 and 0 <= again.seconds < 60
    # one entry gone: the others are held while the sets are made again, and released when that fails
    (Path(again.sets[2].folder) / "done").unlink()
    monkeypatch.setattr(bd, "make_sets", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("no memory")))
    with pytest.raises(RuntimeError, match="no memory") as failed:       # (its traceback keeps prepare's frame)
        bd.prepare(loaded, sizes, root)
    assert cache_store.remove(Path(again.sets[0].folder)) is True and failed.value


def test_a_task_without_a_folder_is_keyed_by_its_definition():
    from cuda_llm.tasks.loader import LoadedTask
    from cuda_llm.tools.harness import bench_data as bd

    task = load_task("gelu").task
    bare = LoadedTask(task=task.model_copy(update={"folder": None}), reference=lambda i, s: {}, make_inputs=None)
    other = LoadedTask(task=task.model_copy(update={"folder": None, "description": "another"}),
                       reference=lambda i, s: {}, make_inputs=None)
    assert bd.entry_key(bare, {"n": 5}, 0) != bd.entry_key(other, {"n": 5}, 0)
