"""``/docs`` in a real browser that can reach nothing but localhost: Swagger UI still renders.

Starts the real ``fleetgate api`` on 127.0.0.1 and opens ``/docs`` in headless Chromium whose
host resolver fails every name but 127.0.0.1 and whose proxy points at a closed port (so neither
a name nor a literal address outside the machine can be reached). The operations must be listed,
which needs Swagger UI's script, stylesheet and the OpenAPI document, all from the server itself,
and the page's Content-Security-Policy must not have refused anything. Never skipped: without
Chromium the test fails and says how to install it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_dashboard_browser import start_chromium
from tests.servers import running_api

pytestmark = [pytest.mark.browser, pytest.mark.slow]

OFFLINE = (
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--proxy-server=http://127.0.0.1:9",  # the discard port: nothing listens, nothing leaves
    "--proxy-bypass-list=127.0.0.1",
)
#: What Swagger UI renders for the placement operation, and the CDN FastAPI would otherwise use.
OPERATION = "#operations-placements-create_placement"
CDN = "cdn.jsdelivr.net"


@pytest.fixture
def api(tmp_path: Path) -> Iterator[str]:
    with running_api(tmp_path / "api.db", token="docs-offline-token") as base:
        yield base


@pytest.fixture
def offline_browser(tmp_path: Path) -> Iterator[Any]:
    driver = start_chromium(tmp_path / "chromium-profile", *OFFLINE)
    try:
        yield driver
    finally:
        driver.quit()


def test_the_docs_list_the_operations_without_network(api: str, offline_browser: Any) -> None:
    from selenium.common.exceptions import TimeoutException, WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    # The browser really is cut off: the CDN FastAPI's default page loads from is unreachable.
    with pytest.raises(WebDriverException, match="ERR_"):
        offline_browser.get(f"https://{CDN}/npm/swagger-ui-dist@5/swagger-ui-bundle.js")

    offline_browser.get(f"{api}/docs")
    listed = """
      return Array.from(document.querySelectorAll('.opblock-summary')).map(s =>
        (s.querySelector('.opblock-summary-method')?.textContent || '') + ' ' +
        (s.querySelector('.opblock-summary-path')?.getAttribute('data-path') || ''));
    """
    try:
        operations = WebDriverWait(offline_browser, 90, poll_frequency=0.25).until(
            lambda d: d.execute_script(listed)
        )
    except TimeoutException:
        pytest.fail(f"/docs listed no operation offline:\n{offline_browser.page_source[:2000]}")
    assert "POST /v1/namespaces/{ns}/placements" in operations, operations
    assert "PUT /v1/nodes/{name}/metrics" in operations, operations
    assert offline_browser.execute_script(f"return !!document.querySelector({OPERATION!r})")
    assert CDN not in offline_browser.page_source
    # Nothing was refused by the page's CSP (a refusal is logged as a console error).
    refused = [
        entry["message"]
        for entry in offline_browser.get_log("browser")
        if "Content Security Policy" in entry["message"]
    ]
    assert refused == [], refused
