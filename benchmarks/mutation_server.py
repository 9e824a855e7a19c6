"""The fast path of benchmarks/mutation_bench.py: collect a module's tests once, then fork per mutant.

    python benchmarks/mutation_server.py JOB.json      (run inside the sandbox copy, by mutation_bench.py)

JOB.json: {"module", "file", "tests", "mutants": [{"index", "source", "reach": [nodeid...] | null,
"timeout"}], "out"}. In the server: pytest collects the tests (the module imported unmutated), a forked child
records which lines of the module each test runs, then each mutant gets a forked child that swaps the mutated
functions' code into the live function objects (`__code__`, defaults, changed module constants), writes the
mutated file (for worker children the tests start) and runs the tests that reach the mutant, stopping at the
first failure. Forking after collection leaves only the tests' own time per mutant.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import types
from pathlib import Path

import pytest
from _pytest.runner import runtestprotocol

PLAIN = (int, float, bool, str, bytes, tuple, frozenset, type(None))
CACHES: list = []     # cached functions of the module: emptied once the mutant's code is in


def _functions(obj, prefix: str, module: str, out: dict, depth: int = 0) -> None:
    """qualname -> function object, for the module's functions and its classes' methods."""
    for name, value in list(vars(obj).items()):
        fn = value
        if isinstance(value, (staticmethod, classmethod)):
            fn = value.__func__
        if isinstance(value, property):
            for part in ("fget", "fset", "fdel"):
                f = getattr(value, part)
                if isinstance(f, types.FunctionType):
                    out[f"{prefix}{name}.{part}"] = f
            continue
        wrapped = getattr(value, "__wrapped__", None)     # functools.cache / lru_cache / wraps
        if not isinstance(fn, types.FunctionType) and isinstance(wrapped, types.FunctionType) \
                and wrapped.__module__ == module:
            out[prefix + name] = wrapped
            if hasattr(value, "cache_clear"):
                CACHES.append(value)
        elif isinstance(fn, types.FunctionType) and fn.__module__ == module:
            out[prefix + name] = fn
        elif isinstance(value, type) and value.__module__ == module and depth < 3 and name != "__class__":
            _functions(value, f"{prefix}{name}.", module, out, depth + 1)


def swap_in(module: types.ModuleType, source: str, filename: str) -> None:
    """Make the live module behave as `source`: functions get the new code, changed plain constants the new value."""
    ns: dict = {"__name__": module.__name__, "__file__": filename, "__package__": module.__package__,
                "__builtins__": __builtins__}
    exec(compile(source, filename, "exec"), ns)
    new = types.ModuleType(module.__name__)
    new.__dict__.update(ns)
    old_f: dict = {}
    new_f: dict = {}
    _functions(module, "", module.__name__, old_f)
    _functions(new, "", module.__name__, new_f)
    for q, f in old_f.items():
        g = new_f.get(q)
        if g is None:
            continue
        if f.__code__.co_freevars == g.__code__.co_freevars:
            f.__code__ = g.__code__
        f.__defaults__ = g.__defaults__
        f.__kwdefaults__ = g.__kwdefaults__
    for cached in CACHES:
        cached.cache_clear()
    for name, value in ns.items():
        old = module.__dict__.get(name, None)
        if isinstance(value, PLAIN) and (type(old) is not type(value) or old != value):
            setattr(module, name, value)
        elif isinstance(value, type) and isinstance(old, type):
            for attr, v in vars(value).items():
                if isinstance(v, PLAIN) and not attr.startswith("__") and vars(old).get(attr, v) != v:
                    try:
                        setattr(old, attr, v)
                    except (AttributeError, TypeError):
                        pass


class Server:
    def __init__(self, job: dict) -> None:
        self.job = job
        self.failed = False
        self.killer = ""

    def pytest_runtest_logreport(self, report):
        if report.failed:
            self.failed = True
            self.killer = self.killer or report.nodeid

    def _child(self, items, body) -> None:
        os.setpgrp()
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        code = 3
        try:
            code = body(items)
        finally:
            os._exit(code)

    def _fork(self, items, body, timeout: float) -> str:
        pid = os.fork()
        if pid == 0:
            self._child(items, body)
        deadline = time.monotonic() + timeout
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                os.waitpid(pid, 0)
                return "timeout"
            time.sleep(0.005)
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        code = os.waitstatus_to_exitcode(status)
        return {0: "survived", 1: "killed"}.get(code, "killed" if code != 3 else "error")

    def _run_items(self, items, stop_first: bool = True) -> int:
        for i, item in enumerate(items):
            runtestprotocol(item, nextitem=items[i + 1] if i + 1 < len(items) else None, log=True)
            if self.failed and stop_first:
                return 1
        return 1 if self.failed else 0

    def pytest_runtestloop(self, session):
        job = self.job
        by_id = {it.nodeid: it for it in session.items}
        target = job["file"]
        cov_file = Path(job["out"] + ".cov")

        # 1. which lines of the module each test runs (and how long each test takes)
        def cover(items):
            lines: dict[str, set[int]] = {}
            durations: dict[str, float] = {}
            cur: list = [None]

            def local(frame, event, arg):
                if event == "line" and cur[0] is not None:
                    cur[0].add(frame.f_lineno)
                return local

            def glob(frame, event, arg):
                if frame.f_code.co_filename == target:
                    return local
                return None

            untraced = tuple(job.get("untraced") or ())
            for i, item in enumerate(items):
                cur[0] = lines.setdefault(item.nodeid, set())
                t0 = time.perf_counter()
                if not item.nodeid.startswith(untraced) or not untraced:
                    sys.settrace(glob)
                    threading.settrace(glob)
                try:
                    runtestprotocol(item, nextitem=items[i + 1] if i + 1 < len(items) else None, log=True)
                finally:
                    sys.settrace(None)
                    threading.settrace(None)
                durations[item.nodeid] = time.perf_counter() - t0
            cov_file.write_text(json.dumps({"lines": {k: sorted(v) for k, v in lines.items()},
                                            "durations": durations, "failed": self.failed,
                                            "first_failure": self.killer}))
            return 0

        t0 = time.monotonic()
        self._fork(session.items, cover, timeout=3600)
        cov = json.loads(cov_file.read_text())
        baseline = time.monotonic() - t0
        results = {"baseline_seconds": baseline, "baseline_failed": cov["failed"], "results": [],
                   "first_failure": cov.get("first_failure", "")}
        if cov["failed"]:
            Path(job["out"]).write_text(json.dumps(results))
            return True
        by_line: dict[int, list[str]] = {}
        for nodeid, lines in cov["lines"].items():
            for ln in lines:
                by_line.setdefault(ln, []).append(nodeid)
        dur = cov["durations"]
        everything = sorted(dur, key=lambda n: dur[n])
        untraced_ids = [n for n in everything if job.get("untraced") and n.startswith(tuple(job["untraced"]))]
        module = sys.modules[job["module"]]
        original = Path(target).read_text()

        # 2. the mutants (until the job's time is up: those left are reported as not run)
        stop_at = time.monotonic() + job["max_seconds"] if job.get("max_seconds") else None
        for m in job["mutants"]:
            if stop_at is not None and time.monotonic() > stop_at:
                break
            if m["reach"] == "all":
                reach = everything
            else:
                reach = sorted(set(by_line.get(m["line"], [])), key=lambda n: dur.get(n, 0.0))
                if not reach and m.get("fallback_all"):
                    reach = everything
                elif not reach and untraced_ids:   # tests run without the tracer may reach any line
                    reach = untraced_ids
            if not reach:
                results["results"].append({"index": m["index"], "outcome": "uncovered", "tests": 0, "seconds": 0.0})
                continue
            items = [by_id[n] for n in reach if n in by_id]
            budget = 10 + 3 * sum(dur.get(n, 5.0) for n in reach)
            Path(target).write_text(m["source"])

            kill_file = Path(job["out"] + ".kill")
            kill_file.unlink(missing_ok=True)

            def body(items, src=m["source"], kill_file=kill_file):
                swap_in(module, src, target)
                code = self._run_items(items)
                if self.killer:
                    kill_file.write_text(self.killer)
                return code

            s = time.monotonic()
            outcome = self._fork(items, body, budget)
            rest = [n for n in untraced_ids if n not in reach]
            if outcome == "survived" and rest:     # untraced tests (a worker subprocess, a session) may reach it too
                more = [by_id[n] for n in rest if n in by_id]
                outcome = self._fork(more, body, 10 + 3 * sum(dur.get(n, 5.0) for n in rest))
                items = items + more
            Path(target).write_text(original)
            killer = kill_file.read_text() if outcome == "killed" and kill_file.exists() else ""
            results["results"].append({"index": m["index"], "outcome": outcome, "tests": len(items),
                                       "seconds": round(time.monotonic() - s, 2), "killer": killer})
            if job.get("verbose"):
                print(f"  {job['module']} {m['index']} {outcome}", file=sys.__stderr__, flush=True)
            _write(job["out"], results)       # after every mutant: a server that dies keeps what it measured
        results["complete"] = True
        _write(job["out"], results)
        return True


def _write(path: str, results: dict) -> None:
    tmp = Path(path + ".tmp")
    tmp.write_text(json.dumps(results))
    os.replace(tmp, path)


def main() -> int:
    job = json.loads(Path(sys.argv[1]).read_text())
    sys.dont_write_bytecode = True
    rc = pytest.main(["-q", "-p", "no:cacheprovider", "-o", "addopts=", "--timeout=300", *job["tests"]],
                     plugins=[Server(job)])
    return 0 if rc in (0, 1) else int(rc)


if __name__ == "__main__":
    sys.exit(main())
