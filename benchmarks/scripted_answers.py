"""Scripted LLM answers for the benchmarks: NOT a language model. A langchain_core chat model that answers
each role from a script (the planner with the features it was offered, the coder with a kernel chosen by
candidate id, the critic with a fixed critique), so a benchmark (benchmarks/loop_bench.py,
benchmarks/prompt_audit.py) measures the loop, the prompts and the GPU, not an LLM. Its model name is
"scripted-benchmark", which every report built from it shows as scripted.

It lives beside the benchmarks, not in the package: a double is never part of what the product can pick.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, PrivateAttr

ROLES = ("planner", "coder", "critic")
_WRITE = re.compile(r"Write candidate `([^`]+)`")
_VARIANT = re.compile(r"//\s*(?:variant|audit):\s*([\w.-]+)")   # a kernel's first line names it


def _text(m: BaseMessage) -> str:
    c = m.content
    return c if isinstance(c, str) else "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in c)


def role_of(messages: list[BaseMessage]) -> str | None:
    """planner / coder / critic, from the opening of the system prompt's template."""
    from cuda_llm.agents.prompts import template

    system = " ".join(next((_text(m) for m in messages if isinstance(m, SystemMessage)), "").split())
    for role in ROLES:
        head = " ".join(template(f"{role}_system").strip().split("{", 1)[0].split())[:60]
        if system.startswith(head):
            return role
    return None


def candidate_of(messages: list[BaseMessage]) -> str:
    """The candidate a coder conversation asks for now: the last ``Write candidate `r2c1``` in it (a repair names
    the failed candidate first, a refinement turn asks for a new one in the same conversation, a compile-fix turn
    asks for none and keeps the first's); "*" when there is none."""
    found = _WRITE.findall("\n".join(_text(x) for x in messages))
    return found[-1] if found else "*"


def offered_ids(messages: list[BaseMessage]) -> tuple[str, ...]:
    part = _text(messages[-1]).split("Offered features", 1)[-1]
    return tuple(re.findall(r"^- `([a-z0-9_]+)`", part, re.M)) or ("coalesced_access",)


def variant_of(source: str) -> str | None:
    m = _VARIANT.search(source)
    return m.group(1) if m else None


def plan_answer(n: int, features: tuple[str, ...], *, ideas: Sequence[str] = (),
                rationale: str = "scripted plan") -> str:
    """n candidates, the i-th applying features[i % len(features)] as ideas[i] ("scripted idea i" without one)."""
    cands = [{"features": [features[i % len(features)]], "idea": ideas[i] if i < len(ideas) else f"scripted idea {i}"}
             for i in range(n)]
    return json.dumps({"rationale": rationale, "candidates": cands})


def critic_answer(features: tuple[str, ...], **critique: Any) -> str:
    """A critique recommending ``features``; ``critique`` replaces or adds fields (evidence, change, ...)."""
    return json.dumps({"bottleneck": "memory-bound", "evidence": ["scripted"], "next_features": list(features),
                       "expected_gain": "unknown", "summary": "scripted critique (no LLM)", **critique})


def coder_answer(source: str, note: str = "Scripted kernel.") -> str:
    return f"{note}\n\n```cuda\n{source}```\n"


class ScriptedBenchModel(BaseChatModel):
    """Answers from ``respond(role, messages) -> str``; usage is characters / 4 so token accounting runs."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    respond: Callable[[str | None, list[BaseMessage]], str]
    model_name: str = "scripted-benchmark"
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "scripted-benchmark"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
        text = self.respond(role_of(messages), list(messages))
        n_in = max(1, sum(len(_text(m)) for m in messages) // 4)
        msg = AIMessage(content=text, usage_metadata={"input_tokens": n_in, "output_tokens": max(1, len(text) // 4),
                                                      "total_tokens": n_in + max(1, len(text) // 4)},
                        response_metadata={"model_name": self.model_name})
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def with_structured_output(self, schema: Any, **kw: Any) -> Any:
        raise NotImplementedError("scripted: answers are plain text JSON")   # the agents parse the text themselves


# ------------------------------------------------------------------ the softmax kernels the coder "writes"
# naive-128/256: one thread per row; block-256/32: one block per row, warp-shuffle block reductions (x read
# twice, y written once); *-extra: a redundant second pass over the row (a deliberately worse variant). The
# first line of each names its variant (how the loop benchmark tells which one won).
NAIVE = """// variant: {name}
#include <cuda_runtime.h>
#include <math.h>
__global__ void softmax_rows(const float* x, float* y, int rows, int cols) {{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* xr = x + (size_t)row * cols;
    float* yr = y + (size_t)row * cols;
    float m = -INFINITY;
    for (int c = 0; c < cols; ++c) m = fmaxf(m, xr[c]);
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += expf(xr[c] - m);
    float inv = 1.0f / s;
    for (int c = 0; c < cols; ++c) yr[c] = expf(xr[c] - m) * inv;
}}
extern "C" void solve(const float* x, float* y, int rows, int cols) {{
    if (rows <= 0 || cols <= 0) return;
    int threads = {threads};
    softmax_rows<<<(rows + threads - 1) / threads, threads>>>(x, y, rows, cols);
}}
"""

# one block per row, warp-shuffle block reductions; PASSES=3 reads x twice and writes y once,
# EXTRA re-reads the row once more (a deliberately worse variant)
BLOCK = """// variant: {name}
#include <cuda_runtime.h>
#include <math.h>
#define THREADS {threads}
__device__ __forceinline__ float warp_max(float v) {{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}}
__device__ __forceinline__ float warp_sum(float v) {{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}}
__device__ float block_max(float v, float* sh) {{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = (threadIdx.x < THREADS / 32) ? sh[lane] : -INFINITY;
    if (warp == 0) v = warp_max(v);
    if (threadIdx.x == 0) sh[0] = v;
    __syncthreads();
    float r = sh[0];
    __syncthreads();
    return r;
}}
__device__ float block_sum(float v, float* sh) {{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = (threadIdx.x < THREADS / 32) ? sh[lane] : 0.0f;
    if (warp == 0) v = warp_sum(v);
    if (threadIdx.x == 0) sh[0] = v;
    __syncthreads();
    float r = sh[0];
    __syncthreads();
    return r;
}}
__global__ void __launch_bounds__(THREADS) softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {{
    __shared__ float sh[32];
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += THREADS) m = fmaxf(m, xr[c]);
    m = block_max(m, sh);
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += THREADS) s += expf(xr[c] - m);
    s = block_sum(s, sh);
{extra}
    float inv = 1.0f / s;
    for (int c = threadIdx.x; c < cols; c += THREADS) yr[c] = expf(xr[c] - m) * inv;
}}
extern "C" void solve(const float* x, float* y, int rows, int cols) {{
    if (rows <= 0 || cols <= 0) return;
    softmax_rows<<<rows, THREADS>>>(x, y, cols);
}}
"""
EXTRA_PASS = """    float s2 = 0.0f;  // a redundant second sum over the row
    for (int c = threadIdx.x; c < cols; c += THREADS) s2 += expf(xr[c] - m);
    s = 0.5f * (s + block_sum(s2, sh));"""


# variant -> (template, threads per block, the extra pass or "")
_SHAPES = {"naive-128": (NAIVE, 128, ""), "naive-256": (NAIVE, 256, ""), "block-256": (BLOCK, 256, ""),
           "block-256-extra": (BLOCK, 256, EXTRA_PASS), "block-32-extra": (BLOCK, 32, EXTRA_PASS),
           "block-32": (BLOCK, 32, "")}
VARIANTS = tuple(_SHAPES)


def kernel(variant: str) -> str:
    """The source of one softmax variant (KeyError, naming the known ones, for any other)."""
    if variant not in _SHAPES:
        raise KeyError(f"no softmax variant {variant!r} (known: {', '.join(VARIANTS)})")
    template, threads, extra = _SHAPES[variant]
    return template.format(name=variant, threads=threads, extra=extra)   # NAIVE has no {extra}: ignored


# ------------------------------------------------------------------ the prompt audit's kernels (softmax and sgemm)
# a warp-per-row softmax (128, 256 or 512 threads by ``size``) and a shared-memory tiled sgemm (tile 16 or 32 by
# ``size``); the first line names the kernel (``// audit: name``, read by variant_of).
WARP_SOFTMAX = """// audit: {name}
#include <cuda_runtime.h>
#include <math.h>
__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {{
    int lane = threadIdx.x & 31;
    long long row = (long long)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
    if (row >= rows) return;
    const float* xr = x + row * cols;
    float m = -INFINITY;
    for (int c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.0f;
    for (int c = lane; c < cols; c += 32) s += expf(xr[c] - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    for (int c = lane; c < cols; c += 32) y[row * cols + c] = expf(xr[c] - m) / s{error};
}}
extern "C" void solve(const float* x, float* y, int rows, int cols) {{
    if (rows <= 0 || cols <= 0) return;
    int threads = {threads};
    softmax_rows<<<(unsigned)((rows + threads / 32 - 1) / (threads / 32)), threads>>>(x, y, rows, cols);
}}
"""

SGEMM_TILED = """// audit: {name}
#include <cuda_runtime.h>
#define T {tile}
__global__ void sgemm_tiled(const float* A, const float* B, float* C, int M, int N, int K) {{
    __shared__ float As[T][T];
    __shared__ float Bs[T][T + 1];
    int i = blockIdx.y * T + threadIdx.y, j = blockIdx.x * T + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += T) {{
        As[threadIdx.y][threadIdx.x] = (i < M && k0 + threadIdx.x < K) ? A[(long long)i * K + k0 + threadIdx.x] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (j < N && k0 + threadIdx.y < K) ? B[(long long)(k0 + threadIdx.y) * N + j] : 0.0f;
        __syncthreads();
        for (int k = 0; k < T; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }}
    if (i < M && j < N) C[(long long)i * N + j] = acc{error};
}}
extern "C" void solve(const float* A, const float* B, float* C, int M, int N, int K) {{
    if (M <= 0 || N <= 0) return;
    dim3 block(T, T), grid((N + T - 1) / T, (M + T - 1) / T);
    sgemm_tiled<<<grid, block>>>(A, B, C, M, N, K);
}}
"""


def audit_kernel(task: str, name: str, *, broken: bool = False, size: int = 0) -> str:
    """The sgemm kernel for task "sgemm", else the softmax one; ``broken`` adds an undeclared name: an nvcc
    error on purpose (a compile-fix turn)."""
    error = " + not_declared" if broken else ""
    if task == "sgemm":
        return SGEMM_TILED.format(name=name, tile=(16, 32)[size % 2], error=error)
    return WARP_SOFTMAX.format(name=name, threads=(128, 256, 512)[size % 3], error=error)
