"""Regenerate the inspector screenshots in docs/ui/ (referenced by docs/ui.md): seed a throwaway
store with tests/ui_browser.py's history, start the real `zmem ui` on it, and photograph each
page in headless Chromium. Needs Debian's chromium and chromium-driver (make test installs
them) and the test extra (selenium).

    .venv/bin/python scripts/ui_screenshots.py [--out docs/ui] [--profile minilm|fake]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import ui_browser  # noqa: E402

# (file name, path, the most height to show: the health page stops before the doctor's last
# rows, which name this checkout's own path)
PAGES = (
    ("overview", "/", 2400),
    ("memories", "/memories", 2400),
    (
        "search",
        "/search?q=which+port+does+the+API+dev+server+use&include_global=1&target=port+8080",
        2400,
    ),
    ("memory", "/memory/{port}", 2400),
    ("memory-as-of", "/memory/{port}?as_of=2026-11-12T00:00:00Z", 2400),
    ("entities", "/entities", 2400),
    ("queue", "/queue", 2400),
    ("health", "/health?dry_run=consolidate", 1000),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "ui")
    parser.add_argument(
        "--profile", choices=("minilm", "fake"), default="minilm", help="embedding profile"
    )
    args = parser.parse_args()
    missing = ui_browser.browser_missing()
    if missing:
        print(f"cannot take screenshots: {missing}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    # A fixed, neutral path: the pages show the store's path, and the pictures go in the docs.
    tmp = Path(tempfile.gettempdir()) / "zmem-ui-demo"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        os.environ.update(
            ZMEM_STORE=str(tmp / "store.sqlite"),
            ZMEM_DATA=str(tmp / "data"),
            ZMEM_EMBED_PROFILE=args.profile,
            ZMEM_HOOK_DAEMON="0",
            ZMEM_SESSION_UPKEEP="0",
        )
        ids = ui_browser.seed(tmp / "store.sqlite", tmp / "data")
        with ui_browser.ui_server() as server:
            driver = ui_browser.chromium(tmp / "chromium", width=1280, height=1000)
            try:
                driver.get(server.link)
                for name, path, most in PAGES:
                    driver.get(server.base + path.format(**ids))
                    time.sleep(0.2)  # layout settles (fonts, SVG)
                    height = driver.execute_script("return document.body.scrollHeight")
                    driver.set_window_size(1280, min(max(int(height) + 40, 700), most))
                    target = args.out / f"{name}.png"
                    driver.save_screenshot(str(target))
                    shown = target.relative_to(ROOT) if target.is_relative_to(ROOT) else target
                    print(f"wrote {shown}")
            finally:
                driver.quit()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
