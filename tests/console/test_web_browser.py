"""`breakerdeck web` in a real headless chromium, against a real server process: the page shows
the console, its cards, and what each token may do; a request without a token, from another
origin or for another host starts no console."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from playwright.async_api import BrowserContext, Page
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from tests.console.web_server import OPERATOR_TOKEN, TERMINAL_TEXT, VIEWER_TOKEN, WebServer
from tests.waiting import BOUND_SECONDS, wait_until

pytestmark = [pytest.mark.xdist_group("browser"), pytest.mark.asyncio(loop_scope="session")]

#: What a console gets to start and draw (a Python process, Textual's first paint) or to show
#: a change: only a hang runs out of it, however loaded the machine.
START_MS = BOUND_SECONDS * 1000
#: How a viewer's console answers a write key: a notice, never a dialog.
READ_ONLY = "Read-only: a viewer"


@pytest.fixture(scope="module")
def elsewhere() -> Iterator[str]:
    """Another origin on this machine: a page served from another loopback port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Elsewhere)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _Elsewhere(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<p>another site</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


async def open_console(
    context: BrowserContext, server: WebServer, token: str, page: Page | None = None
) -> Page:
    page = page or await context.new_page()
    await page.goto(f"{server.url}/?token={token}")
    await wait_for_text(page, "? Help")
    await page.focus(".xterm-helper-textarea")
    return page


async def wait_for_text(page: Page, text: str, timeout: float = START_MS) -> None:
    await page.wait_for_function(
        f"(text) => ({TERMINAL_TEXT})().includes(text)", arg=text, timeout=timeout
    )


async def wait_for_no_text(page: Page, text: str) -> None:
    await page.wait_for_function(
        f"(text) => !({TERMINAL_TEXT})().includes(text)", arg=text, timeout=START_MS
    )


async def terminal_text(page: Page) -> str:
    return str(await page.evaluate(TERMINAL_TEXT))


async def test_the_token_opens_the_console_and_leaves_the_address_bar(browser_context, web_server):
    page = await open_console(browser_context, web_server, OPERATOR_TOKEN)
    assert page.url == f"{web_server.url}/"
    [cookie] = await browser_context.cookies()
    assert (cookie["httpOnly"], cookie["sameSite"]) == (True, "Strict")
    assert OPERATOR_TOKEN not in cookie["value"]
    assert web_server.consoles_running() >= 1


async def test_the_page_asks_nothing_of_another_site(browser_context, web_server):
    """textual-serve's page links a Google font: the content security policy blocks it."""
    page = await browser_context.new_page()
    requested: list[str] = []
    said: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.on("console", lambda message: said.append(message.text))
    await open_console(browser_context, web_server, VIEWER_TOKEN, page)
    [elsewhere] = [url for url in requested if not url.startswith(f"{web_server.url}/")]
    assert elsewhere.startswith("https://fonts.googleapis.com/")
    blocked = [line for line in said if elsewhere in line and "Content Security Policy" in line]
    assert blocked and "has been blocked" in blocked[0]


async def test_the_cards_text_is_in_the_page(browser_context, web_server):
    page = await open_console(browser_context, web_server, VIEWER_TOKEN)
    await wait_for_text(page, "▶ OPEN ")  # live-demo trips billing-assistant 26 simulated s in
    text = await terminal_text(page)
    assert "billing-assistant" in text
    assert "0 failures · trips at auth 3 / upstream 5 · healthy" in text
    assert "events, newest first" in text  # 1280x800 is a wide console: the event log too


async def test_a_request_without_the_token_starts_no_console(browser_context, web_server):
    started = web_server.consoles_started()
    page = await browser_context.new_page()
    response = await page.goto(f"{web_server.url}/")
    assert response is not None and response.status == 401
    assert "present a token" in await page.inner_text("body")
    # The page's own origin, so only the missing token stands in the way.
    opened = await page.evaluate(OPEN_WEBSOCKET, web_server.websocket_url)
    assert opened == "refused"
    with (
        pytest.raises(InvalidStatus) as refused,
        connect(web_server.websocket_url, origin=web_server.origin),
    ):
        pass
    assert refused.value.response.status_code == 401
    # Each was answered 401 by the guard, before any handler: no console could have started.
    # The server's log says a reason once per 10 s (the first here may be an earlier test's).
    assert web_server.consoles_started() == started


async def test_a_cross_origin_page_cannot_open_a_console(browser_context, web_server, elsewhere):
    """Another port on this machine is another origin but the same site: the SameSite cookie
    goes along, and only the Origin check refuses."""
    await browser_context.request.get(f"{web_server.url}/?token={OPERATOR_TOKEN}", max_redirects=0)
    assert await browser_context.cookies(web_server.url)  # the operator's cookie is in the browser
    started, refused_before = web_server.consoles_started(), len(web_server.refusals())
    page = await browser_context.new_page()
    await page.goto(elsewhere)
    assert await page.evaluate(OPEN_WEBSOCKET, web_server.websocket_url) == "refused"
    refusal = f"/ws: cross-origin request refused: {elsewhere}"
    assert web_server.refused_since(refused_before, refusal, 1) == 1
    assert web_server.consoles_started() == started


async def test_a_page_for_another_host_is_refused(web_server):
    """DNS rebinding: a name re-pointed at this machine arrives with its own Host."""
    started, refused_before = web_server.consoles_started(), len(web_server.refusals())
    answer = httpx.get(
        f"{web_server.url}/",
        headers={"Host": "rebound.example", "Authorization": f"Bearer {OPERATOR_TOKEN}"},
    )
    assert answer.status_code == 421
    upgrade = httpx.get(
        f"{web_server.url}/ws",
        headers={
            "Host": "rebound.example",
            "Origin": "http://rebound.example",
            "Authorization": f"Bearer {OPERATOR_TOKEN}",
            **WEBSOCKET_UPGRADE,
        },
    )
    assert upgrade.status_code == 421
    # One line for both: the same reason is said once per 10 s (test_web.py counts them).
    assert web_server.refused_since(refused_before, "/: this console answers at", 1) == 1
    assert web_server.consoles_started() == started


async def test_consoles_are_capped_before_a_process_starts(web_server):
    """The fixture's server runs at most two consoles; a third websocket is refused."""
    wait_until(lambda: web_server.consoles_running() == 0)  # earlier tests' tabs are closed
    started, refused_before = web_server.consoles_started(), len(web_server.refusals())
    operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    with contextlib.ExitStack() as open_consoles:
        for _ in range(2):
            open_consoles.enter_context(
                connect(
                    web_server.websocket_url, origin=web_server.origin, additional_headers=operator
                )
            )
        wait_until(lambda: web_server.consoles_started() == started + 2)
        with pytest.raises(InvalidStatus) as refused:
            connect(web_server.websocket_url, origin=web_server.origin, additional_headers=operator)
        assert refused.value.response.status_code == 503
        assert web_server.refused_since(refused_before, "/ws: 2 consoles are open", 1) == 1
        assert web_server.consoles_started() == started + 2


async def test_a_malformed_message_ends_its_console(web_server):
    await asyncio.to_thread(wait_until, lambda: web_server.consoles_running() == 0)
    operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    with connect(
        web_server.websocket_url, origin=web_server.origin, additional_headers=operator
    ) as socket:
        await asyncio.to_thread(wait_until, lambda: web_server.consoles_running() == 1)
        socket.send('["resize", "not a size"]')
        with pytest.raises(ConnectionClosed):
            while True:
                socket.recv(timeout=15)
    await asyncio.to_thread(wait_until, lambda: web_server.consoles_running() == 0)


async def test_a_viewer_cannot_reset(browser_context, web_server):
    page = await open_console(browser_context, web_server, VIEWER_TOKEN)
    await wait_for_text(page, "▶ OPEN ")  # the top card tripped (not the header's "OPEN 0")
    assert "r Reset" not in await terminal_text(page)
    for key in ("r", "R"):
        await page.keyboard.press(key)
    await page.keyboard.press("Control+p")  # the palette offers a viewer no reset
    await wait_for_text(page, "Search for commands")
    await page.keyboard.type("reset")
    await wait_for_text(page, "No matches found")  # the palette's search is done
    assert "Reset" not in await terminal_text(page)
    await page.keyboard.press("Escape")
    # Closed before the next key (an escape with a key right after reads as alt+that key).
    await wait_for_no_text(page, "🔎")
    await page.keyboard.press("Enter")  # the detail screen has r too
    await wait_for_text(page, "Trips, newest first")
    # The dashboard's r and R each said why in a notice (4 s): gone before the detail's own.
    await wait_for_no_text(page, READ_ONLY)
    await page.keyboard.press("r")
    await wait_for_text(page, READ_ONLY)  # the key was taken: a notice, where a dialog was not
    text = await terminal_text(page)
    assert "Reset billing-assistant?" not in text
    assert "circuit_breaker_reset" not in text


async def test_e_in_a_browser_is_a_download_and_no_file_on_the_server(browser_context, web_server):
    page = await open_console(browser_context, web_server, VIEWER_TOKEN)
    await wait_for_text(page, "▶ OPEN ")
    exports = "*-*-*T*Z.md"  # in the server's working directory, the consoles' too
    before = set(Path.cwd().glob(exports))
    async with page.expect_download(timeout=START_MS) as first:
        await page.keyboard.press("e")
    download = await first.value
    assert download.suggested_filename.endswith(".md")
    assert (await download.path()).read_text().startswith("# Incident: ")
    assert set(Path.cwd().glob(exports)) == before


async def test_an_operators_reset_is_written_by_the_web_actor(browser_context, web_server):
    page = await open_console(browser_context, web_server, OPERATOR_TOKEN)
    await wait_for_text(page, "▶ OPEN ")  # the top card tripped (not the header's "OPEN 0")
    await page.keyboard.press("r")
    await wait_for_text(page, "circuit_breaker_reset by web:127.0.0.1")
    await page.keyboard.press("y")
    # The card's trip history says it for good (the toast that says it too lasts 4 s, which a
    # loaded machine's page may draw after).
    await wait_for_text(page, "→ reset by web:127.0.0.1")


#: A websocket handshake's request headers, as a browser sends them.
WEBSOCKET_UPGRADE = {
    "Upgrade": "websocket",
    "Connection": "Upgrade",
    "Sec-WebSocket-Version": "13",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
}

#: Opens a websocket from the page and says whether the server let it through.
OPEN_WEBSOCKET = """(url) => new Promise((done) => {
  const socket = new WebSocket(url + '?width=80&height=24');
  socket.onopen = () => { socket.close(); done('opened'); };
  socket.onerror = () => done('refused');
})"""
