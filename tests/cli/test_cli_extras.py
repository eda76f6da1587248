"""What the commands do when an optional dependency is missing: name the
extra that installs it (exit 1), or, for uvloop, run without it."""
from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import Coroutine
from typing import Any

import pytest

from chash.cli import main
from chash.cli.gateway import _run_loop


def test_demo_without_aiohttp_names_the_extra(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "aiohttp", None)
    assert main(["demo", "--duration", "2", "--users", "3"]) == 1
    captured = capsys.readouterr()
    assert captured.err == "chash demo needs aiohttp: pip install 'chash-router[gateway]'\n"
    assert captured.out == ""


def test_gateway_without_aiohttp_names_the_extra(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import chash.gateway  # noqa: F401  (loaded as it is before the types parse --key)

    monkeypatch.setitem(sys.modules, "aiohttp", None)
    assert main(["gateway", "--backend", "127.0.0.1:1", "--duration", "1"]) == 1
    captured = capsys.readouterr()
    assert captured.err == "chash gateway needs aiohttp: pip install 'chash-router[gateway]'\n"
    assert captured.out == ""


def test_gateway_redis_without_redis_py_names_the_extra(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")
    monkeypatch.setitem(sys.modules, "redis", None)
    argv = ["gateway", "--backend", "127.0.0.1:1", "--redis", "redis://127.0.0.1:1/0",
            "--duration", "1"]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.err == ("chash gateway: --redis needs redis-py: "
                            "pip install 'chash-router[redis]'\n")
    assert captured.out == ""


@pytest.mark.parametrize(("module", "flags", "message"), [
    ("httpx", ["--etcd", "http://127.0.0.1:1"],
     "--etcd needs httpx: pip install 'chash-router[etcd]'"),
    ("dns", ["--dns-srv", "_http._tcp.x.example"],
     "--dns-srv needs dnspython: pip install 'chash-router[dns]'"),
])
def test_gateway_etcd_and_dns_srv_without_their_library_name_the_extra(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], module: str,
        flags: list[str], message: str) -> None:
    pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")
    monkeypatch.setitem(sys.modules, module, None)
    if module == "dns":
        monkeypatch.setitem(sys.modules, "dns.resolver", None)
    assert main(["gateway", "--backend", "127.0.0.1:1", *flags, "--duration", "1"]) == 1
    captured = capsys.readouterr()
    assert captured.err == f"chash gateway: {message}\n"
    assert captured.out == ""


def test_the_gateway_runs_on_asyncio_without_uvloop(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)
    loops: list[str] = []

    async def main_() -> None:
        loops.append(type(asyncio.get_running_loop()).__module__)

    _run_loop(main_())
    assert loops and loops[0].startswith("asyncio")
    assert capsys.readouterr() == ("", "")  # silently


def test_the_gateway_runs_on_uvloop_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    # A stand-in uvloop that runs the coroutine on asyncio's loop and says
    # it ran it: what matters is that _run_loop hands the coroutine to it.
    ran: list[object] = []

    def run(coro: Coroutine[Any, Any, None]) -> None:
        ran.append(coro)
        asyncio.run(coro)

    monkeypatch.setitem(sys.modules, "uvloop", types.SimpleNamespace(run=run))
    loops: list[str] = []

    async def main_() -> None:
        loops.append(type(asyncio.get_running_loop()).__module__)

    coro = main_()
    _run_loop(coro)
    assert ran == [coro]
    assert loops and loops[0].startswith("asyncio")
