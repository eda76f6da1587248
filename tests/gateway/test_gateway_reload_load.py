"""Reloads under load: wrk on keep-alive connections and open WebSocket
tunnels (the websockets client) through ``chash gateway --config FILE``,
one process and two workers, and two workers over TLS (wrk over HTTPS,
wss tunnels, the certificate renewed by each reload), while the file is
reread again and again.  No request
fails (wrk counts no error and no non-2xx answer), no connection is cut
(every tunnel still echoes, none was closed).  Everything waited for is a
count (requests served between reloads, every worker on the new digest),
never a time."""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
import ssl
import subprocess
from pathlib import Path
from typing import Any

import pytest

aiohttp = pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")
websockets = pytest.importorskip("websockets", reason="websockets is not installed")
if shutil.which("wrk") is None:
    pytest.skip("wrk is not installed", allow_module_level=True)

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

from aiohttp import web  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

from _support.gateway_processes import gateway_process, status  # noqa: E402
from _support.waiting import eventually, run  # noqa: E402

RELOADS = 8
TUNNELS = 12
#: Requests the backends must have answered between two reloads.
BETWEEN = 1000

WRK_SCRIPT = """
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", "/x", {["X-User-Id"] = "user-" .. (i % 300)})
end
"""


class Backend:
    """HTTP (``GET /x``: its name) and a WebSocket echo (``GET /ws``) on one port."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.hits = 0
        self.runner: web.AppRunner | None = None
        self.address = ""

    async def start(self) -> Backend:
        app = web.Application()
        app.router.add_get("/x", self.page)
        app.router.add_get("/ws", self.echo)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.address = f"127.0.0.1:{self.runner.addresses[0][1]}"
        return self

    async def page(self, request: web.Request) -> web.Response:
        self.hits += 1
        return web.json_response({"backend": self.name})

    async def echo(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for message in ws:
            await ws.send_str(f"{self.name}:{message.data}")
        return ws

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


def config_text(backends: list[Backend], weights: str, read_timeout: float,
                workers: int, tls: tuple[str, str] | None = None) -> str:
    return "\n".join([
        *([f'tls_cert = "{tls[0]}"', f'tls_key = "{tls[1]}"'] if tls else []),
        "backend = [" + ", ".join(f'"{b.name}={b.address}"' for b in backends) + "]",
        f"weight = [{weights}]",
        "no_health = true",
        'admin_listen = "127.0.0.1:0"',
        f"workers = {workers}",
        f"read_timeout = {read_timeout}",
        "",
    ])


def wrk_counts(output: str) -> dict[str, int]:
    """Requests, and every error wrk counts (0 when it prints none)."""
    counts = {"requests": int(re.search(r"(\d+) requests in", output).group(1))}  # type: ignore[union-attr]
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)",
                       output)
    for i, name in enumerate(("connect", "read", "write", "timeout")):
        counts[name] = int(errors.group(i + 1)) if errors else 0
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    counts["non_2xx"] = int(non_2xx.group(1)) if non_2xx else 0
    return counts


@pytest.mark.parametrize(("workers", "tls"), [(1, False), (2, False), (2, True)])
def test_reloads_under_load_fail_no_request_and_cut_no_connection(tmp_path: Path,
                                                                  workers: int,
                                                                  tls: bool) -> None:
    certs = context = None
    if tls:
        from _support.tls_certificates import make_certificates

        certs = make_certificates(tmp_path / "certs")
        context = ssl.create_default_context(cafile=certs.ca)

    async def main() -> None:
        backends = {n: await Backend(n).start() for n in "abcd"}
        three = [backends[n] for n in "abc"]
        # Over TLS each reload also renews the certificate (the other one).
        files = [config_text(three, "", 30, workers, certs and (certs.cert, certs.key)),
                 config_text([*three, backends["d"]], '"b=2"', 20, workers,
                             certs and (certs.cert2, certs.key2))]
        path = tmp_path / "gateway.toml"
        path.write_text(files[0])
        script = tmp_path / "keys.lua"
        script.write_text(WRK_SCRIPT)
        wrk = None
        try:
            async with gateway_process("--config", str(path)) as (url, admin, proc):
                assert admin is not None
                assert url.startswith("https://" if tls else "http://")
                if tls:  # the certificate's names
                    url = url.replace("127.0.0.1", "localhost")
                ws_url = url.replace("http", "ws", 1) + "/ws"
                tunnels: list[Any] = []
                for i in range(TUNNELS):
                    ws = await connect(ws_url, additional_headers={"X-User-Id": f"room-{i}"},
                                       **({"ssl": context} if context else {}))
                    await ws.send("hello")
                    assert (await ws.recv()).endswith(":hello")
                    tunnels.append(ws)
                owners = [str(await _echo(ws, "who")).split(":")[0] for ws in tunnels]
                wrk = await asyncio.create_subprocess_exec(
                    "wrk", "-t1", "-c8", "-d600s", "--timeout", "30s", "-s", str(script), url,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)

                def served() -> int:
                    return sum(b.hits for b in backends.values())

                for reload in range(1, RELOADS + 1):
                    mark = served()
                    await eventually(lambda mark=mark: served() >= mark + BETWEEN,
                                     f"{BETWEEN} requests served before reload {reload}",
                                     timeout=120)
                    path.write_text(files[reload % 2])
                    before = (await status(admin))["config"]["digest"]
                    proc.send_signal(signal.SIGHUP)

                    async def every_worker_reloaded(before: str = before) -> bool:
                        page = await status(admin)
                        if workers == 1:
                            return bool(page["config"]["digest"] != before)
                        digests = [w["config_digest"] for w in page.get("workers", [])]
                        return len(digests) == workers and len(set(digests)) == 1 \
                            and before not in digests
                    await eventually(every_worker_reloaded, f"reload {reload} in every worker",
                                     timeout=60)
                    # The tunnels echo between reloads too.
                    for ws in tunnels[reload % 3::3]:
                        assert str(await _echo(ws, f"r{reload}")).endswith(f":r{reload}")
                mark = served()
                await eventually(lambda: served() >= mark + BETWEEN, "requests after the last "
                                 "reload", timeout=120)
                wrk.send_signal(signal.SIGINT)  # wrk prints its counts and exits
                out, err = await asyncio.wait_for(wrk.communicate(), 60)
                output = out.decode()
                counts = wrk_counts(output)
                assert counts["requests"] >= (RELOADS + 1) * BETWEEN, output
                assert {k: v for k, v in counts.items() if k != "requests"} == dict.fromkeys(
                    ("connect", "read", "write", "timeout", "non_2xx"), 0), output
                # No tunnel was cut: each echoes on its first node.
                for ws, owner in zip(tunnels, owners, strict=True):
                    assert await _echo(ws, "last") == f"{owner}:last"
                page = await status(admin)
                assert page["tunnels"]["open"] == TUNNELS and page["tunnels"]["closed"] == {}
                if certs is not None:  # every worker serves the last file's certificate
                    from chash.gateway.tls import certificate_digest

                    last = certs.cert if RELOADS % 2 == 0 else certs.cert2
                    assert [w["tls_certificate"] for w in page["workers"]] == \
                        [certificate_digest(last)] * workers, page["workers"]
                assert backends["d"].hits > 0  # d served while it was in the ring
                for ws in tunnels:
                    await ws.close()
        finally:
            if wrk is not None and wrk.returncode is None:
                wrk.kill()
                await wrk.wait()
            for backend in backends.values():
                await backend.stop()
    run(main(), timeout=600)


async def _echo(ws: Any, text: str) -> object:
    await ws.send(text)
    return await asyncio.wait_for(ws.recv(), 30)


def test_wrk_counts_read_its_summary() -> None:
    quiet = "  1234 requests in 2.00s, 1.2MB read\nRequests/sec: 617\n"
    assert wrk_counts(quiet) == {"requests": 1234, "connect": 0, "read": 0, "write": 0,
                                 "timeout": 0, "non_2xx": 0}
    noisy = quiet + "  Socket errors: connect 0, read 3, write 0, timeout 1\n" \
                    "  Non-2xx or 3xx responses: 7\n"
    assert wrk_counts(noisy) == {"requests": 1234, "connect": 0, "read": 3, "write": 0,
                                 "timeout": 1, "non_2xx": 7}
