"""A screenshot of a run's HTML report in headless chromium (Debian's, through Playwright), for the record:

    python benchmarks/report_shot.py RUN_DIR|REPORT.html OUT.png [--chromium /usr/bin/chromium]

Takes a report.html as it is (one brought back from the GPU machine), or writes RUN_DIR/report.html first if it is missing (`cuda-llm report RUN --html`), opens it from the file with
no network, waits for the plot, opens the best candidate, and saves a full-page PNG. Prints the console
errors and any request that left the file (both must be none)."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=Path, help="a run folder, or a report.html")
    ap.add_argument("out", type=Path)
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = ap.parse_args()
    page_path = args.run_dir if args.run_dir.suffix == ".html" else args.run_dir / "report.html"
    if not page_path.is_file():
        subprocess.run([sys.executable, "-m", "cuda_llm.cli", "report", str(args.run_dir), "--html"], check=True)
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    outside: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: outside.append(r.url) if not r.url.startswith("file://") else None)
        page.goto(page_path.resolve().as_uri())
        page.wait_for_selector("#latency-plot .main-svg", timeout=60_000)
        best = page.locator("#tree details.cand:has(> summary .best) > summary")
        if best.count():
            best.first.click()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(args.out), full_page=True)
        browser.close()
    print(f"screenshot: {args.out} ({args.out.stat().st_size} bytes); console errors: {errors or 'none'}; "
          f"requests outside the file: {outside or 'none'}")
    return 0 if not errors and not outside else 1


if __name__ == "__main__":
    sys.exit(main())
