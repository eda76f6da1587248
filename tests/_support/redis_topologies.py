"""A real Redis Cluster and a real Sentinel setup on loopback, for tests.

``LocalCluster`` starts six ``redis-server --cluster-enabled yes`` (three
primaries, each with a replica, a short ``cluster-node-timeout`` so that a
failover takes about two seconds), joins them with ``redis-cli --cluster
create``, and can move one slot to another primary and kill the primary of
a slot.  ``LocalSentinel`` starts a primary, a replica and three sentinels
watching them, and can kill the primary.  Every process has its own
directory and ports picked by the OS, and everything stops at ``close()``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any

import pytest

from _support.ports import free_port

__all__ = ["LocalCluster", "LocalSentinel"]

DEADLINE = 30.0


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not installed: apt-get install redis-server redis-sentinel")
    return path


def _bus_port() -> int:
    """A port whose cluster bus port (port + 10000) is free too."""
    return free_port(also=10000)


def _command(port: int, *args: str | int, timeout: float = 2.0) -> Any:
    import redis

    c = redis.Redis(host="127.0.0.1", port=port, decode_responses=True,
                    socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        return c.execute_command(*args)
    finally:
        c.close()


def _wait(condition: Any, what: str, deadline: float = DEADLINE) -> None:
    end = time.monotonic() + deadline
    while True:
        try:
            if condition():
                return
        except Exception:  # a node still starting, or failing over
            pass
        if time.monotonic() > end:
            raise RuntimeError(f"timed out after {deadline:g}s waiting until {what}")
        time.sleep(0.05)


class _Processes:
    def __init__(self, prefix: str) -> None:
        self.workdir = tempfile.mkdtemp(prefix=prefix)
        self.processes: dict[int, subprocess.Popen[bytes]] = {}

    def spawn(self, port: int, *args: str) -> None:
        directory = os.path.join(self.workdir, str(port))
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "log"), "ab") as log:
            self.processes[port] = subprocess.Popen(
                [_tool("redis-server"), *args], cwd=directory, stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def log(self, port: int, lines: int = 30) -> str:
        """The end of the log of the process on ``port``."""
        try:
            with open(os.path.join(self.workdir, str(port), "log"), errors="replace") as log:
                return "".join(log.readlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill(self, port: int) -> None:
        process = self.processes.pop(port)
        process.send_signal(signal.SIGKILL)
        process.wait()

    def close(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _server_args(port: int) -> list[str]:
    return ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--protected-mode", "no", "--repl-diskless-sync-delay", "0"]


class LocalCluster(_Processes):
    """Three primaries with a replica each, on loopback."""

    def __init__(self) -> None:
        super().__init__("chash-cluster-")
        _tool("redis-cli")
        self.ports = [_bus_port() for _ in range(6)]
        try:
            for port in self.ports:
                self.spawn(port, *_server_args(port), "--cluster-enabled", "yes",
                           "--cluster-config-file", "nodes.conf",
                           "--cluster-node-timeout", "1000")
            for port in self.ports:
                _wait(lambda port=port: _command(port, "PING"), f"node {port} answers")
            subprocess.run([_tool("redis-cli"), "--cluster", "create",
                            *(f"127.0.0.1:{port}" for port in self.ports),
                            "--cluster-replicas", "1", "--cluster-yes"],
                           check=True, capture_output=True, timeout=60)
            self.wait_ok()
        except BaseException:
            self.close()
            raise

    @property
    def port(self) -> int:
        """A node to connect to (the first one still running)."""
        return next(iter(self.processes))

    def wait_ok(self) -> None:
        """Until every running node says the cluster is ok, and every one's
        view names as primaries exactly the running nodes that say they
        are (a replica is made one by gossip after ``--cluster create``,
        and a failover's roles spread the same way)."""
        def ok() -> bool:
            for port in self.processes:
                info = _command(port, "CLUSTER", "INFO")
                if "cluster_state:ok" not in info:
                    return False
            primaries = set(self.primaries())
            return all(self._primaries_seen_by(port) == primaries for port in self.processes)

        _wait(ok, "the cluster is ok")

    def _primaries_seen_by(self, port: int) -> set[int]:
        return {node["port"] for node in self._nodes(port)
                if "master" in node["flags"] and "fail" not in node["flags"]
                and node["port"] in self.processes}

    def _nodes(self, port: int) -> list[dict[str, Any]]:
        nodes = []
        for line in str(_command(port, "CLUSTER", "NODES")).splitlines():
            fields = line.split()
            address = fields[1].split("@")[0]
            nodes.append({"id": fields[0], "port": int(address.rsplit(":", 1)[1]),
                          "flags": fields[2], "master": fields[3], "slots": fields[8:]})
        return nodes

    def owner(self, slot: int) -> int:
        """The port of the primary serving ``slot``."""
        for node in self._nodes(self.port):
            if "master" not in node["flags"] or "fail" in node["flags"]:
                continue
            for span in node["slots"]:
                if span.startswith("["):
                    continue
                low, _, high = span.partition("-")
                if int(low) <= slot <= int(high or low):
                    return int(node["port"])
        raise RuntimeError(f"no primary serves slot {slot}")

    def node_id(self, port: int) -> str:
        """The cluster id of the node on ``port``."""
        return str(_command(port, "CLUSTER", "MYID"))

    def move_slot(self, slot: int, target: int) -> None:
        """Migrate ``slot`` with its keys to the primary on ``target``."""
        source = self.owner(slot)
        source_id, target_id = self.node_id(source), self.node_id(target)
        _command(target, "CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
        _command(source, "CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
        while True:
            keys = _command(source, "CLUSTER", "GETKEYSINSLOT", slot, 100)
            if not keys:
                break
            _command(source, "MIGRATE", "127.0.0.1", target, "", 0, 5000, "KEYS", *keys)
        for port in self.primaries():
            _command(port, "CLUSTER", "SETSLOT", slot, "NODE", target_id)
        self.wait_ok()
        _wait(lambda: all(self._owner_seen_by(port, slot) == target for port in self.processes),
              "every node knows the slot moved")

    def _owner_seen_by(self, port: int, slot: int) -> int:
        for start, end, primary, *_ in _command(port, "CLUSTER", "SLOTS"):
            if int(start) <= slot <= int(end):
                return int(primary[1])
        return -1

    def primaries(self) -> list[int]:
        """Ports of the running primaries, each as it says itself."""
        return [port for port in self.processes if _command(port, "ROLE")[0] == "master"]

    def replica_of(self, port: int) -> int:
        """The port of a replica of the primary on ``port``."""
        primary_id = self.node_id(port)
        for node in self._nodes(self.port):
            if node["master"] == primary_id and node["port"] in self.processes:
                return int(node["port"])
        raise RuntimeError(f"{port} has no replica")

    def kill_primary(self, port: int) -> int:
        """Kill the primary on ``port`` once its replica caught up; return
        the replica's port, which is the primary once this returns."""
        replica = self.replica_of(port)

        def caught_up() -> bool:
            offset = _command(port, "INFO", "replication")["master_repl_offset"]
            return bool(_command(replica, "INFO", "replication")["slave_repl_offset"] == offset)

        _wait(caught_up, "the replica caught up")
        self.kill(port)
        _wait(lambda: _command(replica, "ROLE")[0] == "master", "the replica took over")
        self.wait_ok()
        return replica


class LocalSentinel(_Processes):
    """A primary, its replica, and three sentinels watching them as
    ``mymaster``, on loopback."""

    service = "mymaster"

    def __init__(self) -> None:
        super().__init__("chash-sentinel-")
        _tool("redis-sentinel")
        self.primary = free_port()
        self.replica = free_port()
        self.sentinels = [free_port() for _ in range(3)]
        try:
            self.spawn(self.primary, *_server_args(self.primary))
            self.spawn(self.replica, *_server_args(self.replica),
                       "--replicaof", "127.0.0.1", str(self.primary))
            for port in self.sentinels:
                directory = os.path.join(self.workdir, str(port))
                os.makedirs(directory, exist_ok=True)
                config = os.path.join(directory, "sentinel.conf")
                with open(config, "w") as out:
                    out.write(f"port {port}\nbind 127.0.0.1\nprotected-mode no\n"
                              f"sentinel monitor {self.service} 127.0.0.1 {self.primary} 2\n"
                              f"sentinel down-after-milliseconds {self.service} 500\n"
                              f"sentinel failover-timeout {self.service} 3000\n")
                self.spawn(port, config, "--sentinel")
            _wait(lambda: _command(self.replica, "INFO", "replication")["master_link_status"]
                  == "up", "the replica is in sync")
            # A sentinel learns of replicas from the primary's INFO, every
            # 10 s: one that asked before the replica connected could not
            # fail over until it asks again.
            _wait(lambda: all(_sentinel_field(port, self.service, "num-other-sentinels") == "2"
                              and _sentinel_field(port, self.service, "num-slaves") == "1"
                              for port in self.sentinels),
                  "the sentinels know each other and the replica")
        except BaseException:
            self.close()
            raise

    def fail_over(self) -> int:
        """Kill the primary once the replica caught up; return the new
        primary's port once the sentinels promoted it."""
        def caught_up() -> bool:
            offset = _command(self.primary, "INFO", "replication")["master_repl_offset"]
            return bool(_command(self.replica, "INFO", "replication")["slave_repl_offset"]
                        == offset)

        _wait(caught_up, "the replica caught up")
        self.kill(self.primary)
        try:
            _wait(lambda: all(_sentinel_field(port, self.service, "port") == str(self.replica)
                              for port in self.sentinels), "the sentinels promoted the replica")
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}; a sentinel's log:\n{self.log(self.sentinels[0])}\n"
                               f"the replica's:\n{self.log(self.replica)}") from None
        _wait(lambda: _command(self.replica, "ROLE")[0] == "master", "the replica took over")
        self.primary, self.replica = self.replica, -1
        return self.primary


def _sentinel_field(port: int, service: str, name: str) -> str:
    reply = _command(port, "SENTINEL", "MASTER", service)
    if isinstance(reply, dict):
        return str(reply.get(name))
    fields = dict(zip(reply[::2], reply[1::2], strict=True))
    return str(fields.get(name))
