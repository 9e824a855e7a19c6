"""The KernelBench sample of docs/kernelbench-results.md: which published files the batch optimizes.

The rule (written down before any kernel of the sample was written; docs/kernelbench-results.md):

- per level (1 and 2), targets are the file numbers OFFSET, OFFSET + K, OFFSET + 2K, ... up to 100
  (OFFSET 6, K 12: 6, 18, 30, ..., 90; eight per level);
- for each target, in order, the problem taken is the first number >= the target (wrapping past 100 to 1)
  that is not kept for the independent check (HELD_BACK), not already taken, whose estimated eager time at
  KernelBench's size is at most MAX_MS and whose tensors at that size take at most MAX_GIB, and that the
  importer does not refuse (a refused file is counted as refused and the rule moves on to the next number);
- the estimate is a roofline of the file's own sizes, found on the meta device (nothing allocated):
  counted flops (torch.utils.flop_counter: matmul, convolution, attention) at 50 TFLOP/s plus the bytes of
  inputs, weights and outputs at 3 TB/s. It only keeps each candidate's evaluation short; it is not a
  measurement and says nothing about how hard the problem is.

The selection is pure (``choose``) so that the rule is tested apart from PyTorch; ``estimate_file`` needs it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Iterable

from pydantic import BaseModel

HELD_BACK = {1: {5, 8, 12, 24, 40, 42, 47, 52, 82, 88, 93, 95}, 2: {66, 67, 76, 97}}
OFFSET, K = 6, 12
MAX_MS, MAX_GIB = 5.0, 4.0
FLOPS_S, BYTES_S = 50e12, 3e12


class Estimate(BaseModel):
    """A file's cost at KernelBench's own size (meta device): tensor bytes and counted flops."""

    tensor_bytes: int
    flops: float

    @property
    def ms(self) -> float:
        return (self.flops / FLOPS_S + self.tensor_bytes / BYTES_S) * 1e3

    @property
    def gib(self) -> float:
        return self.tensor_bytes / 2**30


class Pick(BaseModel):
    level: int
    target: int
    number: int | None            # None: no file left that the rule accepts
    file: str | None = None
    passed_over: list[str] = []   # "<number>: <why>" for every number tried before the one taken


def number_of(name: str) -> int:
    m = re.match(r"(\d+)_", Path(name).name)
    if not m:
        raise ValueError(f"{name}: not a KernelBench file name (<number>_<name>.py)")
    return int(m.group(1))


def why_not(level: int, number: int, est: Estimate | str | None) -> str | None:
    """The reason the rule passes over a file before any import, or None when it may be taken."""
    if number in HELD_BACK.get(level, set()):
        return "kept for the independent check"
    if est is None:
        return "no such file"
    if isinstance(est, str):
        return f"no estimate ({est})"
    if est.gib > MAX_GIB:
        return f"tensors {est.gib:.2f} GiB > {MAX_GIB:g} GiB"
    if est.ms > MAX_MS:
        return f"estimated {est.ms:.1f} ms > {MAX_MS:g} ms"
    return None


def choose(level: int, files: dict[int, str], estimates: dict[int, Estimate | str],
           refused: Callable[[str], str | None], *, offset: int = OFFSET, k: int = K) -> list[Pick]:
    """The rule above for one level. ``files``: number -> file name; ``refused(file)``: the importer's reason
    for refusing it, or None (called only on files the estimate lets through, in the rule's order)."""
    numbers = sorted(files)
    if not numbers:
        return []
    last = numbers[-1]
    taken: set[int] = set()
    picks: list[Pick] = []
    for target in range(offset, last + 1, k):
        pick = Pick(level=level, target=target, number=None)
        order = [n for n in range(target, last + 1)] + [n for n in range(1, target)]
        for n in order:
            if n in taken:
                continue
            reason = why_not(level, n, estimates.get(n) if n in files else None)
            if reason is None:
                reason = refused(files[n])
                if reason is not None:
                    reason = f"refused at import: {reason}"
                    taken.add(n)      # counted once as refused, never tried again
            if reason is not None:
                if n in files:
                    pick.passed_over.append(f"{n}: {reason}")
                continue
            taken.add(n)
            pick.number, pick.file = n, files[n]
            break
        picks.append(pick)
    return picks


def level_files(folder: Path) -> dict[int, str]:
    return {number_of(p.name): p.name for p in Path(folder).glob("*.py") if re.match(r"\d+_", p.name)}


def estimate_file(path: Path) -> Estimate:
    """Counted flops and tensor bytes of one file at its own sizes, on the meta device (needs PyTorch)."""
    import importlib.util

    import torch
    from torch.utils.flop_counter import FlopCounterMode

    spec = importlib.util.spec_from_file_location(f"kb_estimate_{abs(hash(str(path))):x}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: cannot be imported")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.device("meta"):
        inputs = list(mod.get_inputs())
        model = mod.Model(*list(getattr(mod, "get_init_inputs", lambda: [])()))
        with FlopCounterMode(display=False) as counter:
            out = model(*inputs)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    tensors: Iterable = [x for x in inputs + list(model.state_dict().values()) + outs if isinstance(x, torch.Tensor)]
    return Estimate(tensor_bytes=int(sum(t.numel() * t.element_size() for t in tensors)),
                    flops=float(counter.get_total_flops()))


def estimates_of(folder: Path) -> dict[int, Estimate | str]:
    out: dict[int, Estimate | str] = {}
    for n, name in level_files(folder).items():
        try:
            out[n] = estimate_file(Path(folder) / name)
        except Exception as exc:  # noqa: BLE001 - a file that fails here is passed over with its reason
            out[n] = f"{type(exc).__name__}: {exc}"[:160]
    return out
