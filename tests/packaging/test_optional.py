"""chash._optional: the one helper through which extras are imported."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from chash._optional import MissingExtra, missing_extra, require


def test_require_returns_the_module() -> None:
    import json

    assert require("json", user="chash.test", extra="none") is json


def test_a_missing_module_names_the_user_the_package_and_the_extra() -> None:
    with pytest.raises(MissingExtra) as info:
        require("chash_no_such_module.sub", user="chash.thing", extra="thing")
    assert str(info.value) == ("chash.thing needs chash_no_such_module: "
                               "pip install 'chash-router[thing]'")
    assert isinstance(info.value, ImportError)
    assert info.value.name == "chash_no_such_module"
    assert isinstance(info.value.__cause__, ModuleNotFoundError)


def test_the_package_users_know_can_differ_from_the_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "chash_hidden_dep", None)  # import raises ModuleNotFoundError
    with pytest.raises(MissingExtra, match=r"^X needs redis-py: pip install 'chash-router\[redis\]'$"):
        require("chash_hidden_dep", user="X", extra="redis", package="redis-py")


def test_an_import_that_fails_otherwise_keeps_its_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "chash_broken_dep.py").write_text("raise RuntimeError('broken on import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RuntimeError, match="broken on import"):
        require("chash_broken_dep", user="X", extra="x")


def test_missing_extra_builds_the_same_message() -> None:
    error = missing_extra("chash.gateway", "aiohttp", "gateway")
    assert str(error) == "chash.gateway needs aiohttp: pip install 'chash-router[gateway]'"
