"""Writes nothing, and rewrites the worker's Python state so that every check in that process would
pass: the validator, the checker, the guard bytes. None of it runs in the process that judges."""
import sys



def _always_passes(name, got, expected, tol, **kw):
    return {"passed": True, "reason": None, "kind": None, "output": name, "max_abs_err": 0.0, "max_rel_err": 0.0,
            "first_bad_index": None, "expected": None, "got": None}


for mod in list(sys.modules.values()):
    if getattr(mod, "__name__", "").startswith("cuda_llm"):
        if hasattr(mod, "compare_output"):
            mod.compare_output = _always_passes
        if hasattr(mod, "check_call"):
            mod.check_call = lambda *a, **k: None

_loop = sys.modules["cuda_llm.tools.harness.worker_loop"]
_loop.validate.poison_word32 = lambda dtype: 0          # "poison" with zeros: nothing to see


def solve(dev, x, y, n):
    return None
