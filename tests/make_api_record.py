"""Writes tests/vectors/router_api.json: every router class's public
surface as the running chash has it (the names of its methods and
properties, their docstrings and signatures, the class's own).
tests/ring/test_router_api.py checks the classes against it.  The file
committed was made at commit ea11c0d, before the four classes shared one
shell, so the test proves the shell kept each class as it was.  Run from
the repository root with a built chash:

    python tests/make_api_record.py [COMMIT]
    python tests/make_api_record.py --add CLASS [COMMIT]

(COMMIT names the revision when the tree is not a git checkout, such as a
``git archive`` of it.)  ``--add`` records one class added since (as
AnchorRouter was) and leaves every other class's record as it is, noting
in ``added`` the commit it was recorded at.
"""
from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import chash

CLASSES = ("ConsistentHashRouter", "MaglevRouter", "JumpRouter", "RendezvousRouter")
#: Names every class may take from object, recorded only when overridden.
PROTOCOLS = ("__reduce__", "__setstate__", "__iter__", "__len__", "__contains__", "__eq__",
             "__repr__", "__hash__")


def signature(obj: Any) -> str | None:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return None


def surface(cls: type) -> dict[str, Any]:
    names = sorted(name for name in dir(cls) if not name.startswith("__"))
    members = {}
    for name in names:
        attr = inspect.getattr_static(cls, name)
        members[name] = {"kind": type(attr).__name__, "doc": getattr(attr, "__doc__", None),
                         "signature": signature(getattr(cls, name))}
    return {"doc": cls.__doc__, "signature": signature(cls), "members": members,
            "protocols": sorted(name for name in PROTOCOLS if name in cls.__dict__)}


def main() -> None:
    args = sys.argv[1:]
    added = args[1] if args[:1] == ["--add"] and len(args) > 1 else None
    if added:
        args = args[2:]
    commit = args[0] if args else subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
        check=True).stdout.strip()
    path = Path(__file__).parent / "vectors" / "router_api.json"
    made_by = f"chash {chash.__version__} at {commit}"
    if added:
        doc = json.loads(path.read_text(encoding="utf-8"))
        doc["classes"][added] = surface(getattr(chash, added))
        doc.setdefault("added", {})[added] = made_by
    else:
        doc = {"made_by": made_by,
               "classes": {name: surface(getattr(chash, name)) for name in CLASSES}}
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
