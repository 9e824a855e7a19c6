"""What a kernel's dataflow shows, read from the PTX nvcc emits (``nvcc -ptx`` or ``-keep``). Pure logic.

Source regexes see one spelling of a shared-memory tile or a register tile; the PTX sees the structure
whatever the spelling, because its virtual registers make def-use chains plain. This package parses PTX into
kernels and instructions, runs a flow-insensitive taint analysis over the virtual registers (every
definition of a register unions into it; iterated to a fixpoint, so loop-carried registers are covered),
and derives named facts per kernel (``FACTS``), each a count of instances. Its modules:

- ``parse``: PTX text into ``Module``, ``Kernel`` and ``Instr``.
- ``dataflow``: the taint analysis (``analyse`` -> ``Flow``) and the def-use walks the facts share.
- ``affine``: addresses as polynomials over the x thread index (``Affine``), lane by lane.
- ``trees``: shared arrays classified by what their stores combine (trees, scans, warp results).
- ``tiles``: ``shared_tile``, ``register_tile``, ``shared_stages``.
- ``reduction``: ``shared_reduction``.
- ``coalescing``: ``coalesced``, ``strided``.
- ``fusion``: ``fused``, ``online_rescale``.
- ``layout_loops``: ``grid_stride``, ``shared_padding``, ``shared_swizzle``.

The fact modules import ``parse``, ``dataflow``, ``affine`` and ``trees``, never each other nor this module.
"""

from __future__ import annotations

from cuda_llm.tools.compiler.ptx.affine import Affine
from cuda_llm.tools.compiler.ptx.coalescing import coalescing_facts
from cuda_llm.tools.compiler.ptx.dataflow import analyse
from cuda_llm.tools.compiler.ptx.fusion import fusion_facts
from cuda_llm.tools.compiler.ptx.layout_loops import layout_loop_facts
from cuda_llm.tools.compiler.ptx.parse import Kernel, parse_ptx
from cuda_llm.tools.compiler.ptx.reduction import reduction_facts
from cuda_llm.tools.compiler.ptx.tiles import tile_facts

FACTS = ("shared_tile", "register_tile", "shared_stages", "shared_reduction", "coalesced", "strided", "fused",
         "online_rescale", "grid_stride", "shared_padding", "shared_swizzle")


def kernel_facts(kernel: Kernel, shared: frozenset[str]) -> dict[str, int]:
    """Every fact of one kernel, by name."""
    flow = analyse(kernel, shared)
    poly = Affine(flow)
    return {**tile_facts(flow), **reduction_facts(flow, poly), **coalescing_facts(flow, poly),
            **fusion_facts(flow, poly), **layout_loop_facts(flow)}


def flow_facts(ptx: str) -> dict[str, int]:
    """The facts of every kernel of a PTX module, summed; every fact is named, 0 where none was found (so
    an empty dict means the PTX was not read)."""
    mod = parse_ptx(ptx)
    total = dict.fromkeys(FACTS, 0)
    for k in mod.kernels:
        for name, n in kernel_facts(k, mod.shared).items():
            total[name] += n
    return total
