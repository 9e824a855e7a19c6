"""The one format of each figure a run shows, for every layer: a latency in milliseconds and a percentage
of speed of light are written by the tools (the speed-of-light sentence, the roofline, the diagnosis), the
graph (notes) and the reports alike, so one quantity reads the same wherever it appears (0.03458 ms, not
0.0346 in one place and 0.03458 in another). Pure functions, no dependency."""

from __future__ import annotations


def fmt_ms(ms: float | None) -> str:
    """Four significant digits, trailing zeros kept so a column reads alike: 7.439, 1.000, 0.2594, 0.03458;
    whole milliseconds from 1 s on; "-" for none."""
    if ms is None:
        return "-"
    return f"{ms:.0f}" if abs(ms) >= 1000 else f"{ms:#.4g}".rstrip(".")


def fmt_pct(pct: float | None) -> str:
    """A percentage (of speed of light, of peak) to three significant digits: 13.3, 6.73, 41.0, 100; "-" for
    none."""
    if pct is None:
        return "-"
    return f"{pct:.0f}" if abs(pct) >= 100 else f"{pct:#.3g}".rstrip(".")
