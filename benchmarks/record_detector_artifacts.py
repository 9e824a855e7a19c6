"""Record what nvcc builds from every detector-corpus kernel: the ptxas report (kernels, registers,
shared memory) and the SASS opcode counts, one small JSON per kernel, so the detectors' build rules
(SASS and compile-report rules) run in CI and in benchmarks/detector_bench.py without compiling.

Needs nvcc and cuobjdump (no GPU): the machine code for a target is the same on any host. Run it again
after adding or changing corpus kernels:

    python benchmarks/record_detector_artifacts.py                      # every corpus folder
    python benchmarks/record_detector_artifacts.py tests/detector_corpus --jobs 2

Writes tests/fixtures/detector_artifacts/<corpus folder>/<kernel>.json: {"arch", "nvcc", "kernels",
"ops", "flow"} where ops counts full SASS opcodes (``LDG.E.128.CONSTANT``: 12) and flow the facts of the
PTX's dataflow (tools/compiler/ptx/: ``shared_tile``: 2). A kernel that does not build is
named on stderr and gets no file (its build rules then see nothing, as in a run without SASS).
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CORPORA = ("tests/detector_corpus", "tests/detector_corpus_public/tune", "tests/detector_corpus_public/heldout",
           "tests/detector_corpus_strong", "tests/detector_corpus_fresh",
           "tests/detector_corpus_fresh2")


def record_one(path: Path, arch: str, out: Path, nvcc: str) -> str | None:
    """Build one kernel file, write its artifact JSON; the error text when it fails."""
    from cuda_llm.feature_db.detector_eval import Artifacts
    from cuda_llm.tools.compiler.build_facts import BuildFactsError, build_facts
    from cuda_llm.tools.compiler.compile import nvcc_version

    try:
        kernels, sass = build_facts(path, arch, nvcc=nvcc)
    except BuildFactsError as exc:
        return str(exc)
    art = Artifacts(arch=arch, nvcc=nvcc_version(nvcc), kernels=kernels, ops=sass.ops, flow=sass.flow)
    out.write_text(art.model_dump_json(indent=None) + "\n")
    return None


def main(argv: list[str] | None = None) -> int:
    from cuda_llm.feature_db.detector_eval import artifacts_dir
    from cuda_llm.feature_db.detector_eval import load_corpus
    from cuda_llm.tools.compiler.compile import nvcc_path

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpora", nargs="*", type=Path, help=f"corpus folders (default: {', '.join(CORPORA)})")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args(argv)
    folders = a.corpora or [ROOT / c for c in CORPORA if (ROOT / c).is_dir()]
    nvcc = nvcc_path()
    failed = 0
    for folder in folders:
        kernels = load_corpus(folder)
        out = artifacts_dir(folder)
        out.mkdir(parents=True, exist_ok=True)
        for stale in out.glob("*.json"):
            if not any(stale.stem == k.name for k in kernels):
                stale.unlink()

        def job(k, out=out):
            return k.name, record_one(k.path, k.arch, out / f"{k.name}.json", nvcc)

        with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
            for name, err in pool.map(job, kernels):
                if err:
                    failed += 1
                    print(f"{folder.name}/{name}: does not build: {err.strip().splitlines()[-1] if err.strip() else '?'}",
                          file=sys.stderr)
        print(f"{folder}: {len(kernels)} kernels -> {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
