"""Per-SM limits that follow from a GPU's compute capability (the CUDA C++ Programming Guide's table of
technical specifications), for the prompts: what a coder needs to size blocks and predict occupancy and
that DeviceInfo does not measure. Pure data.
"""

from __future__ import annotations

from pydantic import BaseModel


class SmLimits(BaseModel):
    threads_per_sm: int          # resident threads (warps x 32)
    blocks_per_sm: int           # resident thread blocks
    warp_schedulers: int = 4     # processing blocks per SM, one scheduler each (Volta and newer)
    reserved_shared_per_block: int = 1024   # bytes the system keeps per block (sm_80 and newer)
    max_registers_per_thread: int = 255
    notes: str = ""              # what the architecture adds (clusters, TMA, wgmma, ...)


_TABLE: dict[tuple[int, int], SmLimits] = {
    (7, 0): SmLimits(threads_per_sm=2048, blocks_per_sm=32, reserved_shared_per_block=0),
    (7, 5): SmLimits(threads_per_sm=1024, blocks_per_sm=16, reserved_shared_per_block=0),
    (8, 0): SmLimits(threads_per_sm=2048, blocks_per_sm=32, notes="cp.async, mma.sync tensor cores (tf32, fp16, bf16)"),
    (8, 6): SmLimits(threads_per_sm=1536, blocks_per_sm=16, notes="cp.async, mma.sync tensor cores"),
    (8, 7): SmLimits(threads_per_sm=1536, blocks_per_sm=16, notes="cp.async, mma.sync tensor cores"),
    (8, 9): SmLimits(threads_per_sm=1536, blocks_per_sm=24, notes="cp.async, mma.sync tensor cores, fp8"),
    (9, 0): SmLimits(threads_per_sm=2048, blocks_per_sm=32,
                     notes="thread block clusters (8 blocks portable, 16 with opt-in) and distributed shared memory, "
                           "TMA (cp.async.bulk.tensor), wgmma and setmaxnreg (these two need sm_90a)"),
    (10, 0): SmLimits(threads_per_sm=2048, blocks_per_sm=32,
                      notes="thread block clusters, TMA, tcgen05 tensor cores and tensor memory (need sm_100a)"),
    (12, 0): SmLimits(threads_per_sm=1536, blocks_per_sm=32, notes="thread block clusters, TMA, mma.sync tensor cores"),
}


def sm_limits(cc: tuple[int, int]) -> SmLimits | None:
    """The limits of ``cc``, else of the closest lower compute capability of the same major version; None
    for what the table does not know (older than Volta)."""
    if cc in _TABLE:
        return _TABLE[cc]
    same_major = [k for k in _TABLE if k[0] == cc[0] and k <= cc]
    if same_major:
        return _TABLE[max(same_major)]
    lower = [k for k in _TABLE if k <= cc]
    return _TABLE[max(lower)] if lower else None


def render_sm_limits(cc: tuple[int, int]) -> str:
    lim = sm_limits(cc)
    if lim is None:
        return ""
    reserved = (f"{lim.reserved_shared_per_block} B of shared memory per block is reserved by the system (it counts "
                "against the per-SM total)") if lim.reserved_shared_per_block else "no shared memory reserved per block"
    text = (f"Per SM: at most {lim.threads_per_sm} resident threads ({lim.threads_per_sm // 32} warps) and "
            f"{lim.blocks_per_sm} resident blocks, {lim.warp_schedulers} warp schedulers; {reserved}; at most "
            f"{lim.max_registers_per_thread} registers per thread; warp size 32")
    if lim.notes:
        text += f"\nArchitecture features: {lim.notes}"
    return text
