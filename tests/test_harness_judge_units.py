"""The judge's parts without a GPU: the cache cap and its command, the benchmark's input sets (over all 20
tasks), the timing schedule, the parent's clock check on constructed data, the checker on synthetic raw
outputs, the transport, and the worker's environment."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from cuda_llm.tasks import list_task_names, load_task
from cuda_llm.tools.harness import bench_data, timing_plan, timing_stats, transport, validate
from cuda_llm import cache_store
from cuda_llm.tools.harness.checker import Expectation, RawCall, check_call
from cuda_llm.tools.harness.worker_protocol import GUARD_BYTE, GUARD_BYTES


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("CUDA_LLM_CACHE", str(root))
    monkeypatch.delenv(cache_store.MAX_GB_ENV, raising=False)
    monkeypatch.delenv(cache_store.CONFIG_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    root.mkdir()
    return root


def _entry(root: Path, kind: str, name: str, nbytes: int, used: float) -> Path:
    d = root / kind / name
    d.mkdir(parents=True)
    (d / "data.bin").write_bytes(b"\0" * nbytes)
    os.utime(d, (used, used))
    return d


# ---------------------------------------------------------------------------------------- cache cap
def test_cap_setting_from_env_then_toml_then_default(cache, tmp_path):
    assert cache_store.max_bytes() == 20 * 10**9
    (tmp_path / "cuda-llm.toml").write_text("[cache]\nmax_gb = 3.5\n")
    assert cache_store.max_bytes() == int(3.5e9)
    assert cache_store.max_bytes(env={cache_store.MAX_GB_ENV: "0.25"}) == int(0.25e9)
    for bad in ("many", "0", "-1"):
        with pytest.raises(cache_store.CacheConfigError, match="CUDA_LLM_CACHE_MAX_GB"):
            cache_store.max_bytes(env={cache_store.MAX_GB_ENV: bad})
    (tmp_path / "cuda-llm.toml").write_text("[cache]\nmax_gb = 'big'\n")
    with pytest.raises(cache_store.CacheConfigError, match=r"\[cache\] max_gb"):
        cache_store.max_bytes()


def test_eviction_is_least_recently_used_and_never_takes_an_entry_in_use(cache):
    now = time.time()
    old = _entry(cache, "benchdata", "gelu-s0-old", 4000, now - 300)
    busy = _entry(cache, "benchdata", "gelu-s1-busy", 4000, now - 200)
    mid = _entry(cache, "builds", "abc", 4000, now - 100)
    new = _entry(cache, "baselines", "gelu.json", 10, now)
    (cache / "feature_stats.sqlite").write_bytes(b"\0" * 5000)       # not an entry: never evicted
    (cache / "devices").mkdir()
    (cache / "devices" / "h100.json").write_text("{}")
    assert cache_store.usage(cache)["benchdata"] == (2, 8000)
    with cache_store.in_use(busy) as alive:
        assert alive
        cache_store.touch(busy)
        os.utime(busy, (now - 200, now - 200))          # still the second oldest, but in use
        removed = cache_store.enforce_cap(cache, limit=5000 + 4000 + 10 + 200)
    names = [e.path.name for e in removed]
    assert names == ["gelu-s0-old", "abc"], names      # oldest first, skipping the one in use
    assert busy.exists() and new.exists() and not old.exists() and not mid.exists()
    assert (cache / "feature_stats.sqlite").exists() and (cache / "devices" / "h100.json").exists()
    assert cache_store.enforce_cap(cache, limit=10**12) == []


def test_an_evicted_entry_is_missing_for_a_late_user(cache):
    d = _entry(cache, "benchdata", "x", 10, time.time())
    assert cache_store.remove(d) and not d.exists()
    with cache_store.in_use(d) as alive:
        assert not alive


def test_clear_by_kind_and_the_cache_command(cache, capsys):
    from cuda_llm.cli import main

    now = time.time()
    _entry(cache, "benchdata", "a", 2_000_000, now)
    _entry(cache, "builds", "b", 1000, now)
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"benchdata\s+1\s+2\.00 MB", out) and "cap: 20.00 GB" in out, out
    assert main(["cache", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kinds"]["builds"]["entries"] == 1 and data["cap_bytes"] == 20 * 10**9
    assert main(["cache", "clear", "--kind", "benchdata"]) == 0
    assert "removed 1 entries" in capsys.readouterr().out
    assert not (cache / "benchdata" / "a").exists() and (cache / "builds" / "b").exists()
    assert main(["cache", "clear", "--kind", "nonsense"]) == 2
    assert "unknown cache kind" in capsys.readouterr().err
    assert main(["cache", "clear"]) == 0 and not (cache / "builds" / "b").exists()


# ------------------------------------------------------------------------------- benchmark input sets
def _small_gelu(tmp_path: Path, n: int = 5003) -> Path:
    folder = tmp_path / "tasks" / "gelu"
    shutil.copytree(load_task("gelu").task.folder, folder)
    toml = (folder / "task.toml").read_text()
    (folder / "task.toml").write_text(re.sub(r"\[benchmark\]\s*\nn = \d+", f"[benchmark]\nn = {n}", toml))
    return folder


def test_keys_hold_task_shape_and_set_only(tmp_path):
    loaded = load_task(_small_gelu(tmp_path))
    k = bench_data.entry_key(loaded, {"n": 5003}, 0)
    assert k == bench_data.entry_key(loaded, {"n": 5003}, 0)         # no clock, no evaluation seed
    assert k != bench_data.entry_key(loaded, {"n": 5004}, 0) and k != bench_data.entry_key(loaded, {"n": 5003}, 1)
    assert k.startswith("gelu-s0-")


def test_a_hundred_evaluations_add_one_entry_per_set(cache, tmp_path):
    """The CPU side of 100 evaluations of one task: the benchmark data is made once, then reused."""
    loaded = load_task(_small_gelu(tmp_path))
    sizes = dict(loaded.task.benchmark)
    first = bench_data.prepare(loaded, sizes, cache)
    first.close()
    assert first.made == 4
    size = cache_store.usage(cache)["benchdata"]
    for _ in range(99):
        b = bench_data.prepare(loaded, sizes, cache)
        assert b.made == 0 and sorted(b.sets) == [0, 1, 2, 3]
        b.close()
    assert cache_store.usage(cache)["benchdata"] == size and size[0] == 4
    assert not [p for p in (cache / "benchdata").iterdir() if p.name.startswith(".")], "no temporary folders left"


def test_new_benchmark_data_evicts_old_entries_under_the_cap(cache, tmp_path, monkeypatch):
    now = time.time()
    _entry(cache, "benchdata", "other-task-s0", 300_000, now - 1000)
    monkeypatch.setenv(cache_store.MAX_GB_ENV, str(250_000 / 1e9))
    loaded = load_task(_small_gelu(tmp_path))
    b = bench_data.prepare(loaded, dict(loaded.task.benchmark), cache)
    b.close()
    names = sorted(p.name for p in (cache / "benchdata").iterdir())
    assert "other-task-s0" not in names and len([n for n in names if n.startswith("gelu-s")]) == 4


def _mid_shape(task):
    shapes = sorted(task.shapes, key=task.bytes_at)
    return shapes[len(shapes) // 2]


@pytest.mark.parametrize("name", list_task_names())
def test_a_replayed_answer_fails_every_other_set(name):
    """For every task: the reference of any input set, returned for any other set, fails the task's own
    tolerance check; inputs the task marks fixed never change; shuffled rows are rows of the same array."""
    loaded = load_task(name)
    sizes = _mid_shape(loaded.task)
    sets, distinct = bench_data.make_sets(loaded, sizes)
    assert distinct
    for a in sets.values():
        for b in sets.values():
            if a is not b:
                assert bench_data.replay_fails(loaded, sizes, a.expected, b.expected, b.rel_slack), (a.index, b.index)
    full = {i: {n: bench_data.apply_chunks(sets[s.base].inputs[n], s.chunks.get(n)) for n in sets[s.base].inputs}
            for i, s in sets.items() if s.kind == bench_data.DERIVED}
    for i, s in sets.items():
        if s.kind != bench_data.DERIVED:
            continue
        base = sets[s.base].inputs
        for p in loaded.task.inputs:
            changed = ~np.equal(validate._bits(full[i][p.name]), validate._bits(base[p.name]))
            if p.vary == "fixed":
                assert not changed.any(), p.name
            elif p.vary == "shuffle_rows" and base[p.name].ndim > 1:
                rows = {r.tobytes() for r in base[p.name]}
                assert all(r.tobytes() in rows for r in full[i][p.name])


def test_a_derived_set_that_a_replay_of_the_other_derived_set_passes_is_grown(monkeypatch):
    """The four references are made side by side; when a replay between the two derived sets would then
    pass, the derived set being checked is made again with a larger changed part (x4), and checked again."""
    loaded = load_task("gelu")
    sizes = _mid_shape(loaded.task)
    real = bench_data._replays_fail
    refused = []

    def once_not(loaded_, sizes_, x, y):
        if not refused and x.kind == y.kind == bench_data.DERIVED:
            refused.append((x.index, y.index))
            return False
        return real(loaded_, sizes_, x, y)

    grown: list = []
    real_derive = bench_data._derive

    def derive(*a, **k):
        s, ok = real_derive(*a, **k)
        grown.append(s)
        return s, ok

    monkeypatch.setattr(bench_data, "_replays_fail", once_not)
    monkeypatch.setattr(bench_data, "_derive", derive)
    sets, distinct = bench_data.make_sets(loaded, sizes)
    assert refused == [(1, 3)] and distinct and len(grown) == 1          # S1 made again, S3 kept
    assert grown[0].index == 1 and grown[0].fraction == 4 * bench_data.START_FRACTION and sets[1] is grown[0]
    assert sets[3].fraction == bench_data.START_FRACTION
    assert bench_data.replay_fails(loaded, sizes, sets[3].expected, sets[1].expected, sets[1].rel_slack)


def test_the_changed_part_is_small_and_scattered_at_a_large_shape():
    loaded = load_task("gelu")
    base = np.random.default_rng(0).normal(size=1 << 20).astype(np.float32)
    donor = np.random.default_rng(1).normal(size=1 << 20).astype(np.float32)
    c = bench_data.draw_chunks(loaded.task.inputs[0], base, donor, np.random.default_rng(2), bench_data.START_FRACTION)
    assert c is not None and c.starts.size == bench_data.MAX_CHUNKS and c.count == 1 << 10
    assert np.all(np.diff(c.starts) >= c.length)                      # non-overlapping runs
    assert c.starts.max() - c.starts.min() > (1 << 19)                # spread over the array
    out = bench_data.apply_chunks(base, c)
    assert int((out != base).sum()) <= c.count and np.array_equal(out[c.starts[0]:c.starts[0] + c.length],
                                                                 donor[c.starts[0]:c.starts[0] + c.length])


def test_references_are_stored_compactly_and_checked_with_the_rounding():
    p = load_task("gelu").task.outputs[0]
    ref = np.random.default_rng(0).normal(size=1000) * 1e3
    r32, slack = bench_data.compact_reference(p, ref)
    assert r32.dtype == np.float32 and slack == bench_data.FLOAT32_REF_SLACK
    exact = ref.copy()
    exact[0] = 1e-320                                                 # underflows float32: keep float64
    assert bench_data.compact_reference(p, exact)[0].dtype == np.float64
    hist = load_task("histogram").task.outputs[0]
    counts = np.arange(10, dtype=np.int64)
    out, slack = bench_data.compact_reference(hist, counts)
    assert out.dtype == np.int32 and slack == 0.0


# ------------------------------------------------------------------------------------------ schedule
def test_the_schedule_replays_and_keeps_outputs_from_anywhere_in_the_loop():
    sched = timing_plan.Schedule(11)
    live = [sched.next() for _ in range(300)]
    used, kept = timing_plan.replay(11, 300)
    assert [s for s, _ in live] == used
    for b in range(0, 300, 3):
        assert sorted(used[b:b + 3]) == [0, 1, 2]                    # every set in every block of three
    assert sorted(kept) == [0, 1, 2] and all(used[c] == timing_plan.slot_set(k) for k, c in kept.items())
    positions = [timing_plan.replay(seed, 300)[1][1] for seed in range(300)]
    assert min(positions) < 30 and max(positions) > 270              # early and late calls alike
    assert 100 < float(np.median(positions)) < 200


# ------------------------------------------------------------------------------------- clock check
def _marks(call_ms: float, blank_ms: float, n: int = 40, every: int = 2, t0: float = 100.0):
    marks, at = [], t0
    for i in range(1, n + 1):
        at += (call_ms + blank_ms) / 1e3
        marks.append(("t", at))
        if i % every == 0 and i < n:
            at += blank_ms / 1e3
            marks.append(("b", at))
    return marks


def test_clock_check_accepts_honest_times_and_catches_forged_ones():
    rng = np.random.default_rng(0)
    honest = list(2.0 + rng.normal(0, 0.01, 40))
    issues, fig = timing_stats.clock_issues(honest, 100.0, _marks(2.02, 0.3))
    assert issues == [] and fig["parent_solve_ms"] == pytest.approx(2.02, rel=0.01)
    forged = [x / 2 for x in honest]                                  # the events claim half the time
    issues, _ = timing_stats.clock_issues(forged, 100.0, _marks(2.02, 0.3))
    assert len(issues) == 1 and "more than the same loop without solve()" in issues[0]
    issues, _ = timing_stats.clock_issues(honest[:-1], 100.0, _marks(2.02, 0.3))
    assert "39 timing samples, but 40 timed calls" in issues[0]
    too_long = [x * 3 for x in honest]                                # more time than the loop took
    issues, _ = timing_stats.clock_issues(too_long, 100.0, _marks(2.02, 0.3))
    assert any("more than the" in i and "add up to" in i for i in issues)
    no_blanks = [m for m in _marks(2.02, 0.3) if m[0] == "t"]
    issues, _ = timing_stats.clock_issues(honest, 100.0, no_blanks)
    assert "did not report the blank calls" in issues[0]


def test_clock_check_follows_a_machine_that_slows_down():
    """Calls and blanks slow down together halfway (other work on the host): pairing each call with its
    nearest blank keeps an honest time honest."""
    fast, slow = _marks(0.8, 0.2, n=20), _marks(0.8, 2.2, n=21, t0=200.0)
    issues, fig = timing_stats.clock_issues([0.8] * 41, 100.0, fast + slow)
    assert issues == [] and fig["parent_solve_ms"] == pytest.approx(0.8), (issues, fig)
    issues, fig = timing_stats.clock_issues([0.4] * 41, 100.0, fast + slow)
    assert issues, fig


# ------------------------------------------------------------------------------------------ checker
def _gelu_expect(sizes, x, ref, **kw):
    return Expectation(sizes=sizes, expected={"y": ref}, inputs={"x": x}, **kw)


def _guards(n_ptr: int = 2) -> np.ndarray:
    return np.full((n_ptr, GUARD_BYTES), GUARD_BYTE, dtype=np.uint8)


def test_checker_verdicts_on_synthetic_outputs():
    task = load_task("gelu").task
    rng = np.random.default_rng(0)
    x = rng.normal(size=4096).astype(np.float32)
    ref0 = np.tanh(x.astype(np.float64))
    x1 = x.copy()
    x1[100:164] = rng.normal(size=64).astype(np.float32)
    ref1 = np.tanh(x1.astype(np.float64))
    sizes = {"n": 4096}
    good = RawCall(outputs={"y": ref0.astype(np.float32)}, inputs_after={"x": x.copy()}, guards=_guards())
    assert check_call(task, _gelu_expect(sizes, x, ref0), good).passed
    # the answer of set S0 handed back for a call on S1: a replay, named as such
    exp1 = _gelu_expect(sizes, x, ref1, label="input set S1", others=[("input set S0", {"y": ref0}, 0.0)],
                        chunks={"x": bench_data.Chunks(starts=np.array([100]), length=64, values=x1[100:164])})
    r = check_call(task, exp1, RawCall(outputs={"y": ref0.astype(np.float32)}, inputs_after={"x": x1.copy()},
                                       guards=_guards()))
    assert not r.passed and r.kind == "replay" and "input set S0" in r.reason and "input set S1" in r.reason
    # a wrong answer that matches no set is just wrong
    r = check_call(task, exp1, RawCall(outputs={"y": np.zeros(4096, np.float32)}, inputs_after={"x": x1.copy()}))
    assert not r.passed and r.kind == "wrong_values"
    # never written: the poison survives
    r = check_call(task, _gelu_expect(sizes, x, ref0), RawCall(outputs={"y": validate.poisoned((4096,), np.float32)}))
    assert r.kind == "unwritten"
    # an input changed outside the changed chunks of a derived set, and inside them
    after = x1.copy()
    after[3000] += 1
    r = check_call(task, exp1, RawCall(outputs={"y": ref1.astype(np.float32)}, inputs_after={"x": after}))
    assert r.kind == "input_modified" and r.first_bad_index == [3000]
    after = x1.copy()
    after[120] = 0.0
    r = check_call(task, exp1, RawCall(outputs={"y": ref1.astype(np.float32)}, inputs_after={"x": after}))
    assert r.kind == "input_modified" and r.first_bad_index == [120]
    assert check_call(task, exp1, RawCall(outputs={"y": ref1.astype(np.float32)}, inputs_after={"x": x1.copy()})).passed
    # a store past the end of y: its guard row changed
    g = _guards()
    g[1, 0] = 0
    r = check_call(task, _gelu_expect(sizes, x, ref0), RawCall(outputs={"y": ref0.astype(np.float32)}, guards=g))
    assert r.kind == "overrun" and r.output == "y" and "4096 elements" in r.reason
    r = check_call(task, _gelu_expect(sizes, x, ref0), RawCall(outputs={}))
    assert not r.passed and r.kind == "size"


def test_an_output_bit_for_bit_equal_to_one_that_passed_skips_only_the_float_check(monkeypatch):
    """``same_as``: outputs of an earlier call on the same inputs that passed. An identical output passes
    without the float comparison; any other output, one bit off included, is compared in full; guards and
    inputs are checked whatever the output."""
    task = load_task("gelu").task
    rng = np.random.default_rng(1)
    x = rng.normal(size=4096).astype(np.float32)
    ref = np.tanh(x.astype(np.float64))
    sizes = {"n": 4096}
    passed = ref.astype(np.float32)
    calls = []
    real = validate.compare_output
    monkeypatch.setattr(validate, "compare_output", lambda *a, **k: calls.append(1) or real(*a, **k))
    same = {"y": passed.copy()}
    assert check_call(task, _gelu_expect(sizes, x, ref), RawCall(outputs={"y": passed.copy()}, guards=_guards()),
                      same_as=same).passed and calls == []
    off = passed.copy()
    off.view(np.uint32)[7] ^= 1                           # one bit: within tolerance, but compared in full
    assert check_call(task, _gelu_expect(sizes, x, ref), RawCall(outputs={"y": off}), same_as=same).passed
    assert len(calls) == 1
    wrong = passed.copy()
    wrong[9] += 1.0
    r = check_call(task, _gelu_expect(sizes, x, ref), RawCall(outputs={"y": wrong}), same_as=same)
    assert not r.passed and r.kind == "wrong_values" and r.first_bad_index == [9] and len(calls) == 2
    g = _guards()
    g[1, 3] = 0
    r = check_call(task, _gelu_expect(sizes, x, ref), RawCall(outputs={"y": passed.copy()}, guards=g), same_as=same)
    assert r.kind == "overrun"
    after = x.copy()
    after[5] = 9.0
    r = check_call(task, _gelu_expect(sizes, x, ref), RawCall(outputs={"y": passed.copy()}, inputs_after={"x": after}),
                   same_as=same)
    assert r.kind == "input_modified" and r.first_bad_index == [5]


def test_checker_uses_threads_for_large_outputs_with_the_same_verdict():
    from concurrent.futures import ThreadPoolExecutor

    e = np.random.default_rng(1).normal(size=validate.CHUNK * 9 + 17).astype(np.float32)
    g = e.copy()
    with ThreadPoolExecutor(4) as pool:
        assert validate.compare_output("y", g, e, (1e-5, 1e-4), is_float=True, pool=pool)["passed"]
        g[-1] = np.nan
        r = validate.compare_output("y", g, e, (1e-5, 1e-4), is_float=True, pool=pool)
    assert not r["passed"] and r["first_bad_index"] == [e.size - 1]


# ----------------------------------------------------------------------------------------- transport
def test_transport_round_trip_and_the_fallback_folder(tmp_path):
    small_shm = tmp_path / "shm"
    small_shm.mkdir()
    assert transport.exchange_parent(1 << 62, tmp_path / "fallback", shm=small_shm) == tmp_path / "fallback"
    assert transport.exchange_parent(1, tmp_path / "fallback", shm=small_shm) == small_shm
    x = transport.make_exchange(1, tmp_path / "fallback", shm=small_shm)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    transport.write_array(x / "in_x.npy", a)
    transport.write_array(x / "out_y.npy", a * 2)
    transport.write_array(x / "guard.npy", np.zeros((2, 4), np.uint8))
    raw = transport.read_call(x, ["y"], ["x"])
    assert np.array_equal(raw.outputs["y"], a * 2) and raw.guards.shape == (2, 4) and raw.inputs_after == {}
    assert np.array_equal(transport.read_array(x / "in_x.npy"), a)
    transport.write_array(x / "empty.npy", np.zeros(0, np.float32))
    assert transport.read_array(x / "empty.npy").size == 0
    transport.remove_exchange(x)
    assert not x.exists()
    dead = small_shm / f"{transport.PREFIX}999999999-abc"       # left by a killed evaluation
    dead.mkdir()
    mine = transport.make_exchange(1, tmp_path / "fallback", shm=small_shm)
    assert not dead.exists() and mine.exists() and mine.name.startswith(f"{transport.PREFIX}{os.getpid()}-")
    assert transport.sweep_orphans(small_shm) == 0 and mine.exists()


# -------------------------------------------------------------------------------------- environment
def test_the_worker_gets_no_secrets_and_one_gpu(tmp_path):
    from cuda_llm.tools.harness.runner import describe_exit, pinned_device, worker_env

    base = {"PATH": "/usr/bin", "HOME": "/home/u", "OPENAI_API_KEY": "sk-secret", "AWS_SECRET_ACCESS_KEY": "x",
            "HF_TOKEN": "t", "CUDA_VISIBLE_DEVICES": "2,3", "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
            "MY_PROJECT_SETTING": "y", "PYTHONPATH": "/extra"}
    env = worker_env(pinned_device(1, base), tmp_path, base)
    assert env["CUDA_VISIBLE_DEVICES"] == "3" and env["TMPDIR"] == str(tmp_path)
    assert not {"OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "HF_TOKEN", "MY_PROJECT_SETTING"} & set(env)
    assert env["PATH"] == "/usr/bin" and env["LD_LIBRARY_PATH"] == "/usr/local/cuda/lib64"
    assert env["PYTHONPATH"].endswith(os.pathsep + "/extra")
    assert worker_env(None, None, {"PATH": "/bin"})["CUDA_VISIBLE_DEVICES"] == "0"
    assert pinned_device(None, {"CUDA_VISIBLE_DEVICES": "GPU-1234,GPU-5678"}) == "GPU-1234"
    with pytest.raises(ValueError, match="gpu 2 is not visible"):
        pinned_device(2, {"CUDA_VISIBLE_DEVICES": "0,1"})
    assert describe_exit(-6) == "signal 6 (SIGABRT)" and describe_exit(3) == "exit code 3"


# a stand-in worker: reads --events-fd, says it is loading the candidate (or not), then dies with exit code 9
_DYING_WORKER = """import json, os, sys
fd = int(sys.argv[sys.argv.index("--events-fd") + 1])
if {loading}:
    os.write(fd, (json.dumps({{"ev": "loading"}}) + "\\n").encode())
os._exit(9)
"""


@pytest.mark.parametrize("loading", [True, False])
def test_a_worker_that_dies_at_start_up(tmp_path, monkeypatch, loading):
    """While the candidate's .so is being loaded, its static initializers run: a death then is the candidate's.
    Before that (a broken request, a missing file) it is the harness's own failure and never blamed on the kernel."""
    from cuda_llm.tools.harness.evaluate import EvalOptions, run_compiled

    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))
    script = tmp_path / "dies.py"
    script.write_text(_DYING_WORKER.format(loading=loading))
    loaded = load_task(_small_gelu(tmp_path))
    res = run_compiled(loaded, str(tmp_path / "none.so"), source="", options=EvalOptions(timeout_s=20, seed=1),
                       work_dir=tmp_path / "w", worker_argv=[sys.executable, str(script)])
    assert res.status.value == "runtime_error", res.message
    if loading:
        assert "the candidate ended the worker process during loading the candidate: exit code 9" in res.message
    else:
        assert "internal harness error, not caused by the kernel" in res.message and "candidate ended" not in res.message
        assert "before it loaded the candidate" in res.message


def test_a_relative_work_folder_reaches_the_worker(tmp_path, monkeypatch):
    """The worker runs in a fresh folder of its own: a relative work_dir must still find its request."""
    from cuda_llm.tools.harness.evaluate import EvalOptions, run_compiled

    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "reads.py"
    seen = tmp_path / "request-seen.json"
    script.write_text("import sys, pathlib\n"
                      "text = pathlib.Path(sys.argv[sys.argv.index('--request') + 1]).read_text()\n"
                      f"pathlib.Path({str(seen)!r}).write_text(text)\n"
                      "import os\nos._exit(9)\n")
    loaded = load_task(_small_gelu(tmp_path))
    res = run_compiled(loaded, str(tmp_path / "none.so"), source="", options=EvalOptions(timeout_s=20, seed=1),
                       work_dir=Path("relative-work"), worker_argv=[sys.executable, str(script)])
    log = (tmp_path / "relative-work" / "worker_stderr.log").read_text()
    assert "FileNotFoundError" not in log and "Traceback" not in log, log[-2000:]
    request = json.loads(seen.read_text())                       # the worker read the whole request
    assert request["so_path"] == str(tmp_path / "none.so") and Path(request["task_folder"]).is_dir()
    assert res.status.value == "runtime_error" and "exit code 9" in res.message, res.message   # its own exit


def test_runtime_only_candidates_build_without_the_checks(tmp_path):
    """The GPU test judges their trick, not a typo: each builds with nvcc alone (the static checks would
    refuse them, which is why they live apart in tests/adversarial/runtime/)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from adversarial_kernels import RUNTIME, build_without_checks, expected, header

    assert {p.stem for p in RUNTIME} >= {"tamper_writes_nothing", "tamper_forged_times", "exits"}
    for p in RUNTIME:
        h = header(p)
        assert {"task", "expect", "trick", "reason"} <= set(h) and expected(p), p.name
        so = build_without_checks(p, tmp_path, arch="sm_90")
        assert so.is_file() and so.stat().st_size > 0


def test_hand_back_writes_a_npy_chunk_by_chunk(tmp_path, monkeypatch):
    """Device memory reaches the parent as a plain .npy, whatever the chunking of the staging buffer."""
    sys.path.insert(0, str(Path(__file__).parent))
    from numpy_device_worker import NumpyDevice

    from cuda_llm.tools.harness import worker_loop

    monkeypatch.setattr(worker_loop, "HAND_BACK_CHUNK", 1000)          # 1000 bytes: 19 chunks, the last partial
    dev = NumpyDevice()
    a = np.random.default_rng(0).normal(size=(37, 123)).astype(np.float32)
    ptr = dev.alloc(a.nbytes)
    dev.htod(ptr, a)
    worker_loop.hand_back(dev, tmp_path / "x.npy", ptr, a.shape, a.dtype)
    back = transport.read_array(tmp_path / "x.npy")
    assert back.dtype == np.float32 and back.shape == (37, 123) and np.array_equal(back, a)
    assert dev.staging(1).size == 1000
    worker_loop.hand_back(dev, tmp_path / "e.npy", ptr, (0,), np.float16)
    assert transport.read_array(tmp_path / "e.npy").dtype == np.float16


def test_the_worker_poisons_outputs_of_every_dtype_bit_exactly_and_stops_at_the_guard():
    """worker_loop.Buffers.poison on device memory (the NumPy test device): an int64 output of an odd length
    holds the 64-bit sentinel in every element, as does each other dtype, and no guard byte is touched."""
    sys.path.insert(0, str(Path(__file__).parent))
    from numpy_device_worker import NumpyDevice

    from cuda_llm.tasks import LoadedTask, Task
    from cuda_llm.tools.harness import worker_loop

    outs = {"i64": "int64", "f16": "float16", "f32": "float32", "i32": "int32", "u32": "uint32"}
    params = [{"name": "x", "kind": "pointer", "dtype": "int64", "shape": ["n"]}]
    params += [{"name": k, "kind": "pointer", "dtype": v, "role": "output", "shape": ["n"]} for k, v in outs.items()]
    params += [{"name": "n", "kind": "scalar", "dtype": "int32"}, {"name": "stride", "kind": "scalar", "dtype": "int64",
                                                                 "value": "n * 2"}]
    task = Task.model_validate(dict(name="poison_all", description="-", family="elementwise", bound="memory",
                                    domain="HPC", params=params, shapes=[{"n": 3}] * 5, held_out=[{"n": 5}],
                                    benchmark={"n": 7}, bytes="8 * n", flops=0))
    assert task.signature == ('extern "C" void solve(const long long* x, long long* i64, __half* f16, float* f32, '
                              'int* i32, unsigned int* u32, int n, long long stride)')
    dev = NumpyDevice()
    buf = worker_loop.Buffers(dev, LoadedTask(task=task, reference=lambda i, s: {}, make_inputs=None), {"n": 7})
    try:
        assert buf.args[-2:] == [("int32", 7), ("int64", 14)]
        buf.poison()
        for name, dt in outs.items():
            got = dev.view(buf.ptr[name], dt, 7)
            assert np.array_equal(got.view(np.uint8), validate.poisoned((7,), dt).view(np.uint8)), name
        assert (buf.guards() == GUARD_BYTE).all()
    finally:
        buf.free()


def test_a_gpu_index_the_driver_does_not_have_is_refused(monkeypatch):
    """Without CUDA_VISIBLE_DEVICES every device is visible: an index past the driver's count is an error, not a
    worker pinned to a GPU that does not exist (seen on the H100: gpu=1 on a one-GPU machine was accepted)."""
    from cuda_llm.tools.device import device_probe
    from cuda_llm.tools.harness.runner import pinned_device

    monkeypatch.setattr(device_probe, "cuda_device_count", lambda: 1)
    assert pinned_device(0, {}) == "0"
    with pytest.raises(ValueError, match="not visible: the driver reports 1 device"):
        pinned_device(1, {})
    monkeypatch.setattr(device_probe, "cuda_device_count", lambda: 0)   # no driver here: nothing to check
    assert pinned_device(3, {}) == "3"


def test_relative_paths_reach_the_worker_absolute(tmp_path, monkeypatch):
    """The candidate's .so, the task folder and the cache may be given relative to where the user stands; the
    worker, in a fresh folder of its own, is handed them absolute."""
    import json as _json

    from cuda_llm.paths import cache_dir
    from cuda_llm.tools.harness.evaluate import EvalOptions, run_compiled

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUDA_LLM_CACHE", "rel-cache")
    assert cache_dir().is_absolute() and cache_dir() == tmp_path / "rel-cache"
    folder = _small_gelu(tmp_path)
    script = tmp_path / "dump.py"
    script.write_text("import sys, shutil\nshutil.copy(sys.argv[sys.argv.index('--request') + 1], sys.argv[0] + '.json')\n"
                      "import os\nos._exit(9)\n")
    run_compiled(load_task(Path(folder).relative_to(tmp_path)), "none.so", source="",
                 options=EvalOptions(timeout_s=20, seed=1), work_dir=Path("w"), worker_argv=[sys.executable, str(script)])
    req = _json.loads((tmp_path / "dump.py.json").read_text())
    assert Path(req["so_path"]).is_absolute() and Path(req["task_folder"]).is_absolute(), req


def test_benchmark_data_larger_than_the_cap_is_made_and_never_stored(cache, tmp_path, monkeypatch):
    loaded = load_task(_small_gelu(tmp_path))
    sizes = dict(loaded.task.benchmark)
    one = bench_data.entry_bytes(loaded, sizes)
    assert one > 0
    monkeypatch.setenv(cache_store.MAX_GB_ENV, str(one * len(bench_data.PLAN) / 1e9 * 0.9))
    b = bench_data.prepare(loaded, sizes, cache)
    b.close()
    assert sorted(b.sets) == [0, 1, 2, 3] and b.made == 4
    assert not (cache / "benchdata").exists() or not list((cache / "benchdata").iterdir())
