"""`cuda-llm doctor`: is this machine and this endpoint ready for an overnight run?"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cuda_llm.agents.errors import LLMConfigError
from cuda_llm.agents.settings import load_settings
from cuda_llm.commands import one_line_errors
from cuda_llm.commands.flags import add_llm_arguments, llm_cli
from cuda_llm.commands.preflight import Check, failures, run_checks

HELP = "check the GPU, pycuda, nvcc, Nsight Compute, disk space and the LLM endpoint before a run"
DESCRIPTION = """Check everything an overnight run needs, one line each, and say what to do about a problem:

  gpu       the NVIDIA driver and a CUDA device
  pycuda    pycuda imports (in a child interpreter, as the GPU worker's) and sees the driver; when it is
            missing or built against the wrong toolkit, the install command with your toolkit's path
  nvcc      the CUDA compiler, and that it builds for the target architecture (--arch)
  ncu       Nsight Compute, and the permission to read GPU counters (ERR_NVGPUCTRPERM)
  disk      free space where runs (--runs-dir) and the cache ($CUDA_LLM_CACHE) are written
  endpoint  per distinct model and endpoint: reachable, key accepted, model served (one GET /models,
            or a 1-token completion where the server has no /models)

`cuda-llm optimize` and `cuda-llm resume` run the same checks before anything is spent (there, a missing
or forbidden ncu is only a warning: candidates are still measured). Exit code 1 when a check fails."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    add_llm_arguments(p)
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where runs are kept (default ./runs)")
    p.add_argument("--arch", help="target architecture, e.g. sm_90 (default: the device's)")
    p.add_argument("--check-timeout", type=float, default=15.0, help="seconds to wait for the endpoint's answer (default 15)")
    p.add_argument("--no-llm", action="store_true", help="check the machine only")
    p.add_argument("--json", action="store_true", help="print JSON instead of lines")


def run(args: argparse.Namespace) -> int:
    settings, config_check = None, None
    if not args.no_llm:
        try:
            settings = load_settings(llm_cli(args))
        except LLMConfigError as exc:
            config_check = Check(name="endpoint", level="fail", detail=str(exc))
    checks = run_checks(settings, runs_dir=args.runs_dir, arch=args.arch, timeout_s=args.check_timeout, strict_ncu=True)
    if config_check is not None:
        checks.append(config_check)
    if args.json:
        print(json.dumps([c.model_dump() for c in checks], indent=1))
    else:
        for c in checks:
            print(c.line())
        bad = failures(checks)
        print(f"\n{len(bad)} problem(s); fix them before `cuda-llm optimize`" if bad else "\nready for `cuda-llm optimize`")
    sys.stdout.flush()
    return 1 if failures(checks) else 0
