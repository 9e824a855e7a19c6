"""The adversarial kernels in tests/adversarial/ and what each must get: every file starts with
`// task:`, `// expect:` (statuses joined by |) and `// trick:` lines."""

from __future__ import annotations

import re
from pathlib import Path

from cuda_llm.results import Status

ADV = Path(__file__).parent / "adversarial"
ALL = sorted(ADV.glob("*.cu"))


def header(path: Path) -> dict[str, str]:
    """The `// key: value` lines at the top of an adversarial kernel."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        m = re.match(r"//\s*(task|expect|trick|rule|reason|held_out):\s*(.*)", line)
        if m:
            out.setdefault(m.group(1), m.group(2).strip())
        elif not line.startswith("//"):
            break
    return out


def expected(path: Path) -> set[Status]:
    return {Status(s) for s in header(path)["expect"].split("|")}
