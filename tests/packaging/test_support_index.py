"""tests/_support/__init__.py's docstring indexes every module beside it,
one line each, so a reader finds a helper before writing it again."""
from __future__ import annotations

import re
from pathlib import Path

SUPPORT = Path(__file__).resolve().parents[1] / "_support"


def test_the_support_index_names_every_module_once() -> None:
    index = (SUPPORT / "__init__.py").read_text(encoding="utf-8")
    listed = re.findall(r"^- ``(\w+)``: ", index, re.MULTILINE)
    modules = sorted(path.stem for path in SUPPORT.glob("*.py") if path.stem != "__init__")
    assert len(modules) > 1
    assert sorted(listed) == modules
