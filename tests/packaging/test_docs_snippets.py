"""Every Python block of README.md and docs/*.md runs, as written, on 127.0.0.1.

The convention, for whoever writes the docs:

* Every fenced block whose language is ``python`` (or ``py``, ``python3``)
  is a complete program: the test writes it to a file in a scratch folder
  and runs it in its own Python process (the chash under test importable),
  which must exit with status 0 within ``TIMEOUT`` seconds. Anything not
  meant to run (shell commands, output, signatures, PromQL) takes another
  fence language: ``sh``, ``console``, ``json``, or none.
* A block that needs something says so in an HTML comment on the line right
  above its fence::

      <!-- needs: redis, backends=3, listen=8000, serves -->

  ``backends=N``
      N HTTP backends of the test's own, each answering every GET with 200
      (``/health`` included). The block calls them ``127.0.0.1:9001`` ...
      ``127.0.0.1:900N``; the test puts their real addresses in their place.
  ``redis``
      A redis-server of the test's own. The block connects to port ``6379``
      (written out, ``port=6379``), which the test replaces by its port.
  ``etcd``
      A single-member etcd of the test's own. The block connects to
      ``http://127.0.0.1:2379`` (port ``2379`` written out), which the test
      replaces by its port.
  ``dns``
      A DNS server (dnsmasq) of the test's own, answering for
      ``_http._tcp.users.example`` the SRV records ``b1.example:8080``
      (priority 10, weight 10), ``b2.example:8081`` (10, 30) and
      ``spare.example:9000`` (20, 5). The block asks ``127.0.0.1:5353``
      (port ``5353`` written out), which the test replaces by its port.
  ``redis-shards=N``
      N redis-servers of the test's own, each empty, for the sharded clients.
      The block calls them ``127.0.0.1:7001`` ... ``127.0.0.1:700N``.
  ``memcached=N``
      N memcached of the test's own, called ``127.0.0.1:21211`` ...
      ``127.0.0.1:2121N`` in the block.
  ``listen=P``
      The block listens on ``127.0.0.1:P``; the test replaces ``P`` by a free
      port.
  ``serves``
      The block serves until interrupted (needs ``listen``): the test waits
      until a GET on the listening port, carrying ``X-User-Id: user_7`` and a
      ``session`` cookie, is answered 200 by one of the backends, then sends
      SIGINT (Ctrl-C) and expects the block to exit with status 0.

  Every placeholder a directive declares must appear in the block, and a
  block may name no backend address it did not declare, so a block never
  reaches a real service on the host's ports.
* A block deliberately not run carries ``<!-- not-run: REASON -->`` right
  above its fence. It is still compiled, and the number of such blocks is
  held to ``MAX_NOT_RUN`` so that they stay rare.

Blocks added to these files later are picked up by themselves.
"""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import chash
from _support.http_backends import Backend
from _support.ports import free_port
from _support.redis_server import RedisServer
from _support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Where the chash under test comes from (the checkout, or site-packages).
CHASH_ROOT = Path(chash.__file__).resolve().parent.parent
RUN_LANGUAGES = {"python", "py", "python3"}
MAX_NOT_RUN = 2
TIMEOUT = 90.0
SERVE_DEADLINE = 30.0

_FENCE = re.compile(r"^```\s*([\w+-]*)\s*$")
_DIRECTIVE = re.compile(r"^<!--\s*([\w-]+)\s*:(.*?)-->\s*$")
_BACKEND = re.compile(r"\b127\.0\.0\.1:900(\d)\b")
_SHARD = re.compile(r"\b127\.0\.0\.1:700(\d)\b")
_MEMCACHED = re.compile(r"\b127\.0\.0\.1:2121(\d)\b")
_IPV4 = re.compile(r"\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b")


@dataclass
class Block:
    """One fenced Python block and what its directive asks for."""

    path: Path
    line: int  # of the opening fence, 1-based
    code: str
    backends: int = 0
    redis: bool = False
    etcd: bool = False
    dns: bool = False
    redis_shards: int = 0
    memcached: int = 0
    listen: list[int] = field(default_factory=list)
    serves: bool = False
    not_run: str | None = None

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def _parse_needs(block: Block, text: str) -> None:
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, _, value = item.partition("=")
        if key == "backends" and value.isdigit() and 1 <= int(value) <= 9:
            block.backends = int(value)
        elif key == "redis" and not value:
            block.redis = True
        elif key == "etcd" and not value:
            block.etcd = True
        elif key == "dns" and not value:
            block.dns = True
        elif key in ("redis-shards", "memcached") and value.isdigit() and 1 <= int(value) <= 9:
            setattr(block, key.replace("-", "_"), int(value))
        elif key == "listen" and value.isdigit():
            block.listen.append(int(value))
        elif key == "serves" and not value:
            block.serves = True
        else:
            raise ValueError(f"{block.name}: unknown need {item!r}")


def extract_blocks(path: Path) -> list[Block]:
    """The Python blocks of one Markdown file, with their directives."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            raise ValueError(f"{path}:{i + 1}: unclosed code fence")
        if fence.group(1) in RUN_LANGUAGES:
            block = Block(path, i + 1, "\n".join(lines[i + 1:end]) + "\n")
            above = _DIRECTIVE.match(lines[i - 1]) if i > 0 else None
            if above and above.group(1) == "needs":
                _parse_needs(block, above.group(2))
            elif above and above.group(1) == "not-run":
                block.not_run = above.group(2).strip()
                if not block.not_run:
                    raise ValueError(f"{block.name}: not-run needs a reason")
            elif above:
                raise ValueError(f"{block.name}: unknown directive {lines[i - 1]!r}")
            blocks.append(block)
        i = end + 1
    return blocks


BLOCKS = [block for path in DOCS for block in extract_blocks(path)]
RUNNABLE = [block for block in BLOCKS if block.not_run is None]


def test_the_docs_have_python_blocks_and_few_are_not_run() -> None:
    assert DOCS[0].name == "README.md" and len(DOCS) >= 2
    assert len(BLOCKS) >= 13, [b.name for b in BLOCKS]
    not_run = [f"{b.name}: {b.not_run}" for b in BLOCKS if b.not_run is not None]
    assert len(not_run) <= MAX_NOT_RUN, not_run
    for block in BLOCKS:
        compile(block.code, block.name, "exec")


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.name)
def test_blocks_use_loopback_and_declare_what_they_reach(block: Block) -> None:
    assert not set(_IPV4.findall(block.code)) - {"127.0.0.1"}, \
        f"{block.name}: only 127.0.0.1 in the docs' programs"
    named = {int(n) for n in _BACKEND.findall(block.code)}
    assert named <= set(range(1, block.backends + 1)), \
        f"{block.name} names backends {sorted(named)}: declare <!-- needs: backends=N -->"
    for i in range(1, block.backends + 1):
        assert f"127.0.0.1:900{i}" in block.code, f"{block.name}: backend {i} declared, unused"
    for pattern, count, what in ((_SHARD, block.redis_shards, "redis-shards"),
                                 (_MEMCACHED, block.memcached, "memcached")):
        assert {int(n) for n in pattern.findall(block.code)} <= set(range(1, count + 1)), \
            f"{block.name} names more servers than <!-- needs: {what}=N --> declares"
    if block.redis:
        assert re.search(r"\b6379\b", block.code), f"{block.name}: redis declared, no port 6379"
    if block.etcd:
        assert re.search(r"\b2379\b", block.code), f"{block.name}: etcd declared, no port 2379"
    if block.dns:
        assert re.search(r"\b5353\b", block.code), f"{block.name}: dns declared, no port 5353"
    for port in block.listen:
        assert re.search(rf"\b{port}\b", block.code), f"{block.name}: listen={port} unused"
    if block.serves:
        assert len(block.listen) == 1, f"{block.name}: serves needs exactly one listen=PORT"


@contextlib.contextmanager
def _services(block: Block) -> Iterator[tuple[str, list[Backend], list[int]]]:
    """Start what the block needs; yield its code with the real addresses,
    the backends and the ports it will listen on."""
    backends: list[Backend] = []
    redis_server: RedisServer | None = None
    stack = contextlib.ExitStack()
    try:
        code = block.code
        for _ in range(block.backends):
            backends.append(Backend())
        code = _BACKEND.sub(lambda m: backends[int(m.group(1)) - 1].node
                            if int(m.group(1)) <= len(backends) else m.group(0), code)
        if block.redis:
            redis_server = RedisServer()
            redis_server.start()
            code = re.sub(r"\b6379\b", str(redis_server.port), code)
        shards = [RedisServer() for _ in range(block.redis_shards)]
        for shard in shards:
            stack.callback(shard.close)
            shard.start()
        code = _SHARD.sub(lambda m: f"127.0.0.1:{shards[int(m.group(1)) - 1].port}", code)
        if block.memcached:
            from _support.compat_programs import memcacheds

            caches = stack.enter_context(memcacheds(block.memcached))
            code = _MEMCACHED.sub(lambda m: f"127.0.0.1:{caches[int(m.group(1)) - 1].port}", code)
        if block.etcd:
            from _support.etcd_server import EtcdCluster

            etcd = EtcdCluster(1)
            stack.callback(etcd.close)
            etcd.start()
            code = re.sub(r"\b2379\b", str(etcd.members[0].client_port), code)
        if block.dns:
            from _support.dns_server import DnsServer

            dns = DnsServer(ttl=1)
            stack.callback(dns.close)
            name = "_http._tcp.users.example"
            dns.serve([(name, "b1.example", 8080, 10, 10), (name, "b2.example", 8081, 10, 30),
                       (name, "spare.example", 9000, 20, 5)])
            code = re.sub(r"\b5353\b", str(dns.port), code)
        ports = {port: free_port() for port in block.listen}
        for port, real in ports.items():
            code = re.sub(rf"\b{port}\b", str(real), code)
        yield code, backends, list(ports.values())
    finally:
        for backend in backends:
            backend.stop()
        if redis_server is not None:
            redis_server.close()
        stack.close()


def _served(port: int) -> bool:
    """Whether a GET through the block's server reaches a backend."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/", headers={"X-User-Id": "user_7", "Cookie": "session=user_7"})
    try:
        with urllib.request.urlopen(request, timeout=5.0) as response:
            status: int = response.status
            body: bytes = response.read()
    except OSError:
        return False
    return status == 200 and body.startswith(b"200 from 127.0.0.1:")


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.name)
def test_block_runs(block: Block, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(CHASH_ROOT), os.environ.get("PYTHONPATH")])))
    with _services(block) as (code, backends, ports):
        script = tmp_path / "snippet.py"
        script.write_text(code, encoding="utf-8")
        process = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            if block.serves:
                def serving() -> bool:
                    assert process.poll() is None, f"{block.name} exited early"
                    return _served(ports[0])

                wait_until(serving, f"{block.name} serves", timeout=SERVE_DEADLINE, interval=0.1)
                assert sum(b.hits for b in backends) > 0
                process.send_signal(signal.SIGINT)
            output, _ = process.communicate(timeout=TIMEOUT)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert process.returncode == 0, f"{block.name} exited {process.returncode}:\n{output}"


def _toml_blocks() -> list[tuple[str, str]]:
    """Every ``toml`` block of the docs: a ``chash gateway`` configuration file."""
    blocks = []
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            fence = _FENCE.match(lines[i])
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")),
                       len(lines)) if fence else i
            if fence and fence.group(1) == "toml":
                blocks.append((f"{path.relative_to(ROOT)}:{i + 1}",
                               "\n".join(lines[i + 1:end]) + "\n"))
            i = end + 1
    return blocks


TOML_BLOCKS = _toml_blocks()


def test_the_gateway_docs_have_an_example_configuration_file() -> None:
    assert any(name.startswith("docs/gateway.md:") for name, _ in TOML_BLOCKS)


@pytest.mark.parametrize(("name", "text"), TOML_BLOCKS, ids=[n for n, _ in TOML_BLOCKS])
def test_toml_block_is_a_valid_gateway_configuration(name: str, text: str,
                                                     tmp_path: Path) -> None:
    """Each is checked as ``chash gateway --check-config`` checks a file
    (nothing listens: the backends it names are never reached)."""
    assert not set(_IPV4.findall(text)) - {"127.0.0.1"}, f"{name}: only 127.0.0.1 in the docs"
    path = tmp_path / "gateway.toml"
    path.write_text(text, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(CHASH_ROOT), os.environ.get("PYTHONPATH")])))
    env = {k: v for k, v in env.items() if not k.startswith("CHASH_")}
    done = subprocess.run([sys.executable, "-m", "chash", "gateway", "--check-config", str(path)],
                          capture_output=True, text=True, env=env, timeout=TIMEOUT)
    assert done.returncode == 0, f"{name}: {done.stderr}"
    given = {line.split("=", 1)[0].strip() for line in text.splitlines()
             if "=" in line and not line.lstrip().startswith(("#", '"'))
             and not line.startswith(" ")}
    shown = {line.split(" = ", 1)[0] for line in done.stdout.splitlines() if " = " in line}
    assert given <= shown, f"{name}: keys the check does not show: {given - shown}"
