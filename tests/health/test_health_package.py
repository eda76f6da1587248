"""Tests of chash.health as a package: the facade re-exports every public
name, and its modules import only downwards (never the facade, the gateway
or the command line)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import chash.health

PUBLIC = ["AsyncHealthChecker", "HealthChecker", "LocalMembership", "Membership",
          "NodeState", "NodeStatus"]
# Importable from chash.health though not in __all__.
ALSO = ["HealthState", "Transition", "UrlSpec", "OnChange", "logger"]

HOMES = {
    "AsyncHealthChecker": "async_checker", "HealthChecker": "sync_checker",
    "LocalMembership": "membership", "Membership": "membership",
    "NodeState": "state", "NodeStatus": "state", "HealthState": "state", "Transition": "state",
    "UrlSpec": "settings", "OnChange": "settings", "logger": "core",
}
PACKAGE = Path(chash.health.__file__).resolve().parent


def test_all_is_the_public_api() -> None:
    assert chash.health.__all__ == PUBLIC
    namespace: dict[str, object] = {}
    exec("from chash.health import *", namespace)
    assert sorted(name for name in namespace if name != "__builtins__") == sorted(PUBLIC)


@pytest.mark.parametrize("name", PUBLIC + ALSO)
def test_each_name_is_the_one_of_its_module(name: str) -> None:
    module = importlib.import_module(f"chash.health.{HOMES[name]}")
    assert getattr(chash.health, name) is getattr(module, name)


def test_the_gateways_imports_hold() -> None:
    from chash.health import AsyncHealthChecker, Membership

    assert AsyncHealthChecker.__module__ == "chash.health.async_checker"
    assert Membership.__module__ == "chash.health.membership"
    assert chash.health.logger.name == "chash.health"


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any level (TYPE_CHECKING and
    function-local imports included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import"
            found.add(node.module or "")
    return found


def test_modules_import_downwards_only() -> None:
    modules = sorted(p for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert {p.stem for p in modules} == set(HOMES.values()) | {"probes"}
    order = ["state", "settings", "membership", "probes", "core", "sync_checker", "async_checker"]
    for path in modules:
        chash_imports = {name for name in _imports(path) if name.split(".")[0] == "chash"}
        assert "chash" not in chash_imports and "chash.health" not in chash_imports, path.name
        for name in chash_imports:
            assert not name.startswith(("chash.gateway", "chash.cli", "chash.membership")), (path.name, name)
            if name.startswith("chash.health."):
                below = name.removeprefix("chash.health.")
                assert order.index(below) < order.index(path.stem), (path.name, name)


def test_the_state_machine_does_no_io() -> None:
    imported = {name.split(".")[0] for name in _imports(PACKAGE / "state.py")}
    assert imported <= {"__future__", "enum", "math", "collections", "dataclasses", "chash"}
    assert {name for name in _imports(PACKAGE / "state.py") if name.startswith("chash")} == \
        {"chash._text"}
