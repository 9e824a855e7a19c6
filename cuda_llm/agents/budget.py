"""Prompt size budgets: a prompt is built from named sections; when it does not fit, the least important
section goes first, and the prompt says what was left out. Pure.

Budgets are in characters (about 4 per token) and set per role (``prompt_budget_chars`` in cuda-llm.toml,
see settings.DEFAULT_PROMPT_BUDGET). They are sized so that a whole kernel of 60 KB, whole exemplars and
the profile evidence fit in today's models; cutting is the exception, and never silent.
"""

from __future__ import annotations

from typing import Sequence

from pydantic import BaseModel

from cuda_llm.agents.prompts import render

MAX_SOURCE_CHARS = 60_000        # a kernel is shown whole up to this size (and cut, saying so, beyond it)
MIN_SHRUNK_CHARS = 2_000         # a section that must stay keeps at least this much when shrunk
NOTE_RESERVE = 600               # room kept for the sentence that says what was left out


class Section(BaseModel):
    """One placeholder's text, how much it matters, and what the prompt calls it when it is left out."""

    name: str                    # the template placeholder
    text: str
    priority: int                # higher is more important; the lowest goes first
    label: str                   # e.g. "earlier attempts", "the feature exemplars"
    drop: bool = True            # True: left out whole; False: shortened, never removed (a kernel's source)


def cap(text: str, limit: int, what: str = "text") -> str:
    """``text`` cut to ``limit`` characters with a note of how much is missing (unchanged when it fits)."""
    text = text or ""
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + f"\n... [{what} cut: {len(text) - limit} more characters]"


def fit(sections: Sequence[Section], budget: int) -> tuple[dict[str, str], list[str]]:
    """The sections' texts within ``budget`` characters, and what was left out (in words), cutting the least
    important first: droppable sections are replaced by a one-line note, the others shortened last."""
    texts = {s.name: s.text for s in sections}
    omitted: list[str] = []
    total = sum(len(t) for t in texts.values())
    for s in sorted((s for s in sections if s.drop), key=lambda s: s.priority):
        if total <= budget:
            break
        if not s.text.strip():
            continue
        note = f"({s.label} left out to fit the prompt's size budget)"
        total += len(note) - len(texts[s.name])
        texts[s.name] = note
        omitted.append(f"{s.label} ({len(s.text):,} characters)")
    for s in sorted((s for s in sections if not s.drop), key=lambda s: s.priority):
        if total <= budget:
            break
        keep = max(MIN_SHRUNK_CHARS, len(texts[s.name]) - (total - budget))
        if keep >= len(texts[s.name]):
            continue
        shortened = cap(texts[s.name], keep, s.label)
        total += len(shortened) - len(texts[s.name])
        texts[s.name] = shortened
        omitted.append(f"the end of {s.label} (cut after {keep:,} of {len(s.text):,} characters)")
    return texts, omitted


def omitted_note(omitted: Sequence[str]) -> str:
    if not omitted:
        return ""
    return "Left out of this prompt to fit its size budget: " + "; ".join(omitted) + "."


def render_budgeted(name: str, sections: Sequence[Section], budget: int, **fixed: object) -> tuple[str, list[str]]:
    """Template ``name`` filled with ``fixed`` values and the ``sections`` cut to fit ``budget``; its
    ``{omitted}`` placeholder says what was left out. Returns (text, omitted)."""
    full = {s.name: s.text for s in sections}
    text = render(name, **fixed, **full, omitted="")
    if len(text) <= budget:
        return text, []
    room = budget - (len(text) - sum(len(t) for t in full.values()))
    texts, omitted = fit(sections, max(room - NOTE_RESERVE, 0))
    return render(name, **fixed, **texts, omitted=omitted_note(omitted)), omitted
