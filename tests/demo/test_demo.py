"""``chash demo`` end to end, shortened: the timeline, the figures, and the
claims checked against an independent ring."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

aiohttp = pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")

from _support.waiting import run  # noqa: E402
from chash import ConsistentHashRouter  # noqa: E402
from chash.cli import main  # noqa: E402
from chash.demo import SessionBackend  # noqa: E402


def test_demo_command_prints_a_timeline_and_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--duration", "5", "--users", "30"]) == 0
    out = capsys.readouterr().out
    timeline = [line for line in out.splitlines() if re.match(r"\s*\d+\.\d s  ", line)]
    events = [line.split(" s  ", 1)[1] for line in timeline]
    times = [float(line.split(" s  ", 1)[0]) for line in timeline]
    assert times == sorted(times)

    def index(prefix: str) -> int:
        matches = [i for i, event in enumerate(events) if event.startswith(prefix)]
        assert matches, f"no {prefix!r} in the timeline:\n{out}"
        return matches[0]

    order = [index("backends a on 127.0.0.1:"), index("gateway on http://127.0.0.1:"),
             index("30 users start browsing"), index("every user stayed on one backend"),
             index("backend b stops"), index("health: b is down"),
             index("while b was down"), index("backend b restarts"),
             index("health: b is up"), index("users stop")]
    assert order == sorted(order)
    assert "exactly b's" in events[index("while b was down")]
    assert "nobody else moved" in out
    assert re.search(r"^  failed requests\s+0$", out, re.M)
    moved = re.search(r"^  users moved when b stopped\s+(\d+) of 30", out, re.M)
    back = re.search(r"^  users back on b\s+(\d+) of (\d+)$", out, re.M)
    assert moved and back
    assert moved.group(1) == back.group(1) == back.group(2)
    assert "FAILED" not in out
    assert out.rstrip().endswith("result: OK")


def test_demo_json_matches_the_ring(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--duration", "4", "--users", "24", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["ok"] is True and all(result["checks"].values())
    # The users who moved are those a ring of a, b, c gives to b: nobody
    # else, and they all came back.
    ring = ConsistentHashRouter()
    for node in "abc":
        ring.add_service_node(node)
    users = [f"user-{i:03d}" for i in range(1, 25)]
    owned_by_b = sorted(u for u in users if ring.get_target_node(u) == "b")
    assert owned_by_b
    assert result["expected"] == result["moved"] == result["returned"] == owned_by_b
    assert result["strayed"] == []
    assert result["users_per_backend"] == {
        node: sum(1 for u in users if ring.get_target_node(u) == node) for node in "abc"}
    assert result["failed"] == 0 and result["requests"] > 24
    assert result["sessions_kept"] == 24 - len(owned_by_b)
    assert result["stopped_at"] < result["down_at"] < result["restarted_at"] \
        < result["back_at"] < result["ended_at"]


def test_session_backend_keeps_sessions_until_it_stops() -> None:
    async def main_() -> None:
        backend = await SessionBackend("x").start()
        try:
            async with aiohttp.ClientSession() as session:
                async def visit(user: str) -> dict[str, object]:
                    async with session.get(f"http://{backend.address}/cart",
                                           headers={"X-User-Id": user}) as resp:
                        assert resp.status == 200
                        data: dict[str, object] = await resp.json()
                        return data

                first, second, other = await visit("u1"), await visit("u1"), await visit("u2")
                assert first["backend"] == "x" and first["visits"] == 1
                assert second["session"] == first["session"] and second["visits"] == 2
                assert other["session"] != first["session"]
                assert backend.sessions == 2
                async with session.get(f"http://{backend.address}/health") as resp:
                    assert resp.status == 200
                port = backend.port
                await backend.stop()
                assert backend.sessions == 0 and not backend.running
                with pytest.raises(aiohttp.ClientConnectorError):
                    await visit("u1")
                await backend.start()
                assert backend.port == port
                again = await visit("u1")
                assert again["visits"] == 1 and again["session"] != first["session"]
        finally:
            await backend.stop()
    run(main_())


@pytest.mark.parametrize(("argv", "message"), [
    (["--duration", "1"], "argument --duration: must be from 2 to 600 seconds, not 1"),
    (["--duration", "soon"], "argument --duration: not a number of seconds: 'soon'"),
    (["--duration", "nan"], "argument --duration: must be from 2 to 600 seconds"),
    (["--users", "2"], "argument --users: must be from 3 to 2000, not 2"),
    (["--users", "many"], "argument --users: not a whole number: 'many'"),
])
def test_demo_argument_errors(capsys: pytest.CaptureFixture[str], argv: list[str],
                              message: str) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["demo", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "usage: chash demo" in err and message in err


def test_run_demo_rejects_bad_arguments() -> None:
    from chash.demo import run_demo

    for duration, users in ((0.0, 10), (5.0, 2)):
        with pytest.raises(ValueError):
            asyncio.run(run_demo(duration, users, out=None))


def test_demo_counts_read_right_for_one(capsys: pytest.CaptureFixture[str]) -> None:
    # Three users: a ring of a, b, c gives b exactly one of them and a none.
    assert main(["demo", "--duration", "3", "--users", "3"]) == 0
    out = capsys.readouterr().out
    assert "a 0 users, b 1 user, c 2 users" in out
    assert "its 1 user's session goes with it" in out
    assert "while b was down 1 user moved, exactly b's 1" in out
    assert "1 of b's 1 user is back on b" in out
    assert not re.search(r"\b1 (users|nodes|backends|requests|keys)\b", out), out
