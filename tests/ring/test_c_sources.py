"""The C tree's rules, read from the sources: only csrc/python/ sees
Python.h, every .c file is in one list of csrc/sources.mk, and every listed
file exists."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

CSRC = Path(__file__).resolve().parents[2] / "csrc"
if not (CSRC / "sources.mk").is_file():
    pytest.skip("needs the C sources (a checkout or an unpacked sdist)", allow_module_level=True)


def make_lists() -> dict[str, list[str]]:
    """The lists of csrc/sources.mk, $(NAME) references expanded."""
    text = re.sub(r"\\\n", " ", re.sub(r"#.*", "", (CSRC / "sources.mk").read_text(encoding="utf-8")))
    lists: dict[str, list[str]] = {}
    for line in filter(str.strip, text.splitlines()):
        name, _, words = line.partition(":=")
        lists[name.strip()] = [item for word in words.split()
                               for item in (lists[word[2:-1]] if word.startswith("$(") else [word])]
    return lists


def test_only_the_binding_includes_python_h() -> None:
    including = {path.relative_to(CSRC).parts[0] for path in CSRC.rglob("*.[ch]")
                 if re.search(r'#\s*include\s*[<"]Python\.h[>"]', path.read_text(encoding="utf-8"))}
    assert including == {"python"}


def test_every_c_file_is_listed_once_and_every_listed_file_exists() -> None:
    lists = make_lists()
    listed = lists["ENGINE_SOURCES"] + lists["BINDING_SOURCES"]
    assert len(listed) == len(set(listed))
    on_disk = sorted(str(path.relative_to(CSRC)) for path in CSRC.rglob("*.c"))
    assert sorted(listed) == on_disk
    assert all(name.startswith("python/") for name in lists["BINDING_SOURCES"])
    assert not any(name.startswith("python/") for name in lists["ENGINE_SOURCES"])


def test_the_engine_includes_no_binding_header() -> None:
    for path in CSRC.rglob("*.[ch]"):
        if path.relative_to(CSRC).parts[0] != "python":
            text = path.read_text(encoding="utf-8")
            assert not re.search(r'#\s*include\s*"(python/|binding\.h|router\.h)', text), path
