"""The parent side of one evaluation on the device: it drives the worker, checks what comes back, and keeps
every verdict in this process, which never loads candidate code.

1. Start the worker (runner.WorkerSession: no secrets, one pinned GPU, a fresh folder) while the inputs
   and references of the correctness cases are made here.
2. Validation: one ``case`` command per case; each case's raw data is checked in a thread as soon as it
   arrives (checker.py). No new case after a failure once the cap has passed.
3. Timing: the benchmark shape's input sets (bench_data.py) go to the worker as files; the first call's
   output is checked while the loop runs (a failure stops the worker at once); every timed call's event
   line is time-stamped here; the kept outputs of calls at random places (timing_plan.py), the last call
   and a call on a set the loop never used are checked against the reference of their own set; the
   worker's times are checked against this process's clock (timing_stats.clock_issues).
4. Revalidation on fresh inputs at two shown shapes and the held-out ones.

A worker that ends on its own (the candidate called exit or abort, or crashed it) or runs out of time
becomes a result with the phase it was in; a held-out case is named only as such.
"""

from __future__ import annotations

import os
import secrets
import threading
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from cuda_llm import cache_store
from cuda_llm.paths import cache_dir
from cuda_llm.results import CaseResult, Status, TimingResult, ValidationResult
from cuda_llm.tasks.inputs import dims, make_case_inputs, reference_outputs
from cuda_llm.tasks import scale_cases
from cuda_llm.tasks.loader import LoadedTask
from cuda_llm.tools.harness import bench_data, device_compare, timing_plan, timing_stats, transport
from cuda_llm.tools.harness.checker import Checker, Expectation, check_call
from cuda_llm.tools.harness.timing_budget import call_limit_text
from cuda_llm.tools.harness.runner import Event, WorkerGone, WorkerSession, describe_exit, device_lock, pinned_device
from cuda_llm.tools.harness.checker import tolerance
from cuda_llm.tools.harness.worker_protocol import (EXIT_CUDA_FAULT, EXIT_HARNESS, CallCheck, ClockCheck, EvaluateResponse,
                                            OutputCheck, ServeRequest, TimeCommand, WorkerError)

if TYPE_CHECKING:
    from cuda_llm.tools.harness.eval_options import EvalOptions

SLOTS_PER_SET = 1
BLANK_EVERY = 2          # one blank iteration after every two timed calls
Log = Callable[[str], None]


_T0 = time.perf_counter()


def _progress(msg: str) -> None:
    """A time-stamped line on stderr (the worker's own lines go to worker_stderr.log)."""
    print(f"[judge] +{time.perf_counter() - _T0:.2f}s {msg}", file=sys.stderr, flush=True)


@dataclass
class _Case:
    i: int
    sizes: dict[str, int]
    held_out: bool
    folder: Path
    inputs: dict[str, np.ndarray]
    expected: Future
    end: str | None = None                         # a scaled case: which end of the inputs' magnitudes
    ready: Future | None = None                    # a scaled case: its inputs written (None: no scale fits)
    atol_factor: dict[str, float] = field(default_factory=dict)
    scale: scale_cases.ScaleCase | None = None

    def where(self) -> str:
        if self.held_out:
            return "a held-out case" + (f" at the {self.end} end of the input magnitudes" if self.end else "")
        return "the case at sizes " + ", ".join(f"{k}={v}" for k, v in self.sizes.items())


@dataclass
class _State:
    """Where the worker is, as the parent knows it (for a process that ends or hangs)."""

    phase: str = "start-up"
    in_solve: bool = False
    costs: dict[str, float] = field(default_factory=dict)

    def place(self) -> str:
        return ("in solve() " if self.in_solve else "") + f"during {self.phase}"


class _Stop(Exception):
    """The evaluation ends here with this response (a failure already decided)."""


def _bytes(loaded: LoadedTask, sizes: dict[str, int], outputs_times: int, inputs_times: int) -> int:
    t = loaded.task
    size = lambda p: int(np.prod(dims(p, sizes), dtype=np.int64)) * p.dtype.itemsize  # noqa: E731
    return sum(size(p) for p in t.outputs) * outputs_times + sum(size(p) for p in t.inputs) * inputs_times


ValidationCase = tuple[dict[str, int], bool, "str | None"]      # (sizes, held out, scaled to which end or None)


def validation_cases(loaded: LoadedTask, held_out: bool) -> list[ValidationCase]:
    """Every shown case, the held-out ones, and (held out too) the usual draw scaled to both ends of the
    inputs' magnitudes at the smallest held-out shape (the smallest shown one where none is held out)."""
    task = loaded.task
    cases: list[ValidationCase] = [(s, h, None) for s, h in task.all_cases() if held_out or not h]
    if held_out and scale_cases.scalable(task):
        at = min(task.held_out or task.shapes, key=lambda s: sum(s.values()))
        cases += [(at, True, end) for end in scale_cases.ENDS]
    return cases


def revalidation_cases(loaded: LoadedTask, held_out: bool) -> list[ValidationCase]:
    """Fresh inputs after timing: the largest and a middle shown shape, and the held-out ones."""
    shown = sorted(loaded.task.shapes, key=lambda s: sum(s.values()))
    again: list[ValidationCase] = [(shown[-1], False, None), (shown[len(shown) // 2], False, None)]
    return again + ([(s, True, None) for s in loaded.task.held_out] if held_out else [])


class Judge:
    def __init__(self, loaded: LoadedTask, so_path: str, opts: "EvalOptions", seed: int, work: Path,
                 worker_argv: list[str] | None = None):
        self.loaded, self.task, self.so_path, self.opts, self.seed, self.work = loaded, loaded.task, so_path, opts, seed, work
        self.worker_argv = worker_argv
        self._schedule_broken = False
        self._stopped_early = False
        self._current: _Case | None = None
        self._vkeys: list[str] = []
        self._vlabel: str | None = None
        self._again: Future | None = None
        self._calls_since: tuple[float, int] | None = None   # (since when, how many calls) under opts.budget.call_limit_s
        self.resp = EvaluateResponse()
        self.state = _State()
        self.pool = ThreadPoolExecutor(max_workers=max(2, min(8, os.cpu_count() or 2)), thread_name_prefix="judge")
        self.checker = Checker()
        self.session: WorkerSession | None = None
        self.exchange: Path | None = None
        self.bench: bench_data.BenchSets | None = None
        # per benchmark input set: the outputs of the first call on it that passed, kept once their exchange
        # folder is gone (the mapping is then this process's alone); a later call's output that is bit for bit
        # the same passes without the float check again (same set, same reference, same tolerance)
        self._verified: dict[int, dict[str, np.ndarray]] = {}
        self._verified_lock = threading.Lock()
        self._compare_lib: Future | None = None
        self._held = ExitStack()                 # cache entries this evaluation holds in use (the comparison library)
        self._wrong_call: tuple[int, str, CaseResult] | None = None   # (call, where, failure) by the device check

    # ------------------------------------------------------------------------------------- helpers
    def _cases(self, cases: list[ValidationCase], rng: np.random.Generator, label: str) -> list[_Case]:
        """Inputs drawn here, in order (the seed decides them), written for the worker; references in threads.
        A scaled case needs its references before its inputs are final (the scale steps down until the
        reference fits the output dtype), so it is made whole in a thread and waited for when it is sent."""
        assert self.exchange is not None
        out = []
        for i, (sizes, held, end) in enumerate(cases):
            inputs = make_case_inputs(self.loaded, sizes, rng)
            folder = self.exchange / f"{label}{i}"
            folder.mkdir()
            if end is None:
                for n, a in inputs.items():
                    transport.write_array(folder / f"in_{n}.npy", a)
                fut = self.pool.submit(reference_outputs, self.loaded, inputs, sizes)
                out.append(_Case(i, dict(sizes), held, folder, inputs, fut))
            else:
                expected: Future = Future()
                case = _Case(i, dict(sizes), held, folder, inputs, expected, end=end)
                case.ready = self.pool.submit(self._scaled_case, case)
                out.append(case)
        return out

    def _scaled_case(self, c: _Case) -> bool:
        """The scaled inputs, their reference and tolerance factors, written for the worker (False: no scale
        at this end fits the output dtype, the case is dropped)."""
        assert c.end is not None
        run = lambda inputs: reference_outputs(self.loaded, inputs, c.sizes)  # noqa: E731
        try:
            made = scale_cases.make(self.task, c.inputs, run(c.inputs), c.end, run)
        except BaseException as exc:
            c.expected.set_exception(exc)
            raise
        if made is None:
            c.expected.set_result({})
            return False
        c.inputs, c.scale, c.atol_factor = made.inputs, made.case, made.atol_factor
        for n, a in made.inputs.items():
            transport.write_array(c.folder / f"in_{n}.npy", a)
        c.expected.set_result(made.expected)
        return True

    def _call_left(self) -> float | None:
        """Time left to the calls of solve() in flight (opts.budget.call_limit_s each), None when none is or no limit."""
        if self.opts.budget.call_limit_s is None or self._calls_since is None:
            return None
        at, calls = self._calls_since
        return max(0.0, calls * self.opts.budget.call_limit_s - (time.perf_counter() - at))

    def _event(self) -> Event:
        assert self.session is not None
        ev = self.session.next_event(self._call_left())
        kind = ev.get("ev")
        at = getattr(ev, "at", None) or time.perf_counter()
        # the calls of solve() the worker makes before its next event: a checked call (calling -> returned), the
        # warm-up calls (first -> timing-start), one timed call (timing-start or t or b -> t, b or timing-end)
        if kind in ("calling", "timing-start", "t", "b"):
            self._calls_since = (at, 1)
        elif kind == "first":
            self._calls_since = (at, max(1, self.opts.budget.warmup - 1))
        elif kind in ("returned", "timing-end", "case"):
            self._calls_since = None
        if kind == "calling":
            self.state.in_solve = True
        elif kind == "returned":
            self.state.in_solve = False
        elif kind == "fault":
            raise _Fault(str(ev.get("message", "")))
        elif kind == "error":
            self.resp.harness_error = str(ev.get("message", ""))
            raise _Stop()
        return ev

    def _expect(self, want: str) -> Event:
        while True:
            ev = self._event()
            if ev.get("ev") == want:
                return ev

    # ----------------------------------------------------------------------------------- the phases
    def run(self) -> EvaluateResponse:
        t0 = time.perf_counter()
        opts, loaded = self.opts, self.loaded
        device = pinned_device(opts.gpu)
        cases = validation_cases(loaded, opts.held_out)
        bench_sizes = dict(self.task.benchmark)
        need = sum(_bytes(loaded, s, 1, 2) for s, _, _ in cases)
        if opts.timing:
            need += _bytes(loaded, bench_sizes, 3 + 3 * SLOTS_PER_SET, 3)
        bench_future: Future | None = None
        try:
            evals = cache_dir() / "evals"
            evals.mkdir(parents=True, exist_ok=True)
            self.exchange = transport.make_exchange(need, evals)
            with device_lock(device) as waited:
                self.state.costs["lock_wait_s"] = waited
                if opts.timing:    # in the background: from the cache in a moment, or made once per task and shape
                    bench_future = self.pool.submit(bench_data.prepare, loaded, bench_sizes, cache_dir(), _progress)
                    self._compare_lib = self.pool.submit(self._held_compare_lib)
                req = self.work / "serve_request.json"
                # absolute paths: the worker runs in a fresh folder of its own
                req.write_text(ServeRequest(so_path=str(Path(self.so_path).resolve()),
                                            task_folder=str(Path(self.task.folder).resolve())).model_dump_json())
                argv = [*(self.worker_argv or ["serve"]), "--request", str(req)]
                t_start = time.perf_counter()
                self.session = WorkerSession(argv, timeout_s=opts.timeout_s, device=device, workdir=self.work)
                prepared = self._cases(cases, np.random.default_rng(self.seed), "v")
                try:
                    self._start(t_start)
                    self.resp.validation = self._validate(prepared, "validation", opts.validation_cap_s)
                    if self.resp.validation.passed and opts.timing:
                        assert bench_future is not None
                        self.bench = bench_future.result()
                        self.resp.benchmark_data_s = self.bench.seconds
                        if not self.bench.distinct:
                            self.resp.notes.append("the benchmark's input sets could not be made different enough "
                                                   "for a replayed result to fail (inputs all fixed?)")
                        again = lambda: self.pool.submit(  # noqa: E731  (after the timed loop: no CPU contention in it)
                            self._cases, revalidation_cases(loaded, opts.held_out), np.random.default_rng([self.seed, 7]), "r")
                        if self._time(bench_sizes, again):
                            assert self._again is not None
                            self.resp.revalidation = self._validate(self._again.result(), "revalidation", 20.0)
                except _Stop:
                    pass
                except _Fault as exc:
                    self._fault(exc.message)
                except WorkerGone as gone:
                    self._gone(gone)
                finally:
                    self._finish()
        except Exception as exc:          # task data, reference, files: the harness's failure, not the kernel's
            self.resp.harness_error = self.resp.harness_error or f"{type(exc).__name__}: {exc}"
        finally:
            if self.bench is None and bench_future is not None:
                try:
                    bench_future.result().close()
                except Exception:
                    pass
            if self.bench is not None:
                self.bench.close()
            self.checker.close()
            self._held.close()
            self._verified.clear()
            self.pool.shutdown(wait=True, cancel_futures=True)
            if self.exchange is not None:
                transport.remove_exchange(self.exchange)
            self.resp.seconds = time.perf_counter() - t0
            self.resp.costs = {**self.state.costs, "checker_s": self.checker.busy_s}
        return self.resp

    def _start(self, t_start: float) -> None:
        self.state.phase = "start-up"
        ev = self._event()
        while ev.get("ev") not in ("ready", "load-error"):
            if ev.get("ev") == "loading":
                self.state.phase = "loading the candidate"
            ev = self._event()
        self.state.costs["worker_start_s"] = time.perf_counter() - t_start
        if ev.get("ev") == "load-error":
            self.resp.error = WorkerError(status=Status.runtime_error, stage="validation",
                                          message=f"cannot load the candidate's shared object or its entry point "
                                                  f"{self.task.entry}: {ev.get('message')}")
            raise _Stop()
        self.resp.device = str(ev.get("device") or "") or None

    def _validate(self, cases: list[_Case], label: str, cap_s: float) -> ValidationResult:
        assert self.session is not None
        t0 = time.perf_counter()
        keys: list[str] = []
        dropped: list[int] = []
        self._vkeys = keys
        self._vlabel = label
        for c in cases:
            failed = any(self.checker.done(k) and not self.checker.result(k).passed for k in keys)
            if failed and time.perf_counter() - t0 > cap_s:
                _progress(f"{label}: {len(cases) - c.i} cases not run (a case failed and {cap_s:g} s have passed)")
                break
            if c.ready is not None and not c.ready.result():
                _progress(f"{label}: no scale at the {c.end} end fits the output dtype; that case is left out")
                dropped.append(c.i)
                continue
            self.state.phase, self.state.in_solve = f"{label}, {c.where()}", False
            self._current = c
            self.session.send({"cmd": "case", "i": c.i, "sizes": c.sizes, "held_out": c.held_out, "dir": str(c.folder)})
            ev = self._expect("case")
            key = f"{label}{c.i}"
            keys.append(key)
            seconds = float(ev.get("seconds", 0.0))
            self.checker.submit(key, self._case_check(c, seconds))
        results = [self.checker.result(k) for k in keys]
        return ValidationResult(passed=len(results) == len(cases) - len(dropped) and all(r.passed for r in results), cases=results,
                                seconds=time.perf_counter() - t0)

    def _case_check(self, c: _Case, seconds: float) -> Callable[[Any], CaseResult]:
        outs, ins = [p.name for p in self.task.outputs], [p.name for p in self.task.inputs]

        def run(pool: Any) -> CaseResult:
            t0 = time.perf_counter()
            try:
                raw = transport.read_call(c.folder, outs, ins)
                self.state.costs["transport_read_s"] = self.state.costs.get("transport_read_s", 0.0) + time.perf_counter() - t0
                exp = Expectation(sizes=c.sizes, expected=c.expected.result(), inputs=c.inputs, held_out=c.held_out,
                                  atol_factor=c.atol_factor)
                result = check_call(self.task, exp, raw, seconds=seconds, pool=pool)
                if c.scale is not None:
                    result.scale = c.scale.text()
                return result
            finally:
                transport.remove_exchange(c.folder)          # checked: its memory (tmpfs) goes back at once
        return run

    # ------------------------------------------------------------------------------------- timing
    def _bench_expect(self, s: int, others: list[int]) -> Expectation:
        assert self.bench is not None
        sets = self.bench.sets
        one = sets[s]
        base = sets[one.base] if one.base is not None else one
        return Expectation(sizes=self.bench.sizes, expected=one.expected, inputs=base.inputs, chunks=one.chunks,
                           rel_slack=one.rel_slack, label=f"input set S{s}",
                           others=[(f"input set S{j}", sets[j].expected, sets[j].rel_slack) for j in others if j != s])

    def _bench_check(self, key: str, folder: Path, s: int, others: list[int], *, inputs: bool = True) -> None:
        outs = [p.name for p in self.task.outputs]
        ins = [p.name for p in self.task.inputs] if inputs else []

        def run(pool: Any) -> CaseResult:
            with self._verified_lock:
                same_as = self._verified.get(s)
            try:
                raw = transport.read_call(folder, outs, ins)
                result = check_call(self.task, self._bench_expect(s, others), raw, pool=pool, same_as=same_as)
            finally:
                transport.remove_exchange(folder)      # unlinked: nothing else can reach the mapped outputs now
            if result.passed:
                with self._verified_lock:
                    self._verified.setdefault(s, raw.outputs)
            return result
        self.checker.submit(key, run)

    def _held_compare_lib(self) -> str:
        """The comparison library's build, held in use until the evaluation ends (another process's cache
        cap would otherwise evict it between the build and the worker's load); built again if evicted first."""
        for fresh in (False, True):
            so = device_compare.build(self.opts.arch, fresh=fresh)
            if self._held.enter_context(cache_store.in_use(Path(so).parent)) and Path(so).is_file():
                return so
        raise RuntimeError("the comparison library's build was removed from the cache as it was made")

    def _call_check(self, timed: list[int]) -> CallCheck | None:
        """What the worker compares every timed call with: each timed set's reference file and tolerance. None
        (the kept outputs are still checked here) when the comparison library could not be built."""
        assert self.bench is not None and self.exchange is not None
        lib = None
        if self._compare_lib is not None:
            try:
                lib = self._compare_lib.result()
            except Exception as exc:            # no nvcc for it: the kept outputs are still checked here
                self.resp.notes.append(f"every timed call could not be checked on the device: {exc}"[:300])
                return None
        outputs = []
        for p in self.task.outputs:
            refs, tol = {}, {}
            atol, rtol = tolerance(self.task, p, self.bench.sizes)
            for s in timed:
                one = self.bench.sets[s]
                path = self.exchange / f"ref-s{s}-{p.name}.npy"
                if one.folder is not None and (one.folder / f"ref_{p.name}.npy").is_file():
                    path = one.folder / f"ref_{p.name}.npy"
                else:
                    transport.write_array(path, np.ascontiguousarray(one.expected[p.name]))
                refs[s], tol[s] = str(path), (atol, rtol + one.rel_slack)
            exact = not p.dtype.is_float and atol == 0 and rtol == 0
            outputs.append(OutputCheck(name=p.name, refs=refs, tol=tol, exact=exact))
        return CallCheck(lib=lib, outputs=outputs)

    def _wrong(self, ev: Event) -> None:
        """A timed call the device check failed: the verdict on that call, named by its place in the loop."""
        call, s, name = int(ev.get("i", 0)), int(ev.get("set", -1)), str(ev.get("output", ""))
        count, like, rep = int(ev.get("count", 0)), ev.get("like"), int(ev.get("repeat", 1))
        sizes = dict(self.bench.sizes) if self.bench is not None else {}
        p = next((q for q in self.task.outputs if q.name == name), None)
        size = int(np.prod(dims(p, sizes), dtype=np.int64)) if p is not None else 0
        where = f"on timed call {call + 1}" + ("" if rep == 1 else f" of timing repeat {rep}") + f" (input set S{s})"
        if like is None:
            kind, reason = "wrong_values", f"{name}: {count} of {size} elements outside tolerance (every timed call is checked)"
        else:
            kind = "replay"
            reason = (f"{name}: the outputs match the reference of input set S{like}, not of the inputs this call was "
                      f"given (input set S{s}): a result kept from an earlier call (memoized) is replayed")
        self._wrong_call = (call, where, CaseResult(sizes=sizes, passed=False, output=name, kind=kind, reason=reason))

    def _time(self, sizes: dict[str, int], after_loop: Callable[[], Future]) -> bool:
        """The timing phase; False when a check at the benchmark shape failed (the response says how)."""
        assert self.session is not None and self.bench is not None and self.exchange is not None
        opts = self.opts
        timed, post = list(bench_data.TIMED_SETS), bench_data.POST_SET
        dirs = {k: str(self.exchange / f"bench-{k}") for k in ("first", "last", "post", "snap")}
        sched_seed = secrets.randbits(31)
        cmd = TimeCommand(sizes=sizes, sets=self.bench.plan(), timed_sets=timed, post_set=post, dirs=dirs,
                          schedule_seed=sched_seed, slots_per_set=SLOTS_PER_SET, blank_every=BLANK_EVERY,
                          budget=opts.budget, check=self._call_check(timed))
        t0 = time.perf_counter()
        self.state.phase, self.state.in_solve = "timing at the benchmark shape", False
        self.session.send({"cmd": "time", **cmd.model_dump()})
        samples: list[float] = []
        host: list[float] = []
        hidden: list[float] = []
        sets_used: list[int] = []
        marks: list[tuple[str, float]] = []
        start_at = None
        stop_reason = ""
        repeats: list[tuple[float, float]] = []
        snaps: list[tuple[str, int, int]] = []          # (key, set, call) in call order
        while True:
            if self._a_bench_check_failed():
                self.session.kill()                     # decided: a call at the benchmark shape was wrong
                self._stopped_early = True
                break
            ev = self._event()
            kind = ev.get("ev")
            if kind == "sets-ready":
                self.state.costs["sets_upload_s"] = float(ev.get("seconds", 0.0))
            elif kind == "check-ready":
                self.resp.every_call_checked = bool(ev.get("on"))
                if not ev.get("on"):
                    self.resp.notes.append(f"every timed call could not be checked on the device: {ev.get('why')}; "
                                           f"the kept outputs were checked")
            elif kind == "wrong":
                self._wrong(ev)
                self.session.kill()
                self._stopped_early = True
                break
            elif kind == "first":
                self.state.costs["transport_write_s"] = float(ev.get("seconds", 0.0))
                self._bench_check("first", Path(dirs["first"]), timed[0], [])
            elif kind == "timing-start":
                self.state.phase, start_at = "the timed calls", ev.at
            elif kind == "t":
                marks.append(("t", ev.at))
                samples.append(float(ev["ms"]))
                host.append(float(ev.get("host", 0.0)))
                hidden.append(float(ev.get("hidden", 0.0)))
                sets_used.append(int(ev.get("set", -1)))
            elif kind == "timing-end":
                stop_reason = str(ev.get("stop_reason") or "")
                self.state.phase = "after the timed calls"
                self._again = after_loop()
            elif kind == "last":
                planned, _ = timing_plan.replay(sched_seed, len(samples), timed, SLOTS_PER_SET)
                last_set = planned[-1] if planned else timed[0]
                self._bench_check("last", Path(dirs["last"]), last_set, timed)
            elif kind == "b":
                marks.append(("b", ev.at))
            elif kind == "snaps":
                self.state.costs["transport_write_s"] = self.state.costs.get("transport_write_s", 0.0) + float(ev.get("seconds", 0.0))
                _, kept = timing_plan.replay(sched_seed, len(samples), timed, SLOTS_PER_SET)
                claimed = {int(it["slot"]): (int(it["set"]), int(it["call"]), it["dir"]) for it in ev.get("items", [])}
                for slot, call in sorted(kept.items(), key=lambda kv: kv[1]):
                    s = timing_plan.slot_set(slot, timed, SLOTS_PER_SET)
                    key = f"snap{slot}"
                    got = claimed.get(slot)
                    if got is None or got[:2] != (s, call):
                        self._schedule_broken = True
                    self._bench_check(key, Path(dirs["snap"]) / f"slot{slot}", s, timed, inputs=False)
                    snaps.append((key, s, call))
                self.state.phase = "the call on fresh inputs after timing"
            elif kind == "post":
                self._bench_check("post", Path(dirs["post"]), post, timed)
                self.state.phase = "repeated timings"
            elif kind == "checks-wait":                # every check is submitted; the repeats wait for them
                self.state.phase = "the checks of the calls at the benchmark shape"
                if not self._bench_checks_failed():
                    self.state.phase = "repeated timings"
                    self.session.send({"cmd": "repeat"})
            elif kind == "repeat":
                rs = [float(x) for x in ev.get("samples", [])]
                if rs:
                    repeats.append((float(np.median(rs)), float(ev.get("seconds", 0.0))))
            elif kind == "timed":
                break
        seconds = time.perf_counter() - t0
        failed = self._bench_failure(len(samples), snaps)
        if failed is not None:
            self.resp.error = WorkerError(status=Status.wrong_answer, message=failed.reason or "wrong", stage="timing")
            self.resp.revalidation = ValidationResult(passed=False, cases=[failed])
            return False
        planned, _ = timing_plan.replay(sched_seed, len(samples), timed, SLOTS_PER_SET)
        issues, fig = timing_stats.clock_issues(samples, start_at, marks)
        if planned != sets_used:
            issues.append("the worker's timed calls did not use the input sets the schedule gave them")
        if self._schedule_broken:
            issues.append("the worker did not keep the outputs the schedule asked for")
        self.resp.clock = ClockCheck(calls=len(samples), issues=issues, **fig)
        s = timing_stats.summarize(samples)
        self.resp.timing = TimingResult(sizes=sizes, median_ms=s["median"], min_ms=s["min"], mean_ms=s["mean"],
                                        iqr_ms=s["iqr"], rse=s["rse"], samples_ms=samples,
                                        host_median_ms=float(np.median(host)), repetitions=len(samples),
                                        stop_reason=stop_reason, seconds=seconds,
                                        every_call_checked=self.resp.every_call_checked)
        self.resp.hidden_median_ms = float(np.median(hidden))
        self.resp.repeat_medians_ms = [s["median"]] + [m for m, _ in repeats]
        self.resp.repeat_seconds = [seconds - sum(t for _, t in repeats)] + [t for _, t in repeats]
        return True

    def _a_bench_check_failed(self) -> bool:
        """A finished check at the benchmark shape failed (never waits): the rest of the loop, the call on fresh
        inputs and the repeated timings cannot change the verdict, so the worker is stopped."""
        return any(self.checker.done(k) and not self.checker.result(k).passed for k in self._bench_keys())

    def _bench_keys(self) -> tuple[str, ...]:
        return ("first", "last", "post") + tuple(f"snap{k}" for k in range(3 * SLOTS_PER_SET))

    def _bench_checks_failed(self) -> bool:
        return any(self.checker.has(k) and not self.checker.result(k).passed for k in self._bench_keys())

    def _bench_failure(self, n: int, snaps: list[tuple[str, int, int]]) -> CaseResult | None:
        """The first failing check at the benchmark shape, in call order, with where it happened: the kept
        outputs checked here and the call the device check failed, whichever came first."""
        order: list[tuple[float, str, str]] = [(-1, "first", "on the first call")]
        order += [(call, k, f"on timed call {call + 1} of {n} (input set S{s})") for k, s, call in snaps]
        order += [(n - 1, "last", f"after {n} timed calls"), (n + 1, "post", "on fresh inputs after timing")]
        if self._wrong_call is not None:
            order.append((self._wrong_call[0] + 0.5, "device", self._wrong_call[1]))
        for _, key, where in sorted(order, key=lambda o: o[0]):
            if key == "device":
                assert self._wrong_call is not None
                r = self._wrong_call[2]
                r.reason = f"at the benchmark shape {where}: {r.reason}"
                return r
            if not self.checker.has(key):
                continue
            r = self.checker.result(key)
            if not r.passed:
                r.reason = f"at the benchmark shape {where}: {r.reason}"
                return r
        return None

    # ---------------------------------------------------------------------------- ends of the worker
    def _fault(self, message: str) -> None:
        stage = "validation" if self.state.phase.startswith("validation") else (
            "revalidation" if self.state.phase.startswith("revalidation") else "timing")
        self.resp.error = WorkerError(status=Status.runtime_error, stage=stage,
                                      message=f"CUDA error during {stage}: {message}")
        self._record_case_failure("cuda_error", f"CUDA error: {message}")

    def _gone(self, gone: WorkerGone) -> None:
        stage = "validation" if self.state.phase.startswith("validation") else (
            "revalidation" if self.state.phase.startswith("revalidation") else "timing")
        if gone.timed_out and self.session is not None and self.session.call_timed_out:
            assert self.opts.budget.call_limit_s is not None
            self.resp.error = WorkerError(
                status=Status.timeout, stage=stage,
                message=f"killed: a call of solve() ran longer than the limit for one call, "
                        f"{call_limit_text(self.opts.budget.call_limit_s, self.opts.budget.naive_ms)} (last step: {self.state.place()}). "
                        f"A kernel that never ends, or one far slower than the naive kernel: check loop bounds, "
                        f"spin-waits on flags other blocks set (every block must be able to make progress) and "
                        f"barriers that not every thread reaches. The next evaluation starts a fresh process.")
            return
        if gone.timed_out:
            self.resp.error = WorkerError(status=Status.timeout, stage=stage,
                                          message=f"killed after {self.opts.timeout_s:g} s without finishing "
                                                  f"(last step: {self.state.place()}). A kernel that never ends: "
                                                  f"check loop bounds and barriers that not every thread reaches. "
                                                  f"The next evaluation starts a fresh process.")
            return
        if stage == "timing" and (self._stopped_early or self._bench_checks_failed()):
            failed = self._bench_failure(0, [])          # a check at the benchmark shape decides, not the exit
            if failed is not None:
                self.resp.error = WorkerError(status=Status.wrong_answer, message=failed.reason or "wrong", stage="timing")
                self.resp.revalidation = ValidationResult(passed=False, cases=[failed])
                return
        rc = gone.rc
        if self.state.phase == "start-up":   # the worker died before it loaded any candidate code: ours, not the kernel's
            self.resp.harness_error = (f"the GPU worker stopped ({describe_exit(rc)}) before it loaded the candidate; "
                                       f"its log is {self.work / 'worker_stderr.log'}")
            return
        if rc in (EXIT_CUDA_FAULT, EXIT_HARNESS):
            self.resp.harness_error = f"the worker stopped ({describe_exit(rc)}) {self.state.place()} without saying why"
            return
        how = describe_exit(rc)
        hint = " (a crash in its host code)" if rc is not None and rc < 0 and -rc in (4, 7, 8, 11) else ""
        self.resp.error = WorkerError(status=Status.runtime_error, stage=stage,
                                      message=f"the candidate ended the worker process {self.state.place()}: {how}{hint}. "
                                              f"solve() must return normally: no exit, abort or signals")
        self._record_case_failure("worker_exit", self.resp.error.message)

    def _record_case_failure(self, kind: str, reason: str) -> None:
        """The case that was running when the worker stopped, as a failed case of its validation."""
        c, label = self._current, self._vlabel
        if c is None or label is None or not self.state.phase.startswith(label):
            return
        done = [self.checker.result(k) for k in self._vkeys]
        done.append(CaseResult(sizes=c.sizes, held_out=c.held_out, passed=False, kind=kind, reason=reason))
        v = ValidationResult(passed=False, cases=done)
        if label == "validation":
            self.resp.validation = v
        else:
            self.resp.revalidation = v

    def _finish(self) -> None:
        if self.session is None:
            return
        rc = self.session.close()
        (self.work / "worker_stderr.log").write_text(self.session.stderr)
        if self.session.stdout.strip():
            (self.work / "worker_stdout.log").write_text(self.session.stdout)
        self.state.costs["worker_s"] = self.session.seconds
        if rc not in (0, None) and self.resp.error is None and self.resp.harness_error is None \
                and self.resp.validation is not None and self.resp.validation.passed and not self.opts.timing:
            self.resp.notes.append(f"the worker ended with {describe_exit(rc)} after its last command")


class _Fault(Exception):
    def __init__(self, message: str):
        self.message = message
        super().__init__(message)


def judge(loaded: LoadedTask, so_path: str, opts: "EvalOptions", seed: int, work: Path,
          worker_argv: list[str] | None = None) -> EvaluateResponse:
    """Run and judge one compiled candidate on the device (see the module doc). ``worker_argv`` replaces
    ``serve`` of ``python -m cuda_llm.tools.harness.gpu_worker`` (tests run a worker on another Device)."""
    return Judge(loaded, so_path, opts, seed, work, worker_argv).run()
