"""Real etcd members on free loopback ports, for the membership tests.

``EtcdCluster(size)`` starts ``size`` members (1 or 3) of one new cluster,
each with its own data directory and client and peer ports from the OS,
auto-compaction off, short heartbeat and election timeouts (so that a lost
leader is replaced within a second or two), and waits until the cluster
has a leader.  A member can be killed, paused (SIGSTOP), resumed and
restarted on its ports with its data; ``close()`` kills every member
whatever state it is in and removes the directories.

The tests run against etcd 3.4 (Debian 12's ``etcd-server``, found on the
PATH) and 3.5 (``etcd_executable("3.5")``: ``$CHASH_ETCD_3_5``, else
``/opt/chash/etcd-3.5/etcd``, which ``.ci/fetch-etcd-3.5`` puts there);
``VERSIONS`` lists both, for fixtures parametrized by version.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

from _support.ci import missing
from _support.compat_programs import program_env, require
from _support.ports import free_ports

__all__ = ["VERSIONS", "EtcdCluster", "etcd_executable", "running_cluster"]

STARTUP_DEADLINE = 30.0
#: The etcd versions the tests run against.
VERSIONS = ("3.4", "3.5")
#: Where ``.ci/fetch-etcd-3.5`` puts etcd 3.5.
DEFAULT_ETCD_3_5 = "/opt/chash/etcd-3.5/etcd"


@functools.cache
def _reported_version(executable: str) -> str:
    """The ``MAJOR.MINOR`` an etcd binary reports (empty if it does not run)."""
    try:
        out = subprocess.run([executable, "--version"], capture_output=True, text=True,
                             timeout=30, env=program_env()).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    for line in out.splitlines():
        if line.startswith("etcd Version: "):
            return ".".join(line.split()[2].split(".")[:2])
    return ""


def etcd_executable(version: str = "3.4") -> str:
    """The etcd server binary of ``version`` ("3.4" or "3.5"); outside CI
    a missing one skips saying how to get it, in CI (``CI=true``) that is
    a failure."""
    if version == "3.4":
        executable = require("etcd")
        how = "apt-get install etcd-server (Debian 12)"
    elif version == "3.5":
        executable = os.environ.get("CHASH_ETCD_3_5") or DEFAULT_ETCD_3_5
        how = (f"run .ci/fetch-etcd-3.5 (as root: it puts Debian trixie's at "
               f"{DEFAULT_ETCD_3_5}), or set CHASH_ETCD_3_5 to an etcd 3.5 binary")
    else:
        raise ValueError(f"no etcd {version!r} for the tests: one of {VERSIONS}")
    found = _reported_version(executable) if os.access(executable, os.X_OK) else ""
    if found != version:
        problem = f"is etcd {found}" if found else "is missing or does not run"
        missing(f"etcd {version} is needed: {executable} {problem}; {how}")
    return executable


def _post(url: str, body: dict[str, Any], token: str | None = None,
          timeout: float = 2.0) -> dict[str, Any]:
    """POST JSON to etcd's gateway (plain urllib: the fixture must not
    depend on the code under test)."""
    request = urllib.request.Request(url, json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": token} if token else {})})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        reply: dict[str, Any] = json.loads(response.read() or b"{}")
        return reply


class EtcdMember:
    """One etcd process of a cluster."""

    def __init__(self, name: str, client_port: int, peer_port: int, workdir: str) -> None:
        self.name = name
        self.client_port = client_port
        self.peer_port = peer_port
        self.data_dir = os.path.join(workdir, name)
        self.log_path = os.path.join(workdir, f"{name}.log")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """http://127.0.0.1:CLIENT_PORT"""
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def launch(self, executable: str, initial_cluster: str, state: str) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [executable, "--name", self.name, "--data-dir", self.data_dir,
                 "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                 "--listen-peer-urls", self.peer_url,
                 "--initial-advertise-peer-urls", self.peer_url,
                 "--initial-cluster", initial_cluster, "--initial-cluster-state", state,
                 "--initial-cluster-token", "chash-test",
                 "--heartbeat-interval", "50", "--election-timeout", "500", "--bcrypt-cost", "4",
                 "--auto-compaction-retention", "0", "--logger", "zap",
                 "--log-level", "error"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**program_env(), "ETCD_UNSUPPORTED_ARCH": os.environ.get(
                    "ETCD_UNSUPPORTED_ARCH", "")})

    def kill(self) -> None:
        """SIGKILL the member and wait for it."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGCONT)
            process.kill()
            process.wait(10)

    def pause(self) -> None:
        """SIGSTOP the member: its connections stay open, nothing answers."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT the member."""
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def status(self) -> dict[str, Any] | None:
        """The member's ``/v3/maintenance/status``, or None if it does not answer."""
        try:
            return _post(self.url + "/v3/maintenance/status", {}, timeout=1.0)
        except (OSError, ValueError, urllib.error.URLError):
            return None

    def log_tail(self, lines: int = 15) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as log:
                return "".join(log.readlines()[-lines:])
        except OSError:
            return "(no log)"


class EtcdCluster:
    """``size`` etcd members of one new cluster, of etcd ``version``."""

    def __init__(self, size: int = 1, version: str = "3.4") -> None:
        self.version = version
        self.executable = etcd_executable(version)
        self.workdir = tempfile.mkdtemp(prefix="chash-etcd-")
        ports = free_ports(2 * size)
        self.members = [EtcdMember(f"m{i}", ports[2 * i], ports[2 * i + 1], self.workdir)
                        for i in range(size)]
        self.initial_cluster = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        self.root_token: str | None = None

    @property
    def urls(self) -> list[str]:
        """Every member's client URL."""
        return [member.url for member in self.members]

    @property
    def url(self) -> str:
        """The endpoints, comma-separated (as ``--etcd`` takes them)."""
        return ",".join(self.urls)

    def start(self) -> None:
        """Start every member and wait for a leader."""
        for member in self.members:
            member.launch(self.executable, self.initial_cluster, "new")
        self.wait_healthy()

    def restart(self, member: EtcdMember) -> None:
        """Kill ``member`` and start it again with its data; wait for a leader."""
        member.kill()
        member.launch(self.executable, self.initial_cluster, "existing")
        self.wait_healthy()

    def leader(self) -> EtcdMember:
        """The member that leads now."""
        deadline = time.monotonic() + STARTUP_DEADLINE
        while time.monotonic() < deadline:
            for member in self.members:
                if not member.running:
                    continue
                status = member.status()
                if status and status.get("leader") and \
                        status.get("leader") == status.get("header", {}).get("member_id"):
                    return member
            time.sleep(0.05)
        raise RuntimeError("no etcd member leads")

    def wait_healthy(self) -> None:
        """Wait until every running member answers and one of them leads."""
        deadline = time.monotonic() + STARTUP_DEADLINE
        for member in self.members:
            while member.running and member.status() is None:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"etcd {member.name} did not answer within "
                                       f"{STARTUP_DEADLINE:g}s: {member.log_tail()}")
                time.sleep(0.05)
            if member.process is not None and member.process.poll() is not None:
                raise RuntimeError(f"etcd {member.name} exited with "
                                   f"{member.process.returncode}: {member.log_tail()}")
        self.leader()

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST to the first member that answers (as root once auth is on)."""
        error: Exception | None = None
        for member in self.members:
            if member.running:
                try:
                    return _post(member.url + path, body, self.root_token, timeout=5.0)
                except (OSError, urllib.error.URLError) as exc:
                    error = exc
        raise RuntimeError(f"no etcd member answered {path}: {error}")

    def wipe(self) -> None:
        """Delete every key (between tests sharing the cluster)."""
        self.post("/v3/kv/deleterange", {"key": "AA==", "range_end": "AA=="})

    def compact(self) -> int:
        """Compact the history up to the current revision; that revision."""
        rev = int(self.post("/v3/kv/range", {"key": "AA=="})["header"]["revision"])
        self.post("/v3/kv/compaction", {"revision": str(rev), "physical": True})
        return rev

    def enable_auth(self, password: str = "rootpw") -> None:
        """Add user root (role root) and turn auth on."""
        self.post("/v3/auth/user/add", {"name": "root", "password": password})
        self.post("/v3/auth/user/grant", {"user": "root", "role": "root"})
        self.post("/v3/auth/enable", {})
        self.root_token = str(self.post("/v3/auth/authenticate",
                                        {"name": "root", "password": password})["token"])

    def disable_auth(self) -> None:
        """Turn auth off again (as root)."""
        self.post("/v3/auth/disable", {})
        self.root_token = None

    def close(self) -> None:
        """Kill every member, whatever state it is in, and remove the data."""
        for member in self.members:
            member.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)


def running_cluster(size: int = 1, version: str = "3.4") -> Iterator[EtcdCluster]:
    """A started cluster, closed when the generator is closed: the body of
    the tests' etcd fixtures (``yield from running_cluster(3)``).  Skips
    without that etcd (fails in CI)."""
    cluster = EtcdCluster(size, version)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()
