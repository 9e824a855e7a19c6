"""Where the vendor libraries of the yardstick baselines live, as nvcc flags.

cuBLAS comes either with the CUDA toolkit (``-lcublas`` is enough) or as NVIDIA's pip wheel
``nvidia-cublas``, which ships the headers and only the versioned ``libcublas.so.N``: then nvcc needs the
include and library folders, the exact file name and an rpath so that the worker loads the same library.
Only library baselines use this; candidates may not link libraries at all.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Sequence

HEADERS = {"cublas": "cublas_v2.h", "cublasLt": "cublasLt.h"}


def _toolkit_roots() -> list[Path]:
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(str(Path(os.path.realpath(nvcc)).parent.parent))
    return [Path(r) for r in roots if r]


def _wheel_dirs() -> list[tuple[Path, Path]]:
    """(include, lib) folders of NVIDIA's pip wheels (namespace package ``nvidia``)."""
    try:
        import nvidia  # noqa: PLC0415 - optional, namespace package of NVIDIA's wheels
    except ImportError:
        return []
    out = []
    for root in map(Path, getattr(nvidia, "__path__", [])):
        for sub in sorted(root.glob("cu1*")) + [root / "cublas"]:
            out.append((sub / "include", sub / "lib"))
    return out


def in_toolkit(lib: str) -> bool:
    """The toolkit itself has the library's header and an unversioned .so (so ``-l<lib>`` links)."""
    header = HEADERS.get(lib, f"{lib}.h")
    for root in _toolkit_roots():
        for inc, libdir in ((root / "include", root / "lib64"), (root / "include", root / "lib"),
                            (root / "targets/x86_64-linux/include", root / "targets/x86_64-linux/lib")):
            if (inc / header).is_file() and (libdir / f"lib{lib}.so").exists():
                return True
    return False


def library_flags(lib: str) -> list[str]:
    """nvcc flags that compile against and link ``lib`` (e.g. ``cublas``), wherever it is installed.

    Falls back to plain ``-l<lib>`` when nothing is found, so nvcc's own error names what is missing.
    """
    name = lib[2:] if lib.startswith("-l") else lib
    if in_toolkit(name):
        return [f"-l{name}"]
    header = HEADERS.get(name, f"{name}.h")
    for inc, libdir in _wheel_dirs():
        files = sorted(libdir.glob(f"lib{name}.so*")) if libdir.is_dir() else []
        if (inc / header).is_file() and files:
            so = libdir / f"lib{name}.so"
            link = f"-l{name}" if so.exists() else f"-l:{files[-1].name}"
            return [f"-I{inc}", f"-L{libdir}", link, "-Xlinker", f"-rpath,{libdir}"]
    return [f"-l{name}"]


def link_flags(libs: Sequence[str]) -> list[str]:
    out: list[str] = []
    for lib in libs:
        out.extend(library_flags(lib))
    return out


def missing_library_advice(lib: str) -> str:
    return (f"{lib} was not found in the CUDA toolkit: install the toolkit's {lib} or the pip package "
            f"nvidia-{lib.lower()} (e.g. `python3 -m pip install nvidia-{lib.lower()}`)")
