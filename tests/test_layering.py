"""The house as drawn: each package's __init__ docstring states what it may import ("May import: ..."), and
this test holds the code to it, counting function-local imports. Also: no import circle in the package,
nothing left at tools/'s root, only the judge's wing starts the process that runs candidate code, and a
function-local import of the package stays only with its reason written beside it (`# local: why`)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PKG_DIR = Path(__file__).resolve().parents[1] / "cuda_llm"
ROOT = "cuda_llm"
# the foundation, below every package: what each of these modules may import of the package
FOUNDATION = {"cuda_llm.results": set(), "cuda_llm.paths": set(), "cuda_llm.halts": set(), "cuda_llm.figures": set(),
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


# folders whose function-local imports of the package need no written reason, each with why
LOCAL_IMPORTS_UNCHECKED = {
    "commands": "`cuda-llm --help` imports every command module, so each keeps its heavy imports inside run()",
}
LOCAL_REASON = re.compile(r"#\s*local\b[^:]*:\s*\S+\s+\S+")   # `# local: <why, in a few words>`


def _local_imports(tree: ast.AST) -> list[ast.stmt]:
    """Imports of the package inside a function (absolute or relative), each once."""
    found: dict[int, ast.stmt] = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] == ROOT):
                found[id(node)] = node
            elif isinstance(node, ast.Import) and any(a.name.split(".")[0] == ROOT for a in node.names):
                found[id(node)] = node
    return sorted(found.values(), key=lambda n: n.lineno)


def _unexplained_local_imports(text: str) -> list[int]:
    """Lines of function-local package imports with no `# local: why` on the line, on the line above, or above
    the run of local imports the line belongs to."""
    lines = text.splitlines()
    nodes = _local_imports(ast.parse(text))
    covered = {i for n in nodes for i in range(n.lineno, (n.end_lineno or n.lineno) + 1)}
    bad = []
    for n in nodes:
        if any(LOCAL_REASON.search(lines[i - 1]) for i in range(n.lineno, (n.end_lineno or n.lineno) + 1)):
            continue
        above = n.lineno - 1
        while above in covered or (above >= 1 and LOCAL_REASON.search(lines[above - 1]) is None
                                    and lines[above - 1].strip().startswith("#")):
            above -= 1   # through the run of local imports (and any other comments over them)
        if not (above >= 1 and LOCAL_REASON.search(lines[above - 1])):
            bad.append(n.lineno)
    return bad


def test_local_imports_say_why():
    """A function-local import of the package hides an arrow of the house and costs a lookup at each call: it
    stays only with its reason written beside it (start-up of `cuda-llm --help`, the worker child, an
    optional extra)."""
    missing = []
    for path in sorted(PKG_DIR.rglob("*.py")):
        rel = path.relative_to(PKG_DIR)
        if rel.parts[0] in LOCAL_IMPORTS_UNCHECKED:
            continue
        missing += [f"cuda_llm/{rel}:{line}" for line in _unexplained_local_imports(path.read_text())]
    assert not missing, ("function-local imports of the package with no `# local: why` comment (move them to "
                         "the module's top, or write the reason):\n" + "\n".join(missing))


def test_the_local_import_check_can_fail():
    text = ("def f():\n    from cuda_llm.paths import cache_dir\n    return cache_dir\n\n\n"
            "def g():\n    # local: the worker child must not load the compiler\n"
            "    from cuda_llm.tools.compiler import compile\n    from . import x\n    return compile, x\n\n\n"
            "def h():\n    from cuda_llm import results   # local: start-up of `cuda-llm --help`\n\n\n"
            "def k():\n    # a comment that gives no reason\n    import cuda_llm.results\n")
    assert _unexplained_local_imports(text) == [2, 19]
