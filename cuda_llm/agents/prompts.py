"""Prompt templates are markdown files in prompts/ with {placeholders}; render() fills them.

Only ``{identifier}`` is a placeholder, so CUDA braces in a template are left alone; ``{{`` and ``}}``
give literal braces around an identifier. Values are inserted once and never re-scanned.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

PROMPTS_DIR = Path(__file__).parent / "prompts"
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


class PromptError(KeyError):
    """A template that does not exist, or values that do not match its placeholders."""

    def __str__(self) -> str:
        return str(self.args[0])


@lru_cache(maxsize=None)
def template(name: str) -> str:
    path = PROMPTS_DIR / f"{name}.md"
    if not path.is_file():
        known = sorted(p.stem for p in PROMPTS_DIR.glob("*.md"))
        raise PromptError(f"no prompt template {name!r} in {PROMPTS_DIR}; known: {known}")
    return path.read_text()


def placeholders(name: str) -> set[str]:
    return {m.group(1) for m in _PLACEHOLDER.finditer(template(name)) if m.group(1)}


def render(name: str, **values: object) -> str:
    """Fill template ``name`` (prompts/<name>.md); every placeholder must be given and nothing else."""
    text = template(name)
    needed = placeholders(name)
    missing, extra = needed - set(values), set(values) - needed
    if missing or extra:
        raise PromptError(f"prompt {name!r}: missing values {sorted(missing)}, unexpected values {sorted(extra)}")

    def sub(m: re.Match) -> str:
        if m.group(0) == "{{":
            return "{"
        if m.group(0) == "}}":
            return "}"
        return str(values[m.group(1)])

    return _PLACEHOLDER.sub(sub, text).strip() + "\n"
