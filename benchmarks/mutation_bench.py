"""Mutation testing of the modules whose bugs hurt users most: each module against its own tests.

    python benchmarks/mutation_bench.py                 # every module of [tool.cuda_llm.mutation] in pyproject
    python benchmarks/mutation_bench.py --module graph.selection
    python benchmarks/mutation_bench.py --named         # the named mutants (bugs once missed) alone
    python benchmarks/mutation_bench.py --sample 30 --seed 7   # a few killed mutants drawn across modules
    python benchmarks/mutation_bench.py --report        # docs/mutation.md again from the recorded results

Why a runner of our own and not mutmut or cosmic-ray: both are built around the whole suite (mutmut 3 runs
the entire suite once for its statistics, about 12 minutes here, and keeps a mutated copy of the project;
cosmic-ray needs a session database and a full test command per mutant). This runner makes one module's
mutants with the `ast` module, records once which of the module's tests run each line, and then runs, per
mutant, only the tests that reach the mutated line, fastest first, stopping at the first failure, in a child
forked from a process that has already imported pytest and the heavy libraries. docs/mutation.md gives the
measured cost.

A mutant is one change: a comparison flipped (< <=, == !=, in / not in, is / is not), and/or swapped, a `not`
removed, an arithmetic operator swapped, a number + 1 (a float of 1000 or more doubled), True/False swapped, a returned value replaced by None,
a call statement removed, an `if` condition made always true. Strings, docstrings, f-strings, annotations and
log calls are left alone. The tests run against a copy of the checkout (the module written from the mutated
tree), so subprocesses the tests start see the mutant too and the checkout is never touched.

Outcomes: killed (a test failed), timed out (counted as detected: the suite's pytest-timeout would fail it),
survived (all reaching tests passed), uncovered (no test reaches the line: a survivor). Survivors judged
equivalent (no test could tell them apart) are listed with the reason in benchmarks/mutation_equivalent.toml
and left out of the kill rate. Results go to benchmarks/mutation_results/<module>.json.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "mutation_results"
EQUIVALENT = ROOT / "benchmarks" / "mutation_equivalent.toml"
NAMED = ROOT / "benchmarks" / "mutation_named.toml"
DOC = ROOT / "docs" / "mutation.md"
LOG_CALLS = {"debug", "info", "warning", "warn", "error", "exception", "msg", "critical"}


# ---------------------------------------------------------------- configuration

def load_config() -> dict[str, dict]:
    """{module: {"tests": [...], "coverage": bool}} from pyproject's [tool.cuda_llm.mutation.modules]."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mods = cfg.get("tool", {}).get("cuda_llm", {}).get("mutation", {}).get("modules", {})
    if not mods:
        raise SystemExit("pyproject.toml has no [tool.cuda_llm.mutation.modules]")
    out = {}
    for name, v in mods.items():
        tests = [t for t in v["tests"] if (ROOT / t).exists()]    # a test file not written yet is skipped
        out[name] = {"tests": tests, "coverage": bool(v.get("coverage", True)),
                     "fallback_all": bool(v.get("fallback_all", False)), "untraced": list(v.get("untraced", []))}
    return out


def module_path(module: str) -> Path:
    return Path("cuda_llm", *module.split(".")).with_suffix(".py")


def load_equivalent() -> dict[str, dict[str, str]]:
    """{module: {mutant key: reason}}."""
    if not EQUIVALENT.exists():
        return {}
    data = tomllib.loads(EQUIVALENT.read_text())
    out: dict[str, dict[str, str]] = {}
    for e in data.get("equivalent", []):
        out.setdefault(e["module"], {})[e["key"]] = e["reason"]
    return out


# ---------------------------------------------------------------- mutants

@dataclass
class Mutant:
    module: str
    index: int          # position in this module's list (stable while the source is)
    line: int           # line in the normalised (ast.unparse) source, for the coverage look-up
    key: str            # "function | before -> after #n": stable across edits elsewhere in the file
    before: str
    after: str
    in_function: bool = True   # False: run at import (module constants, class bodies, defaults)


_CMP_SWAP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
             ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_BIN_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult,
             ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.BitOr: ast.BitAnd, ast.BitAnd: ast.BitOr}


def _skip_subtrees(tree: ast.AST) -> set[int]:
    """ids of nodes never mutated: docstrings, f-strings, annotations, log calls, decorators."""
    skip: set[int] = set()

    def mark(n: ast.AST | None) -> None:
        if n is not None:
            for m in ast.walk(n):
                skip.add(id(m))

    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            mark(node)
        elif isinstance(node, (ast.AnnAssign,)):
            mark(node.annotation)
        elif isinstance(node, ast.arg):
            mark(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            mark(node.returns)
            for d in node.decorator_list:
                mark(d)
        elif isinstance(node, ast.ClassDef):
            for d in node.decorator_list:
                mark(d)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in LOG_CALLS:
            mark(node)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            mark(node)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                mark(first)
    return skip


def _owners(tree: ast.AST) -> dict[int, str]:
    """id(node) -> qualified name of the function or class it lies in."""
    owner: dict[int, str] = {}

    def visit(node: ast.AST, name: str) -> None:
        for child in ast.iter_child_nodes(node):
            n = name
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                n = f"{name}.{child.name}" if name else child.name
            owner[id(child)] = n or "<module>"
            visit(child, n)

    visit(tree, "")
    return owner


def _edits(node: ast.AST) -> list[tuple[str, object]]:
    """The single-point changes this node allows: (kind, argument)."""
    out: list[tuple[str, object]] = []
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _CMP_SWAP:
                out.append(("cmp", i))
    elif isinstance(node, ast.BoolOp):
        out.append(("bool", None))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        out.append(("not", None))
    elif isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _BIN_SWAP:
        out.append(("bin", None))
    elif isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, bool):
            out.append(("bool_const", None))
        elif isinstance(v, (int, float)):
            out.append(("num", None))
    elif isinstance(node, ast.Return) and node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None):
        out.append(("return", None))
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        out.append(("drop_call", None))
    elif isinstance(node, ast.If):
        out.append(("if_true", None))
    return out


def _apply(node: ast.AST, kind: str, arg: object) -> ast.AST:
    """A mutated copy of node (the parent keeps its other children)."""
    new = copy.deepcopy(node)
    if kind == "cmp":
        new.ops[arg] = _CMP_SWAP[type(new.ops[arg])]()
    elif kind == "bool":
        new.op = ast.Or() if isinstance(new.op, ast.And) else ast.And()
    elif kind == "not":
        return new.operand
    elif kind == "bin":
        new.op = _BIN_SWAP[type(new.op)]()
    elif kind == "bool_const":
        new.value = not new.value
    elif kind == "num":   # + 1; a float of 1000 or more doubled instead (no behaviour could show a + 1 there)
        v = new.value
        new.value = v * 2 if isinstance(v, float) and abs(v) >= 1000 else v + 1
    elif kind == "return":
        new.value = ast.Constant(None)
    elif kind == "drop_call":
        return ast.Pass()
    elif kind == "if_true":
        new.test = ast.Constant(True)
    return new


def _short(node: ast.AST) -> str:
    text = ast.unparse(node).split("\n")[0]
    return text if len(text) <= 90 else text[:87] + "..."


def normalised(source: str) -> str:
    """The source as ast.unparse writes it: the baseline every mutant is compared against."""
    return ast.unparse(ast.parse(source)) + "\n"


def enumerate_mutants(module: str, source: str) -> tuple[list[Mutant], ast.Module]:
    tree = ast.parse(normalised(source))
    skip = _skip_subtrees(tree)
    owner = _owners(tree)
    in_body: set[int] = set()
    default_line: dict[int, int] = {}    # a default value: the tests that reach the function's first line
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for stmt in fn.body:
                in_body.update(id(n) for n in ast.walk(stmt))
            for d in [*fn.args.defaults, *[k for k in fn.args.kw_defaults if k is not None]]:
                for n in ast.walk(d):
                    default_line[id(n)] = fn.body[-1].lineno if len(fn.body) == 1 else fn.body[1].lineno
    mutants: list[Mutant] = []
    seen: dict[str, int] = {}
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        for kind, arg in _edits(node):
            before = _short(node if not isinstance(node, ast.If) else node.test)
            mutated = _apply(node, kind, arg)
            after = _short(mutated if not isinstance(node, ast.If) else mutated.test)
            if kind == "drop_call":
                after = "(call removed)"
            base = f"{owner.get(id(node), '<module>')} | {before} -> {after}"
            seen[base] = seen.get(base, 0) + 1
            key = base if seen[base] == 1 else f"{base} #{seen[base]}"
            line = default_line.get(id(node), getattr(node, "lineno", 0))
            mutants.append(Mutant(module, len(mutants), line, key, before, after,
                                  id(node) in in_body or id(node) in default_line))
    return mutants, tree


def mutated_source(tree: ast.Module, index: int) -> str:
    """The module with mutant `index` applied (same walk order as enumerate_mutants)."""
    tree = copy.deepcopy(tree)
    skip = _skip_subtrees(tree)
    n = 0
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            items = value if isinstance(value, list) else [value]
            for pos, child in enumerate(items):
                if not isinstance(child, ast.AST) or id(child) in skip:
                    continue
                edits = _edits(child)
                if n + len(edits) > index:
                    kind, arg = edits[index - n]
                    new = _apply(child, kind, arg)
                    if isinstance(value, list):
                        value[pos] = new
                    else:
                        setattr(parent, field, new)
                    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"
                n += len(edits)
    raise IndexError(index)


def _walk_order_check(tree: ast.Module, count: int) -> None:
    """mutated_source walks children in the order ast.walk visits them (breadth first): assert the counts agree."""
    n = 0
    skip = _skip_subtrees(tree)
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            if id(child) not in skip:
                n += len(_edits(child))
    if n != count:
        raise RuntimeError(f"mutant enumeration disagrees with application ({n} != {count})")


# ---------------------------------------------------------------- running tests in forked children

PRELOAD = ["pytest", "numpy", "pydantic", "structlog", "platformdirs", "rich", "langchain_core",
           "langgraph.graph", "elftools.elf.elffile"]


class Sandbox:
    """A copy of the checkout (no .git, no runs) whose module file is rewritten per mutant."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="cuda-llm-mutation-"))
        ignore = shutil.ignore_patterns(".git", "runs", ".venv", "__pycache__", "*.pyc", ".pytest_cache", "mutants")
        for item in ROOT.iterdir():
            if item.name in {".git", "runs", ".venv", "mutants"}:
                continue
            if item.is_dir():
                shutil.copytree(item, self.dir / item.name, ignore=ignore, symlinks=True)
            else:
                shutil.copy2(item, self.dir / item.name)

    def write(self, module: str, text: str) -> None:
        (self.dir / module_path(module)).write_text(text)

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def preload() -> None:
    sys.dont_write_bytecode = True
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    if any(m == "cuda_llm" or m.startswith("cuda_llm.") for m in sys.modules):
        raise RuntimeError("the runner imported cuda_llm before forking: children would not see the mutant")


class _Coverage:
    """pytest plugin: the lines of one file each test executes, and each test's duration."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.lines: dict[str, set[int]] = {}
        self.durations: dict[str, float] = {}
        self.import_lines: set[int] = set()    # run while the tests were collected (module level, defaults)
        self._cur: set[int] | None = self.import_lines

    def _local(self, frame, event, arg):
        if event == "line" and self._cur is not None:
            self._cur.add(frame.f_lineno)
        return self._local

    def _global(self, frame, event, arg):
        if frame.f_code.co_filename == self.filename:
            if self._cur is not None:
                self._cur.add(frame.f_lineno)
            return self._local
        return None

    def pytest_runtest_protocol(self, item, nextitem):
        import threading
        self._cur = self.lines.setdefault(item.nodeid, set())
        t0 = time.perf_counter()
        sys.settrace(self._global)
        threading.settrace(self._global)
        try:
            from _pytest.runner import runtestprotocol
            runtestprotocol(item, nextitem=nextitem, log=True)
        finally:
            sys.settrace(None)
            threading.settrace(None)
            self.durations[item.nodeid] = time.perf_counter() - t0
            self._cur = None
        return True

    def pytest_collection_finish(self, session):
        sys.settrace(None)



def _child(sandbox: Sandbox, args: list[str], result_file: Path | None, cover: str | None) -> None:
    """In the forked child: run pytest inside the sandbox, exit with its code."""
    os.setpgrp()
    os.chdir(sandbox.dir)
    sys.path[:] = [str(sandbox.dir)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT]
    os.environ["PYTHONPATH"] = str(sandbox.dir)
    fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    import pytest
    plugins = []
    if cover:
        plugins.append(_Coverage(str(sandbox.dir / module_path(cover))))
        sys.settrace(plugins[0]._global)
    rc = pytest.main(["-q", "-x", "-p", "no:cacheprovider", "-o", "addopts=", "--timeout=300", *args], plugins=plugins)
    if cover and result_file:
        c = plugins[0]
        result_file.write_text(json.dumps({"rc": int(rc), "lines": {k: sorted(v) for k, v in c.lines.items()},
                                           "import_lines": sorted(c.import_lines),
                                           "durations": c.durations}))
    os._exit(int(rc))


def run_forked(sandbox: Sandbox, args: list[str], timeout: float, cover: str | None = None,
               result_file: Path | None = None) -> str:
    """'passed', 'failed' (a test failed, or the mutant broke collection), 'missing' (pytest found no such
    test: exit 4 or 5) or 'timeout'."""
    pid = os.fork()
    if pid == 0:
        try:
            _child(sandbox, args, result_file, cover)
        finally:
            os._exit(99)
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
        time.sleep(0.02)
    try:
        os.killpg(pid, signal.SIGKILL)   # whatever the tests left running
    except (ProcessLookupError, PermissionError):
        pass
    code = os.waitstatus_to_exitcode(status)
    return {0: "passed", 4: "missing", 5: "missing"}.get(code, "failed")


# ---------------------------------------------------------------- one module

def sample_mutants(module: str, mutants: list[Mutant], n: int, seed: int) -> list[Mutant]:
    """n of the module's mutants drawn with a fixed seed (the same n and seed give the same mutants while the
    module's source is unchanged), in their order in the file."""
    if n >= len(mutants):
        return mutants
    picked = random.Random(f"{seed}:{module}").sample(range(len(mutants)), n)
    return [mutants[i] for i in sorted(picked)]


def run_module(module: str, conf: dict, sandbox: Sandbox, limit: int | None = None, quiet: bool = False,
               max_seconds: float | None = None, sample: int | None = None, seed: int = 7,
               only_keys: set[str] | None = None) -> dict:
    """Every mutant of the module (or the first `limit`, or a seeded sample of `sample`, or those whose key is in
    `only_keys`) through the fork server (benchmarks/mutation_server.py); survivors of mutants run at import
    (module constants, class bodies) are tried again in a fresh pytest."""
    source = (ROOT / module_path(module)).read_text()
    mutants, tree = enumerate_mutants(module, source)
    _walk_order_check(tree, len(mutants))
    chosen = mutants if limit is None else mutants[:limit]
    if sample:
        chosen = sample_mutants(module, chosen, sample, seed)
    if only_keys is not None:
        chosen = [m for m in chosen if m.key in only_keys]
    if max_seconds:     # a run cut short by time is a random sample of the module's mutants, not its first lines
        chosen = random.Random(f"mutants:{module}").sample(chosen, len(chosen))
    sandbox.write(module, normalised(source))
    job_file = sandbox.dir / f".job-{module}.json"
    out_file = sandbox.dir / f".out-{module}.json"
    job = {"module": f"cuda_llm.{module}", "file": str(sandbox.dir / module_path(module)), "tests": conf["tests"],
           "out": str(out_file), "verbose": not quiet, "max_seconds": max_seconds, "untraced": conf["untraced"],
           "mutants": [{"index": m.index, "line": m.line, "source": mutated_source(tree, m.index),
                        "reach": None if (m.in_function and conf["coverage"]) else "all",
                        "fallback_all": conf["fallback_all"]} for m in chosen]}
    job_file.write_text(json.dumps(job))
    env = dict(os.environ, PYTHONPATH=str(sandbox.dir), PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1")
    t0 = time.monotonic()
    import subprocess
    subprocess.run([sys.executable, str(sandbox.dir / "benchmarks" / "mutation_server.py"), str(job_file)],
                   cwd=sandbox.dir, env=env, stdout=subprocess.DEVNULL, check=False)
    if not out_file.exists():
        raise SystemExit(f"{module}: the mutation server wrote no results (its tests could not be collected?)")
    out = json.loads(out_file.read_text())
    if not out.get("complete") and not out["baseline_failed"]:
        print(f"{module}: the mutation server stopped after {len(out['results'])} of {len(chosen)} mutants; "
              "those are reported", flush=True)
    if out["baseline_failed"]:
        raise SystemExit(f"{module}: its tests fail on the unmutated module ({out.get('first_failure') or '?'} "
                         "failed first); fix that first")
    equivalent = load_equivalent().get(module, {})
    results = []
    chosen = chosen[:len(out["results"])]     # a time limit may have left the rest unrun
    for m, r in zip(chosen, out["results"], strict=True):
        outcome, secs = r["outcome"], r["seconds"]
        if outcome == "survived" and not m.in_function:
            sandbox.write(module, mutated_source(tree, m.index))
            s = time.monotonic()
            outcome = {"failed": "killed", "passed": "survived", "timeout": "timeout", "missing": "survived"}[
                run_forked(sandbox, conf["tests"], timeout=10 + 3 * out["baseline_seconds"])]
            secs = round(time.monotonic() - s, 2)
            sandbox.write(module, normalised(source))
        if outcome == "error":
            outcome = "killed"
        if outcome in ("survived", "uncovered") and m.key in equivalent:
            outcome = "equivalent"
        results.append({"index": m.index, "line": m.line, "key": m.key, "outcome": outcome, "tests": r["tests"],
                        "seconds": secs, "killer": r.get("killer", "") if outcome == "killed" else ""})
        if not quiet and outcome not in ("killed", "timeout"):
            print(f"  {module} {outcome:9s} {m.key}", flush=True)
    sandbox.write(module, source)
    return {"module": module, "mutants": len(mutants), "run": len(chosen), "sample": sample, "seed": seed,
            "baseline_seconds": round(out["baseline_seconds"], 1),
            "seconds": round(time.monotonic() - t0, 1), "tests": conf["tests"], "results": results}


def rerun_survivors(module: str, conf: dict, sandbox: Sandbox, quiet: bool) -> dict | None:
    """The recorded result of the module with its survivors (and uncovered mutants) run again against the
    tests as they are now: the rest of the record (killed, timed out) is kept as it was measured."""
    f = RESULTS / f"{module}.json"
    if not f.exists():
        print(f"{module}: no recorded results to run the survivors of", flush=True)
        return None
    rec = json.loads(f.read_text())
    equivalent = load_equivalent().get(module, {})
    for r in rec["results"]:            # named equivalent since: no need to run them again
        if r["outcome"] in ("survived", "uncovered") and r["key"] in equivalent:
            r["outcome"] = "equivalent"
    keys = {r["key"] for r in rec["results"] if r["outcome"] in ("survived", "uncovered")}
    if not keys:
        return rec
    again = run_module(module, conf, sandbox, quiet=quiet, only_keys=keys)
    new = {r["key"]: r for r in again["results"]}
    rec["results"] = [new.get(r["key"], r) for r in rec["results"]]
    rec["seconds"] = round(rec["seconds"] + again["seconds"], 1)
    rec["survivors_rerun"] = round(again["seconds"], 1)
    return rec


def summarise(rec: dict) -> dict:
    counts = {k: 0 for k in ("killed", "timeout", "survived", "uncovered", "equivalent")}
    for r in rec["results"]:
        counts[r["outcome"]] += 1
    live = counts["killed"] + counts["timeout"] + counts["survived"] + counts["uncovered"]
    counts["rate"] = (counts["killed"] + counts["timeout"]) / live if live else 1.0
    return counts


# ---------------------------------------------------------------- named mutants

def load_named() -> list[dict]:
    return tomllib.loads(NAMED.read_text())["mutant"]


def apply_named(source: str, m: dict) -> str:
    n = source.count(m["find"])
    if n != 1:
        raise SystemExit(f"named mutant {m['name']}: its text occurs {n} times in {m['module']} (must be once); "
                         "update benchmarks/mutation_named.toml to the module as it is now")
    return source.replace(m["find"], m["replace"])


def run_named(sandbox: Sandbox, names: list[str] | None = None) -> list[dict]:
    out = []
    for m in load_named():
        if names and m["name"] not in names:
            continue
        source = (ROOT / module_path(m["module"])).read_text()
        sandbox.write(m["module"], apply_named(source, m))
        s = time.monotonic()
        outcome = {"failed": "killed", "passed": "survived", "timeout": "timeout", "missing": "no tests"}[
            run_forked(sandbox, m["tests"], timeout=float(m.get("timeout", 300)))]
        sandbox.write(m["module"], source)
        out.append({"name": m["name"], "module": m["module"], "outcome": outcome,
                    "seconds": round(time.monotonic() - s, 1), "why": m["why"]})
        print(f"  named {m['name']:40s} {outcome:9s} {out[-1]['seconds']:6.1f} s", flush=True)
    return out


# ---------------------------------------------------------------- sample (CI)

def draw_sample(n: int, seed: int) -> list[tuple[str, dict]]:
    """n mutants recorded as killed (with the test that killed them), drawn with a fixed seed across the
    recorded modules: each must stay killed."""
    pool = []
    for f in sorted(RESULTS.glob("*.json")):
        if f.name == "named.json":
            continue
        rec = json.loads(f.read_text())
        for r in rec["results"]:
            if r["outcome"] == "killed" and r.get("killer") and r["seconds"] <= 5:
                pool.append((rec["module"], r))
    rng = random.Random(seed)
    return rng.sample(pool, min(n, len(pool)))


def run_sample(sandbox: Sandbox, n: int, seed: int, config: dict) -> list[dict]:
    """Each drawn mutant (found by its key, so edits elsewhere in the module don't break it) against the test
    that killed it, or the module's tests where that test is gone; a mutant whose key no longer exists is
    reported as gone, not failed."""
    out = []
    trees: dict[str, tuple[list[Mutant], ast.Module, str]] = {}
    for module, r in draw_sample(n, seed):
        if module not in config:
            continue
        if module not in trees:
            source = (ROOT / module_path(module)).read_text()
            ms, tree = enumerate_mutants(module, source)
            trees[module] = (ms, tree, source)
        ms, tree, source = trees[module]
        match = [m for m in ms if m.key == r["key"]]
        if not match:
            out.append({"module": module, "key": r["key"], "outcome": "gone"})
            print(f"  sample {module:32s} gone      {r['key']}", flush=True)
            continue
        sandbox.write(module, mutated_source(tree, match[0].index))
        s = time.monotonic()
        got = run_forked(sandbox, [r["killer"]], timeout=120)
        if got == "missing":
            got = run_forked(sandbox, config[module]["tests"], timeout=900)
        outcome = {"failed": "killed", "passed": "survived", "timeout": "timeout", "missing": "survived"}[got]
        sandbox.write(module, source)
        out.append({"module": module, "key": r["key"], "outcome": outcome, "seconds": round(time.monotonic() - s, 1)})
        print(f"  sample {module:32s} {outcome:9s} {r['key']}", flush=True)
    return out


# ---------------------------------------------------------------- report

def write_report(config: dict) -> None:
    rows, survivors, notrun, stale = [], [], [], []
    equivalent = load_equivalent()
    for module in config:
        f = RESULTS / f"{module}.json"
        if not f.exists():
            notrun.append(module)
            continue
        rec = json.loads(f.read_text())
        # equivalents judged after the run count as such in the report too
        for r in rec["results"]:
            if r["outcome"] in ("survived", "uncovered") and r["key"] in equivalent.get(module, {}):
                r["outcome"] = "equivalent"
        c = summarise(rec)
        run = f"{rec['run']}/{rec['mutants']}" + (f" (sample, seed {rec.get('seed')})" if rec.get("sample") else "")
        now = len(enumerate_mutants(module, (ROOT / module_path(module)).read_text())[0])
        if now != rec["mutants"]:      # the module changed since: the figure is of its older version
            run += f" (stale: {now} mutants now)"
            stale.append(module)
        rows.append(f"| {module} | {run} | {c['killed']} | {c['timeout']} | {c['survived']} | "
                    f"{c['uncovered']} | {c['equivalent']} | {100 * c['rate']:.0f}% | {rec['seconds']:.0f} s |")
        for r in rec["results"]:
            if r["outcome"] in ("survived", "uncovered"):
                survivors.append(f"| {module} | {r['outcome']} | `{r['key'].replace('|', '/')}` |")
    eq_rows = [f"| {m} | `{k.replace('|', '/')}` | {why} |" for m, d in equivalent.items() for k, why in d.items()]
    named = json.loads((RESULTS / "named.json").read_text()) if (RESULTS / "named.json").exists() else []
    named_rows = [f"| {n['name']} | {n['module']} | {n['outcome']} | {n['why']} |" for n in named]
    text = DOC.read_text() if DOC.exists() else ""
    head = text.split("<!-- results -->")[0] if "<!-- results -->" in text else "# Mutation testing\n\n"
    body = ["<!-- results -->", "",
            "## Per module (written by `python benchmarks/mutation_bench.py`)", "",
            "Kill rate = (killed + timed out) / (all run - equivalent). `uncovered`: no test of the module reaches "
            "the line (a survivor).", "",
            "| module | mutants run | killed | timed out | survived | uncovered | equivalent | kill rate | time |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |", *rows, ""]
    if notrun:
        body += ["Not run yet (no results recorded): " + ", ".join(notrun) + ".", ""]
    if stale:
        body += ["Stale (the module changed since its row was measured; run it again): " + ", ".join(stale) + ".", ""]
    body += ["## The named mutants (bugs once missed)", "",
             "| name | module | outcome | the bug |", "| --- | --- | --- | --- |", *named_rows, "",
             "## Equivalent mutants (left out of the rate)", "",
             "| module | mutant | why no test can tell it apart |", "| --- | --- | --- |", *eq_rows, "",
             "## Survivors still open", "",
             "| module | outcome | mutant |", "| --- | --- | --- |", *survivors, ""]
    DOC.write_text(head.rstrip() + "\n\n" + "\n".join(body))


# ---------------------------------------------------------------- command line

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--module", action="append", help="a module of [tool.cuda_llm.mutation.modules] (repeatable)")
    ap.add_argument("--limit", type=int, help="only the first N mutants of each module (a quick look)")
    ap.add_argument("--named", action="store_true", help="run the named mutants only")
    ap.add_argument("--name", action="append", help="with --named: only these")
    ap.add_argument("--sample", type=int, help="run N recorded-killed mutants drawn with --seed; exit 1 if any survives")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--report", action="store_true", help="only write docs/mutation.md from the recorded results")
    ap.add_argument("--list", action="store_true", help="list the mutants of the modules and exit")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--mutants", type=int, help="per module: run a sample of N mutants drawn with --seed "
                    "(the same N and seed draw the same mutants; the table says it is a sample)")
    ap.add_argument("--survivors", action="store_true", help="run again only the mutants recorded as survived or "
                    "uncovered (after new tests), and update their outcomes in the recorded results")
    ap.add_argument("--max-seconds", type=float, help="per module: stop making mutants after this long (the rest "
                    "are reported as not run)")
    a = ap.parse_args(argv)
    config = load_config()
    modules = a.module or list(config)
    for m in modules:
        if m not in config:
            raise SystemExit(f"unknown module {m!r}; configured: {', '.join(config)}")
    if a.report:
        write_report(config)
        return 0
    if a.list:
        for m in modules:
            ms, _ = enumerate_mutants(m, (ROOT / module_path(m)).read_text())
            print(f"{m}: {len(ms)} mutants")
            for x in ms[: a.limit or len(ms)]:
                print(f"  {x.index:4d} line {x.line:4d}  {x.key}")
        return 0
    preload()
    sandbox = Sandbox()
    try:
        if a.named or a.sample:
            bad = []
            if a.named:
                res = run_named(sandbox, a.name)
                if not a.name and not a.sample:
                    RESULTS.mkdir(exist_ok=True)
                    (RESULTS / "named.json").write_text(json.dumps(res, indent=1) + "\n")
                    write_report(config)
                bad += [r for r in res if r["outcome"] not in ("killed", "timeout")]
                print(f"named: {len(res)} mutants, {len(res) - len(bad)} killed")
            if a.sample:
                res = run_sample(sandbox, a.sample, a.seed, config)
                lost = [r for r in res if r["outcome"] == "survived"]
                bad += lost
                print(f"sample: {len(res)} mutants, {len(lost)} survived, "
                      f"{sum(r['outcome'] == 'gone' for r in res)} no longer in the source")
            for r in bad:
                print(f"NOT KILLED: {r.get('name') or r['module']}: {r.get('key') or r.get('why')}")
            return 1 if bad else 0
        RESULTS.mkdir(exist_ok=True)
        for m in modules:
            if a.survivors:
                rec = rerun_survivors(m, config[m], sandbox, a.quiet)
                if rec is None:
                    continue
            else:
                rec = run_module(m, config[m], sandbox, a.limit, a.quiet, a.max_seconds, a.mutants, a.seed)
            if a.limit is None:
                (RESULTS / f"{m}.json").write_text(json.dumps(rec, indent=1) + "\n")
            c = summarise(rec)
            print(f"{m}: {rec['run']} mutants in {rec['seconds']:.0f} s: killed {c['killed']}, timed out {c['timeout']}, "
                  f"survived {c['survived']}, uncovered {c['uncovered']}, equivalent {c['equivalent']}; "
                  f"kill rate {100 * c['rate']:.0f}%", flush=True)
        if a.limit is None:
            write_report(config)
    finally:
        sandbox.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
