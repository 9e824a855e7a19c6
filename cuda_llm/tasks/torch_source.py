"""From what a dry run of a PyTorch module recorded to a task folder: pure, no torch.

``torch_import.py`` runs the module (PyTorch needed) and fills a ``ModuleRecord``: every tensor with its
dtype and its dimensions, each a literal or a size name. This module turns that record into the entry
point (inputs, then parameters and buffers as const pointers, then outputs, then the sizes as ints),
task.toml, the generated reference.py and the starting-point naive.cu. Keeping it free of torch lets CI
test the derivation from recorded metadata on a machine without PyTorch.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, Field

from cuda_llm.tasks.formulas import evaluate, evaluate_int
from cuda_llm.tasks.model import DType

SUPPORTED_DTYPES = tuple(d.value for d in DType)   # float32, float16, int32, uint32, int64, uint8: what the harness runs
EXTRA = "torch"
# cuda-llm is installed from its checkout (it is not on a package index): the extra is named there
INSTALL_HINT = (f"install PyTorch with: pip install -e '.[{EXTRA}]' in the cuda-llm checkout (or any PyTorch build "
                f"for your CUDA)")

# KernelBench's eval (kernelbench/eval.py, get_tolerance_for_precision): fp32 1e-4, fp16/bf16 1e-2, as atol
# and rtol alike. (Its first release compared every dtype at 1e-2; pass --atol/--rtol 1e-2 for that.)
KERNELBENCH_TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "int32": 0.0, "uint32": 0.0, "int64": 0.0, "uint8": 0.0}

# Names C, C++ or CUDA reserve (a Python identifier may be one of them), and those the harness uses.
_RESERVED = set("""
alignas alignof and asm auto bitand bitor bool break case catch char char16_t char32_t class compl const
constexpr const_cast continue decltype default delete do double dynamic_cast else enum explicit export extern
false float for friend goto if inline int long mutable namespace new noexcept not nullptr operator or private
protected public register reinterpret_cast restrict return short signed sizeof static static_assert
static_cast struct switch template this thread_local throw true try typedef typeid typename union unsigned
using virtual void volatile wchar_t while xor half dim3 main solve
""".split())
_IDENT_BAD = re.compile(r"[^A-Za-z0-9_]+")


class ModuleFileError(ValueError):
    """A module file that cannot become a task; the message names the file and what is wrong."""

    def __init__(self, path: Any, message: str):
        self.path = path
        super().__init__(f"{path}: {message}")


def c_name(raw: str, taken: set[str]) -> str:
    """A C identifier for ``raw`` (``conv.weight`` -> ``conv_weight``), never a keyword, unique in ``taken``."""
    name = _IDENT_BAD.sub("_", raw).strip("_") or "t"
    if name[0].isdigit():
        name = "t_" + name
    if name in _RESERVED or name.startswith("__"):
        name = name.lstrip("_") + "_"
    base, i = name, 2
    while name in taken:
        name = f"{base}_{i}"
        i += 1
    taken.add(name)
    return name


def task_name(stem: str) -> str:
    """A task name from a file name: ``19_ReLU`` -> ``kb_19_relu`` (lower case, starts with a letter)."""
    name = re.sub(r"_+", "_", _IDENT_BAD.sub("_", stem).lower()).strip("_") or "module"
    return name if name[0].isalpha() else f"kb_{name}"


# How to convert an unsupported dtype in the module (the harness's buffers, poison values and comparisons
# exist for SUPPORTED_DTYPES only).
_CONVERT = {"float64": ".float()", "bfloat16": ".half() or .float()",
            "int8": ".int()", "int16": ".int()", "uint16": ".int()", "uint64": ".long() where the values fit"}


def unsupported_dtype(path: Any, what: str, dtype: str) -> ModuleFileError:
    return ModuleFileError(path, f"{what} has dtype {dtype}; the harness's buffers, poison values and checks exist "
                                 f"for {', '.join(SUPPORTED_DTYPES)} only (convert it in the module with "
                                 f"{_CONVERT.get(dtype, '.float() or .int()')}, or leave this module out)")


class TensorRecord(BaseModel):
    """One tensor of the entry point as the dry run saw it."""

    name: str                                   # the C parameter name
    role: Literal["input", "weight", "output"]
    source: str                                 # forward()'s argument, the state_dict key, or "output 0"
    kind: Literal["parameter", "buffer", ""] = ""
    dtype: str                                  # the entry point's (a bool tensor travels as uint8)
    dims: list[int | str]                       # a literal, or a size name; [] for a scalar
    bool_tensor: bool = False                   # torch.bool in the module, 0/1 bytes on the device
    scalar: float | int | None = None           # a float or int argument of forward(): its one value


class ModuleRecord(BaseModel):
    """Everything the derivation needs, recorded by a dry run (or written by hand in tests)."""

    name: str
    source_file: str = ""
    module_text: str
    class_name: str = "Model"
    tensors: list[TensorRecord]
    tuple_output: bool = False
    constants: list[str] = Field(default_factory=list)          # module constants that are sizes
    derived: list[str] = Field(default_factory=list)            # sizes computed per shape by the dry run
    benchmark: dict[str, int]                                   # the file's own sizes (constants + derived)
    shapes: list[dict[str, int]] = Field(default_factory=list)  # declared shapes (complete sizes)
    held_out: list[dict[str, int]] = Field(default_factory=list)
    flops: str | int = 0                                        # formula, or the name of a per-shape size
    family: str = "elementwise"
    ops: list[str] = Field(default_factory=list)                # aten ops the forward ran (for people)
    mode: Literal["train", "eval"] = "train"
    reference_dtype: Literal["float64", "native"] = "float64"
    seeds: int = 3
    tolerance: dict[str, tuple[float, float]] = Field(default_factory=dict)   # dtype -> (atol, rtol)
    bytes_override: str | int | None = None
    init_inputs: str = ""
    dropped_buffers: list[str] = Field(default_factory=list)
    fixed_sizes: str = ""                                       # why the sizes cannot vary ("" where they do)
    estimate: str = ""                                          # the full-size cost, for people
    notes: list[str] = Field(default_factory=list)

    def of_role(self, role: str) -> list[TensorRecord]:
        return [t for t in self.tensors if t.role == role]

    @property
    def size_names(self) -> list[str]:
        """Every size a dimension names, in the order of first use (the entry point's int parameters)."""
        seen: list[str] = []
        for t in self.tensors:
            for d in t.dims:
                if isinstance(d, str) and d not in seen:
                    seen.append(d)
        return seen


def module_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def bytes_formula(record: ModuleRecord) -> str | int:
    """Each input, weight and output moved once: sum of elements times item size."""
    if record.bytes_override is not None:
        return record.bytes_override
    terms = []
    for t in record.tensors:
        if t.scalar is not None:
            continue
        item = DType(t.dtype).itemsize
        factors = [str(d) for d in t.dims if d != 1] or ["1"]
        terms.append(" * ".join([str(item), *factors]))
    return " + ".join(terms) if terms else 0


def _bound(record: ModuleRecord, data: dict[str, Any]) -> str:
    """compute when the forward does more than ~10 flops per byte at the file's own shape (matmul, conv)."""
    sizes = record.benchmark
    try:
        flops = float(evaluate(data["flops"], sizes))
        nbytes = float(evaluate(data["bytes"], sizes))
    except Exception:  # noqa: BLE001 - a formula error is reported by the task model itself
        return "memory"
    return "compute" if nbytes > 0 and flops / nbytes > 10 else "memory"


def describe(record: ModuleRecord) -> str:
    """What to compute, for the LLM: the mapping of every pointer, then the module file itself."""
    lines = [f"Compute the forward pass of the PyTorch module `{record.class_name}` defined in the file below, "
             f"constructed as `{record.class_name}(*get_init_inputs())`"
             + (f" = `{record.class_name}({record.init_inputs})`" if record.init_inputs else "")
             + (" in training mode (nn.Module's default, as KernelBench runs it)" if record.mode == "train"
                else " in eval mode (module.eval())")
             + (": BatchNorm normalizes with the batch's own statistics and its running statistics need not be "
                "updated" if record.mode == "train" and any("batch_norm" in o for o in record.ops) else "") + ".",
             "Every pointer is a device pointer to a contiguous row-major tensor:"]
    for t in record.tensors:
        shape = "[" + ", ".join(str(d) for d in t.dims) + "]"
        if t.scalar is not None:
            kind = "float" if isinstance(t.scalar, float) else "int"
            lines.append(f"- `{t.name}` {t.dtype} scalar = {t.scalar!r}: forward() argument `{t.source}` (a Python "
                         f"{kind} in get_inputs(), passed by value as {t.dtype})")
            continue
        if t.bool_tensor:
            shape += " (a torch.bool tensor, passed as uint8: 0 or 1)"
        if t.role == "input":
            what = f"forward() argument `{t.source}`"
        elif t.role == "weight":
            what = f"the module's {t.kind or 'parameter'} `{t.source}` (read it, never write it)"
        else:
            what = f"forward()'s {t.source}" if record.tuple_output else "forward()'s result"
        lines.append(f"- `{t.name}` {t.dtype}{shape}: {what}")
    if record.size_names:
        lines.append("The int parameters " + ", ".join(f"`{n}`" for n in record.size_names)
                     + " are the sizes above" + (" (those not in the file are computed from it, e.g. an output "
                                                 "dimension)" if record.derived else "") + ".")
    lines += ["", f"```python\n{record.module_text.strip()}\n```"]
    return "\n".join(lines)


def task_dict(record: ModuleRecord) -> dict[str, Any]:
    """The task.toml data (validated by cuda_llm.tasks.model.Task)."""
    params: list[dict[str, Any]] = []
    for t in record.tensors:
        if t.scalar is not None:
            params.append({"name": t.name, "kind": "scalar", "dtype": t.dtype, "value": t.scalar})
            continue
        p: dict[str, Any] = {"name": t.name, "kind": "pointer", "dtype": t.dtype, "shape": list(t.dims) or [1]}
        if t.role == "output":
            p["role"] = "output"
        if t.role != "output":
            p["generator"] = {"kind": "custom"}
        params.append(p)
    for n in record.size_names:
        params.append({"name": n, "kind": "scalar", "dtype": "int32"})
    sizes_needed = set(record.size_names) | ({record.flops} if isinstance(record.flops, str)
                                              and record.flops in record.benchmark else set())

    def complete(sizes: dict[str, int]) -> dict[str, int]:
        return {k: int(v) for k, v in sizes.items() if k in sizes_needed or k in record.constants}

    bench = complete(record.benchmark)
    # where shapes vary the suite's rule holds (five shown): seeds of the file's own shape make up the count
    seeds = max(record.seeds, 5 - len(record.shapes)) if record.held_out else record.seeds
    shapes = [bench] * seeds + [complete(s) for s in record.shapes]
    tolerance = {dt: {"atol": a, "rtol": r} for dt, (a, r) in sorted(record.tolerance.items())}
    data: dict[str, Any] = {
        "name": record.name,
        "description": describe(record),
        "family": record.family,
        "bound": "memory",
        "domain": "AI",
        "tags": ["pytorch", *(["fused"] if len({o for o in record.ops if o in _FUSED_OPS}) > 1 else [])],
        "bytes": bytes_formula(record),
        "flops": record.flops,
        **({"notes": " ".join(record.notes)} if record.notes else {}),
        "params": params,
        "shapes": shapes,
        "held_out": [complete(s) for s in record.held_out],
        "benchmark": bench,
    }
    if tolerance:
        data["tolerance"] = tolerance
    if any(t.dtype == "float16" for t in record.tensors):
        data["includes"] = ["cuda_fp16.h"]
    data["bound"] = _bound(record, data)
    data["torch"] = {
        "module": "module.py",
        "module_sha256": module_sha256(record.module_text),
        "class_name": record.class_name,
        "inputs": [t.name for t in record.of_role("input")],
        "weights": [{"param": t.name, "key": t.source, "kind": t.kind or "parameter"} for t in record.of_role("weight")],
        "outputs": [t.name for t in record.of_role("output")],
        "tuple_output": record.tuple_output,
        "constants": list(record.constants),
        "derived": list(record.derived),
        "dropped_buffers": list(record.dropped_buffers),
        "bool_tensors": [t.name for t in record.tensors if t.bool_tensor],
        "mode": record.mode,
        "reference_dtype": record.reference_dtype,
        "declared_shapes": bool(record.shapes or record.held_out),
        **({"fixed_sizes": record.fixed_sizes} if record.fixed_sizes else {}),
        "seeds": record.seeds,
        "source_file": record.source_file,
        "init_inputs": record.init_inputs,
    }
    return data


# aten ops that count as separate stages when deciding whether a module is "fused" (level-2-like)
_FUSED_OPS = {"convolution", "mm", "addmm", "bmm", "relu", "gelu", "sigmoid", "tanh", "add", "mul", "div", "sub",
              "_softmax", "native_layer_norm", "native_batch_norm", "max_pool2d_with_indices", "avg_pool2d",
              "mean", "sum", "clamp", "hardtanh", "leaky_relu", "silu", "mish", "exp", "log"}


def check_dims(record: ModuleRecord, sizes: dict[str, int], actual: dict[str, tuple[int, ...]], label: str) -> None:
    """Every tensor's dimensions at ``sizes`` must be what the record's dims say (a dry run gave ``actual``)."""
    for t in record.tensors:
        if t.scalar is not None:
            continue
        got = tuple(actual[t.name])
        want = tuple(evaluate_int(d, sizes) for d in t.dims)
        if got != want and not (got == () and want == (1,)):
            raise ValueError(f"{label}: {t.name} ({t.source}) has shape {list(got)}, but the sizes give {list(want)}; "
                             f"a dimension the file's constants do not determine changed")


# ------------------------------------------------------------------------------------------- files
def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str) and "\n" in v:   # a multi-line basic string, readable in the file
        body = v.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
        body = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", lambda m: f"\\u{ord(m.group()):04x}", body)
        return '"""\n' + body + '"""'
    if isinstance(v, str):
        return json.dumps(v)          # a TOML basic string is a JSON string
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _key(k: str) -> str:
    return k if re.match(r"^[A-Za-z0-9_-]+$", k) else json.dumps(k)


def render_toml(data: dict[str, Any]) -> str:
    """TOML for task.toml: scalars first, then tables and arrays of tables (only the shapes task.toml has)."""
    head: list[str] = ["# Derived from a PyTorch module by `cuda-llm import`; edit shapes and tolerances freely,",
                       "# import again after changing module.py (the entry point follows the module).", ""]
    tables: list[str] = []
    for k, v in data.items():
        if isinstance(v, dict) and k != "torch" and all(isinstance(x, dict) for x in v.values()) and v:
            for sub, inner in v.items():
                tables += ["", f"[{k}.{_key(sub)}]"] + [f"{_key(a)} = {toml_value(b)}" for a, b in inner.items()]
        elif isinstance(v, dict):
            tables += ["", f"[{k}]"]
            for a, b in v.items():
                if isinstance(b, list) and b and all(isinstance(x, dict) for x in b):
                    continue
                tables.append(f"{_key(a)} = {toml_value(b)}")
            for a, b in v.items():
                if isinstance(b, list) and b and all(isinstance(x, dict) for x in b):
                    for x in b:
                        tables += [f"[[{k}.{_key(a)}]]"] + [f"{_key(c)} = {toml_value(d)}" for c, d in x.items()]
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for x in v:
                tables += ["", f"[[{k}]]"] + [f"{_key(a)} = {toml_value(b)}" for a, b in x.items()]
        elif isinstance(v, list) and not v and k in ("held_out", "shapes"):
            head.append(f"{_key(k)} = []")
        else:
            head.append(f"{_key(k)} = {toml_value(v)}")
    return "\n".join(head + tables) + "\n"


REFERENCE_PY = '''"""Generated by `cuda-llm import`: the reference is the PyTorch module in module.py, run by PyTorch on
the CPU (see task.toml's [torch] table). Inputs come from the file's get_inputs() and the module's own
initialisation, seeded per case, at each case's sizes."""

from pathlib import Path

from cuda_llm.tasks.torch_reference import TorchReference

_REF = TorchReference(Path(__file__).resolve().parent)


def make_inputs(sizes, rng):
    return _REF.make_inputs(sizes, rng)


def reference(inputs, sizes):
    return _REF.reference(inputs, sizes)
'''


def naive_cu(signature: str, record: ModuleRecord) -> str:
    """The starting point the loop shows before any kernel passed: the signature and nothing computed.
    PyTorch eager, not this file, is speedup 1.0; it fails every check (its outputs stay poisoned)."""
    return (f"// Starting point for `{record.name}`: the entry point only, no kernel yet.\n"
            f"// PyTorch eager is the baseline (speedup 1.0) and torch.compile the yardstick; this file computes\n"
            f"// nothing, so every output keeps the harness's poison value and fails. Write the kernels that\n"
            f"// compute {record.class_name}.forward (see the task description) and launch them from here.\n"
            "#include <cuda_runtime.h>\n"
            + ("#include <cuda_fp16.h>\n" if any(t.dtype == "float16" for t in record.tensors) else "")
            + f"\n{signature} {{\n}}\n")
