"""benchmarks/bench_gateway.py stops everything it started when a later
program fails to start: here the gateway, run from a folder whose chash
cannot be imported (as from a source folder whose extension is not built)."""

from __future__ import annotations

import importlib.util
import socket
import sys
from pathlib import Path
from types import ModuleType

import pytest

from _support.compat_programs import require

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_gateway.py"


def bench_module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    # The script imports its siblings (_ratios) as it does when run from
    # benchmarks/, where its own folder is first on the path.
    monkeypatch.syspath_prepend(str(BENCH.parent))
    spec = importlib.util.spec_from_file_location("bench_gateway", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_a_gateway_that_cannot_start_leaves_nothing_running(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require("nginx")
    require("haproxy")
    bench = bench_module(monkeypatch)
    broken = tmp_path / "src" / "chash"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('the C extension is not built')\n")
    (broken / "__main__.py").write_text("")
    # ``python -m chash`` imports this one: it is first on the path, and the
    # suite's PYTHONSAFEPATH (set when testing an installed chash) is off.
    monkeypatch.chdir(broken.parent)
    monkeypatch.setenv("PYTHONPATH", str(broken.parent))
    monkeypatch.delenv("PYTHONSAFEPATH", raising=False)
    lab = bench.Lab(tmp_path, [1])
    with pytest.raises(RuntimeError, match="chash-1 exited"), lab:
        pass
    assert set(lab.procs) == {"backend-a", "backend-b", "backend-c", "nginx-1", "haproxy-1",
                              "chash-1"}
    assert all(proc.popen.poll() is not None for proc in lab.procs.values())
    assert not any(listening(port) for port in [*lab.backend_ports.values(),
                                                *lab.ports.values()])
