"""``CHASH_<OPTION>`` environment variables for every option of ``chash
gateway`` (chash.cli.env): each one read, the command line winning, a bad
one reported by name."""

from __future__ import annotations

import argparse

import pytest

from chash.cli import build_parser, main
from chash.cli.env import check_environment, variable

#: A value for every option's variable, and what the option then holds.
SAMPLES: dict[str, tuple[str, object]] = {
    "--config": ("/etc/chash/gateway.toml", "/etc/chash/gateway.toml"),
    "--check-config": ("/etc/chash/gateway.toml", "/etc/chash/gateway.toml"),
    "--listen": ("0.0.0.0:9000", ("0.0.0.0", 9000)),
    "--backend": ("a=127.0.0.1:1@eu,b=127.0.0.1:2",
                  [[("a", "127.0.0.1:1", "eu"), ("b", "127.0.0.1:2", None)]]),
    "--zone": ("eu", "eu"),
    "--key": ("cookie:sid", "cookie:sid"),
    "--missing-key": ("reject", "reject"),
    "--affinity": ("prefix", "prefix"),
    "--workers": ("3", 3),
    "--redis": ("redis://127.0.0.1:1/0", "redis://127.0.0.1:1/0"),
    "--etcd": ("http://127.0.0.1:1,http://127.0.0.1:2", "http://127.0.0.1:1,http://127.0.0.1:2"),
    "--ring": ("shop", "shop"),
    "--vote-ttl": ("2.5", 2.5),
    "--resync-interval": ("0.5", 0.5),
    "--dns-srv": ("_http._tcp.shop.example", "_http._tcp.shop.example"),
    "--nameserver": ("127.0.0.1:5353", ["127.0.0.1:5353"]),
    "--bootstrap": ("yes", True),
    "--admin-listen": ("127.0.0.1:9001", ("127.0.0.1", 9001)),
    "--attempts": ("5", 5),
    "--connect-timeout": ("0.5", 0.5),
    "--read-timeout": ("7", 7.0),
    "--deadline": ("9", 9.0),
    "--pool-size": ("4", 4),
    "--max-body": ("2m", 2 << 20),
    "--header-timeout": ("3", 3.0),
    "--idle-timeout": ("4", 4.0),
    "--retry-unsafe": ("1", True),
    "--tunnel-idle-timeout": ("60", 60.0),
    "--max-tunnels": ("50", 50),
    "--on-ring-change": ("close", "close"),
    "--tunnel-close-grace": ("2", 2.0),
    "--tls-cert": ("/etc/chash/cert.pem", "/etc/chash/cert.pem"),
    "--tls-key": ("/etc/chash/key.pem", "/etc/chash/key.pem"),
    "--tls-ciphers": ("ECDHE+AESGCM", "ECDHE+AESGCM"),
    "--tls-min-version": ("1.3", "1.3"),
    "--tls-client-ca": ("/etc/chash/clients.pem", "/etc/chash/clients.pem"),
    "--tls-handshake-timeout": ("3", 3.0),
    "--backend-ca": ("/etc/chash/internal-ca.pem", "/etc/chash/internal-ca.pem"),
    "--backend-insecure": ("1", True),
    "--fail-on-status": ("500,503", frozenset({500, 503})),
    "--no-health": ("true", True),
    "--health-path": ("/ping", "/ping"),
    "--health-interval": ("0.25", 0.25),
    "--health-timeout": ("0.5", 0.5),
    "--fall": ("4", 4),
    "--rise": ("5", 5),
    "--node-header": ("X-Node", "X-Node"),
    "--no-metrics": ("on", True),
    "--no-tracing": ("1", True),
    "--slow-start": ("30", 30.0),
    "--duration": ("12", 12.0),
    "--log-level": ("debug", "debug"),
    "--vnodes": ("40", 40),
    "--hash": ("crc32", "crc32"),
    "--layout": ("nginx", "nginx"),
    "--weight": ("a=2", [("a", 2.0)]),
    "--router": ("rendezvous", "rendezvous"),
}


def gateway_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    gateway: argparse.ArgumentParser = sub.choices["gateway"]
    return gateway


def parse(*argv: str) -> argparse.Namespace:
    args = build_parser().parse_args(["gateway", *argv])
    check_environment(args, args.gateway_parser)
    return args


def test_every_option_has_a_sample() -> None:
    options = {o for a in gateway_parser()._actions for o in a.option_strings
               if o.startswith("--") and o != "--help"}
    assert options == set(SAMPLES)


def test_every_variable_sets_its_option(monkeypatch: pytest.MonkeyPatch) -> None:
    for option, (text, _) in SAMPLES.items():
        monkeypatch.setenv(variable(option), text)
    args = parse()
    for option, (_, expected) in SAMPLES.items():
        dest = option.lstrip("-").replace("-", "_")
        assert getattr(args, dest) == expected, option


def test_the_command_line_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHASH_LISTEN", "0.0.0.0:9000")
    monkeypatch.setenv("CHASH_BACKEND", "a=127.0.0.1:1")
    monkeypatch.setenv("CHASH_NO_HEALTH", "1")
    args = parse("--listen", "127.0.0.1:7000", "--backend", "127.0.0.1:3")
    assert args.listen == ("127.0.0.1", 7000)
    assert args.backend == [[("127.0.0.1:3", "127.0.0.1:3", None)]]
    assert args.no_health is True
    monkeypatch.setenv("CHASH_NO_HEALTH", "0")
    assert parse().no_health is False
    assert variable("--health-interval") == "CHASH_HEALTH_INTERVAL"


@pytest.mark.parametrize(("name", "value", "says"), [
    ("CHASH_WORKERS", "none", "CHASH_WORKERS"),
    ("CHASH_NO_HEALTH", "maybe", "CHASH_NO_HEALTH: expected 1/true/yes/on"),
    ("CHASH_LOG_LEVEL", "loud", "CHASH_LOG_LEVEL: 'loud' is not one of"),
    ("CHASH_LISTEN", "nowhere", "CHASH_LISTEN: expected HOST:PORT"),
])
def test_a_bad_variable_is_named(monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str],
                                 name: str, value: str, says: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exc:
        main(["gateway", "--backend", "127.0.0.1:1"])
    assert exc.value.code == 2
    assert says in capsys.readouterr().err
    # Other commands do not read the gateway's variables.
    assert main(["route", "--nodes", "a,b", "k"]) == 0
