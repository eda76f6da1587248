"""``chash demo --rooms`` end to end, shortened: the timeline and the
claims, checked against an independent ring; the rooms' backend through the
gateway in a real browser (Debian's headless Chromium, through selenium and
chromium-driver)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil

import pytest

aiohttp = pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")

from _support.waiting import run  # noqa: E402
from chash import ConsistentHashRouter  # noqa: E402
from chash.cli import main  # noqa: E402
from chash.demo import RoomBackend, run_rooms_demo  # noqa: E402


def test_rooms_demo_prints_a_timeline_and_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--rooms", "--duration", "6", "--users", "30"]) == 0
    out = capsys.readouterr().out
    timeline = [line for line in out.splitlines() if re.match(r"\s*\d+\.\d s  ", line)]
    events = [line.split(" s  ", 1)[1] for line in timeline]

    def index(prefix: str) -> int:
        matches = [i for i, event in enumerate(events) if event.startswith(prefix)]
        assert matches, f"no {prefix!r} in the timeline:\n{out}"
        return matches[0]

    order = [index("backends a on 127.0.0.1:"), index("gateway on http://127.0.0.1:"),
             index("30 players join 6 rooms over WebSocket"),
             index("every room is on one node, its players together"),
             index("backend b dies"), index("health: b is down"),
             index("while b was dead"), index("backend b restarts"),
             index("health: b is up"), index("the gateway closed the tunnels of b's rooms"),
             index("players stop")]
    assert order == sorted(order)
    assert "result: OK" in out and "FAILED" not in out


def test_rooms_demo_claims_hold_against_an_independent_ring() -> None:
    result = asyncio.run(run_rooms_demo(6.0, 40, out=None))
    ring = ConsistentHashRouter()
    for name in "abc":
        ring.add_service_node(name)
    assert result.ok, result.checks
    assert result.owner == {room: ring.get_target_node(room) for room in result.rooms}
    assert result.expected == sorted(r for r in result.rooms if ring.get_target_node(r) == "b")
    # Each of b's rooms went to the node the ring gives it without b.
    without = ConsistentHashRouter()
    for name in "ac":
        without.add_service_node(name)
    assert result.moved == {room: [without.get_target_node(room)] for room in result.expected}
    assert result.returned == result.expected
    data = result.as_dict()
    assert json.loads(json.dumps(data))["ok"] is True


def test_rooms_demo_rejects_bad_arguments() -> None:
    for duration, players in ((0.0, 10), (5.0, 2), (float("nan"), 10)):
        with pytest.raises(ValueError):
            asyncio.run(run_rooms_demo(duration, players, out=None))


# -- a real browser ------------------------------------------------------------

def _chromium() -> tuple[str, str]:
    """The Debian chromium and chromium-driver binaries, or a skip saying
    what is missing."""
    browser = shutil.which("chromium")
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        pytest.skip("Debian's chromium and chromium-driver are not installed")
    return browser, driver


def test_a_browser_chats_through_the_gateway() -> None:
    """Headless Chromium loads the room page from a backend through the
    gateway; the page opens a WebSocket through the gateway, lands on the
    room's owner, and hears itself back."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    browser, driver_path = _chromium()
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    from chash.gateway import Gateway, GatewayConfig

    async def main_() -> None:
        backends = {name: await RoomBackend(name).start() for name in "abc"}
        gateway = Gateway({n: b.address for n, b in backends.items()},
                          GatewayConfig(key="query:room", health=False))
        await gateway.start()
        try:
            options = webdriver.ChromeOptions()
            options.binary_location = browser
            for flag in ("--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--no-proxy-server"):
                options.add_argument(flag)

            def in_the_browser() -> dict[str, str | None]:
                # The browser and its driver are not this project's: a
                # sanitizer preloaded for chash's extension stays out of them.
                env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS")}
                chrome = webdriver.Chrome(service=Service(driver_path, env=env), options=options)
                try:
                    chrome.set_page_load_timeout(30)
                    chrome.get(f"{gateway.url}/?room=lobby&player=ada")
                    WebDriverWait(chrome, 30).until(
                        lambda c: c.find_element("tag name", "body").get_attribute(
                            "data-state") == "heard")
                    body = chrome.find_element("tag name", "body")
                    return {name: body.get_attribute(f"data-{name}")
                            for name in ("backend", "heard", "closed")}
                finally:
                    chrome.quit()

            seen = await asyncio.to_thread(in_the_browser)
            owner = gateway.router.get_target_node("lobby")
            assert seen == {"backend": owner, "heard": f"ada: hello from ada (on {owner})",
                            "closed": None}
            counts = gateway.tunnels.counts()
            assert counts.opened == {owner: 1}
        finally:
            await gateway.stop()
            for backend in backends.values():
                await backend.stop()
    run(main_(), timeout=120)
