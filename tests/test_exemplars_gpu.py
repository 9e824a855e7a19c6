"""Every catalogue exemplar runs on the GPU and passes its check (catalogue/*.toml `check`): the program
built from exemplar_check.cuh + the exemplar + its main() compares the kernel's output with a CPU
computation and prints PASS. Needs a CUDA device (an H100 for the sm_90 / sm_90a ones)."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cuda_llm.feature_db import load_catalogue
from cuda_llm.feature_db.catalogue import check_program, nvcc_arch_flags, parse_arch
from cuda_llm.tools.device.device_probe import has_cuda_device

pytestmark = pytest.mark.gpu_long
CATALOGUE = load_catalogue()


def _device_arch() -> str:
    """The local GPU's arch, e.g. sm_90 (from nvidia-smi; the exemplars need at least their min_cc)."""
    out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                         text=True, timeout=60).stdout.split()
    major, minor = out[0].split(".")
    return f"sm_{major}{minor}"


@pytest.fixture(scope="module")
def built(nvcc_path, tmp_path_factory) -> dict[str, tuple[Path | None, str]]:
    """Each feature's self-checking program, built in parallel for this GPU: {id: (binary or None, log)}."""
    if not has_cuda_device():
        pytest.skip("needs a CUDA device")
    arch = _device_arch()
    folder = tmp_path_factory.mktemp("exemplar-programs")

    def build(f):
        if parse_arch(arch) < f.min_cc:
            return f.id, (None, f"needs {f.min_arch}, this GPU is {arch}")
        target = arch + "a" if f.needs_arch_specific else arch
        src = folder / f"{f.id}.cu"
        src.write_text(check_program(f))
        exe = folder / f.id
        proc = subprocess.run([nvcc_path, *nvcc_arch_flags(f, target), "-O2", "-std=c++17", "-o", str(exe), str(src)],
                              capture_output=True, text=True, timeout=600)
        return f.id, (exe if proc.returncode == 0 else None, proc.stdout + proc.stderr)

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return dict(pool.map(build, CATALOGUE))


@pytest.mark.parametrize("feature", CATALOGUE, ids=lambda f: f.id)
def test_exemplar_runs_and_passes_its_check(feature, built):
    exe, log = built[feature.id]
    if exe is None and log.startswith("needs "):
        pytest.skip(log)
    assert exe is not None, f"build failed:\n{log[-2000:]}"
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "PASS" in out, out[-2000:]
