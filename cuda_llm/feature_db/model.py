"""The feature catalogue's data model: what one optimization feature is and how to recognise it.

Features are data (one TOML file each in ``catalogue/``); this module validates them so a typo in a
file fails loudly with the file and field named, instead of silently never matching.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Category = Literal["memory", "compute", "parallelism", "synchronization", "launch"]
Bound = Literal["memory", "compute", "*"]
# The bottlenecks the rule-based diagnosis names (tools/profile/diagnosis.py, Bottleneck, less "unknown"): what a
# feature serves. A test keeps the two lists equal and checks every suggestion of the diagnosis against it.
Serves = Literal["memory-bound", "compute-bound", "latency-bound", "occupancy-bound", "launch-bound", "divergence",
                 "bank-conflicts", "algorithm-bound"]
FloatDType = Literal["float16", "bfloat16", "float32"]

# Pattern families of the task suite (Task.family). "*" means every family.
KNOWN_FAMILIES: frozenset[str] = frozenset(
    {
        "elementwise", "reduction", "scan", "normalization", "matmul", "transpose", "histogram", "stencil",
        "convolution", "attention", "sparse", "sort", "nbody", "pooling", "loss", "clustering", "matvec",
    }
)

RESOURCE_FIELDS = ("registers", "shared_bytes", "constant_bytes", "stack_bytes", "spill_store_bytes", "spill_load_bytes")
_ID = re.compile(r"^[a-z][a-z0-9_]*$")


class SourceRule(BaseModel):
    """Matches a regex against the candidate's source.

    scope "code": the source with comments and string literals blanked (so a comment that names a
    feature does not count), one kernel at a time (the kernel's body with the file's other code, never
    another kernel's body), as written and with the file's own macros expanded; scope "asm": only the
    string literals of inline ``asm(...)`` statements, where PTX such as ``cp.async`` or ``mma.sync``
    lives (one kernel at a time too); scope "file": the whole file at once (kernel counts, host code).
    """

    model_config = ConfigDict(extra="forbid")
    source: str
    scope: Literal["code", "asm", "file"] = "code"
    min_count: int = Field(default=1, ge=1)

    @field_validator("source")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"invalid regex {v!r}: {exc}") from None
        return v


class ResourceRule(BaseModel):
    """Matches when some kernel of the compile report satisfies ``resource op value`` (ptxas -v);
    ``kernels`` is the number of kernels the build holds."""

    model_config = ConfigDict(extra="forbid")
    resource: Literal["registers", "shared_bytes", "constant_bytes", "stack_bytes", "spill_store_bytes", "spill_load_bytes",
                      "spill_bytes", "kernels"]
    op: Literal[">", ">=", "<", "<=", "==", "!="]
    value: int


class SassRule(BaseModel):
    """Matches when the build's machine code (sass.py: every kernel's SASS, counted by full opcode such as
    ``LDG.E.128.CONSTANT``) holds at least ``min_count`` instructions whose opcode the regex matches
    from its start. Never matches when the SASS was not read: what the source says then decides."""

    model_config = ConfigDict(extra="forbid")
    sass: str
    min_count: int = Field(default=1, ge=1)

    @field_validator("sass")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"invalid regex {v!r}: {exc}") from None
        return v


class FlowRule(BaseModel):
    """Matches when the build's PTX dataflow (tools/compiler/ptx/) shows at least ``min_count``
    instances of a fact: ``shared_tile`` (global data staged in a shared array and read back at another
    thread's slot), ``register_tile`` (accumulators fed by loaded values each reused by several of them),
    ``shared_stages`` (waits that leave the newest copies in flight, or an mbarrier ring), ``shared_reduction``
    (a shared array combined from itself at a uniform positive offset, or warp shuffle results met in one),
    ``coalesced`` / ``strided`` (kernels whose global accesses are mostly coalesced / mostly strided, lane by
    lane in 32-byte sectors), ``fused`` (the forms of kernel fusion, tools/compiler/ptx/fusion.py),
    ``online_rescale`` (a running value rescaled by the exponential of a running maximum's change),
    ``grid_stride`` (loops stepping by grid size x block size), ``shared_padding`` (a padded row pitch across a
    warp's lanes), ``shared_swizzle`` (a shared address XOR-ed from two indices, a wgmma descriptor's swizzle
    mode; tools/compiler/ptx/layout_loops.py). Never matches without a build: what the source says then decides."""

    model_config = ConfigDict(extra="forbid")
    flow: Literal["shared_tile", "register_tile", "shared_stages", "shared_reduction", "coalesced", "strided",
                  "fused", "online_rescale", "grid_stride", "shared_padding", "shared_swizzle"]
    min_count: int = Field(default=1, ge=1)


class RuleGroup(BaseModel):
    """Matches when every ``all_of`` rule matches and no ``none_of`` rule does: one alternative of an
    ``any_of`` list that needs several facts at once (e.g. a two-stage shared buffer *and* a stage flip)."""

    model_config = ConfigDict(extra="forbid")
    all_of: list[SourceRule | ResourceRule | SassRule | FlowRule] = Field(min_length=1)
    none_of: list[SourceRule | ResourceRule | SassRule | FlowRule] = Field(default_factory=list)


Rule = SourceRule | ResourceRule | SassRule | FlowRule | RuleGroup


class Detector(BaseModel):
    """A feature is detected when any ``any_of`` rule matches (if there are any), every ``all_of`` rule
    matches, and no ``none_of`` rule matches. An ``any_of`` entry may be a group ``{ all_of = [...] }``."""

    model_config = ConfigDict(extra="forbid")
    any_of: list[Rule] = Field(default_factory=list)
    all_of: list[SourceRule | ResourceRule | SassRule | FlowRule] = Field(default_factory=list)
    none_of: list[SourceRule | ResourceRule | SassRule | FlowRule] = Field(default_factory=list)

    @model_validator(mode="after")
    def _not_empty(self) -> "Detector":
        if not self.any_of and not self.all_of:
            raise ValueError("detector needs at least one rule in any_of or all_of")
        return self


class Feature(BaseModel):
    """One GPU optimization feature: when it helps, where it runs, how to apply it, how to spot it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    name: str
    category: Category
    bottleneck: str = Field(description="the bottleneck it addresses, one line")
    min_cc: tuple[int, int] = Field(description="minimum compute capability, e.g. [8, 0]")
    applies_to: list[str] = Field(description="task families it applies to, or ['*']")
    bounds: list[Bound] = Field(default_factory=lambda: ["*"], description="task bounds it applies to")
    min_tolerance: float | None = Field(
        default=None, description="only for tasks whose float outputs allow at least this relative error"
    )
    lossless_for_inputs: list[FloatDType] = Field(
        default_factory=list,
        description="float input dtypes on which the feature loses no precision (then min_tolerance does not apply)",
    )
    input_dtypes: list[FloatDType] = Field(
        default_factory=list,
        description="the float input dtypes the feature is for (3xTF32: float32); empty: any",
    )
    serves: list[Serves] = Field(description="the bottlenecks (diagnosis names) it relieves")
    conflicts_with: list[str] = Field(default_factory=list, description="features not to combine in one candidate")
    how: str = Field(description="how to apply it, a few lines for the coder")
    exemplar: str = Field(description="a small complete CUDA snippet with a __global__ kernel using it")
    exemplar_arch: str | None = Field(default=None, description="arch to compile the exemplar for; default from min_cc")
    needs_arch_specific: bool = Field(
        default=False, description="uses sm_90a-only instructions (wgmma, setmaxnreg): compile for the 'a' target "
        "(-gencode=arch=compute_90a,code=sm_90a), which runs on that architecture only")
    check: str | None = Field(
        default=None, description="host code with main() appended to the exemplar: runs it on the GPU, checks the "
        "output against a CPU computation, prints PASS and returns 0 (tests/test_exemplars_gpu.py)")
    detector: Detector

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not _ID.match(v):
            raise ValueError(f"{v!r}: feature ids are lower-case letters, digits and underscores")
        return v

    @field_validator("name", "bottleneck", "how")
    @classmethod
    def _text(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        return v.strip()

    @field_validator("min_cc")
    @classmethod
    def _cc(cls, v: tuple[int, int]) -> tuple[int, int]:
        major, minor = v
        if not (3 <= major <= 12 and 0 <= minor <= 9):
            raise ValueError(f"{v}: not a compute capability (expected e.g. [8, 0])")
        return v

    @field_validator("applies_to")
    @classmethod
    def _families(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("list at least one family, or '*' for all")
        unknown = [f for f in v if f != "*" and f not in KNOWN_FAMILIES]
        if unknown:
            raise ValueError(f"unknown families {unknown}; known: {sorted(KNOWN_FAMILIES)} or '*'")
        return v

    @field_validator("serves")
    @classmethod
    def _serves(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("name at least one bottleneck it relieves")
        return v

    @field_validator("bounds")
    @classmethod
    def _bounds(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("list at least one bound ('memory', 'compute') or '*'")
        return v

    @field_validator("exemplar")
    @classmethod
    def _exemplar(cls, v: str) -> str:
        if "__global__" not in v:
            raise ValueError("the exemplar must define a __global__ kernel")
        return v

    @field_validator("check")
    @classmethod
    def _check_main(cls, v: str | None) -> str | None:
        if v is not None and "main(" not in v:
            raise ValueError("the check must define int main() (it is appended to the exemplar and run)")
        return v

    @property
    def min_arch(self) -> str:
        return f"sm_{self.min_cc[0]}{self.min_cc[1]}"

    @property
    def compile_arch(self) -> str:
        """The target the exemplar compiles for: exemplar_arch, else min_cc; 'a' added for sm_90a-only code."""
        arch = self.exemplar_arch or self.min_arch
        return arch + "a" if self.needs_arch_specific and not arch.endswith("a") else arch

    def applies_to_family(self, family: str) -> bool:
        return "*" in self.applies_to or family in self.applies_to

    def applies_to_bound(self, bound: str | None) -> bool:
        return bound is None or "*" in self.bounds or bound in self.bounds

    def allowed_by_tolerance(self, tolerance: float | None, float_inputs: list[str] | None = None) -> bool:
        """Whether a task with this relative tolerance (None: unknown) may use the feature: always when
        the task's float inputs are all of a dtype the feature computes on without loss."""
        if self.min_tolerance is None or tolerance is None or tolerance >= self.min_tolerance:
            return True
        return bool(float_inputs) and all(d in self.lossless_for_inputs for d in float_inputs)

    def allowed_for_dtypes(self, float_inputs: list[str] | None) -> bool:
        """Whether the task's float inputs (None: unknown) are of a dtype the feature is for."""
        if not self.input_dtypes or float_inputs is None:
            return True
        return bool(float_inputs) and all(d in self.input_dtypes for d in float_inputs)
