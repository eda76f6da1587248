"""The C tree's rules, read from the sources: only csrc/python/ sees
Python.h, every .c file is in one list of csrc/sources.mk, and every listed
file exists; no file calls or includes its way back to itself inside a
folder, and across folders calls and includes point down."""
from __future__ import annotations

import itertools
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


# ---------------------------------------------------------------------------
# The call and include graphs among the C files: no circle inside a folder,
# and across folders arrows only point down.
#
# A node is a file, a header counting as its .c (same folder, same stem)
# when it has one.  A call edge B -> A: a function defined in A is called
# from a function body in B.  An include edge B -> A: B includes "A" (a
# project header, found beside B or under csrc/).  Comments, string and
# character literals and preprocessor lines are blanked before calls and
# definitions are read; regexes good enough for this code base, which
# keeps one definition's head on its own lines.

# What each folder may use; a folder not named here may use nothing.
MAY_USE: dict[str, set[str]] = {
    "python": {"engine", "hash", "strategies", "http"},
    "strategies": {"engine", "hash"},
    "engine": {"hash"},
    "hash": set(),
    "http": set(),
}
_TOKENS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_KEYWORDS = frozenset({"if", "for", "while", "switch", "return", "sizeof", "defined", "case",
                       "_Alignof", "_Static_assert", "_Generic", "do", "else", "goto"})
_HEAD = re.compile(r"\b([A-Za-z_]\w*)\s*\([^;{}=]*\)\s*$", re.S)
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)


def _blank(match: re.Match[str]) -> str:
    """A comment or literal as spaces, its newlines kept (and a literal's
    quotes, so that it stays an expression)."""
    text = match.group(0)
    if text.startswith(("//", "/*")):
        return re.sub(r"[^\n]", " ", text)
    return text[0] + re.sub(r"[^\n]", " ", text[1:-1]) + text[-1]


def strip_c(text: str) -> tuple[str, str]:
    """(the text without comments, the code without comments, literals'
    contents or preprocessor lines)."""
    no_comments = _TOKENS.sub(lambda m: _blank(m) if m.group(0).startswith(("//", "/*")) else m.group(0),
                              text)
    code = _TOKENS.sub(_blank, text)
    code = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", lambda m: re.sub(r"[^\n]", " ", m.group(0)),
                  code, flags=re.M)
    return no_comments, code


def functions(code: str) -> tuple[dict[str, tuple[bool, set[str]]], int]:
    """Functions defined at the top level of code: name -> (static, names
    called in its body); and how many top-level braces were read."""
    found: dict[str, tuple[bool, set[str]]] = {}
    depth, start, head_from, blocks = 0, 0, 0, 0
    for i, ch in enumerate(code):
        if ch == "{":
            if depth == 0:
                start, blocks = i, blocks + 1
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                head = code[head_from:start]
                match = _HEAD.search(head)
                if match:
                    body = code[start:i]
                    calls = {name for name in _CALL.findall(body) if name not in _KEYWORDS}
                    found[match.group(1)] = (re.search(r"\bstatic\b", head) is not None, calls)
                head_from = i + 1
        elif ch == ";" and depth == 0:
            head_from = i + 1
    return found, blocks


class Graph:
    """The C files under root, their functions, calls and includes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        paths = sorted(root.rglob("*.[ch]"))
        self.files = [str(path.relative_to(root)) for path in paths]
        self.defs: dict[str, dict[str, tuple[bool, set[str]]]] = {}
        self.includes: dict[str, set[str]] = {}
        for path, name in zip(paths, self.files, strict=True):
            no_comments, code = strip_c(path.read_text(encoding="utf-8"))
            self.defs[name], _ = functions(code)
            self.includes[name] = {found for target in _INCLUDE.findall(no_comments)
                                   if (found := self._resolve(path, target)) is not None}
        # Who defines a name, and whether it is visible outside its file.
        self.definers: dict[str, list[tuple[str, bool]]] = {}
        for name, defs in self.defs.items():
            for fn, (static, _) in defs.items():
                self.definers.setdefault(fn, []).append((name, static))

    def _resolve(self, path: Path, target: str) -> str | None:
        for base in (path.parent, self.root):
            candidate = (base / target).resolve()
            if candidate.is_file() and self.root.resolve() in candidate.parents:
                return str(candidate.relative_to(self.root.resolve()))
        return None

    def node(self, name: str) -> str:
        """A header's node is its .c (same folder and stem) when there is one."""
        if name.endswith(".h") and name[:-2] + ".c" in self.defs:
            return name[:-2] + ".c"
        return name

    def seen_from(self, name: str) -> set[str]:
        """The headers name includes, directly or through other headers."""
        seen: set[str] = set()
        todo = list(self.includes[name])
        while todo:
            header = todo.pop()
            if header not in seen:
                seen.add(header)
                todo.extend(self.includes.get(header, ()))
        return seen

    def callee(self, caller: str, fn: str) -> str | None:
        """The file whose definition of fn a call in caller reaches: its own,
        a header's it includes (static inline or not), else the one file
        that defines fn with external linkage; None for a name defined
        nowhere here (the C library, Python's C API, a macro)."""
        candidates = self.definers.get(fn, [])
        if any(name == caller for name, _ in candidates):
            return caller
        visible = self.seen_from(caller)
        included = [name for name, _ in candidates if name in visible]
        if len(included) == 1:
            return included[0]
        external = [name for name, static in candidates if not static and name.endswith(".c")]
        if len(external) == 1:
            return external[0]
        assert not external and not included, f"{caller}: a call to {fn} could reach {candidates}"
        return None

    def edges(self) -> dict[tuple[str, str], set[str]]:
        """(from node, to node) -> why: the functions called, the headers included."""
        out: dict[tuple[str, str], set[str]] = {}
        for name, defs in self.defs.items():
            for _, (_, calls) in defs.items():
                for fn in calls:
                    target = self.callee(name, fn)
                    if target is not None and self.node(target) != self.node(name):
                        out.setdefault((self.node(name), self.node(target)), set()).add(f"{fn}()")
            for header in self.includes[name]:
                if self.node(header) != self.node(name):
                    out.setdefault((self.node(name), self.node(header)), set()).add(f'#include "{header}"')
        return out


def cycles(edges: dict[tuple[str, str], set[str]], within: str | None = None) -> list[list[str]]:
    """One circle of each strongly connected component of two or more nodes
    (Tarjan), among the nodes under folder `within` (all when None)."""
    graph: dict[str, list[str]] = {}
    for a, b in sorted(edges):
        if within is None or (a.split("/")[0] == within and b.split("/")[0] == within):
            graph.setdefault(a, []).append(b)
            graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    found = []
    for component in components:
        # A shortest way back to the component's first node, breadth first.
        members, first = set(component), component[0]
        came_from: dict[str, str] = {}
        frontier = [first]
        while first not in came_from and frontier:
            nxt = []
            for v in frontier:
                for w in graph[v]:
                    if w in members and w not in came_from:
                        came_from[w] = v
                        nxt.append(w)
            frontier = nxt
        path = [first]
        while path[-1] != first or len(path) == 1:
            path.append(came_from[path[-1]])
        found.append(path[::-1])
    return found


def describe(path: list[str], edges: dict[tuple[str, str], set[str]]) -> str:
    steps = [f"{a} -> {b} ({', '.join(sorted(edges[a, b])[:3])})" for a, b in itertools.pairwise(path)]
    return "\n  ".join(["a circle:", *steps])


@pytest.fixture(scope="module")
def graph() -> Graph:
    return Graph(CSRC)


def test_the_graph_reads_definitions_calls_and_includes(graph: Graph) -> None:
    """The parser sees what is there, so that the checks below cannot pass
    on a graph it failed to read."""
    edges = graph.edges()
    assert ("engine/ring_bulk.c", "engine/ring.c") in edges
    assert "chash_ring_find()" in edges["engine/ring_bulk.c", "engine/ring.c"]
    assert "chash_priv_sorted_pairs()" in edges["engine/ring.c", "engine/sort.c"]
    assert "chash_maglev_envoy_table()" in edges["python/maglev.c", "strategies/maglev.c"]
    assert "chash_maglev_mod()" in edges["python/maglev.c", "strategies/maglev.c"]  # static inline in maglev.h
    assert "chash_haproxy_ids_take()" in edges["python/ring32/haproxy.c", "engine/haproxy_ids.c"]
    assert "chash_xxh64()" in edges["strategies/maglev.c", "hash/xxhash.c"]
    assert '#include "engine/chash.h"' in edges["python/family.h", "engine/chash.h"]  # a header of no .c
    static_helpers = graph.definers["lower_bound"]
    assert ("engine/haproxy_ids.c", True) in static_helpers
    for folder in MAY_USE:
        assert any(name.startswith(folder + "/") for name in graph.defs), folder
    assert sum(len(defs) for defs in graph.defs.values()) > 400  # 466 when written


def test_the_cycle_finder_finds_a_planted_circle(tmp_path: Path) -> None:
    """a.c -> b.c -> c.c -> a.c by calls, and an include circle d <-> e, in
    a tree of their own; comments and strings that name functions count
    for nothing."""
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "a.c").write_text('#include "b.h"\nint a(void) { return b(); }\n')
    (tmp_path / "x" / "b.h").write_text("int b(void);\n")
    (tmp_path / "x" / "b.c").write_text("int c(void);\nint b(void)\n{\n    return c();\n}\n")
    (tmp_path / "x" / "c.c").write_text("int a(void);\nstatic int s(int v) { return v; }\n"
                                        "int c(void) { return s(a()); }\n")
    (tmp_path / "x" / "d.c").write_text('#include "e.h"\nint d(void) { return 1; }\n')
    (tmp_path / "x" / "e.h").write_text("int e(void);\n")
    (tmp_path / "x" / "e.c").write_text('#include "d.h"\nint e(void) { return 2; }\n')
    (tmp_path / "x" / "d.h").write_text("int d(void);\n")
    (tmp_path / "x" / "f.c").write_text('/* a() */ int f(void) { const char *t = "d()"; return t[0]; }\n')
    planted = Graph(tmp_path)
    edges = planted.edges()
    found = sorted(sorted(path) for path in cycles(edges, "x"))
    assert found == [["x/a.c", "x/a.c", "x/b.c", "x/c.c"], ["x/d.c", "x/d.c", "x/e.c"]]
    assert not any(a == "x/f.c" for a, _ in edges)
    # Take one call away and the circle is gone.
    (tmp_path / "x" / "c.c").write_text("static int s(int v) { return v; }\nint c(void) { return s(1); }\n")
    assert sorted(sorted(p) for p in cycles(Graph(tmp_path).edges(), "x")) == [["x/d.c", "x/d.c", "x/e.c"]]


@pytest.mark.parametrize("folder", [
    "engine", "hash", "strategies", "http",
    "python",
])
def test_no_circle_inside_a_folder(graph: Graph, folder: str) -> None:
    edges = graph.edges()
    found = cycles(edges, folder)
    assert not found, "\n".join(describe(path, edges) for path in found)


def test_arrows_point_down_across_folders(graph: Graph) -> None:
    folders = {name.split("/")[0] for name in graph.files}
    assert folders <= set(MAY_USE), f"a folder the rules do not name: {folders - set(MAY_USE)}"
    wrong = [f"{a} -> {b} ({', '.join(sorted(why))})" for (a, b), why in sorted(graph.edges().items())
             if a.split("/")[0] != b.split("/")[0] and b.split("/")[0] not in MAY_USE[a.split("/")[0]]]
    assert not wrong, "arrows pointing up or sideways:\n  " + "\n  ".join(wrong)
    # The rules themselves are layered: no folder may use one that may use it.
    assert not cycles({(a, b): set() for a, uses in MAY_USE.items() for b in uses})
