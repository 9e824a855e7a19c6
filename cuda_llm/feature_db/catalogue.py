"""Loading the feature catalogue (``catalogue/*.toml``) and filtering it by architecture and task."""

from __future__ import annotations

import re
import tomllib
from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from cuda_llm.feature_db.model import Feature

CATALOGUE_DIR = Path(__file__).parent / "catalogue"
_ARCH = re.compile(r"^(?:sm|compute)_(\d+?)(\d)[a-z]?$")


class CatalogueError(ValueError):
    """A catalogue file that cannot be used; the message names the file and the field."""


def parse_arch(arch: str) -> tuple[int, int]:
    """'sm_90' / 'sm_90a' / 'compute_80' / '9.0' -> (9, 0)."""
    text = arch.strip().lower()
    m = _ARCH.match(text)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = re.match(r"^(\d+)\.(\d)$", text)
    if m:
        return int(m.group(1)), int(m.group(2))
    raise ValueError(f"{arch!r} is not a GPU architecture; write it like sm_90 (or sm_80, sm_120)")


def arch_name(cc: tuple[int, int]) -> str:
    return f"sm_{cc[0]}{cc[1]}"


def supports(feature: Feature, arch: str) -> bool:
    """Whether the architecture has the hardware the feature needs."""
    return parse_arch(arch) >= feature.min_cc


def _load_file(path: Path) -> Feature:
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise CatalogueError(f"{path}: not valid TOML: {exc}") from None
    try:
        feature = Feature.model_validate(data)
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            loc = ".".join(str(x) for x in err["loc"])
            parts.append(f"field {loc}: {err['msg'].removeprefix('Value error, ')}")
        raise CatalogueError(f"{path}: " + "; ".join(parts)) from None
    if feature.id != path.stem:
        raise CatalogueError(f"{path}: id {feature.id!r} must equal the file name {path.stem!r}")
    return feature


def load_catalogue_from(folder: Path) -> list[Feature]:
    """Every feature in a folder of TOML files, sorted by id; ids unique, conflicts refer to known ids."""
    files = sorted(Path(folder).glob("*.toml"))
    if not files:
        raise CatalogueError(f"{folder}: no feature files (*.toml)")
    features = [_load_file(p) for p in files]
    ids = {f.id for f in features}
    for f in features:
        unknown = [c for c in f.conflicts_with if c not in ids]
        if unknown:
            raise CatalogueError(f"{folder / (f.id + '.toml')}: conflicts_with names unknown features {unknown}")
    return features


@lru_cache(maxsize=1)
def _builtin() -> tuple[Feature, ...]:
    return tuple(load_catalogue_from(CATALOGUE_DIR))


def load_catalogue() -> list[Feature]:
    """The built-in catalogue (cached; Features are immutable)."""
    return list(_builtin())


def feature_index() -> dict[str, Feature]:
    return {f.id: f for f in _builtin()}


def get_feature(feature_id: str) -> Feature:
    idx = feature_index()
    try:
        return idx[feature_id]
    except KeyError:
        raise KeyError(f"unknown feature {feature_id!r}; known: {', '.join(sorted(idx))}") from None


CHECK_PRELUDE = Path(__file__).parent / "exemplar_check.cuh"


def check_program(feature: Feature) -> str:
    """One self-checking CUDA program: the check helpers, the exemplar, then its check's main()."""
    if feature.check is None:
        raise CatalogueError(f"{feature.id}: no check section (host code with main() that runs the exemplar)")
    return "\n".join([CHECK_PRELUDE.read_text(), f"// ---- exemplar of {feature.id}", feature.exemplar,
                      f"// ---- check of {feature.id}", feature.check])


def nvcc_arch_flags(feature: Feature, arch: str | None = None) -> list[str]:
    """nvcc flags for the exemplar: -arch=sm_XY, or the arch-specific target for sm_90a-only code."""
    target = arch or feature.compile_arch
    if target.endswith("a"):
        num = target.removeprefix("sm_")
        return [f"-gencode=arch=compute_{num},code=sm_{num}"]
    return [f"-arch={target}"]
