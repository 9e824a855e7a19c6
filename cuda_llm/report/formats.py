"""The number and table formats that the console, the reports, the commands and the benchmarks share.

One home for each: milliseconds, speedups, durations, one-line messages, aligned text tables and
Markdown tables. Pure functions, no dependency.
"""

from __future__ import annotations

from collections.abc import Sequence

from cuda_llm.figures import fmt_ms, fmt_pct  # noqa: F401 - the one format of a latency and a %, re-exported

MAX_MESSAGE_CHARS = 80


def fmt_x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def fmt_fixed(value: float | None, digits: int = 1, unit: str = "") -> str:
    """A figure with a fixed number of decimals and its unit, a bare "-" when there is none: summary sentences
    and metric lists read alike."""
    return "-" if value is None else f"{value:.{digits}f}{unit}"


def fmt_tokens(n: float | None) -> str:
    """1234 -> 1.2k, 2000000 -> 2M: token counts beside budgets."""
    if n is None:
        return "-"
    n = float(n)
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= size:
            v = n / size
            return f"{v:.1f}".rstrip("0").rstrip(".") + unit
    return f"{int(n)}"


def fmt_duration(seconds: float) -> str:
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def feature_text(asked: Sequence[str], detected: Sequence[str] | None, absent: Sequence[str] = ()) -> str:
    """A candidate's features as every view shows them: what the detectors found new in it over its parent when
    it was measured (what the statistics credit), beside what the planner asked for ("free slot": the coder's
    own idea; "not found": asked, but the detectors did not see it). A candidate never measured has only the
    asked ones."""
    asked_text = ", ".join(f"{f} (not found)" if f in absent else f for f in asked)
    if detected is None:
        return f"asked: {asked_text or 'free slot'} (no detection recorded)"
    return f"detected: {', '.join(detected) or 'nothing new'}; asked: {asked_text or 'free slot'}"


FEATURES_LEGEND = ("features: detected = found new in the kernel over its parent by the detectors when it was "
                   "measured (what the statistics credit); asked = assigned by the planner (free slot: the coder's "
                   "own idea; not found: asked, but not detected)")


def md_cell(text: str) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(md_cell(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def render_table(headers: Sequence[str], rows: Sequence[Sequence[object]], align: str | None = None) -> str:
    """Render rows under headers; `align` has one char per column, 'l' or 'r' (numbers default right)."""
    cells = [[_fmt(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    if align is None:
        align = "".join(
            "r" if rows and all(isinstance(r[i], (int, float)) or r[i] is None for r in rows) else "l"
            for i in range(len(headers))
        )

    def line(values: Sequence[str]) -> str:
        out = []
        for i, v in enumerate(values):
            out.append(v.rjust(widths[i]) if align[i] == "r" else v.ljust(widths[i]))
        return "  ".join(out).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(list(headers)), sep, *(line(r) for r in cells)])


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 100:
            return f"{value:.1f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    return str(value)
