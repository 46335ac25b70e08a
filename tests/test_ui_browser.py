"""The web inspector in a real headless Chromium (Debian's chromium + chromium-driver, driven by
Selenium): open the printed link, read the overview, search, open a memory, walk its history
with the as-of slider, invalidate it with a reason, and see recall change. Plus what a browser
alone can show: memory text with HTML and script in it stays text."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ui_browser import browser_missing, chromium, seed, ui_server
from zmem import MemoryStore

MISSING = browser_missing()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")

QUERY = "which port does the API dev server use"


@pytest.fixture
def session(tmp_path: Path):
    ids = seed(tmp_path / "store.sqlite", tmp_path / "data")
    with ui_server(env=dict(os.environ), cwd=tmp_path) as server:
        driver = chromium(tmp_path / "chromium")
        try:
            driver.get(server.link)
            yield driver, server, ids, tmp_path
        finally:
            driver.quit()


def _by(driver, css: str):
    """The element, waiting for it: a click that submits a form returns before the next page
    has loaded, and looking too early finds nothing (or the page being left)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, css))
    return driver.find_element(By.CSS_SELECTOR, css)


def _all(driver, css: str):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, css)


def _search(driver, base: str, query: str, target: str = "") -> list[str]:
    """Type a query into the search page like a person and return the result ids, in order."""
    driver.get(f"{base}/search")
    box = _by(driver, "#q")
    box.clear()
    box.send_keys(query)
    _by(driver, "input[name=include_global]").click()
    if target:
        _by(driver, "input[name=target]").send_keys(target)
    _by(driver, "#search-go").click()
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 20).until(lambda d: "q=" in d.current_url and _all(d, "h2"))
    return [li.get_attribute("data-id") for li in _all(driver, "#results > li")]


def test_overview_search_history_invalidate_and_recall_changes(session):
    driver, server, ids, tmp = session
    # The link left no token in the address bar, and the overview counts what is stored.
    assert server.token not in driver.current_url
    assert driver.title.startswith("Overview")
    assert _by(driver, "#live-count").text == "9"
    assert "project:github.com/acme/api" in _by(driver, "table.counts").text
    assert len(_all(driver, "svg.chart polyline")) == 1

    # Search: the current port fact comes first, with its verdict beside it.
    found = _search(driver, server.base, QUERY)
    assert found and found[0] == ids["port"]
    assert "found" in _by(driver, "#results > li .verdict").text

    # Open it and walk its history: three versions, the slider moves the highlight.
    _by(driver, f'#results > li[data-id="{ids["port"]}"] a.id').click()
    assert "port 9191" in _by(driver, "#content").text
    versions = _all(driver, "#timeline .version")
    assert [v.text.count("port") for v in versions] == [1, 1, 1]
    assert "8080" in versions[0].text and "9191" in versions[2].text
    from selenium.webdriver.common.keys import Keys

    slider = _by(driver, "#asof-slider")
    slider.send_keys(Keys.HOME)
    assert "at" in versions[0].get_attribute("class").split()
    label = _by(driver, "#asof-label").text
    assert label.startswith("2026-11-10")
    # The slider's instant, submitted, is a server-side as-of read of this memory.
    _by(driver, "form.asof button").click()
    assert "port 8080" in _by(driver, "#asof-note").text

    # Invalidate with a reason.
    driver.get(f"{server.base}/memory/{ids['port']}")
    _by(driver, "#invalidate-reason").send_keys("the dev server moved behind the proxy on 443")
    _by(driver, "#fix-invalidate button").click()
    assert "Invalidated" in _by(driver, ".flash").text
    assert "retired" in _by(driver, "#state").text
    assert "moved behind the proxy" in _by(driver, "#state").text
    with MemoryStore.open(tmp / "store.sqlite") as s:
        gone = s.get(ids["port"])
    assert not gone.live and gone.supersede_reason.startswith("the dev server moved")

    # Recall changed: the row is gone from the results, and the explain says why.
    after = _search(driver, server.base, QUERY, target=ids["port"])
    assert ids["port"] not in after
    why = _by(driver, "#not-shown").text
    assert "superseded" in why


def test_a_fix_without_its_reason_is_refused_in_the_browser(session):
    driver, server, ids, tmp = session
    driver.get(f"{server.base}/memory/{ids['lesson']}")
    # The browser's own check would stop an empty reason; take it away to reach the server.
    driver.execute_script(
        "document.getElementById('invalidate-reason').removeAttribute('required')"
    )
    _by(driver, "#fix-invalidate button").click()
    assert "requires a non-empty" in _by(driver, ".error").text
    with MemoryStore.open(tmp / "store.sqlite") as s:
        assert s.get(ids["lesson"]).live


def test_memory_text_with_markup_stays_text_in_the_browser(session):
    driver, server, ids, _ = session
    title = driver.title
    for path in ("/", f"/memory/{ids['hostile']}", "/memories?taint=untrusted_web"):
        driver.get(server.base + path)
        assert "pwned" not in driver.title
        shown = _by(driver, f'[data-id="{ids["hostile"]}"] .content, #content')
        assert "<script>document.title='pwned'</script>" in shown.text
        assert not shown.find_elements("css selector", "b, script")
    driver.get(server.base + "/")
    assert driver.title == title
