"""Every baseline of the built-in suite compiles with the real nvcc for sm_90a, through the product's own
compile verifier (the flags and links the harness uses), in one parallel batch: the 20 naive.cu files,
the CUB yardsticks, and the cuBLAS yardsticks where cuBLAS is installed (the toolkit's or the pip
package's), and passes the checks made after compiling. Each library.cu is found by task.library_path,
declares what it links in task.toml, and is refused as a candidate."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_llm.tasks import TaskError, list_task_names, load_task, load_task_folder
from cuda_llm.tasks.loader import SUITE_DIR
from cuda_llm.tools.compiler.compile import compile_many
from cuda_llm.tools.compiler.symbols import check_build
from cuda_llm.results import CompileResult
from suite_checks import LIBRARY_TASKS, cublas_installed

pytestmark = pytest.mark.slow     # whole graph runs / every suite build: `pytest -m "not slow"` leaves them out

# Libraries a library.cu links: the names task.toml must list in library_links (CUB is header-only).
LINK_HEADERS = {"cublas": "cublas_v2.h"}


def _library_sources() -> list[Path]:
    return sorted(SUITE_DIR.glob("*/library.cu"))


def _links(src: Path) -> set[str]:
    text = src.read_text()
    return {lib for lib, header in LINK_HEADERS.items() if header in text}


@pytest.fixture(scope="module")
def builds(nvcc_path, tmp_path_factory) -> dict[str, CompileResult]:
    """{"<task>/naive.cu" | "<task>/library.cu": CompileResult}, compiled into a fresh cache so that nvcc
    really runs; cuBLAS yardsticks only where cuBLAS is installed."""
    cache_root = tmp_path_factory.mktemp("suite_builds")
    plain = {f"{n}/naive.cu": SUITE_DIR / n / "naive.cu" for n in list_task_names()}
    plain |= {f"{s.parent.name}/library.cu": s for s in _library_sources() if not _links(s)}
    linked = {f"{s.parent.name}/library.cu": s for s in _library_sources() if _links(s)} if cublas_installed() else {}
    out = dict(zip(plain, compile_many([p.read_text() for p in plain.values()], arch="sm_90", cache_root=cache_root)))
    if linked:
        results = compile_many([p.read_text() for p in linked.values()], arch="sm_90", cache_root=cache_root,
                               libs=("cublas",))
        out |= dict(zip(linked, results))
    return out


def _assert_built(builds: dict[str, CompileResult], labels: list[str]) -> None:
    failed = {label: (builds[label].errors or builds[label].log)[-2000:] for label in labels if not builds[label].ok}
    assert not failed, failed
    for label in labels:
        r = builds[label]
        assert r.arch == "sm_90a" and not r.cached, f"{label}: {r.arch}, cached={r.cached}"
        assert r.so_path and Path(r.so_path).is_file(), f"{label}: no shared object"
        assert r.kernels, f"{label}: ptxas reported no kernel\n{r.log}"
        # no false refusal after compiling: preprocessed source, symbols, library kernels (library.cu in
        # --library mode, where vendor libraries and device-wide CUB are the point)
        refused = check_build(r, allow_libraries=label.endswith("library.cu"))
        assert refused == [], f"{label}: {refused}"


def test_every_naive_baseline_compiles_for_sm_90_without_spills(builds):
    labels = [f"{n}/naive.cu" for n in list_task_names()]
    assert len(labels) >= 20
    _assert_built(builds, labels)
    spilled = {label: [k.name for k in builds[label].kernels if k.spill_store_bytes or k.spill_load_bytes]
               for label in labels}
    assert not {label: ks for label, ks in spilled.items() if ks}, spilled


def test_cub_library_baselines_compile_for_sm_90(builds):
    labels = [f"{s.parent.name}/library.cu" for s in _library_sources() if not _links(s)]
    assert {f"{n}/library.cu" for n, lib in LIBRARY_TASKS.items() if lib == "cub"} <= set(labels)
    _assert_built(builds, labels)


def test_cublas_library_baselines_compile_and_link(builds):
    if not cublas_installed():
        pytest.skip("cuBLAS not installed (no cublas_v2.h and libcublas in the CUDA toolkit or the pip "
                    "package nvidia-cublas): `pip install nvidia-cublas` to run this check")
    labels = [f"{s.parent.name}/library.cu" for s in _library_sources() if _links(s)]
    assert {f"{n}/library.cu" for n, lib in LIBRARY_TASKS.items() if lib == "cublas"} <= set(labels)
    _assert_built(builds, labels)


def test_library_links_are_declared_in_task_toml():
    """The harness links what task.toml lists: every library a library.cu includes must be named there."""
    for src in _library_sources():
        try:
            task = load_task_folder(src.parent).task
        except TaskError:
            continue  # not a complete task folder (yet): nothing to link against
        assert _links(src) <= set(task.library_links), f"{src}: library_links = {task.library_links}"
        assert task.library_path == src


@pytest.mark.parametrize("name", list_task_names())
def test_library_yardstick_is_found_where_present(name):
    """library.cu, where a task has one, is what task.library_path gives; it defines the task's exact
    entry point and is refused as a candidate (it lets a library do the work)."""
    from cuda_llm.tools.compiler.static_check import check_source

    task = load_task(name).task
    src = SUITE_DIR / name / "library.cu"
    if not src.is_file():
        assert task.library_path is None
        assert name not in LIBRARY_TASKS, f"{name}: library.cu missing"
        return
    assert task.library_path == src
    source = src.read_text()
    assert check_source(source, task, allow_libraries=True) == []
    assert any(i.rule == "forbidden-library" for i in check_source(source, task, allow_libraries=False))
