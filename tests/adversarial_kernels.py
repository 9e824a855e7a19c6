"""The adversarial kernels in tests/adversarial/ and what each must get: every file starts with
`// task:`, `// expect:` (statuses joined by |) and `// trick:` lines; `// needs: timing` where only the
timing stage can catch the trick (the others are judged with timing off, which is faster).
tests/adversarial/runtime/ holds candidates the static checks refuse, built here on purpose without them
(``build_without_checks``) to show what the runtime does with them."""

from __future__ import annotations

import re
from pathlib import Path

from cuda_llm.results import Status

ADV = Path(__file__).parent / "adversarial"
ALL = sorted(ADV.glob("*.cu"))
RUNTIME = sorted((ADV / "runtime").glob("*.cu"))


def header(path: Path) -> dict[str, str]:
    """The `// key: value` lines at the top of an adversarial kernel."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        m = re.match(r"//\s*(task|expect|trick|rule|reason|held_out|needs):\s*(.*)", line)
        if m:
            out.setdefault(m.group(1), m.group(2).strip())
        elif not line.startswith("//"):
            break
    return out


def expected(path: Path) -> set[Status]:
    return {Status(s) for s in header(path)["expect"].split("|")}


def build_without_checks(path: Path, out_dir: Path, arch: str | None = None) -> Path:
    """nvcc straight to a shared object, the way the harness builds candidates but with none of its checks
    (and -ldl for dlsym on older C libraries)."""
    import subprocess

    from cuda_llm.tools.compiler.compile import nvcc_path, resolve_arch, runtime_rpath

    nvcc = nvcc_path()
    so = out_dir / (path.stem + ".so")
    cmd = [nvcc, f"-arch={resolve_arch(arch)}", "-O3", "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared",
           *runtime_rpath(nvcc), str(path), "-o", str(so), "-ldl"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"{path.name}: nvcc failed:\n{done.stdout}{done.stderr}")
    return so
