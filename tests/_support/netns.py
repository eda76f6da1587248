"""A small network of Linux network namespaces, for the partition tests.

``Network`` makes a namespace per host, each with one veth link
(``eth0``, address ``10.213.0.N/24``) to a bridge in a namespace of its
own (the switch), so the machine's own namespace gains no link, address or
route: the hosts reach each other and nothing else.  Processes run inside
a host with ``ip netns exec`` (``Host.spawn``, ``Host.run``); the tests
talk to them over pipes, never over the network.

Faults, made and undone by the harness:

* ``isolate(host)`` / ``rejoin(host)``: the host's switch port down (every
  packet to or from it is dropped silently, as on a cut cable), then up;
* ``cut(a, b)`` / ``mend(a, b)``: a blackhole route to the other's address
  in each of the two hosts, so those two cannot talk while both still
  reach everyone else (this kernel has no netem and the machine no nft or
  iptables; a route is the packet filter every Linux has);
* latency and loss: ``tests/_support/relays.py``.

``close()`` kills every process started, deletes every namespace (which
takes their links with them) and the files; ``leftovers()`` names the
namespaces of runs that died without closing, which ``Network()`` deletes.
Needs root and ``ip`` (iproute2); ``require_netns()`` skips (fails in CI)
without them, saying why.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from _support.ci import missing
from _support.compat_programs import program_env

__all__ = ["SUBNET", "Host", "Network", "leftovers", "require_netns"]

#: The hosts' addresses: SUBNET.1, SUBNET.2, ... inside their namespaces only.
SUBNET = "10.213.0"
#: Every namespace a Network makes starts so, then the pid of its run.
PREFIX = "chp"

_counter = itertools.count()


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check,
                          timeout=30, env=program_env())


def require_netns() -> None:
    """Skip the test (fail it in CI) unless this process may make network
    namespaces: root, and ``ip netns`` working."""
    why = None
    if shutil.which("ip") is None:
        why = "no ip command (apt-get install iproute2)"
    elif os.geteuid() != 0:
        why = "network namespaces need root"
    else:
        probe = f"{PREFIX}probe{os.getpid()}"
        made = _ip("netns", "add", probe, check=False)
        if made.returncode != 0:
            why = f"ip netns add failed: {made.stderr.strip()}"
        else:
            _ip("netns", "del", probe, check=False)
    if why is not None:
        missing(f"the partition tests need network namespaces: {why}")


def _namespaces() -> list[str]:
    listed = _ip("netns", "list", check=False).stdout.split("\n")
    return [line.split()[0] for line in listed if line.strip()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def leftovers() -> list[str]:
    """Namespaces made by a Network of a process that is gone."""
    found = []
    for name in _namespaces():
        if not name.startswith(PREFIX) or "x" not in name:
            continue
        pid = name[len(PREFIX):].partition("x")[0]
        if pid.isdigit() and not _alive(int(pid)):
            found.append(name)
    return found


class Host:
    """One namespace with one address."""

    def __init__(self, network: Network, name: str, index: int) -> None:
        self.network = network
        self.name = name
        self.index = index
        self.ns = f"{network.tag}-{name}"
        self.address = f"{SUBNET}.{index}"
        self.port = f"v{index}"  # its end of the link, on the switch

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside this host."""
        return ["ip", "netns", "exec", self.ns, *argv]

    def spawn(self, argv: Sequence[str], *, log: str | None = None, pipes: bool = False,
              env: dict[str, str] | None = None, cwd: str | Path | None = None,
              ) -> subprocess.Popen[str]:
        """Start ``argv`` inside this host; its output goes to the log file
        ``log`` (in the network's directory), or to pipes with ``pipes``.
        The network kills it at ``close()``."""
        out: IO[str] | int | None
        if pipes:
            stdin, out, err = subprocess.PIPE, subprocess.PIPE, None
        else:
            stdin = subprocess.DEVNULL
            out = open(self.network.path(log or f"{self.name}.log"), "a")  # noqa: SIM115
            err = subprocess.STDOUT
        if pipes and log is not None:
            err = open(self.network.path(log), "a")  # noqa: SIM115
        try:
            process = subprocess.Popen(self.command(argv), stdin=stdin, stdout=out,
                                       stderr=err, text=True, env=env, cwd=cwd,
                                       start_new_session=True)
        finally:
            for stream in (out, err):
                if hasattr(stream, "close"):
                    stream.close()  # type: ignore[union-attr]
        self.network.processes.append(process)
        return process

    def run(self, argv: Sequence[str], *, timeout: float = 30.0,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside this host to its end; its output."""
        return subprocess.run(self.command(argv), capture_output=True, text=True,
                              timeout=timeout, env=env)

    def __repr__(self) -> str:
        return f"Host({self.name}, {self.address})"


class Network:
    """Hosts on one switch; see the module's docstring.  ``close()`` undoes
    everything, whatever state it is in."""

    def __init__(self) -> None:
        for name in leftovers():
            _ip("netns", "del", name, check=False)
        self.tag = f"{PREFIX}{os.getpid()}x{next(_counter)}"
        self.switch = f"{self.tag}-switch"
        self.hosts: dict[str, Host] = {}
        self.processes: list[subprocess.Popen[Any]] = []
        self.workdir = tempfile.mkdtemp(prefix="chash-netns-")
        self._cuts: set[tuple[str, str]] = set()
        self._isolated: set[str] = set()
        #: When a fault was last undone (wall clock): the moment promise 3
        #: counts from, once the last one is (``None`` until then).
        self.healed_at: float | None = None
        try:
            _ip("netns", "add", self.switch)
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "up")
        except BaseException:
            self.close()
            raise

    def path(self, name: str) -> str:
        """A file of this network's directory (logs, data)."""
        return os.path.join(self.workdir, name)

    def host(self, name: str) -> Host:
        """A new host on the switch, with the next address."""
        host = Host(self, name, len(self.hosts) + 1)
        self.hosts[name] = host
        _ip("netns", "add", host.ns)
        _ip("-n", host.ns, "link", "set", "lo", "up")
        _ip("-n", host.ns, "link", "add", "eth0", "type", "veth", "peer", "name", host.port,
            "netns", self.switch)
        _ip("-n", self.switch, "link", "set", host.port, "master", "br0")
        _ip("-n", self.switch, "link", "set", host.port, "up")
        _ip("-n", host.ns, "addr", "add", f"{host.address}/24", "dev", "eth0")
        _ip("-n", host.ns, "link", "set", "eth0", "up")
        return host

    # -- faults -----------------------------------------------------------

    def isolate(self, host: Host) -> None:
        """Cut ``host`` off from every other host: its switch port down."""
        _ip("-n", self.switch, "link", "set", host.port, "down")
        self._isolated.add(host.name)

    def rejoin(self, host: Host) -> None:
        """Undo ``isolate``."""
        _ip("-n", self.switch, "link", "set", host.port, "up")
        if host.name in self._isolated:
            self._isolated.discard(host.name)
            self.healed_at = time.time()

    def cut(self, a: Host, b: Host) -> None:
        """``a`` and ``b`` cannot talk; both still reach every other host."""
        for one, other in ((a, b), (b, a)):
            if (one.name, other.name) not in self._cuts:
                _ip("-n", one.ns, "route", "add", "blackhole", f"{other.address}/32")
                self._cuts.add((one.name, other.name))

    def mend(self, a: Host, b: Host) -> None:
        """Undo ``cut``."""
        for one, other in ((a, b), (b, a)):
            if (one.name, other.name) in self._cuts:
                _ip("-n", one.ns, "route", "del", "blackhole", f"{other.address}/32")
                self._cuts.discard((one.name, other.name))
                self.healed_at = time.time()

    def split(self, side: Sequence[Host]) -> None:
        """Cut every host of ``side`` from every host not in it."""
        inside = {host.name for host in side}
        for a in side:
            for b in self.hosts.values():
                if b.name not in inside:
                    self.cut(a, b)

    def heal(self) -> None:
        """Undo every cut and isolation."""
        for one, other in list(self._cuts):
            self.mend(self.hosts[one], self.hosts[other])
        for host in self.hosts.values():
            self.rejoin(host)

    # -- the end ----------------------------------------------------------

    def close(self) -> None:
        """Kill every process started, delete every namespace and file."""
        for process in self.processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGCONT)
                    os.killpg(process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):  # not a group leader
                    process.send_signal(signal.SIGCONT)
                    process.kill()
        for process in self.processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                pass
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
        for host in self.hosts.values():
            _ip("netns", "del", host.ns, check=False)
        _ip("netns", "del", self.switch, check=False)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def namespaces(self) -> list[str]:
        """This network's namespaces that exist now."""
        return [name for name in _namespaces() if name.startswith(self.tag + "-")]
