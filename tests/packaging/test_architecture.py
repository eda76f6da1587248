"""The rules of docs/architecture.md, checked on the source itself.

Imports are read from the syntax tree of every module of the chash under
test (module level, under ``if TYPE_CHECKING:`` and inside functions alike),
so a rule holds for every import a reader sees, not only those that run.
The C tree's own rules (who includes Python.h, the one source list) are
checked by tests/ring/test_c_sources.py; here only its folders.
"""
from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

import chash

PACKAGE = Path(chash.__file__).resolve().parent
SOURCE = Path(__file__).resolve().parents[2]

#: The layers, lowest first; a module may import only its own layer and those
#: below. Within the subsystem layer the rooms stand apart (see SEPARATE).
LAYERS: list[tuple[str, set[str]]] = [
    ("engine binding", {"chash._chash"}),
    ("ring", {"chash", "chash.affinity", "chash.bounded", "chash.compat", "chash.metrics", "chash.routers",
              "chash.simulate", "chash.zones", "chash._text", "chash._optional", "chash._version"}),
    ("subsystems", {"chash.health", "chash.membership", "chash.discovery", "chash.routing",
                    "chash.httpx", "chash.grpc", "chash.aiohttp", "chash.migration",
                    "chash.weights", "chash.pymemcache", "chash.redis"}),
    ("gateway", {"chash.gateway"}),
    ("demo", {"chash.demo"}),
    ("commands", {"chash.cli", "chash.__main__"}),
]
#: Rooms of one layer that never import each other.
SEPARATE = [("chash.health", "chash.membership"), ("chash.discovery", "chash.health"),
            ("chash.discovery", "chash.membership"), ("chash.migration", "chash.health"),
            ("chash.migration", "chash.membership"), ("chash.migration", "chash.weights")]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


MODULES = modules()


def is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def imports(name: str) -> Iterator[tuple[str, int, bool]]:
    """``(target, line, facade)`` for each chash module ``name`` imports;
    ``facade`` when it takes names (not submodules) from a package."""
    path = MODULES[name]
    package = name if is_package(name) else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "chash" or alias.name.startswith("chash."):
                    yield alias.name, node.lineno, False
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target != "chash" and not target.startswith("chash."):
                continue
            plain = []
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in MODULES or sub == "chash._chash":
                    yield sub, node.lineno, False
                else:
                    plain.append(alias.name)
            if plain:
                yield target, node.lineno, True


def known(target: str) -> str:
    """The module of ours that ``target`` names (a compiled one included)."""
    if target in MODULES or target == "chash._chash":
        return target
    raise AssertionError(f"import of {target}, which is no module of chash")


def graph() -> dict[str, set[str]]:
    return {name: {known(target) for target, _, _ in imports(name)} - {name} for name in MODULES}


def layer_of(name: str) -> tuple[int, str]:
    best: tuple[int, str] | None = None
    for rank, (_, roots) in enumerate(LAYERS):
        for root in roots:
            inside = name == root or (root != "chash" and name.startswith(root + "."))
            if inside and (best is None or len(root) > len(best[1])):
                best = (rank, root)
    if best is None and name.startswith("chash."):
        raise AssertionError(f"{name} is in no layer of docs/architecture.md")
    return best or (1, "chash")


def test_every_module_is_in_a_layer() -> None:
    for name in MODULES:
        layer_of(name)


def test_no_import_cycles() -> None:
    edges = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for name in sorted(edges):
        if name not in index:
            visit(name)
    assert cycles == [], f"import cycles: {cycles}"


def test_no_module_imports_its_own_package_facade() -> None:
    offences = []
    for name in MODULES:
        own = name if is_package(name) else name.rpartition(".")[0]
        ancestors = {".".join(own.split(".")[:i]) for i in range(1, own.count(".") + 2)}
        for target, line, facade in imports(name):
            if facade and target in ancestors:
                offences.append(f"{MODULES[name].relative_to(PACKAGE.parent)}:{line} "
                                f"takes names from {target}")
    assert offences == []


def test_arrows_point_down() -> None:
    offences = []
    for name, targets in graph().items():
        rank, room = layer_of(name)
        for target in targets:
            target_rank, target_room = layer_of(target)
            if target_rank > rank:
                offences.append(f"{name} ({LAYERS[rank][0]}) imports {target} ({LAYERS[target_rank][0]})")
            elif {room, target_room} in [set(pair) for pair in SEPARATE]:
                offences.append(f"{name} imports {target}: separate rooms")
    assert offences == []


#: The modules flat in chash/: the facade and a few ring-level modules; every
#: other room is a package.
FLAT = {"__init__.py", "__main__.py", "_optional.py", "_text.py", "_version.py", "affinity.py", "bounded.py",
        "demo.py", "metrics.py", "routers.py", "zones.py"}
#: Rooms that are packages, one module a program's grammar or a concern,
#: whose facade re-exports the names of the modules inside.
SPLIT_ROOMS = ("chash.compat", "chash.simulate", "chash.compat.uhashring")


def test_only_the_ring_level_modules_are_flat_in_the_package() -> None:
    flat = {path.name for path in PACKAGE.glob("*.py")}
    assert flat <= FLAT, sorted(flat - FLAT)


@pytest.mark.parametrize("room", SPLIT_ROOMS)
def test_a_split_room_is_a_package_whose_facade_has_every_name(room: str) -> None:
    leaf = room.rpartition(".")[2]
    assert not (PACKAGE / f"{leaf}.py").exists(), f"chash/{leaf}.py beside the package chash/{leaf}/"
    assert is_package(room)
    # A package inside the room (chash.compat.uhashring) is a room of its own,
    # checked against its own facade.
    inside = sorted(name for name in MODULES if name.startswith(room + ".")
                    and not any(name == other or name.startswith(other + ".") for other in SPLIT_ROOMS if other != room
                                and other.startswith(room + ".")))
    assert len(inside) >= 2, inside
    facade = importlib.import_module(room)
    for name in facade.__all__:
        assert hasattr(facade, name), f"{room}.__all__ names {name}, which it lacks"
    for module_name in inside:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            assert getattr(facade, name, None) is getattr(module, name), f"{room} lacks {module_name}.{name}"


def test_the_rules_see_what_they_check() -> None:
    # The rules above mean something only if the import reader finds the
    # imports there are: the facade's import of the engine, a subsystem's of
    # the ring.
    assert "chash._chash" in graph()["chash"]
    assert any(target.startswith("chash.health") for target in graph()["chash.gateway"] |
               {t for name, ts in graph().items() if name.startswith("chash.gateway.") for t in ts})


def csrc_files() -> list[Path]:
    csrc = SOURCE / "csrc"
    if not csrc.is_dir():
        pytest.skip(f"no csrc/ beside the tests ({SOURCE}): needs a checkout or an unpacked sdist")
    return sorted(path for path in csrc.rglob("*") if path.suffix in (".c", ".h"))


def test_c_sources_live_in_their_folders() -> None:
    folders = {path.relative_to(SOURCE / "csrc").parts[0] for path in csrc_files()}
    assert folders <= {"engine", "hash", "strategies", "http", "python"}, sorted(folders)
