"""The stored table of tensor-core rates per instruction form (wgmma, mma.sync) and input type, and the
L2-to-SM bandwidth, per GPU architecture (tensor_rates.toml): what the critic, the diagnosis and the coder's
prompt read to tell a kernel on mma.sync what wgmma would give, and the hardware facts every coder asked
for. Each figure says where it came from (measured here, or an estimate with its source). Pure.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, Field

RATES_FILE = Path(__file__).parent / "tensor_rates.toml"


class FormRates(BaseModel):
    """TFLOP/s of one instruction form by input type (fp16, tf32), and where the figures come from."""

    fp16: float | None = None
    tf32: float | None = None
    measured: bool = False
    source: str = ""

    def of(self, kind: str) -> float | None:
        return {"fp16": self.fp16, "bf16": self.fp16, "tf32": self.tf32}.get(kind)


class L2Rate(BaseModel):
    to_sm_gbs: float = 0.0
    measured: bool = False
    source: str = ""


class ArchRates(BaseModel):
    device: str = ""
    wgmma: FormRates = Field(default_factory=FormRates)
    mma_sync: FormRates = Field(default_factory=FormRates)
    l2: L2Rate = Field(default_factory=L2Rate)

    def mma_vs_wgmma(self, kind: str) -> tuple[float, float] | None:
        """(mma.sync, wgmma) TFLOP/s for an input type, or None where either is unknown."""
        a, b = self.mma_sync.of(kind), self.wgmma.of(kind)
        return (a, b) if a and b else None


def _how(r: FormRates) -> str:
    return "measured" if r.measured else "estimate"


@lru_cache(maxsize=4)
def load_rates(path: Path = RATES_FILE) -> dict[str, ArchRates]:
    """arch ("sm_90") -> its rates; a broken file names itself."""
    try:
        data = tomllib.loads(Path(path).read_text())
        return {k: ArchRates.model_validate(v) for k, v in data.items()}
    except (OSError, tomllib.TOMLDecodeError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}") from None


def rates_for(arch: str) -> ArchRates | None:
    """The table of an architecture (``sm_90a`` reads ``sm_90``), or None."""
    base = arch[:-1] if arch and arch[-1] in "af" else arch
    return load_rates().get(base)


def hardware_facts(arch: str) -> list[str]:
    """The facts coders of this architecture ask for, stated once in the prompt (empty elsewhere)."""
    r = rates_for(arch)
    if r is None:
        return []
    out = []
    for kind in ("fp16", "tf32"):
        pair = r.mma_vs_wgmma(kind)
        if pair:
            out.append(f"{kind} tensor cores: mma.sync (HMMA, warp-level) ~{pair[0]:.0f} TFLOP/s "
                       f"({_how(r.mma_sync)}) vs wgmma (HGMMA, warpgroup, sm_90a) {pair[1]:.0f} TFLOP/s "
                       f"({_how(r.wgmma)}): only wgmma reaches the tensor-core peak the speed of light assumes")
    out += ["wgmma with tf32 operands needs both A and B K-major in shared memory (the transpose bits apply only to "
            "16-bit types); an MN-major fp32 operand must be transposed on its way into shared memory",
            "tf32 tensor cores read only the top 19 bits of an fp32 operand (the low 13 mantissa bits are ignored, "
            "truncated), so a split's low part must be formed as x - float(tf32(x)) with cvt.rna.tf32.f32",
            "ptxas may serialize wgmma (messages C7510/C7515: 'wgmma.mma_async instructions are serialized'), e.g. when "
            "accumulator registers are touched between wgmma.fence and wgmma.wait_group, on register pressure, or "
            "across a non-inlined call; a serialized wgmma kernel runs far below the wgmma rate"]
    if r.l2.to_sm_gbs:
        out.append(f"L2-to-SM bandwidth ~{r.l2.to_sm_gbs / 1000:.1f} TB/s ({'measured' if r.l2.measured else 'estimate'})")
    return out
