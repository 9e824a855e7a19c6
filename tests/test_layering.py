"""The house as drawn: each package's __init__ docstring states what it may import ("May import: ..."), and
this test holds the code to it, counting function-local imports. Also: no import circle in the package,
nothing left at tools/'s root, and only the judge's wing starts the process that runs candidate code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PKG_DIR = Path(__file__).resolve().parents[1] / "cuda_llm"
ROOT = "cuda_llm"
# the foundation, below every package: what each of these modules may import of the package
FOUNDATION = {"cuda_llm.results": set(), "cuda_llm.paths": set(), "cuda_llm.halts": set(),
              "cuda_llm.cache_store": {"cuda_llm.paths"}, "cuda_llm": set()}
# imports that break a rule, each with the reason it stays
EXCEPTIONS = {
}
# import circles that stay, each with its reason
CIRCLE_EXCEPTIONS: dict[frozenset[str], str] = {}   # none: a circle needs its reason written here


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG_DIR.rglob("*.py"):
        parts = p.relative_to(PKG_DIR.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


MODULES = _modules()


def _owner(name: str) -> str:
    """The module itself when it names one, else the package a dotted name lives in."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _imports(name: str, path: Path) -> set[str]:
    """Every module of the package that ``name`` imports, anywhere in the file (function-local included)."""
    out = set()
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                pkg = pkg[:len(pkg) - node.level + 1]
                base = ".".join(pkg + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        out |= {_owner(t) for t in targets if t == ROOT or t.startswith(ROOT + ".")}
    out.discard(name)
    return out


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _rule(pkg: str) -> tuple[set[str], bool] | None:
    """(what the package's docstring allows, whether it allows anything) or None when it states no rule."""
    doc = ast.get_docstring(ast.parse(MODULES[pkg].read_text())) or ""
    m = re.search(r"May import:(.*?)(?:\n\s*\n|\Z)", doc, re.S)
    if not m:
        return None
    text = m.group(1)
    return set(re.findall(r"cuda_llm(?:\.\w+)*", text)), "anything of the package" in text


def _governing(name: str) -> str | None:
    """The deepest package with a stated rule that holds ``name`` (the foundation has its own table)."""
    parts = name.split(".")
    for i in range(len(parts), 1, -1):
        pkg = ".".join(parts[:i])
        if pkg in MODULES and MODULES[pkg].name == "__init__.py" and _rule(pkg) is not None:
            return pkg
    return None


def _allowed(target: str, own: str, allowed: set[str]) -> bool:
    return any(target == a or target.startswith(a + ".") for a in allowed | {own})


def test_every_package_states_its_rule():
    pkgs = [n for n, p in MODULES.items() if p.name == "__init__.py" and n.count(".") >= 1
            and not n.startswith("cuda_llm.tasks.suite")]
    missing = [p for p in pkgs if _rule(p) is None and _governing(p) is None]
    assert not missing, f"packages whose __init__ docstring says nothing of what they may import: {missing}"


def test_imports_follow_the_stated_rules():
    broken = []
    for name, targets in sorted(GRAPH.items()):
        if name in FOUNDATION:
            bad = {t for t in targets if t not in FOUNDATION[name]}
        else:
            pkg = _governing(name)
            if pkg is None:
                if name == "cuda_llm.cli":
                    continue  # the entry point: loads the commands by name
                broken.append(f"{name}: no package rule governs it")
                continue
            allowed, anything = _rule(pkg)
            if anything:
                continue
            bad = {t for t in targets if not _allowed(t, pkg, allowed)}
        for t in sorted(bad):
            if (name, t) not in EXCEPTIONS:
                broken.append(f"{name} -> {t}")
    assert not broken, "imports that break the rule their package states:\n" + "\n".join(broken)


def test_exceptions_are_still_needed():
    stale = [f"{a} -> {b}" for a, b in EXCEPTIONS if b not in GRAPH.get(a, set())]
    assert not stale, f"exceptions no import needs any more (remove them): {stale}"


def _circles() -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    for start in GRAPH:
        if start in index:
            continue
        work = [(start, iter(sorted(GRAPH[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in GRAPH:
                    continue
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(GRAPH[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.add(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(comp)
    return out


def test_no_import_circle():
    circles = [sorted(c) for c in _circles() if frozenset(c) not in CIRCLE_EXCEPTIONS]
    assert not circles, f"import circles (function-local imports counted): {circles}"


def test_circle_exceptions_are_still_needed():
    found = {frozenset(c) for c in _circles()}
    assert not [sorted(c) for c in CIRCLE_EXCEPTIONS if c not in found]


def test_tools_root_holds_only_wings():
    loose = sorted(p.name for p in (PKG_DIR / "tools").glob("*.py") if p.name != "__init__.py")
    assert not loose, f"modules at tools/'s root: place each in the wing of its concern: {loose}"


@pytest.mark.parametrize("worker", ["gpu_worker", "torch_timer"])
def test_only_the_harness_starts_the_child_that_runs_foreign_code(worker):
    """The worker's module path, as `python -m` takes it, appears only in harness/ and in ncu.py (which runs
    the same worker under Nsight Compute, through harness/runner.py)."""
    spawners = sorted(str(p.relative_to(PKG_DIR)) for p in PKG_DIR.rglob("*.py")
                      if f'"cuda_llm.tools.harness.{worker}"' in p.read_text())
    outside = [s for s in spawners if not s.startswith("tools/harness/") and s != "tools/profile/ncu.py"]
    assert spawners and not outside, f"{worker} started from outside the harness: {outside}"
