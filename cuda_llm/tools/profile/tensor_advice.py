"""Tensor-core advice at the level of the kernel it advises (Hopper and its mma.sync/wgmma split). Pure.

The diagnosis's rules know that a compute-bound GEMM should use tensor cores; they do not know which form a
kernel already uses. This reads the build's machine code (SASS: HGMMA is wgmma, HMMA is mma.sync or wmma),
the recognized split precision (the speed of light's ``split_of``, carried on the roofline), the tensor pipe's
busy share and the L2 and DRAM throughput of the profile, and the stored rates (tools/bounds/tensor_rates):

- never a tensor-core feature the kernel already uses in the same or a faster form (mma.sync or wmma to a
  wgmma kernel, wmma to an mma.sync one, 3xTF32 to a 3xTF32 or a faster fp16 split);
- a kernel whose tensor pipe is busy on HMMA on a GPU with wgmma is told the two rates and what wgmma would
  give, and wgmma is suggested;
- a split is named (3xTF32, 3xFP16...) and its bound explained;
- tiles re-read from L2 (a tiled product whose L2 is far busier than its DRAM) are pointed to thread block
  clusters with TMA multicast, which load a tile once for the whole cluster.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from cuda_llm.results import SassSummary
from cuda_llm.tools.bounds.tensor_rates import rates_for

TENSOR_FEATURES = ("tensor_cores_wmma", "tensor_cores_mma", "tensor_cores_3xtf32", "wgmma")
BUSY_PIPE_PCT = 30.0        # a tensor pipe this busy: the MMA rate matters
L2_OVER_DRAM = 1.5          # L2 this many times busier than DRAM: tiles are re-read from L2
L2_BUSY_PCT = 40.0


class TensorAdvice(BaseModel):
    evidence: list[str] = Field(default_factory=list)
    drop: list[str] = Field(default_factory=list)      # features not to suggest: used already, or slower
    add: list[str] = Field(default_factory=list)       # features to suggest first


def form_of(sass: SassSummary | None) -> str | None:
    """'wgmma' (HGMMA in the SASS), 'mma' (HMMA: mma.sync or wmma), or None (no tensor-core code)."""
    if sass is None:
        return None
    ops = sass.opcodes or {}
    if ops.get("HGMMA") or ops.get("IGMMA") or ops.get("QGMMA"):
        return "wgmma"
    if ops.get("HMMA") or ops.get("IMMA"):
        return "mma"
    return None


def advise(sass: SassSummary | None, *, arch: str = "", split: str = "", tensor_pipe_pct: float | None = None,
           l2_pct: float | None = None, dram_pct: float | None = None, tiled: bool = False) -> TensorAdvice:
    """The advice for one kernel (see the module doc). ``split``: the recognized split's name ("3xTF32"),
    ``tiled``: it stages tiles (shared-memory tiles, cp.async or TMA in its code)."""
    out = TensorAdvice()
    form = form_of(sass)
    kinds = sorted(k for k, n in (sass.tensor if sass else {}).items() if n)
    if form == "wgmma":
        out.drop += ["tensor_cores_wmma", "tensor_cores_mma", "wgmma"]
    elif form == "mma":
        out.drop += ["tensor_cores_wmma", "tensor_cores_mma"]
    if split:
        out.drop.append("tensor_cores_3xtf32")   # a split already: 3xTF32 is the same or slower (tf32 is half fp16)
        faster = " (3xTF32 would be slower: the tf32 rate is half the fp16 rate)" if "FP16" in split else ""
        out.evidence.append(f"the kernel is a {split} split (split precision on {', '.join(kinds)} tensor cores){faster}; "
                            f"its speed of light counts the products of the split")
    rates = rates_for(arch) if arch else None
    if form == "mma" and rates is not None and rates.wgmma.fp16:
        kind = "tf32" if kinds == ["tf32"] else "fp16"
        pair = rates.mma_vs_wgmma(kind)
        if pair is not None:
            busy = f"its tensor pipe is busy {tensor_pipe_pct:.0f}% on HMMA (mma.sync)" if tensor_pipe_pct else \
                "it issues HMMA (mma.sync or wmma)"
            out.evidence.append(
                f"{busy}: on this GPU mma.sync reaches ~{pair[0]:.0f} TFLOP/s ({kind}) against wgmma's {pair[1]:.0f} "
                f"(the rate the speed of light assumes), so mma.sync tops out near {100 * pair[0] / pair[1]:.0f}% of "
                f"it; wgmma (sm_90a warpgroup MMAs reading operands from shared memory, fed by TMA) would give up to "
                f"{pair[1] / pair[0]:.2f}x on the MMA-bound part ({rates.mma_sync.source.split(':')[0]})")
            if tensor_pipe_pct is None or tensor_pipe_pct >= BUSY_PIPE_PCT:
                out.add.append("wgmma")
    if tiled and l2_pct is not None and l2_pct >= L2_BUSY_PCT and (dram_pct is None or l2_pct >= L2_OVER_DRAM * dram_pct):
        cluster = rates is not None
        out.evidence.append(
            f"L2 is {l2_pct:.0f}% busy against DRAM's {dram_pct or 0:.0f}%: neighbouring blocks re-read the same tiles "
            "from L2" + ("; thread block clusters with TMA multicast (cp.async.bulk.tensor ... .multicast::cluster) "
                         "load each tile once for the cluster" if cluster else ""))
        out.add.append("thread_block_clusters")
    out.drop = list(dict.fromkeys(out.drop))
    out.add = [f for f in dict.fromkeys(out.add) if f not in out.drop]
    return out
