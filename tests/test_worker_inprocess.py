"""The GPU worker's loop (tools/harness/worker_loop.py) driven in this process on the NumPy test device
(tests/numpy_device_worker.py): the same serve() the child process runs, with the commands given as a list
and the events written to a file. What the parent relies on is checked event by event and file by file: the
order of the phases, which set every timed call ran on, the blanks between calls, the kept outputs, the
checks of every call, the exit codes. No torch, no GPU, no subprocess; about a second."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from numpy_device_worker import NumpyDevice

from cuda_llm.tasks.loader import load_task
from cuda_llm.tools.harness import bench_data, transport, worker_loop
from cuda_llm.tools.harness.timing_budget import TimingBudget
from cuda_llm.tools.harness.timing_plan import Schedule
from cuda_llm.tools.harness.worker_protocol import (EXIT_CUDA_FAULT, EXIT_HARNESS, EXIT_OK, GUARD_BYTE, GUARD_BYTES,
                                                    CallCheck,
                                                    OutputCheck, TimeCommand, decode, encode)

KERNELS = Path(__file__).parent / "numpy_kernels"
N = 3001


def _serve(tmp_path: Path, kernel: str, commands: list[dict], dev: NumpyDevice | None = None,
           lines: list[bytes] | None = None) -> tuple[int, list[dict]]:
    """serve() on the NumPy device with these commands; (exit code, the events in order)."""
    loaded = load_task("gelu")
    path = tmp_path / "events.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        code = worker_loop.serve(dev or NumpyDevice(), loaded, str(KERNELS / f"{kernel}.py"), fd,
                                 lines if lines is not None else [encode(c) for c in commands])
    finally:
        os.close(fd)
    events = [decode(line) for line in path.read_bytes().splitlines()]
    for e in events:                           # durations are durations, in every event that has one
        assert 0 <= e.get("seconds", 0) < 60, e
    return code, events


def _names(events: list[dict]) -> list[str]:
    return [e["ev"] for e in events]


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """gelu's four benchmark sets at n=3001 on disk, and the references of the timed ones as files."""
    root = tmp_path_factory.mktemp("cache")
    loaded = load_task("gelu")
    b = bench_data.prepare(loaded, {"n": N}, root)
    refs = {}
    for s in bench_data.TIMED_SETS:
        path = root / f"ref{s}.npy"
        transport.write_array(path, np.ascontiguousarray(b.sets[s].expected["y"]))
        refs[s] = str(path)
    yield b, refs
    b.close()


def _time_cmd(bench, tmp_path: Path, *, reps: int = 6, repeats: int = 1, check: bool = True, seed: int = 11) -> dict:
    b, refs = bench
    dirs = {k: str(tmp_path / k) for k in ("first", "last", "post", "snap")}
    budget = TimingBudget(min_reps=reps, max_reps=reps, min_time_s=0.0, warmup=2, timing_repeats=repeats)
    cc = CallCheck(outputs=[OutputCheck(name="y", refs=refs, tol={s: (1e-5, 1e-4) for s in refs})]) if check else None
    cmd = TimeCommand(sizes={"n": N}, sets=b.plan(), dirs=dirs, schedule_seed=seed, budget=budget, check=cc)
    return {"cmd": "time", **cmd.model_dump()}


def _close(got: np.ndarray, want: np.ndarray) -> bool:
    return bool(np.allclose(got.astype(np.float64), want.astype(np.float64), atol=1e-5, rtol=1e-4))


def test_a_case_hands_back_the_outputs_the_inputs_and_untouched_guards(tmp_path):
    x = np.linspace(-3, 3, 37, dtype=np.float32)
    folder = tmp_path / "case0"
    folder.mkdir()
    transport.write_array(folder / "in_x.npy", x)
    code, ev = _serve(tmp_path, "gelu_ok", [{"cmd": "case", "i": 4, "sizes": {"n": 37}, "dir": str(folder)},
                                            {"cmd": "quit"}])
    assert code == EXIT_OK
    assert _names(ev) == ["loading", "ready", "calling", "returned", "case", "bye"]
    assert ev[4]["i"] == 4 and ev[4]["seconds"] >= 0 and ev[2]["where"] == ev[3]["where"] == "case"
    y = np.load(folder / "out_y.npy")
    want = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x.astype(np.float64) ** 3)))
    assert y.shape == (37,) and _close(y, want)
    assert np.array_equal(np.load(folder / "after_x.npy"), x)
    guards = np.load(folder / "guard.npy")
    assert guards.shape[0] == 2 and (guards == GUARD_BYTE).all()


def test_a_case_that_writes_nothing_hands_back_the_poison(tmp_path):
    from cuda_llm.tools.harness import validate

    folder = tmp_path / "case0"
    folder.mkdir()
    transport.write_array(folder / "in_x.npy", np.ones(9, np.float32))
    code, _ = _serve(tmp_path, "gelu_writes_nothing", [{"cmd": "case", "i": 0, "sizes": {"n": 9}, "dir": str(folder)}])
    assert code == EXIT_OK
    assert validate.is_poison(np.load(folder / "out_y.npy")).all()


def test_the_timing_loop_phase_by_phase(bench, tmp_path):
    b, _ = bench
    dev = NumpyDevice()
    code, ev = _serve(tmp_path, "gelu_ok", [_time_cmd(bench, tmp_path), {"cmd": "quit"}], dev=dev)
    names = _names(ev)
    assert code == EXIT_OK, ev
    order = ["sets-ready", "check-ready", "first", "timing-start", "timing-end", "last", "snaps", "post", "timed",
             "bye"]
    assert [n for n in names if n in order] == order
    assert ev[names.index("sets-ready")]["on_device"] is True
    assert ev[names.index("check-ready")]["on"] is True
    calls = [e for e in ev if e["ev"] == "t"]
    assert [e["i"] for e in calls] == list(range(6)) and all(e["bad"] == 0 and e["ms"] >= 0 for e in calls)
    sched = Schedule(11, [0, 1, 2], 1)
    assert [e["set"] for e in calls] == [sched.next()[0] for _ in range(6)]   # the parent replays this schedule
    assert ev[names.index("timing-end")]["n"] == 6
    # one blank after every second call, numbered, never after the last call
    between = names[names.index("timing-start"):names.index("timing-end")]
    assert "".join("t" if n == "t" else "b" for n in between if n in ("t", "b")) == "ttbttbtt"
    assert [e["i"] for e in ev if e["ev"] == "b"] == [0, 1]
    # the first call, the last one, the call after the loop: each holds its own set's answer
    first = ev[names.index("first")]
    assert first["set"] == 0 and _close(np.load(tmp_path / "first" / "out_y.npy"), b.sets[0].expected["y"])
    last = ev[names.index("last")]
    assert last["set"] == calls[-1]["set"] and last["call"] == 5
    assert _close(np.load(tmp_path / "last" / "out_y.npy"), b.sets[last["set"]].expected["y"])
    assert ev[names.index("post")]["set"] == 3
    assert _close(np.load(tmp_path / "post" / "out_y.npy"), b.sets[3].expected["y"])
    assert not _close(np.load(tmp_path / "post" / "out_y.npy"), b.sets[last["set"]].expected["y"])
    # the kept outputs: one slot per timed set, each the answer of the set its call ran on
    snaps = ev[names.index("snaps")]["items"]
    assert sorted(s["slot"] for s in snaps) == [0, 1, 2] and sorted(s["set"] for s in snaps) == [0, 1, 2]
    for s in snaps:
        assert calls[s["call"]]["set"] == s["set"]
        assert _close(np.load(Path(s["dir"]) / "out_y.npy"), b.sets[s["set"]].expected["y"])
    # every call and every blank: the persisting L2 reset and the device's count of bad elements
    assert dev.resets == 6 + 2 + 2 and dev.compares == 6 + 2
    assert not dev._mem, "every device buffer freed"


def test_without_room_on_the_device_the_sets_and_slots_come_from_the_host(bench, tmp_path):
    b, _ = bench
    dev = NumpyDevice(free_memory=1 << 20)        # less than the staging headroom: nothing staged
    code, ev = _serve(tmp_path, "gelu_ok", [_time_cmd(bench, tmp_path, seed=5)], dev=dev)
    names = _names(ev)
    assert code == EXIT_OK and names[-1] == "timed", ev
    assert ev[names.index("sets-ready")]["on_device"] is False
    ready = ev[names.index("check-ready")]
    assert ready["on"] is False and "no room on the device" in ready["why"]
    assert all(e["bad"] == 0 for e in ev if e["ev"] == "t")
    for s in ev[names.index("snaps")]["items"]:
        assert _close(np.load(Path(s["dir"]) / "out_y.npy"), b.sets[s["set"]].expected["y"])
    assert _close(np.load(tmp_path / "post" / "out_y.npy"), b.sets[3].expected["y"])
    assert not dev._mem


def test_repeats_run_after_the_parents_word_and_report_their_samples(bench, tmp_path):
    code, ev = _serve(tmp_path, "gelu_ok", [_time_cmd(bench, tmp_path, reps=3, repeats=3), {"cmd": "repeat"}])
    names = _names(ev)
    assert code == EXIT_OK and names.count("repeat") == 2 and names.count("timing-start") == 1
    assert names.index("checks-wait") < names.index("repeat") and names[-1] == "timed"
    assert all(len(e["samples"]) == 3 and e["stop_reason"] for e in ev if e["ev"] == "repeat")
    code, ev = _serve(tmp_path, "gelu_ok", [_time_cmd(bench, tmp_path, reps=3, repeats=1)])
    assert "checks-wait" not in _names(ev)        # nothing to wait for without repeats


def test_a_replayed_answer_ends_the_loop_at_that_call(bench, tmp_path):
    code, ev = _serve(tmp_path, "gelu_memo_pointer", [_time_cmd(bench, tmp_path, reps=30)])
    names = _names(ev)
    assert code == EXIT_OK
    wrong = ev[names.index("wrong")]
    calls = [e for e in ev if e["ev"] == "t"]
    assert wrong["i"] == calls[-1]["i"] and calls[-1]["bad"] == wrong["count"] > 0 and wrong["output"] == "y"
    assert wrong["set"] != 0 and wrong["like"] == 0 and wrong["repeat"] == 1     # set 0's answer replayed
    assert all(e["bad"] == 0 for e in calls[:-1]) and all(e["set"] == 0 for e in calls[:-1])
    assert names[-1] == "timed" and "last" not in names and "post" not in names


def test_the_exit_codes_say_whose_fault_it_was(tmp_path):
    code, ev = _serve(tmp_path, "no_such_kernel", [])
    assert code == EXIT_OK and _names(ev) == ["loading", "load-error"] and "no_such_kernel" in ev[1]["message"]
    code, ev = _serve(tmp_path, "gelu_ok", [], lines=[b"not json\n"])
    assert code == EXIT_HARNESS and ev[-1]["ev"] == "error" and "not a command" in ev[-1]["message"]
    code, ev = _serve(tmp_path, "gelu_ok", [{"cmd": "dance"}])
    assert code == EXIT_HARNESS and "unknown command 'dance'" in ev[-1]["message"]
    code, ev = _serve(tmp_path, "gelu_ok", [{"cmd": "case", "i": 0, "sizes": {"n": 4}, "dir": str(tmp_path / "none")}])
    assert code == EXIT_HARNESS and ev[-1]["ev"] == "error" and ev[-1]["cmd"] == "case"
    code, ev = _serve(tmp_path, "gelu_ok", [])
    assert code == EXIT_OK and _names(ev) == ["loading", "ready"]


def test_a_device_fault_in_a_call_is_a_cuda_fault(tmp_path):
    class Faulty(NumpyDevice):
        def launch_error(self):
            return "too many resources requested for launch"

    folder = tmp_path / "case0"
    folder.mkdir()
    transport.write_array(folder / "in_x.npy", np.ones(5, np.float32))
    code, ev = _serve(tmp_path, "gelu_ok", [{"cmd": "case", "i": 0, "sizes": {"n": 5}, "dir": str(folder)}],
                      dev=Faulty())
    assert code == EXIT_CUDA_FAULT and ev[-1]["ev"] == "fault" and ev[-1]["cmd"] == "case"
    assert "too many resources" in ev[-1]["message"] and "returned" not in _names(ev)


class Recording(NumpyDevice):
    """The NumPy device that also counts calls of solve(), the flush writes and the peak of allocated bytes."""

    def __init__(self, free_memory: int = 1 << 34):
        super().__init__(free_memory)
        self.solve_calls = 0
        self.flushes: list[tuple[int, int]] = []          # (fill value, words) of each flush write
        self.live = self.peak = 0
        self.sizes: dict[int, int] = {}

    def alloc(self, nbytes):
        ptr = super().alloc(nbytes)
        self.sizes[ptr] = nbytes
        self.live += nbytes
        self.peak = max(self.peak, self.live)
        return ptr

    def free(self, ptr):
        self.live -= self.sizes.pop(ptr, 0)
        super().free(ptr)

    def memset_d32(self, ptr, value, count):
        if self.sizes.get(ptr) == self.flush_bytes:
            self.flushes.append((value, count))
        super().memset_d32(ptr, value, count)

    def bind(self, fn, args):
        call = super().bind(fn, args)

        def counted():
            self.solve_calls += 1
            call()
        return counted


def test_every_call_flushes_the_l2_and_the_calls_are_counted(bench, tmp_path):
    dev = Recording()
    code, ev = _serve(tmp_path, "gelu_ok", [_time_cmd(bench, tmp_path, reps=6)], dev=dev)
    assert code == EXIT_OK and _names(ev)[-1] == "timed", ev
    # the first call, warmup - 1 more, the timed calls, the call on fresh inputs after them
    assert dev.solve_calls == 1 + (2 - 1) + 6 + 1
    # every timed call and every blank writes the whole flush buffer, each timed call with another byte
    assert len(dev.flushes) == 6 + 2 and all(words * 4 == dev.flush_bytes for _, words in dev.flushes)
    fills = [v for v, _ in dev.flushes]
    assert len(set(fills)) == 6 and all(0 <= v <= 0xFF for v in fills)
    for e in ev:                               # durations are durations
        if "seconds" in e:
            assert 0 <= e["seconds"] < 60, e


def test_without_room_nothing_but_the_calls_own_buffers_is_on_the_device(bench, tmp_path):
    dev = Recording(free_memory=1 << 20)
    code, ev = _serve(tmp_path, "gelu_ok", [_time_cmd(bench, tmp_path)], dev=dev)
    assert code == EXIT_OK and _names(ev)[-1] == "timed", ev
    buffers = 2 * ((N * 4 + 3) // 4 * 4 + GUARD_BYTES)       # x and y, rounded to words, with their guards
    assert dev.peak == buffers + dev.flush_bytes and dev.live == 0


def test_the_sets_are_staged_only_with_more_than_the_headroom_free(bench, tmp_path):
    need = N * 4 * 4                                         # x of the three timed sets and the post set
    for free, staged in ((need + worker_loop.STAGING_HEADROOM, False), (need + worker_loop.STAGING_HEADROOM + 1, True)):
        code, ev = _serve(tmp_path, "gelu_ok", [_time_cmd(bench, tmp_path, reps=3, check=False)],
                          dev=NumpyDevice(free_memory=free))
        assert code == EXIT_OK and ev[_names(ev).index("sets-ready")]["on_device"] is staged


def test_timing_without_a_device_check_and_repeats_of_every_count(bench, tmp_path):
    code, ev = _serve(tmp_path, "gelu_ok", [_time_cmd(bench, tmp_path, reps=3, check=False)])
    names = _names(ev)
    assert code == EXIT_OK and names[-1] == "timed" and "check-ready" not in names and "repeat" not in names
    code, ev = _serve(tmp_path, "gelu_ok", [_time_cmd(bench, tmp_path, reps=3, repeats=2), {"cmd": "repeat"}])
    assert code == EXIT_OK and _names(ev).count("repeat") == 1
    code, ev = _serve(tmp_path, "gelu_ok", [_time_cmd(bench, tmp_path, reps=3, repeats=2), {"cmd": "quit"}])
    assert code == EXIT_OK and "repeat" not in _names(ev) and "checks-wait" in _names(ev)


def test_a_missing_input_set_file_is_named_and_nothing_stays_allocated(bench, tmp_path):
    cmd = _time_cmd(bench, tmp_path, reps=3)
    cmd["sets"] = {**cmd["sets"], "2": {"kind": "fresh", "inputs": {"x": str(tmp_path / "gone.npy")}}}
    dev = Recording()
    code, ev = _serve(tmp_path, "gelu_ok", [cmd], dev=dev)
    assert code == EXIT_HARNESS and ev[-1]["ev"] == "error" and ev[-1]["cmd"] == "time"
    assert "gone.npy" in ev[-1]["message"] and dev.live == 0


def test_a_fault_that_surfaces_at_the_synchronize_after_a_call_is_a_cuda_fault(tmp_path):
    from cuda_llm.tools.harness.worker_loop import DeviceFault

    class Late(NumpyDevice):
        """An asynchronous error: the launch returns, the fault shows at the next synchronize after solve()."""

        def bind(self, fn, args):
            call = super().bind(fn, args)

            def run():
                call()
                self.failed = True
            return run

        def sync(self):
            if getattr(self, "failed", False):
                raise DeviceFault("an illegal memory access was encountered")

    folder = tmp_path / "case0"
    folder.mkdir()
    transport.write_array(folder / "in_x.npy", np.ones(5, np.float32))
    code, ev = _serve(tmp_path, "gelu_ok", [{"cmd": "case", "i": 0, "sizes": {"n": 5}, "dir": str(folder)}], dev=Late())
    assert code == EXIT_CUDA_FAULT and ev[-1]["ev"] == "fault" and "returned" not in _names(ev)


def test_buffers_that_cannot_be_made_free_what_they_took(tmp_path):
    from cuda_llm.tasks.loader import LoadedTask
    from cuda_llm.tasks.model import DType

    task = load_task("gelu").task
    params = [p if p.kind == "pointer" else p.model_copy(update={"dtype": DType.float16}) for p in task.params]
    loaded = LoadedTask(task=task.model_copy(update={"params": params}), reference=lambda i, s: {}, make_inputs=None)
    dev = Recording()
    with pytest.raises(ValueError, match="not supported"):
        worker_loop.Buffers(dev, loaded, {"n": 8})
    assert dev.live == 0 and dev.peak > 0
