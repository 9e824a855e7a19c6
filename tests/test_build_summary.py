"""What the coder cannot see of a build, in the next prompt: the ptxas messages that cost speed, the parent's
machine code summarized (instruction mix and innermost loops, read from a real nvcc + cuobjdump listing where
one is installed), and the GPU's hardware facts once."""

from __future__ import annotations

import subprocess

import pytest

from cuda_llm.agents.context import BuildBrief, ParentKernel
from cuda_llm.results import KernelResources, SassSummary
from cuda_llm.tools.bounds.tensor_rates import hardware_facts
from cuda_llm.tools.compiler.build_summary import BuildView, notable_warnings, sass_lines
from cuda_llm.tools.compiler.sass import cuobjdump_path, dump_sass, innermost_loops, summarize_sass

SERIALIZED = ("ptxas info    : (C7510) Potential Performance Loss: wgmma.mma_async instructions are serialized due "
              "to insufficient register resources for the wgmma pipeline in the function '_Z4gemmPKfS0_Pfi'")


def test_the_messages_that_cost_speed_are_picked_out():
    view = BuildView(log="ptxas info    : Used 168 registers\n" + SERIALIZED,
                     kernels=[KernelResources(name="gemm(float const*)", registers=255, spill_store_bytes=96,
                                              spill_load_bytes=128)])
    notes = notable_warnings(view)
    assert notes[0].startswith("ptxas (C7510): wgmma.mma_async instructions are serialized")
    assert "far below the wgmma rate" in notes[0]
    assert notes[1].startswith("gemm: 96 B spill stores, 128 B spill loads at 255 registers")
    assert notable_warnings(BuildView(log="ptxas info    : Used 40 registers")) == []


def test_the_parent_head_and_the_build_brief_carry_them():
    sass = SassSummary(opcodes={"HMMA": 64, "LDGSTS": 8}, ops={"HMMA.16816.F32": 64, "LDGSTS.E.BYPASS.128": 8,
                                                              "BAR.SYNC.DEFER_BLOCKING": 4},
                       tensor={"fp16": 64}, loops=[{"HMMA": 32, "LDGSTS": 4, "BAR": 2}])
    lines = sass_lines(sass)
    assert lines[0] == ("instruction mix (SASS, all kernels): HMMA 64, LDGSTS 8, BAR 4; tensor-core instructions "
                        "by input type: fp16 64, issued as mma.sync (HMMA)")
    assert lines[1] == "innermost loop 1: HMMA 32, LDGSTS 4, BAR 2"
    head = ParentKernel(source="", sass=lines, build_notes=["ptxas (C7510): serialized"]).render_head()
    assert "Its machine code (SASS), summarized" in head and "innermost loop 1: HMMA 32" in head
    assert "ptxas messages about its build that cost speed:\n- ptxas (C7510): serialized" in head
    brief = BuildBrief(cuda_version="13.0", hardware_facts=hardware_facts("sm_90a")).render()
    assert brief.count("Hardware facts of this GPU") == 1 and "mma.sync (HMMA, warp-level)" in brief
    assert "K-major" in brief and "low 13 mantissa bits" in brief


@pytest.mark.skipif(cuobjdump_path() is None, reason="cuobjdump is not installed")
def test_innermost_loops_from_a_real_listing(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(const float* a, float* b, int n) { float s = 0.f;\n"
                   "  for (int i = threadIdx.x; i < n; i += blockDim.x) { s += a[i] * a[i]; __syncthreads(); }\n"
                   "  b[threadIdx.x] = s; }\n")
    cubin = tmp_path / "k.cubin"
    subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", str(cubin), str(src)], check=True, capture_output=True)
    text = dump_sass(cubin)
    assert text is not None
    loops = innermost_loops(text)
    assert loops and loops[0].get("FFMA") and loops[0].get("BAR") and loops[0].get("LDG")
    assert summarize_sass(text).loops == loops
