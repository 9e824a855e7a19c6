"""What task.toml records about a task whose reference is a PyTorch module (its ``[torch]`` table).

Pure data, no torch: the loader, the CLI and the export read it on machines without PyTorch. It says how
the entry point's parameters map back to the module (forward's inputs, state_dict entries, outputs),
which module-level constants are sizes, and how the reference runs. ``tasks/torch_import.py`` writes it.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


class TorchWeight(BaseModel):
    """One parameter or buffer of the module, passed to the entry point as a const device pointer."""

    model_config = ConfigDict(extra="forbid")
    param: str = Field(description="the entry point's parameter name")
    key: str = Field(description="the module's state_dict key, e.g. conv.weight")
    kind: Literal["parameter", "buffer"] = "parameter"

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        if not _KEY.match(v):
            raise ValueError(f"{v!r} is not a state_dict key")
        return v


class TorchSource(BaseModel):
    """The ``[torch]`` table of a task made from a KernelBench-style module file."""

    model_config = ConfigDict(extra="forbid")
    module: str = Field(default="module.py", description="the module file, inside the task folder")
    module_sha256: str = Field(description="sha256 of the module file when the task was derived from it")
    class_name: str = "Model"
    inputs: list[str] = Field(description="entry-point parameters that are forward()'s inputs, in order (pointers, "
                                          "or scalars for a float or int argument)")
    weights: list[TorchWeight] = Field(default_factory=list)
    outputs: list[str] = Field(description="entry-point parameters that are forward()'s outputs, in order")
    tuple_output: bool = Field(default=False, description="forward() returns a tuple (else one tensor)")
    constants: list[str] = Field(default_factory=list,
                                 description="module-level int constants that are sizes: set before get_inputs()")
    derived: list[str] = Field(default_factory=list,
                               description="sizes computed by a dry run for each shape (dims no constant names)")
    dropped_buffers: list[str] = Field(default_factory=list,
                                       description="buffers of an unsupported dtype that forward() does not read")
    bool_tensors: list[str] = Field(default_factory=list,
                                    description="pointers that are torch.bool in the module (uint8 0/1 on the device)")
    mode: Literal["train", "eval"] = Field(default="train", description="the module's mode, as KernelBench runs it")
    reference_dtype: Literal["float64", "native"] = Field(
        default="float64", description="float64: module and inputs promoted (exact reference); native: as written")
    declared_shapes: bool = Field(default=False, description="shapes besides the file's own (varied or declared)")
    fixed_sizes: str = Field(default="", description="why the sizes cannot vary, where they cannot")
    seeds: int = Field(default=3, ge=1, description="correctness cases at the file's own shape, one seed each")
    source_file: str = Field(default="", description="where the module was imported from (for people)")
    init_inputs: str = Field(default="", description="repr of get_init_inputs() at the file's own sizes")

    @field_validator("module")
    @classmethod
    def _module(cls, v: str) -> str:
        if "/" in v or "\\" in v or not v.endswith(".py"):
            raise ValueError(f"{v!r}: the module is a .py file inside the task folder")
        return v

    @property
    def entry_names(self) -> list[str]:
        """Every pointer parameter the [torch] table names, in entry-point order."""
        return [*self.inputs, *(w.param for w in self.weights), *self.outputs]
