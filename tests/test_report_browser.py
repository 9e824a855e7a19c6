"""The HTML report in a real headless browser (Debian's chromium through Playwright; .ci/run installs both):
it loads from the file with no network and no console error, the Plotly plot and the candidate tree render,
a click opens a candidate's code, and a screenshot is written and is not blank.

Skipped only where chromium or the playwright package is absent."""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from test_show_report import finished  # noqa: F401 - the run the report is built from (a module fixture)

from cuda_llm.cli import main

CHROMIUM = os.environ.get("CUDA_LLM_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
try:
    import playwright.sync_api  # noqa: F401
    HAVE_PLAYWRIGHT = True
except ImportError:
    HAVE_PLAYWRIGHT = False

pytestmark = pytest.mark.skipif(not (HAVE_PLAYWRIGHT and os.access(CHROMIUM, os.X_OK)),
                                reason="needs chromium (apt install chromium) and the playwright package")


def png_colours(data: bytes, limit: int = 64) -> int:
    """Distinct byte values in a PNG's decoded pixel rows (1 or 2 for a blank image), up to ``limit``."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompress(idat)
    return min(limit, len(set(raw[::7])))


def test_the_report_renders_offline_in_chromium(finished, tmp_path, capsys):  # noqa: F811
    from playwright.sync_api import sync_playwright

    assert main(["report", finished.run_id, "--runs-dir", str(finished.root.parent), "--html"]) == 0
    capsys.readouterr()
    page_path = finished.root / "report.html"
    shot = Path(os.environ.get("CUDA_LLM_SCREENSHOT", tmp_path / "report.png"))
    errors: list[str] = []
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1600})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_path.as_uri())
            page.wait_for_selector("#latency-plot .main-svg", timeout=30_000)
            assert page.locator("#latency-plot .scatterlayer .point").count() >= 4   # candidates and the best line
            legend = page.locator("#latency-plot .legendtext").all_text_contents()
            assert "wrong_answer (not timed)" in legend                            # a failed candidate is marked
            assert page.locator("#latency-plot .annotation-text", has_text="not timed").count() == 1
            assert page.locator("#tree li").count() == 7   # baseline, 4 candidates, 2 repairs
            assert page.locator("#scripted").is_visible()
            _title_clear_of_the_axis(page)
            source = page.locator("#cand-r2c0 > details.source pre")
            assert not source.is_visible()
            page.locator("#cand-r2c0 > summary").click()
            page.locator("#cand-r2c0 > details.source > summary").click()
            assert source.is_visible() and "variant: v2" in source.inner_text()
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert errors == []
    assert [u for u in requests if not u.startswith("file://")] == []
    assert shot.stat().st_size > 20_000 and png_colours(shot.read_bytes()) > 8


def test_the_latency_axis_reads_as_numbers_across_decades(finished, tmp_path):  # noqa: F811
    """With a speed-of-light line a decade below the baseline (as on a real GPU), every tick of the log axis
    is labelled with its value, read top to bottom in falling order (Plotly's default labels the ticks
    between decades with a bare digit: a "2" for 0.2 under a "2" for 2)."""
    import plotly.io as pio
    from playwright.sync_api import sync_playwright

    from cuda_llm.report.html import build_report_data, latency_figure, plotly_js
    from cuda_llm.report.summary import build_summary
    from cuda_llm.runs.run_info import read_values
    from cuda_llm.runs.rundir import RunDir

    rd = RunDir(finished.root)
    values = read_values(rd)
    data = build_report_data(rd, values, build_summary(rd, values))
    data = data.model_copy(update={"sol_ms": data.summary.baseline_ms / 12})
    page_path = tmp_path / "latency.html"
    page_path.write_text(f"<script>{plotly_js()}</script>" +    # the report's own (basic) bundle
                         pio.to_html(latency_figure(data), include_plotlyjs=False, div_id="latency-plot"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 600})
            page.goto(page_path.as_uri())
            page.wait_for_selector("#latency-plot .main-svg", timeout=30_000)
            ticks = page.locator("#latency-plot .ytick")
            read = [(ticks.nth(i).bounding_box()["y"], float(ticks.nth(i).text_content().replace("\u2212", "-")))
                    for i in range(ticks.count())]
        finally:
            browser.close()
    values_top_down = [v for _, v in sorted(read)]
    assert len(values_top_down) >= 3
    assert values_top_down == sorted(values_top_down, reverse=True) and len(set(values_top_down)) == len(read), read
    assert values_top_down[0] >= data.summary.baseline_ms / 2 and values_top_down[-1] <= data.sol_ms * 2


def _title_clear_of_the_axis(page) -> None:
    """The plot's title and subtitle end above the plot area and its tick labels."""
    title = page.locator("#latency-plot .gtitle").bounding_box()
    area = page.locator("#latency-plot .gridlayer").bounding_box()
    ticks = [page.locator("#latency-plot .ytick").nth(i).bounding_box()
             for i in range(page.locator("#latency-plot .ytick").count())]
    top = min([area["y"], *(t["y"] for t in ticks if t)])
    assert title is not None and title["y"] + title["height"] <= top, (title, top)


def test_the_demo_plot_keeps_its_subtitle_off_the_axis(tmp_path, capsys, monkeypatch):
    """The demo's report has a speed-of-light bound: its subtitle must not run into the axis."""
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    runs = tmp_path / "runs"
    assert main(["demo", "--runs-dir", str(runs)]) == 0
    (run,) = runs.iterdir()
    assert main(["report", run.name, "--runs-dir", str(runs), "--html"]) == 0
    capsys.readouterr()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1200})
            page.goto((run / "report.html").as_uri())
            page.wait_for_selector("#latency-plot .main-svg", timeout=30_000)
            assert "speed of light" in (page.locator("#latency-plot .gtitle").text_content() or "").lower()
            _title_clear_of_the_axis(page)
        finally:
            browser.close()
