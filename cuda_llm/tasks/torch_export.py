"""The text of an export: a Python module that calls the best kernel from PyTorch, a test, a README.

Pure templating from the task (no torch, no GPU): ``cuda-llm export RUN --torch DIR`` compiles the kernel
and writes these files beside it. For a task imported from a PyTorch module the module defines
``ModelNew``, a subclass of the file's ``Model`` (the same constructor, parameters and state_dict) whose
forward calls the kernel through a torch.library custom op (so torch.compile can trace it). For any other
task it defines a function taking tensors. The kernel is the .so cuda-llm built, loaded with ctypes; its
pointers are the tensors' ``data_ptr()``.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from pydantic import BaseModel

from cuda_llm.tasks.formulas import names_in
from cuda_llm.tasks.model import Task

_TORCH_DTYPE = {"float32": "torch.float32", "float16": "torch.float16", "int32": "torch.int32",
                "uint32": "torch.uint32", "int64": "torch.int64", "uint8": "torch.uint8"}
_MATH = {"ceil": "math.ceil", "floor": "math.floor", "log2": "math.log2", "sqrt": "math.sqrt",
         "min": "min", "max": "max", "int": "int"}


class ExportFiles(BaseModel):
    """File name -> text, and the module name users import."""

    module_name: str
    files: dict[str, str]


def py_expr(formula: Any, sizes_var: str = "s") -> str:
    """A task formula (size names, + - * / // % **, min/max/ceil/...) as Python over ``sizes_var[name]``."""
    if not isinstance(formula, str):
        return repr(formula)
    tree = ast.parse(formula, mode="eval")

    class Rewrite(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> Any:  # noqa: N802
            node.args = [self.visit(a) for a in node.args]
            if isinstance(node.func, ast.Name) and node.func.id in _MATH:
                node.func = ast.parse(_MATH[node.func.id], mode="eval").body
            return node

        def visit_Name(self, node: ast.Name) -> Any:  # noqa: N802
            return ast.Subscript(value=ast.Name(id=sizes_var, ctx=ast.Load()), slice=ast.Constant(node.id),
                                 ctx=ast.Load())

    return ast.unparse(Rewrite().visit(tree))


def _size_sources(task: Task, tensors: list[str]) -> dict[str, tuple[str, int]]:
    """For each size name: the first of ``tensors`` with a dimension that is exactly that name."""
    found: dict[str, tuple[str, int]] = {}
    by_name = {p.name: p for p in task.params}
    for t in tensors:
        for i, d in enumerate(by_name[t].shape or []):
            if isinstance(d, str) and d.isidentifier() and d not in found:
                found[d] = (t, i)
    return found


def _common(task: Task) -> dict[str, Any]:
    pointers = [p for p in task.params if p.kind == "pointer"]
    scalars = [p for p in task.params if p.kind == "scalar"]
    return {
        "entry": task.entry,
        "pointers": [p.name for p in pointers],
        "dims": {p.name: [d if isinstance(d, int) else py_expr(d) for d in p.shape or []] for p in pointers},
        "dtypes": {p.name: p.dtype.value for p in pointers},
        "scalars": [(p.name, p.dtype.value, py_expr(p.value if p.value is not None else p.name)) for p in scalars],
    }


_RUNTIME = '''
_HERE = Path(__file__).resolve().parent
_LIB = None
_CTYPES = {"int32": ctypes.c_int32, "uint32": ctypes.c_uint32, "int64": ctypes.c_int64, "float32": ctypes.c_float}
_TORCH_DTYPES = TORCH_DTYPE_MAP


def _kernel():
    """The entry point of kernel.so (built from kernel.cu), loaded once."""
    global _LIB
    if _LIB is None:
        _LIB = ctypes.CDLL(str(_HERE / "kernel.so"))
        getattr(_LIB, ENTRY).restype = None
    return getattr(_LIB, ENTRY)


def _call(tensors, sizes):
    """Check every tensor against the entry point, then call it on the tensors' device memory. The kernel
    launches on the CUDA default stream: work queued on another current stream is waited for first."""
    device = tensors[POINTERS[0]].device
    for name in POINTERS:
        t = tensors[name]
        want = tuple(int(eval(d, {"math": math, "s": sizes}) if isinstance(d, str) else d) for d in DIMS[name])
        if not t.is_cuda or t.dtype != _TORCH_DTYPES[DTYPES[name]] or tuple(t.shape) not in (want, ()) \\
                or not t.is_contiguous():
            raise ValueError(f"{name}: the kernel takes a contiguous CUDA {DTYPES[name]} tensor of shape "
                             f"{list(want)}, got {t.dtype} {list(t.shape)} on {t.device}"
                             + ("" if t.is_contiguous() else " (not contiguous)"))
    stream = torch.cuda.current_stream(device)
    if stream.cuda_stream != 0:
        stream.synchronize()
    args = [ctypes.c_void_p(tensors[n].data_ptr()) for n in POINTERS]
    args += [_CTYPES[dt](eval(v, {"math": math, "min": min, "max": max, "int": int, "s": sizes}))
             for _, dt, v in SCALARS]
    with torch.cuda.device(device):
        _kernel()(*args)
'''


def _header(task: Task, arch: str, what: str) -> str:
    return (f'"""{what} for the cuda-llm task `{task.name}`, computed by the kernel cuda-llm found\n'
            f"(kernel.cu, built into kernel.so for {arch}). Generated by `cuda-llm export`; see README.md.\n"
            '"""\n\nimport ctypes\nimport importlib.util\nimport math\nfrom pathlib import Path\n\nimport torch\n')


def _constants(task: Task) -> str:
    c = _common(task)
    lines = [f"ENTRY = {c['entry']!r}",
             f"POINTERS = {c['pointers']!r}",
             f"DIMS = {json.dumps(c['dims'])}",
             f"DTYPES = {json.dumps(c['dtypes'])}",
             f"SCALARS = {c['scalars']!r}"]
    runtime = _RUNTIME.replace("TORCH_DTYPE_MAP", "{" + ", ".join(f'"{k}": {v}' for k, v in _TORCH_DTYPE.items()) + "}")
    return "\n".join(lines) + "\n" + runtime


def torch_module_text(task: Task, arch: str) -> str:
    """The module for a task imported from a PyTorch module: Model, get_inputs, get_init_inputs, ModelNew."""
    t = task.torch
    assert t is not None
    op = f"cuda_llm::{task.name}"
    outs = t.outputs
    ins = t.inputs + [w.param for w in t.weights]
    sources = _size_sources(task, [p for p in t.entry_names])
    by_name = {p.name: p for p in task.params}
    fn_args = ", ".join([f"{n}: torch.Tensor" for n in ins] + [f"shape_{o}: list[int]" for o in outs])
    ret = "list[torch.Tensor]" if t.tuple_output else "torch.Tensor"
    out_dtypes = ", ".join(_TORCH_DTYPE[by_name[o].dtype.value] for o in outs)
    body = [
        _header(task, arch, "`ModelNew`: the same constructor, parameters and forward as `Model`"),
        "_spec = importlib.util.spec_from_file_location(",
        f'    "_cuda_llm_reference_{task.name}", Path(__file__).resolve().parent / "reference_module.py")',
        "_ref = importlib.util.module_from_spec(_spec)",
        "_spec.loader.exec_module(_ref)",
        f"Model = _ref.{t.class_name}",
        "get_inputs = _ref.get_inputs",
        "get_init_inputs = getattr(_ref, 'get_init_inputs', lambda: [])",
        "",
        _constants(task),
        f"INPUTS = {t.inputs!r}",
        f"WEIGHTS = {[(w.param, w.key) for w in t.weights]!r}",
        f"OUTPUTS = {outs!r}",
        f"SIZE_SOURCES = {json.dumps({k: list(v) for k, v in sources.items()})}",
        f"_OUT_DTYPES = [{out_dtypes}]",
        "",
        "",
        f'@torch.library.custom_op("{op}", mutates_args=())',
        f"def kernel_op({fn_args}) -> {ret}:",
        '    """forward() by the kernel; output shapes come from the caller (a meta run of Model.forward)."""',
        f"    tensors = dict(zip(INPUTS + [w for w, _ in WEIGHTS], [{', '.join(ins)}]))",
        f"    shapes = [{', '.join(f'shape_{o}' for o in outs)}]",
        f"    outs = [torch.empty(sh, dtype=dt, device={ins[0]}.device) for sh, dt in zip(shapes, _OUT_DTYPES)]",
        "    tensors.update(zip(OUTPUTS, outs))",
        "    sizes = {k: int(tensors[n].shape[i]) if tensors[n].dim() else 1 for k, (n, i) in SIZE_SOURCES.items()}",
        "    _call(tensors, sizes)",
        f"    return {'outs' if t.tuple_output else 'outs[0]'}",
        "",
        "",
        "@kernel_op.register_fake",
        "def _(" + ", ".join([*ins, *(f"shape_{o}" for o in outs)]) + "):",
        f"    outs = [{ins[0]}.new_empty(sh, dtype=dt) for sh, dt in zip([{', '.join(f'shape_{o}' for o in outs)}], _OUT_DTYPES)]",
        f"    return {'outs' if t.tuple_output else 'outs[0]'}",
        "",
        "",
        "class ModelNew(Model):",
        '    """Model with forward computed by the kernel: construct it with the same arguments as Model, or load',
        '    a Model\'s state_dict into it. Inputs and weights must be contiguous CUDA tensors of the task\'s dtypes."""',
        "",
        "    def __init__(self, *args, **kwargs):",
        "        super().__init__(*args, **kwargs)",
        "        self._cuda_llm_init = (args, kwargs)",
        "        self._cuda_llm_shapes = {}",
        "",
        "    def _output_shapes(self, inputs):",
        '        """Model.forward on the meta device (a shadow built from the same arguments): shapes only."""',
        "        key = (self.training,) + tuple(tuple(x.shape) for x in inputs)",
        "        if key not in self._cuda_llm_shapes:",
        "            args, kwargs = self._cuda_llm_init",
        "            with torch.device('meta'):",
        "                shadow = Model(*args, **kwargs)",
        "            shadow.train(self.training)",
        "            with torch.no_grad():",
        "                out = shadow(*[x.to('meta') for x in inputs])",
        "            outs = list(out) if isinstance(out, (tuple, list)) else [out]",
        "            self._cuda_llm_shapes[key] = [tuple(o.shape) for o in outs]",
        "        return self._cuda_llm_shapes[key]",
        "",
        "    def _state(self, key):",
        "        try:",
        "            return self.get_parameter(key)",
        "        except AttributeError:",
        "            return self.get_buffer(key)",
        "",
        "    def forward(self, *inputs):",
        "        shapes = self._output_shapes(inputs)",
        "        args = [x.contiguous() for x in inputs] + [self._state(k).detach().contiguous() for _, k in WEIGHTS]",
        "        out = kernel_op(*args, *[list(s) or [1] for s in shapes])",
        "        outs = [o.reshape(s) for o, s in zip(out if isinstance(out, (tuple, list)) else [out], shapes)]",
        f"        return {'tuple(outs)' if t.tuple_output else 'outs[0]'}",
    ]
    return "\n".join(body) + "\n"


def function_module_text(task: Task, arch: str) -> str:
    """The module for a built-in (or hand-written) task: one function taking its input tensors."""
    ins = [p.name for p in task.inputs]
    outs = [p.name for p in task.outputs]
    sources = _size_sources(task, ins)
    needed = set()
    for p in task.params:
        if p.kind == "scalar":
            needed |= names_in(p.value) if p.value is not None else {p.name}
        for d in p.shape or []:
            needed |= names_in(d)
    keyword = sorted(needed - set(sources))
    sig = ", ".join(ins) + (", *, " + ", ".join(keyword) if keyword else "")
    out_shapes = {o: [d if isinstance(d, int) else py_expr(d) for d in next(p for p in task.outputs if p.name == o).shape]
                  for o in outs}
    body = [
        _header(task, arch, f"`{task.name}(...)`: the task's entry point as a function of tensors"),
        _constants(task),
        f"INPUTS = {ins!r}",
        f"OUTPUTS = {outs!r}",
        f"SIZE_SOURCES = {json.dumps({k: list(v) for k, v in sources.items()})}",
        f"OUT_SHAPES = {json.dumps(out_shapes)}",
        "",
        "",
        f"def {task.name}({sig}):",
        f'    """{task.signature};\n    inputs are CUDA tensors; returns '
        + ("the outputs " + ", ".join(outs) if len(outs) > 1 else f"the output {outs[0]}") + '."""',
        f"    tensors = dict(zip(INPUTS, [{', '.join(ins)}]))",
        "    sizes = {k: int(tensors[n].shape[i]) for k, (n, i) in SIZE_SOURCES.items()}",
        *(f"    sizes[{k!r}] = int({k})" for k in keyword),
        f"    device = {ins[0]}.device",
        "    for name in OUTPUTS:",
        "        shape = [int(eval(d, {'math': math, 's': sizes})) if isinstance(d, str) else d for d in OUT_SHAPES[name]]",
        "        tensors[name] = torch.empty(shape, dtype=_TORCH_DTYPES[DTYPES[name]], device=device)",
        "    _call(tensors, sizes)",
        "    outs = [tensors[n] for n in OUTPUTS]",
        "    return outs[0] if len(outs) == 1 else tuple(outs)",
    ]
    return "\n".join(body) + "\n"


def torch_test_text(task: Task, module_name: str) -> str:
    """pytest: ModelNew against Model (promoted to float64 on the CPU, as the harness's reference) on fresh
    inputs from get_inputs(), for a few seeds, with the task's tolerances."""
    t = task.torch
    assert t is not None
    tol = {o.name: (o.dtype.value, *(_num(x) for x in (task.tolerance_for(o).atol, task.tolerance_for(o).rtol)))
           for o in task.outputs}
    return f'''"""ModelNew (the kernel) against Model (PyTorch) on fresh inputs. Run: pytest -q {module_name.replace('_ext', '')}_test.py"""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from {module_name} import Model, ModelNew, get_init_inputs, get_inputs  # noqa: E402

TOLERANCE = {tol!r}   # output -> (dtype, atol, rtol): the task's, from task.toml
OUTPUTS = {t.outputs!r}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the kernel needs a CUDA device")
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_model_new_matches_model(seed):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(seed)
    init = get_init_inputs()
    ref = Model(*init)
    new = ModelNew(*init).cuda()
    new.load_state_dict(ref.state_dict())
    ref.train({t.mode == "train"})
    new.train({t.mode == "train"})
    inputs = get_inputs()
    with torch.no_grad():
        want = ref.double()(*[x.double() if x.is_floating_point() else x for x in inputs])
        got = new(*[x.cuda() for x in inputs])
    want = list(want) if isinstance(want, (tuple, list)) else [want]
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(want)
    for name, g, w in zip(OUTPUTS, got, want):
        _, atol, rtol = TOLERANCE[name]
        assert g.shape == w.shape, name
        if not w.is_floating_point():                       # indices, counts: exactly
            assert g.dtype == w.dtype, f"{{name}}: {{g.dtype}}, expected {{w.dtype}}"
            torch.testing.assert_close(g.cpu(), w, atol=0, rtol=0, msg=lambda m: f"{{name}}: {{m}}")
            continue
        torch.testing.assert_close(g.cpu().double(), w, atol=atol, rtol=rtol, msg=lambda m: f"{{name}}: {{m}}")
'''


def function_test_text(task: Task, module_name: str) -> str:
    """pytest: the function against the task's reference (cuda_llm's own inputs and reference, from the
    copy of the task folder beside it), on fresh inputs at the task's shown shapes."""
    fn = task.name
    return f'''"""{fn}() (the kernel) against the task's reference on fresh inputs. Run: pytest -q {fn}_test.py
Needs cuda-llm installed (it draws the inputs and runs the reference exactly as the harness does)."""

import inspect
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from {module_name} import {fn}  # noqa: E402

TASK = Path(__file__).resolve().parent / "task" / "{task.name}"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the kernel needs a CUDA device")
def test_{fn}_matches_reference():
    from cuda_llm.tasks import load_task_folder
    from cuda_llm.tasks.formulas import evaluate
    from cuda_llm.tasks.inputs import make_case_inputs, reference_outputs

    loaded = load_task_folder(TASK)
    task = loaded.task
    keyword = [p.name for p in inspect.signature({fn}).parameters.values() if p.kind == p.KEYWORD_ONLY]
    rng = np.random.default_rng(2024)
    for sizes in task.shapes[:4]:
        inputs = make_case_inputs(loaded, sizes, rng)
        expected = reference_outputs(loaded, inputs, sizes)
        got = {fn}(*[torch.from_numpy(inputs[p.name]).cuda() for p in task.inputs],
                   **{{k: sizes[k] for k in keyword}})
        got = list(got) if isinstance(got, tuple) else [got]
        for p, g in zip(task.outputs, got):
            tol = task.tolerance_for(p)
            atol, rtol = float(evaluate(tol.atol, sizes)), float(evaluate(tol.rtol, sizes))
            if not p.dtype.is_float and atol == 0 and rtol == 0:       # integers: exactly, in their own dtype
                np.testing.assert_array_equal(g.cpu().numpy(), np.asarray(expected[p.name]), err_msg=p.name)
                continue
            want = torch.from_numpy(np.asarray(expected[p.name], dtype=np.float64))
            torch.testing.assert_close(g.cpu().double(), want, atol=atol, rtol=rtol)
'''


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return 0.0


def export_files(task: Task, *, arch: str, command: str, origin: str) -> ExportFiles:
    """Every text file of an export (kernel.cu, kernel.so, the module copy and the task folder are the
    command's to copy)."""
    module_name = f"{task.name}_ext"
    if task.torch is not None:
        scalars = [p.name for p in task.params if p.kind == "scalar" and p.name in task.torch.inputs]
        if scalars or task.torch.bool_tensors:
            raise ValueError(f"task {task.name}: ModelNew does not yet pass a float or int argument of forward() "
                             f"({', '.join(scalars) or 'none'}) or a bool tensor "
                             f"({', '.join(task.torch.bool_tensors) or 'none'}) to the kernel; use kernel.cu directly")
        files = {f"{module_name}.py": torch_module_text(task, arch), f"{task.name}_test.py": torch_test_text(task, module_name)}
    else:
        files = {f"{module_name}.py": function_module_text(task, arch),
                 f"{task.name}_test.py": function_test_text(task, module_name)}
    files["README.md"] = readme_text(task, module_name, arch, command, origin)
    return ExportFiles(module_name=module_name, files=files)


def readme_text(task: Task, module_name: str, arch: str, command: str, origin: str) -> str:
    """The README snippet: what the folder holds, how to use it, how to rebuild, how to test."""
    if task.torch is not None:
        use = (f"```python\nimport sys\nsys.path.insert(0, \"path/to/this/folder\")\nfrom {module_name} import ModelNew\n\n"
               f"model = ModelNew({task.torch.init_inputs}).cuda()      # the same arguments as Model\n"
               f"model.load_state_dict(trained_model.state_dict())       # or keep its own initialisation\n"
               f"y = model(*inputs)                                     # CUDA tensors, as Model takes\n```\n\n"
               "`ModelNew` subclasses the module's `Model`: the same constructor, parameters and state_dict. Its "
               f"forward calls the custom op `torch.ops.cuda_llm.{task.name}`, which torch.compile traces "
               "as one opaque call.")
        test = f"pytest -q {task.name}_test.py   # ModelNew against Model (float64 on the CPU) on fresh inputs"
    else:
        use = (f"```python\nimport sys\nsys.path.insert(0, \"path/to/this/folder\")\nfrom {module_name} import {task.name}\n\n"
               f"out = {task.name}(...)   # {task.signature}\n```")
        test = f"pytest -q {task.name}_test.py   # against the task's reference (needs cuda-llm installed)"
    return f"""# `{task.name}`: the kernel cuda-llm found, callable from PyTorch

From {origin}. Files: `kernel.cu` (the kernel), `kernel.so` (built for {arch}), `{module_name}.py` (the
PyTorch side), `{task.name}_test.py` (a test against the reference){', `reference_module.py` (the original module)' if task.torch is not None else ', `task/` (the task folder)'}.

{use}

Inputs must be contiguous CUDA tensors of the task's dtypes and shapes (a clear ValueError says otherwise).
The kernel runs on the CUDA default stream; if another stream is current, it is synchronized first.

Test it:

```bash
{test}
```

{rebuild_text(arch, command)}"""


_GENCODE = re.compile(r"-gencode=arch=compute_\w+,code=sm_\w+")


def _arch_words(arch: str) -> str:
    """What a target's machine code runs on, for the README."""
    if arch.endswith("a"):
        return (f"the architecture-specific target of compute capability "
                f"{arch[3:-2]}.{arch[-2]}: it loads only on GPUs of exactly that capability"
                + (", H100 and H200" if arch == "sm_90a" else ""))
    return f"machine code for {arch}: it loads on GPUs of that compute capability (and no PTX for others)"


def rebuild_text(arch: str, command: str) -> str:
    """How to rebuild kernel.so: the exact line cuda-llm built it with (run from this folder, nothing of
    cuda-llm's cache needed), and the same line for another GPU."""
    text = f"""## Rebuild

`kernel.so` was built for **{arch}** ({_arch_words(arch)}). Rebuild it here, from this folder alone, with the
flags cuda-llm used (nvcc from the CUDA toolkit on PATH; `-Xlinker -rpath,...` points the library at the
toolkit's CUDA runtime: use your toolkit's `lib` folder on another machine):

```bash
{command}
```
"""
    if not _GENCODE.search(command):
        return text
    other = _GENCODE.sub("-gencode=arch=compute_80,code=sm_80", command)
    return text + f"""
For another GPU, change the `-gencode` to its compute capability (`nvidia-smi --query-gpu=compute_cap
--format=csv,noheader` says it: 8.0 -> `compute_80,code=sm_80`; 9.0 -> `compute_90a,code=sm_90a`). For an A100:

```bash
{other}
```

A kernel that uses {arch}-only instructions (wgmma, setmaxnreg on sm_90a) does not build for another target;
`cuda-llm export RUN --torch DIR --arch sm_80` builds the export for that GPU or says why it cannot; then let
cuda-llm optimize the task on that GPU.
"""
