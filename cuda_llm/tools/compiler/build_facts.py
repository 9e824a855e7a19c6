"""What nvcc builds from one CUDA file, without linking or running it: the ptxas report (kernels,
registers, shared memory, spills), the SASS summary and the facts of the PTX's dataflow (kept from the same
build). The feature detectors' build rules read these;
benchmarks/record_detector_artifacts.py records them for the detector corpora. Needs nvcc and cuobjdump,
no GPU: the machine code for a target is the same on any host."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from cuda_llm.results import KernelResources, SassSummary
from cuda_llm.tools.compiler.compile import nvcc_path
from cuda_llm.tools.compiler.ptx import flow_facts
from cuda_llm.tools.compiler.ptxas import parse_ptxas
from cuda_llm.tools.compiler.sass import dump_sass, summarize_sass


class BuildFactsError(RuntimeError):
    """The file did not build, or its machine code could not be read; the message says which."""


def build_facts(path: Path, arch: str, *, nvcc: str | None = None, timeout_s: float = 600.0
                ) -> tuple[list[KernelResources], SassSummary]:
    """Compile ``path`` to a cubin for ``arch`` (sm_90, or sm_90a for the architecture-specific target)
    with ``-Xptxas -v``; the kernels of the report and the SASS summary of the cubin, with the dataflow
    facts of the PTX nvcc kept (``SassSummary.flow``)."""
    tool = nvcc or nvcc_path()
    flags = [f"-gencode=arch=compute_{arch[3:]},code={arch}"] if arch.endswith("a") else [f"-arch={arch}"]
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "k.cubin"
        keep = Path(tmp) / "keep"
        keep.mkdir()
        proc = subprocess.run([tool, *flags, "-std=c++17", "-cubin", "-Xptxas", "-v", "-keep", "-keep-dir", str(keep),
                               "-o", str(cubin), str(path)], capture_output=True, text=True, timeout=timeout_s)
        if proc.returncode != 0:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
            raise BuildFactsError(f"{path}: nvcc failed for {arch}: {' | '.join(tail)}")
        text = dump_sass(cubin)
        if text is None:
            raise BuildFactsError(f"{path}: cuobjdump could not read the cubin (install cuobjdump: see tools/compiler/sass.py)")
        ptx = sorted(keep.glob("*.ptx"))
        if not ptx:
            raise BuildFactsError(f"{path}: nvcc kept no PTX for {arch}")
        summary = summarize_sass(text)
        summary.flow = flow_facts("\n".join(p.read_text(errors="replace") for p in ptx))
        return parse_ptxas(proc.stdout + proc.stderr), summary
