"""``chash gateway --config FILE`` and ``--check-config FILE``
(chash.cli.config_file): a key for every option, read off the parser;
values parsed by the options' own types; the precedence flag > variable >
file > default; errors naming the key and its line; the effective
configuration printed, and read back to the same."""

from __future__ import annotations

import argparse
import re
import textwrap
from pathlib import Path

import pytest
from test_cli_env import SAMPLES, gateway_parser

from chash.cli import main
from chash.cli.config_file import (
    ConfigFileError,
    digest,
    effective_text,
    key_lines,
    line_of,
    option_keys,
    read_options,
)

#: A value for every key, as TOML; the option then holds SAMPLES' value.
FILE_SAMPLES: dict[str, str] = {
    "listen": '"0.0.0.0:9000"',
    "backend": '["a=127.0.0.1:1@eu", "b=127.0.0.1:2"]',
    "zone": '"eu"',
    "key": '"cookie:sid"',
    "missing_key": '"reject"',
    "affinity": '"prefix"',
    "workers": "3",
    "redis": '"redis://127.0.0.1:1/0"',
    "etcd": '"http://127.0.0.1:1,http://127.0.0.1:2"',
    "ring": '"shop"',
    "vote_ttl": "2.5",
    "resync_interval": "0.5",
    "dns_srv": '"_http._tcp.shop.example"',
    "nameserver": '["127.0.0.1:5353"]',
    "bootstrap": "true",
    "admin_listen": '"127.0.0.1:9001"',
    "attempts": "5",
    "connect_timeout": "0.5",
    "read_timeout": "7",
    "deadline": "9.0",
    "pool_size": "4",
    "max_body": '"2m"',
    "header_timeout": "3",
    "idle_timeout": "4",
    "retry_unsafe": "true",
    "tunnel_idle_timeout": "60",
    "max_tunnels": "50",
    "on_ring_change": '"close"',
    "tunnel_close_grace": "2",
    "tls_cert": '"/etc/chash/cert.pem"',
    "tls_key": '"/etc/chash/key.pem"',
    "tls_ciphers": '"ECDHE+AESGCM"',
    "tls_min_version": '"1.3"',
    "tls_client_ca": '"/etc/chash/clients.pem"',
    "tls_handshake_timeout": "3",
    "backend_ca": '"/etc/chash/internal-ca.pem"',
    "backend_insecure": "true",
    "fail_on_status": "[500, 503]",
    "no_health": "true",
    "health_path": '"/ping"',
    "health_interval": "0.25",
    "health_timeout": "0.5",
    "fall": "4",
    "rise": "5",
    "node_header": '"X-Node"',
    "no_metrics": "true",
    "no_tracing": "true",
    "slow_start": "30",
    "duration": "12",
    "log_level": '"debug"',
    "vnodes": "40",
    "hash": '"crc32"',
    "layout": '"nginx"',
    "router": '"rendezvous"',
    "weight": '["a=2"]',
}

BACKENDS = 'backend = ["a=127.0.0.1:9001", "b=127.0.0.1:9002"]\n'


def write(tmp_path: Path, text: str, name: str = "gateway.toml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(path)


def check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``chash gateway --check-config ...``: exit code, stdout, stderr."""
    try:
        code = main(["gateway", *argv])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def effective(out: str) -> dict[str, str]:
    return dict(line.split(" = ", 1) for line in out.splitlines()
                if line and not line.startswith("#"))


def test_every_option_but_the_files_has_a_key() -> None:
    keys = set(option_keys(gateway_parser()))
    options = {o[2:].replace("-", "_") for o in SAMPLES} - {"config", "check_config"}
    assert keys == options == set(FILE_SAMPLES)


def test_every_key_sets_its_option(tmp_path: Path) -> None:
    path = write(tmp_path, "".join(f"{k} = {v}\n" for k, v in FILE_SAMPLES.items()))
    parser = gateway_parser()
    options = read_options(path, parser)
    actions = option_keys(parser)
    for key in FILE_SAMPLES:
        expected = SAMPLES["--" + key.replace("_", "-")][1]
        value = options.values[actions[key].dest]
        if isinstance(actions[key], argparse._AppendAction) and key == "backend":
            expected = [[entry] for entry in expected[0]]  # type: ignore[index]
        assert value == expected, key


def test_an_option_added_later_has_its_key_and_its_types(tmp_path: Path) -> None:
    from chash.cli.args import seconds

    parser = gateway_parser()
    parser.add_argument("--spare-cert", metavar="FILE")
    parser.add_argument("--spare-version", choices=("1.2", "1.3"))
    parser.add_argument("--spare-timeout", type=seconds, default=10.0)
    parser.add_argument("--spare-insecure", action="store_true")
    path = write(tmp_path, 'spare_cert = "/etc/cert.pem"\nspare_version = "1.3"\n'
                           'spare_timeout = 2\nspare_insecure = true\n')
    values = read_options(path, parser).values
    assert values == {"spare_cert": "/etc/cert.pem", "spare_version": "1.3",
                      "spare_timeout": 2.0, "spare_insecure": True}
    bad = write(tmp_path, '\n\nspare_version = "1.1"\n', "bad.toml")
    with pytest.raises(ConfigFileError, match=r"bad.toml:3: spare_version: '1.1' is not one"):
        read_options(bad, parser)
    bad = write(tmp_path, 'spare_timeout = "2"\n', "bad.toml")
    with pytest.raises(ConfigFileError, match=r":1: spare_timeout: expected a number, not a "
                                              r"string"):
        read_options(bad, parser)


@pytest.mark.parametrize(("flag", "variable", "in_file", "expected"), [
    (True, True, True, "30.0"),
    (False, True, True, "20.0"),
    (False, False, True, "10.0"),
    (False, False, False, "30.0"),  # the default
    (True, False, False, "30.0"),
])
def test_flag_over_variable_over_file_over_default(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        flag: bool, variable: bool, in_file: bool, expected: str) -> None:
    path = write(tmp_path, BACKENDS + ("read_timeout = 10\n" if in_file else ""))
    if variable:
        monkeypatch.setenv("CHASH_READ_TIMEOUT", "20")
    argv = ["--read-timeout", "30"] if flag else []
    code, out, _ = check(capsys, "--check-config", path, *argv)
    assert code == 0
    assert effective(out)["read_timeout"] == expected


def test_an_empty_array_is_an_option_with_no_value(tmp_path: Path) -> None:
    path = write(tmp_path, BACKENDS + "fail_on_status = []\nnameserver = []\nweight = []\n")
    values = read_options(path, gateway_parser()).values
    assert values["fail_on_status"] == frozenset()
    assert values["nameserver"] == [] and values["weight"] == []


def test_a_flag_given_its_default_value_still_wins(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, BACKENDS + "attempts = 5\nno_health = false\n")
    code, out, _ = check(capsys, "--check-config", path, "--attempts", "3", "--no-health")
    assert code == 0
    assert effective(out)["attempts"] == "3" and effective(out)["no_health"] == "true"


def test_repeatable_options_from_each_source(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, BACKENDS)
    assert effective(check(capsys, "--check-config", path)[1])["backend"] == \
        '["a=127.0.0.1:9001", "b=127.0.0.1:9002"]'
    monkeypatch.setenv("CHASH_BACKEND", "c=127.0.0.1:9003")
    assert effective(check(capsys, "--check-config", path)[1])["backend"] == \
        '["c=127.0.0.1:9003"]'
    out = check(capsys, "--check-config", path, "--backend", "d=127.0.0.1:9004")[1]
    assert effective(out)["backend"] == '["d=127.0.0.1:9004"]'


def test_the_file_path_may_come_from_its_variable(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHASH_CHECK_CONFIG", write(tmp_path, BACKENDS + "attempts = 4\n"))
    code, out, _ = check(capsys)
    assert code == 0 and effective(out)["attempts"] == "4"


@pytest.mark.parametrize(("text", "where"), [
    ("listen = 8080\n", ":1: listen: expected a string, not an integer"),
    ("\n\nattempts = 2.5\n", ":3: attempts: expected an integer, not a number"),
    ("attempts = 0\n", ":1: attempts: must be >= 1, not 0"),
    ("# comment\nread_timeout = -1\n", ":2: read_timeout: must be a positive number of seconds"),
    ("no_health = \"yes\"\n", ":1: no_health: expected true or false, not a string"),
    ("missing_key = \"drop\"\n", ":1: missing_key: 'drop' is not one of remote, reject"),
    ("read_timout = 3\n", ":1: read_timout: unknown key \\(did you mean read_timeout\\?\\)"),
    ("attempts = 3\n\n[proxy]\nread_timeout = 3\n", ":3: proxy: unknown key"),
    ("proxy.read_timeout = 3\n", ":1: proxy: unknown key"),
    ('fail_on_status = [\n  500,\n  503,\n]\n"max_body" = "lots"\n',
     ":5: max_body: expected a size in bytes"),
    ('health_path = """\nattempts = 0\n"""\nattempts = 0\n', ":4: attempts: must be >= 1"),
    ("fail_on_status = [500, [503]]\n", ":1: fail_on_status: expected an array of numbers"),
    ("weight = [\"a=2\", \"b=x\"]\n", ":1: weight: in 'b=x': the weight is not a number"),
    ("backend = {a = \"127.0.0.1:1\"}\n", ":1: backend: expected a string, not a table"),
    ("duration = 1979-05-27\n", ":1: duration: expected a number, not a date"),
    ("config = \"other.toml\"\n", ":1: config: unknown key"),
])
def test_a_wrong_key_type_or_value_names_the_key_and_its_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, where: str) -> None:
    path = write(tmp_path, BACKENDS.replace("backend", "# backend") + text)
    code, out, err = check(capsys, "--check-config", path)
    assert code == 2 and out == ""
    line, _, rest = where[1:].partition(":")
    assert f"gateway.toml:{int(line) + 1}:" in err, err  # the backend comment is line 1
    assert re.search(rest, err), err


def test_a_file_that_is_no_toml_or_missing_exits_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = check(capsys, "--check-config", write(tmp_path, "attempts = \n"))
    assert code == 2 and "not valid TOML" in err and "line 1" in err
    code, _, err = check(capsys, "--check-config", str(tmp_path / "none.toml"))
    assert code == 2 and "none.toml: cannot read it" in err


def test_the_checks_across_options_apply_to_the_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = check(capsys, "--check-config", write(tmp_path, 'ring = "shop"\n' + BACKENDS))
    assert code == 2 and "--ring and --bootstrap need --redis URL" in err
    code, _, err = check(capsys, "--check-config", write(tmp_path, "attempts = 3\n"))
    assert code == 2 and "at least one --backend is required" in err
    code, _, err = check(capsys, "--check-config", write(tmp_path, BACKENDS + 'weight = ["z=2"]\n'))
    assert code == 2 and "--weight names unknown node(s): z" in err


def test_a_bad_file_stops_the_gateway_before_it_listens(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, BACKENDS + 'listen = "127.0.0.1:0"\nattempts = "3"\n')
    code, out, err = check(capsys, "--config", path)
    assert code == 2 and "gateway.toml:3: attempts: expected an integer" in err
    assert "listening" not in out


def test_config_and_check_config_together_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, BACKENDS)
    code, _, err = check(capsys, "--config", path, "--check-config", path)
    assert code == 2 and "not both" in err


def test_the_effective_configuration_reads_back_to_itself(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = "".join(f"{k} = {v}\n" for k, v in FILE_SAMPLES.items()
                   if k not in ("redis", "etcd", "ring", "bootstrap", "vote_ttl",
                                "resync_interval", "dns_srv", "nameserver", "slow_start", "router",
                                # --check-config reads the certificates, which are not there
                                "tls_cert", "tls_key", "tls_ciphers", "tls_client_ca",
                                "backend_ca"))
    code, out, err = check(capsys, "--check-config", write(tmp_path, text))
    assert code == 0, err
    header, body = out.split("\n", 4)[:4], out.split("\n", 4)[4]
    assert header[3] == f"# {digest(body)}"
    again = write(tmp_path, out, "again.toml")
    code, out2, _ = check(capsys, "--check-config", again)
    assert code == 0
    assert out2.replace("again.toml", "gateway.toml") == out
    assert effective(out)["max_body"] == str(2 << 20) and effective(out)["workers"] == "3"


def test_effective_text_lists_every_key_in_the_parsers_order() -> None:
    parser = gateway_parser()
    args = parser.parse_args(["--backend", "a=127.0.0.1:1"])
    lines = effective_text(parser, args).splitlines()
    keys = [line.split(" = ")[0].removeprefix("# ").removesuffix(": not set") for line in lines]
    assert keys == list(option_keys(parser))
    assert 'listen = "127.0.0.1:8080"' in lines and "# admin_listen: not set" in lines


def test_key_lines_steps_over_strings_arrays_and_tables() -> None:
    text = "\n".join([
        "# a comment with x = 1",
        "a = 1",
        'b = """',
        "c = 2",
        '"""',
        "d = [",
        '  "e = 3",  # f = 4',
        "  [5, 6],",
        "]",
        "\"quoted.key\" = 'g = 7'",
        "h.i.j = {k = 8}",
        "",
        "[t]",
        "l = 9",
        "[[u.v]]",
        "m = \'\'\'x = 10",
        "n = 11\'\'\'",
        "o = 12",
        "",
    ])
    lines = key_lines(text)
    assert lines[("a",)] == 2 and lines[("b",)] == 3 and lines[("d",)] == 6
    assert ("c",) not in lines and ("e",) not in lines and ("f",) not in lines
    assert lines[("quoted.key",)] == 10
    assert lines[("h",)] == lines[("h", "i")] == lines[("h", "i", "j")] == 11
    assert line_of(lines, ("h", "i", "j", "k")) == 11
    assert lines[("t",)] == 13 and lines[("t", "l")] == 14
    assert lines[("u", "v")] == 15 and lines[("u", "v", "m")] == 16
    assert ("n",) not in lines and ("u", "v", "n") not in lines
    assert lines[("u", "v", "o")] == 18
    assert line_of(lines, ("nowhere",)) is None
