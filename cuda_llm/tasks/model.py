"""The task model: what a kernel must compute, on which inputs, how it is checked and how fast it could be.

A task is data (``task.toml``) plus a NumPy reference (``reference.py``) and a naive CUDA baseline
(``naive.cu``) in one folder. This module only describes and validates; loading lives in ``loader.py``
and input generation in ``inputs.py``.
"""

from __future__ import annotations

import re
from enum import Enum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cuda_llm.results import EAGER_BASELINE, NAIVE_BASELINE
from cuda_llm.tasks.formulas import FormulaError, evaluate, names_in
from cuda_llm.tasks.torch_meta import TorchSource

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TASK_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class DType(str, Enum):
    float32 = "float32"
    float16 = "float16"
    int32 = "int32"
    uint32 = "uint32"
    int64 = "int64"          # indices (torch.long): embedding lookups, gather, argmax
    uint8 = "uint8"          # bytes: a PyTorch bool tensor as 0/1 (masks)

    @property
    def c_type(self) -> str:
        # long long, not int64_t: 64 bits on every CUDA host compiler with no header needed (the signature
        # check reads int64_t as the same type)
        return {"float32": "float", "float16": "__half", "int32": "int", "uint32": "unsigned int",
                "int64": "long long", "uint8": "unsigned char"}[self.value]

    @property
    def numpy(self) -> str:
        return self.value

    @property
    def is_float(self) -> bool:
        return self in (DType.float32, DType.float16)

    @property
    def itemsize(self) -> int:
        return {"float32": 4, "float16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint8": 1}[self.value]


# The dtypes a scalar parameter may have: those the worker can pass by value through ctypes (it has no half).
SCALAR_DTYPES = (DType.int32, DType.uint32, DType.int64, DType.float32)

Expr = str | int | float


class Generator(BaseModel):
    """How random values for one input pointer are drawn. ``custom`` means reference.py's make_inputs."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["normal", "uniform", "randint", "custom"] = "normal"
    mean: float = 0.0
    std: float = 1.0
    low: Expr = 0
    high: Expr = 1  # exclusive for randint


class Magnitude(BaseModel):
    """The magnitudes a correct kernel must handle for one float input (the dtype's contract, not the test
    draw's): held-out cases scale the usual draw so that its largest |value| reaches ``high`` and ``low``.
    In task.toml ``magnitude = 1e4`` means 1e-4 to 1e4, ``magnitude = [1e-3, 1e2]`` gives both ends, and
    ``magnitude = false`` exempts an input whose values mean something at their scale (bin edges, angles)."""

    model_config = ConfigDict(extra="forbid")
    low: float = Field(gt=0)
    high: float = Field(gt=0)

    @model_validator(mode="before")
    @classmethod
    def _short_forms(cls, v: object) -> object:
        if isinstance(v, bool):
            raise ValueError("magnitude: true is not a range; give a number (1e4), [low, high], or false")
        if isinstance(v, (int, float)):
            if v <= 1:
                raise ValueError(f"magnitude = {v}: one number is the largest magnitude, above 1 (its inverse is the smallest)")
            return {"low": 1.0 / float(v), "high": float(v)}
        if isinstance(v, (list, tuple)):
            if len(v) != 2:
                raise ValueError(f"magnitude = {list(v)}: give [low, high]")
            return {"low": float(v[0]), "high": float(v[1])}
        return v

    @model_validator(mode="after")
    def _ordered(self) -> "Magnitude":
        if not self.low < self.high:
            raise ValueError(f"magnitude: low {self.low:g} must be below high {self.high:g}")
        return self


# The range every float input must handle unless its task says otherwise: a float32 GEMM, reduction or
# normalization is expected to be right for data from 1e-4 to 1e4 (an fp16 split without scaling, a softmax
# without the max subtracted, a sum in fp16 are not); float16 holds only up to 65504, so its default is narrower.
DEFAULT_MAGNITUDES: dict[str, Magnitude] = {
    "float32": Magnitude(low=1e-4, high=1e4),
    "float16": Magnitude(low=1e-2, high=1e2),
}


class Param(BaseModel):
    """One parameter of the entry point, in order."""

    model_config = ConfigDict(extra="forbid")
    name: str
    kind: Literal["pointer", "scalar"]
    dtype: DType
    role: Literal["input", "output"] = "input"
    shape: list[Expr] | None = None  # pointers: dimensions as expressions of the size names
    value: Expr | None = None  # scalars: defaults to the size of the same name
    generator: Generator = Field(default_factory=Generator)
    # How the benchmark's input sets differ inside the timing loop (docs/harness.md): "replace" swaps a
    # few scattered chunks for values of another drawn set at the same positions; "shuffle_rows" copies
    # whole rows (first axis) from elsewhere in the same array, for rows that must stay valid against
    # other inputs (points near fixed centroids); "fixed" never changes (CSR row pointers, indices).
    vary: Literal["replace", "shuffle_rows", "fixed"] = "replace"
    # float inputs: the magnitudes a correct kernel must handle (None: the dtype's default; False: exempt)
    magnitude: Magnitude | Literal[False] | None = None

    @field_validator("magnitude", mode="before")
    @classmethod
    def _magnitude(cls, v: object) -> object:
        return v if v is False or v is None or isinstance(v, Magnitude) else Magnitude.model_validate(v)

    @field_validator("name")
    @classmethod
    def _ident(cls, v: str) -> str:
        if not _IDENT.match(v):
            raise ValueError(f"{v!r} is not a C identifier")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "Param":
        if self.kind == "pointer" and not self.shape:
            raise ValueError(f"pointer parameter {self.name!r} needs a shape")
        if self.magnitude and (self.role != "input" or not self.dtype.is_float):
            raise ValueError(f"parameter {self.name!r}: magnitude is for float inputs (integer inputs state their "
                             f"bounds in the generator)")
        if self.kind == "scalar":
            if self.role != "input":
                raise ValueError(f"scalar parameter {self.name!r} must be an input")
            if self.shape:
                raise ValueError(f"scalar parameter {self.name!r} cannot have a shape")
            if self.magnitude:
                raise ValueError(f"scalar parameter {self.name!r}: magnitude is for pointer inputs")
            if self.dtype not in SCALAR_DTYPES:
                raise ValueError(f"scalar parameter {self.name!r}: dtype {self.dtype.value} cannot be passed by value "
                                 f"(ctypes has no such type); scalars are "
                                 f"{', '.join(d.value for d in SCALAR_DTYPES)}")
        return self

    @property
    def c_decl(self) -> str:
        if self.kind == "scalar":
            return f"{self.dtype.c_type} {self.name}"
        const = "const " if self.role == "input" else ""
        return f"{const}{self.dtype.c_type}* {self.name}"


class Tolerance(BaseModel):
    """Elementwise check |out - ref| <= atol + rtol * |ref|; atol may grow with the sizes (sums)."""

    model_config = ConfigDict(extra="forbid")
    atol: Expr
    rtol: Expr = 0.0


DEFAULT_TOLERANCES: dict[DType, Tolerance] = {
    DType.float32: Tolerance(atol=1e-4, rtol=1e-4),
    DType.float16: Tolerance(atol=1e-2, rtol=1e-2),
    DType.int32: Tolerance(atol=0, rtol=0),
    DType.uint32: Tolerance(atol=0, rtol=0),
    DType.int64: Tolerance(atol=0, rtol=0),
    DType.uint8: Tolerance(atol=0, rtol=0),
}

Sizes = dict[str, int]


class Task(BaseModel):
    """A kernel to optimize. The file format is described in docs/tasks.md."""

    model_config = ConfigDict(extra="forbid")
    name: str
    description: str
    family: str = Field(description="pattern family used for feature statistics, e.g. reduction, matmul")
    bound: Literal["memory", "compute"]
    domain: Literal["AI", "HPC"]
    tags: list[str] = Field(default_factory=list)
    entry: str = "solve"
    params: list[Param]
    shapes: list[Sizes] = Field(description="correctness shapes; a sample is shown to the LLM")
    held_out: list[Sizes] = Field(description="correctness shapes never shown to the LLM")
    benchmark: Sizes
    bytes: Expr = Field(description="fewest bytes the kernel must move through device memory")
    flops: Expr = Field(description="floating-point (or integer) operations the kernel must do")
    tolerance: dict[str, Tolerance] = Field(
        default_factory=dict, description="per output name or per dtype name; defaults by dtype"
    )
    includes: list[str] = Field(default_factory=list, description="headers the signature needs, e.g. cuda_fp16.h")
    notes: str = ""
    library_links: list[str] = Field(default_factory=list, description="libraries library.cu links, e.g. cublas")
    torch: TorchSource | None = Field(default=None, description="the reference is a PyTorch module (torch_meta.py)")
    folder: Path | None = Field(default=None, exclude=True)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _TASK_NAME.match(v):
            raise ValueError(f"{v!r}: task names are lower-case letters, digits and underscores")
        return v

    @field_validator("entry")
    @classmethod
    def _entry(cls, v: str) -> str:
        if not _IDENT.match(v):
            raise ValueError(f"{v!r} is not a C identifier")
        return v

    @model_validator(mode="after")
    def _check(self) -> "Task":
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"params: duplicate names in {names}")
        if not any(p.role == "output" for p in self.params):
            raise ValueError("params: at least one output pointer is required")
        # A PyTorch task whose user declared no shapes besides the file's own is tested at that one shape over
        # several seeds (as KernelBench does): nothing else is known to be valid for the module, so there
        # is nothing to hold out. Declared shapes bring back the suite's rules.
        single = self.torch is not None and not self.torch.declared_shapes
        if len(self.shapes) < (1 if single else 5):
            raise ValueError(f"shapes: at least {1 if single else 5} correctness shapes are required, got {len(self.shapes)}")
        if len(self.held_out) < 1 and not single:
            raise ValueError("held_out: at least one held-out shape is required")
        size_names = self.size_names
        for label, shape_list in (("shapes", self.shapes), ("held_out", self.held_out), ("benchmark", [self.benchmark])):
            for i, sizes in enumerate(shape_list):
                missing = size_names - set(sizes)
                if missing:
                    raise ValueError(f"{label}[{i}]: missing sizes {sorted(missing)}")
                for k, v in sizes.items():
                    if v < 0:
                        raise ValueError(f"{label}[{i}]: size {k} = {v} is negative")
                try:
                    for p in self.params:
                        if p.shape:
                            for d in p.shape:
                                if evaluate(d, sizes) < 0:
                                    raise ValueError(f"{label}[{i}]: dimension {d!r} of {p.name} is negative")
                    evaluate(self.bytes, sizes)
                    evaluate(self.flops, sizes)
                except FormulaError as exc:
                    raise ValueError(f"{label}[{i}]: {exc}") from None
        for key in self.tolerance:
            if key not in names and key not in DType.__members__:
                raise ValueError(f"tolerance: {key!r} is neither an output name nor a dtype")
        if self.torch is not None:
            self._check_torch(names)
        return self

    def _check_torch(self, names: list[str]) -> None:
        t = self.torch
        assert t is not None
        by_name = {p.name: p for p in self.params}
        for label, group, role in (("inputs", t.inputs, "input"), ("weights", [w.param for w in t.weights], "input"),
                                   ("outputs", t.outputs, "output")):
            for n in group:
                p = by_name.get(n)
                if label == "inputs" and p is not None and p.kind == "scalar":
                    continue            # a float or int argument of forward(), passed by value
                if p is None or p.kind != "pointer" or p.role != role:
                    raise ValueError(f"torch.{label}: {n!r} is not an {role} pointer parameter")
        scalars = {p.name for p in self.params if p.kind == "scalar"}
        named = [n for n in t.entry_names if n not in scalars]
        if len(set(named)) != len(named):
            raise ValueError("torch: a parameter is named twice in inputs, weights and outputs")
        pointers = [p.name for p in self.params if p.kind == "pointer"]
        if sorted(named) != sorted(pointers):
            raise ValueError(f"torch: inputs, weights and outputs must name every pointer parameter once "
                             f"(they name {named}, the entry point has {pointers})")

    @property
    def size_names(self) -> set[str]:
        """Every name the shapes must define: scalar params and names used in dimensions and formulas."""
        found: set[str] = set()
        for p in self.params:
            if p.kind == "scalar":
                found |= names_in(p.value) if p.value is not None else {p.name}
            for d in p.shape or []:
                found |= names_in(d)
            found |= names_in(p.generator.low) | names_in(p.generator.high)
        found |= names_in(self.bytes) | names_in(self.flops)
        for tol in self.tolerance.values():
            found |= names_in(tol.atol) | names_in(tol.rtol)
        return found

    @property
    def signature(self) -> str:
        args = ", ".join(p.c_decl for p in self.params)
        return f'extern "C" void {self.entry}({args})'

    @property
    def inputs(self) -> list[Param]:
        return [p for p in self.params if p.kind == "pointer" and p.role == "input"]

    @property
    def outputs(self) -> list[Param]:
        return [p for p in self.params if p.role == "output"]

    def magnitude_for(self, p: Param) -> Magnitude | None:
        """The range of magnitudes input ``p`` must be handled at: its own, else the dtype's default; None for
        integer inputs, outputs and exempt inputs."""
        if p.kind != "pointer" or p.role != "input" or not p.dtype.is_float or p.magnitude is False:
            return None
        return p.magnitude or DEFAULT_MAGNITUDES.get(p.dtype.value)

    def magnitude_text(self) -> str | None:
        """The one line a prompt carries on the magnitudes a correct kernel must handle (None: no float input
        has a range). The held-out cases at both ends are tasks/scale_cases.py's."""
        groups: dict[tuple[float, float], list[str]] = {}
        for p in self.inputs:
            if (m := self.magnitude_for(p)) is not None:
                groups.setdefault((m.low, m.high), []).append(p.name)
        if not groups:
            return None
        parts = [f"{', '.join(names)} from {lo:g} to {hi:g}" for (lo, hi), names in groups.items()]
        return ("Input magnitudes: a correct kernel is right for float inputs of any size in their range ("
                + "; ".join(parts) + "), not only for the test draw; held-out cases scale the inputs to both ends.")

    def tolerance_for(self, output: Param) -> Tolerance:
        return self.tolerance.get(output.name) or self.tolerance.get(output.dtype.value) or DEFAULT_TOLERANCES[output.dtype]

    def bytes_at(self, sizes: Sizes) -> float:
        return float(evaluate(self.bytes, sizes))

    def flops_at(self, sizes: Sizes) -> float:
        return float(evaluate(self.flops, sizes))

    @property
    def baseline_label(self) -> str:
        """What speedup 1.0 is: the naive kernel, or PyTorch eager for a module."""
        return EAGER_BASELINE if self.torch is not None else NAIVE_BASELINE

    @property
    def library_label(self) -> str:
        """The yardstick column: the vendor library, or torch.compile for a module."""
        return "torch.compile" if self.torch is not None else "library"

    @property
    def has_library(self) -> bool:
        """Whether there is a yardstick to measure (library.cu, or torch.compile for a module)."""
        return self.torch is not None or self.library_path is not None

    @property
    def baseline_path(self) -> Path:
        assert self.folder is not None, "task has no folder"
        return self.folder / "naive.cu"

    @property
    def library_path(self) -> Path | None:
        if self.folder is None:
            return None
        p = self.folder / "library.cu"
        return p if p.exists() else None

    def all_cases(self) -> list[tuple[Sizes, bool]]:
        """Every correctness case as (sizes, held_out)."""
        return [(s, False) for s in self.shapes] + [(s, True) for s in self.held_out]
