"""``HashRing``: uhashring 2.5's ring, key for key, with its continuum in C.

Both of uhashring's continuums are here, placed exactly as uhashring places
them:

- the default (uhashring's ``MetaRing``): a node ``n`` of ``vnodes`` and
  ``weight`` has the 128-bit points ``int(md5(f"{n}-{i}").hexdigest(), 16)``
  for ``i < vnodes * weight``; a key hashes as ``md5(str(key))`` (so a
  ``bytes`` key hashes as its ``repr``); the key goes to the first point
  strictly greater, wrapping.  A point two nodes share belongs to the one
  that wrote it last.  Setting a node again (a changed weight, ``vnodes``
  or ``nodename``) replaces its points, as uhashring 2.5 does (2.3 and 2.4
  left the old points in place: see docs/compat.md);
- ``hash_fn="ketama"`` (uhashring's ``KetamaRing``): ``replicas`` (default
  4) little-endian 32-bit words of the MD5 of ``f"{n}-{w}"`` for
  ``w < vnodes * len(nodes) * weight // total weight``, rebuilt whole on
  every change, a repeated value kept as often as it comes.

The points, lookups, builds, adds and removes are in C
(``chash._chash._UHashRing``); the node configurations are the dict
``_nodes`` as in uhashring.  A ``hash_fn`` callable hashes keys and points
in Python, as uhashring does, with the same results.

Thread rule: as uhashring's, a ring is not to be changed while another
thread reads it; with the GIL every single call sees the ring before or
after a change.
"""
from __future__ import annotations

import math
import threading
from bisect import bisect
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from hashlib import md5
from typing import Any

from chash._chash import _UHashRing

__all__ = ["HashRing"]

#: The argument ``nodes`` when none is given (uhashring's ``[]``).
_NO_NODES: Any = object()
#: ``add_node``'s configuration when none is given (uhashring's ``{"weight": 1}``).
_DEFAULT_CONF: Any = object()
#: Configuration keys whose change rebuilds a node's points.
_PLACING = ("nodename", "vnodes", "weight")


def _balance_factor(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"balance_factor must be a number, not {type(value).__name__}")
    if not value >= 1 or math.isinf(value):
        raise ValueError(f"balance_factor must be a finite number >= 1, not {value!r}")
    return float(value)


def _load(node: Any, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"the load of {node!r} must be a number, not {type(value).__name__}")
    if not value >= 0 or math.isinf(value):
        raise ValueError(f"the load of {node!r} must be a finite number >= 0, not {value!r}")
    return float(value)


def _md5_point(key: Any) -> int:
    return int(md5(str(key).encode("utf-8")).hexdigest(), 16)


def _ketama_point(key: Any, replica: int = 0) -> int:
    digest = md5(str(key).encode("utf-8")).digest()
    at = replica * 4
    return int.from_bytes(digest[at:at + 4], "little") if at + 4 <= 16 else digest[at + 3]


class _Runtime:
    """What uhashring's ``ring.runtime`` shows (its internals), read-only:
    ``_nodes``, ``_ring``, ``_keys``, ``_distribution``, ``hashi`` and, for
    ketama, ``_replicas``."""

    def __init__(self, ring: HashRing) -> None:
        self._owner = ring

    @property
    def _nodes(self) -> dict[Any, dict[str, Any]]:
        return self._owner._nodes

    @property
    def _ring(self) -> dict[Any, Any]:
        return self._owner._ring

    @property
    def _keys(self) -> list[Any]:
        return self._owner._keys

    @property
    def _distribution(self) -> Counter[Any]:
        return self._owner.distribution

    @property
    def _replicas(self) -> int:
        return self._owner._replicas

    def hashi(self, key: Any, *args: Any) -> Any:
        return self._owner.hashi(key, *args)


class HashRing(_UHashRing):
    """A consistent hash ring with uhashring 2.5's API and placement.

    ``nodes`` is a node name (str), a list of names, a dict name -> weight
    (int) or a dict name -> configuration dict (keys ``hostname``,
    ``instance``, ``nodename``, ``port``, ``vnodes``, ``weight``; others are
    ignored).  Keywords: ``hash_fn`` (a callable hashing keys and points,
    or ``"ketama"``), ``vnodes`` (default 160, or 40 with ketama),
    ``weight_fn`` (called with a node's configuration as keywords, returns
    its weight), ``replicas`` (ketama's points per MD5, default 4);
    others (uhashring's ``compat``) are accepted and ignored.

    Threads: a ring may be shared.  Changes (``add_node``, ``remove_node``,
    ``regenerate``, ``ring[name] = conf``) take the ring's own lock, so two
    never interleave; every call into the C continuum holds the
    continuum's lock (and a ``hash_fn`` ring's Python points are read under
    the ring's lock), so a lookup never reads half-changed points.  A
    lookup during a change may see a node's new configuration just before
    its points move.  Lookups do not run in parallel on a free-threaded
    build: use a router of ``chash`` itself where many threads look up at
    once (docs/reliability.md).
    """

    hashi: Callable[..., Any]
    _public_class: type[HashRing]
    _changing: threading.RLock

    def __new__(cls, nodes: Any = _NO_NODES, **kwargs: Any) -> HashRing:
        public = cls
        hash_fn = kwargs.get("hash_fn")
        if hash_fn != "ketama" and callable(hash_fn) and not issubclass(cls, _PythonPoints):
            cls = _with_python_points(cls)
        ring = super().__new__(cls)
        ring._public_class = public
        ring._changing = threading.RLock()
        return ring

    def __init__(self, nodes: Any = _NO_NODES, **kwargs: Any) -> None:
        hash_fn = kwargs.get("hash_fn")
        vnodes = kwargs.get("vnodes")
        weight_fn = kwargs.get("weight_fn")
        self._ketama = hash_fn == "ketama"
        self._replicas: int = kwargs.get("replicas", 4) if self._ketama else 4
        self._distribution: Counter[Any] = Counter()
        # Nodes whose points were made (uhashring's _node_points keys).
        self._placed: set[Any] = set()
        self._options = dict(kwargs)
        if self._ketama:
            self.hashi = _ketama_point
            self._default_vnodes = 40 if vnodes is None else vnodes
        else:
            if hash_fn and not callable(hash_fn):
                raise TypeError("hash_fn should be a callable function")
            self.hashi = hash_fn or _md5_point
            self._default_vnodes = 160 if vnodes is None else vnodes
        if weight_fn and not callable(weight_fn):
            raise TypeError("weight_fn should be a callable function")
        self._weight_fn = weight_fn
        if self._configure_nodes([] if nodes is _NO_NODES else nodes):
            self._create_ring(list(self._nodes))

    # ---- configuration (uhashring's rules) ----

    def _configure_nodes(self, nodes: Any) -> bool:
        if isinstance(nodes, str):
            nodes = [nodes]
        elif not isinstance(nodes, (dict, list)):
            raise ValueError(f"nodes configuration should be a list or a dict, got {type(nodes)}")
        changed = False
        for node in nodes:
            conf: dict[str, Any] = {"hostname": node, "instance": None, "nodename": node, "port": None,
                                    "vnodes": self._default_vnodes, "weight": 1}
            current = self._nodes.get(node, {})
            if not current:
                changed = True
            if isinstance(nodes, dict):
                given = nodes[node]
                if isinstance(given, int):
                    conf["weight"] = given
                elif isinstance(given, dict):
                    for k, v in given.items():
                        if k in conf:
                            conf[k] = v
                            if k in _PLACING and current.get(k) != v:
                                changed = True
                else:
                    raise ValueError(f"node configuration should be a dict or an int, got {type(given)}")
            if self._weight_fn:
                conf["weight"] = self._weight_fn(**conf)
            if current.get("weight") != conf["weight"]:
                changed = True
            self._nodes[node] = conf
        return changed

    def _create_ring(self, names: list[Any]) -> None:
        """(Re)make the points of names (ketama: of every node)."""
        if self._ketama:
            self._build_ketama()
            return
        if len(names) > 1 and not isinstance(self, _PythonPoints):
            counts = self._counts(names)
            if counts is not None:
                self._build([(name, count) for name, count in counts], False, 1)
                self._distribution = Counter({name: count for name, count in counts if count > 0})
                self._placed = set(names)
                return
        for name in names:
            self._create_one(name)

    def _counts(self, names: list[Any]) -> list[tuple[Any, int]] | None:
        """(name, point count) of each, or None when a count is no int
        (the one-by-one path then raises where uhashring does)."""
        out = []
        for name in names:
            conf = self._nodes[name]
            try:
                count = len(range(conf["vnodes"] * conf["weight"]))
            except TypeError:
                return None
            out.append((name, count))
        return out

    def _create_one(self, name: Any) -> None:
        conf = self._nodes[name]
        self._distribution.pop(name, None)
        try:
            count = len(range(0, conf["vnodes"] * conf["weight"]))
        except TypeError:
            # uhashring drops the node's points before range() refuses.
            if name in self._placed:
                self._set_node(name, 0)
                self._placed.discard(name)
            raise
        self._set_node(name, count)
        self._placed.add(name)
        if count > 0:
            self._distribution[name] = count

    def _build_ketama(self, nodes: dict[Any, dict[str, Any]] | None = None) -> None:
        """Rebuild ketama's continuum from nodes (default: every node)."""
        nodes = self._nodes if nodes is None else nodes
        weight_sum = 0
        for conf in nodes.values():
            weight_sum += conf["weight"]
        total = len(nodes)
        replicas = len(range(0, self._replicas))
        items = []
        for name, conf in nodes.items():
            ks = len(range(0, (conf["vnodes"] * total * conf["weight"]) // weight_sum))
            if ks and replicas > 4:
                raise IndexError("index out of range")
            items.append((name, ks))
        self._build(items, True, replicas)
        self._distribution = Counter({name: ks * replicas for name, ks in items if ks * replicas > 0})

    # ---- changes ----

    def __setitem__(self, nodename: Any, conf: Any = _DEFAULT_CONF) -> None:
        """Add node ``nodename`` with ``conf`` (a weight or a configuration
        dict; default weight 1), or set it again: its points are remade when
        its weight, ``vnodes`` or ``nodename`` changed."""
        if conf is _DEFAULT_CONF:
            conf = {"weight": 1}
        with self._changing:
            if self._configure_nodes({nodename: conf}):
                self._create_ring([nodename])

    add_node = __setitem__

    def __delitem__(self, nodename: Any) -> None:
        """Remove node ``nodename``; ``KeyError`` naming the nodes there are
        when it is not in the ring."""
        with self._changing:
            if nodename not in self._nodes:
                raise KeyError(f"node '{nodename}' not found, available nodes: {self._nodes.keys()}")
            # The points go before the configuration: a lookup meanwhile
            # (get_bounded reads the weight of every node with points)
            # finds a configuration for each node that has points.
            if self._ketama:
                try:
                    self._build_ketama({k: v for k, v in self._nodes.items() if k != nodename})
                finally:  # gone even when the rebuild refuses, as in uhashring
                    self._nodes.pop(nodename)
                return
            if nodename not in self._placed:
                raise KeyError(nodename)
            self._remove(nodename)
            self._nodes.pop(nodename)
            self._placed.discard(nodename)
            if nodename not in self._distribution:
                raise KeyError(nodename)
            self._distribution.pop(nodename)

    remove_node = __delitem__

    def regenerate(self) -> None:
        """Re-evaluate ``weight_fn`` for every node (keeping the rest of its
        configuration) and rebuild the ring."""
        with self._changing:
            self._configure_nodes(dict(self._nodes))
            self._create_ring(list(self._nodes))

    # ---- lookups ----

    __getitem__ = _UHashRing.get_node_instance

    def _get(self, key: Any, what: str) -> Any:
        found = self._lookup(key)
        if found is None:
            return None
        pos, point, name = found
        if what == "pos":
            return pos
        if what == "tuple":
            return (point, name)
        return self._nodes[name][what]

    def get_node_hostname(self, key: Any) -> Any:
        """The hostname of the node key maps to (None when empty)."""
        return self._get(key, "hostname")

    def get_node_port(self, key: Any) -> Any:
        """The port of the node key maps to (None when empty)."""
        return self._get(key, "port")

    def get_node_pos(self, key: Any) -> int | None:
        """The index of the point key maps to (None when empty)."""
        pos: int | None = self._get(key, "pos")
        return pos

    def get_node_weight(self, key: Any) -> Any:
        """The weight of the node key maps to (None when empty)."""
        return self._get(key, "weight")

    def get_server(self, key: Any) -> tuple[Any, Any] | None:
        """ketama's ``(point, node name)`` of key (None when empty)."""
        server: tuple[Any, Any] | None = self._get(key, "tuple")
        return server

    def get_key(self, key: Any) -> Any:
        """The hash of key (``hashi``)."""
        return self.hashi(key)

    def get_instances(self) -> list[Any]:
        """The instances of the nodes that have a truthy one."""
        return [c.get("instance") for c in self._nodes.values() if c.get("instance")]

    def get_nodes(self) -> Any:
        """The node names (a ``dict_keys`` view)."""
        return self._nodes.keys()

    def get_points(self) -> list[tuple[Any, Any]]:
        """ketama's ``(point, node name)`` pairs in ring order."""
        return self._points()

    def iterate_nodes(self, key: Any, distinct: bool = True) -> Iterator[Any]:
        """A generator of node names from key's point on, once round the
        ring (each once when ``distinct``); one None when the ring is empty."""
        if not self._size():
            yield None
        else:
            for node in self.range(key, unique=distinct):
                yield node["nodename"]

    def range(self, key: Any, size: int | None = None, unique: bool = True) -> Iterator[dict[str, Any]]:
        """A generator of node configurations from key's point on, once
        round the ring: at most ``size`` (every node when None), each once
        when ``unique``, else one a point."""
        if unique:
            size = size or len(self._nodes)
        for count, name in enumerate(self._walk(key, unique), 1):
            yield self._nodes[name]
            if count == size:
                break

    def print_continuum(self) -> None:
        """Print ketama's continuum report."""
        points = self.get_points()
        if points:
            print(f"Numpoints in continuum: {len(points)}")
        else:
            print("Continuum empty")
        for point, node in points:
            print(f"{node} ({point})")

    # ---- properties ----

    @property
    def conf(self) -> dict[Any, dict[str, Any]]:
        """The node configurations: name -> dict (live)."""
        return self._nodes

    nodes = conf

    @property
    def distribution(self) -> Counter[Any]:
        """Points made per node (a ``Counter``)."""
        return self._distribution

    @property
    def ring(self) -> dict[Any, Any]:
        """The continuum: point -> node name (a new dict each time)."""
        return self._continuum()

    continuum = ring

    @property
    def size(self) -> int:
        """How many distinct points the ring holds."""
        return self._size()

    @property
    def _ring(self) -> dict[Any, Any]:
        return self._continuum()

    @property
    def _keys(self) -> list[Any]:
        return [point for point, _ in self._points()]

    @property
    def runtime(self) -> _Runtime:
        """uhashring's internals, read-only (what its own tests inspect)."""
        return _Runtime(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (self._public_class, self._options, list(self._nodes.items())))


def _restore(cls: type[HashRing], options: dict[str, Any], confs: list[tuple[Any, dict[str, Any]]]) -> HashRing:
    ring = cls(**options)
    for name, conf in confs:
        ring._nodes[name] = dict(conf)
    if confs:
        ring._create_ring(list(ring._nodes))
    return ring


class _PythonPoints(HashRing):
    """What a HashRing (or a subclass) whose ``hash_fn`` is the caller's
    does instead of the C continuum: its points kept and searched in
    Python, as uhashring's ``MetaRing`` keeps them.  Mixed in before the
    class the caller named (``_with_python_points``)."""

    def __init__(self, nodes: Any = _NO_NODES, **kwargs: Any) -> None:
        self._py_ring: dict[Any, Any] = {}
        self._py_keys: list[Any] = []
        self._py_points: dict[Any, list[Any]] = {}
        super().__init__(nodes, **kwargs)

    def _set_node(self, name: Any, count: int) -> None:
        for point in self._py_points.pop(name, ()):
            if self._py_ring.get(point) == name:
                del self._py_ring[point]
        new = []
        for w in range(count):
            point = self.hashi(f"{name}-{w}")
            self._py_ring[point] = name
            new.append(point)
        self._py_points[name] = new
        self._py_keys = sorted(self._py_ring)

    def _remove(self, name: Any) -> None:
        for point in self._py_points.pop(name):
            if self._py_ring.get(point) == name:
                del self._py_ring[point]
        self._py_keys = sorted(self._py_ring)

    def _lookup(self, key: Any) -> tuple[int, Any, Any] | None:
        point_of_key = self.hashi(key)
        with self._changing:  # a change edits _py_ring in place
            if not self._py_ring:
                return None
            pos = bisect(self._py_keys, point_of_key)
            if pos == len(self._py_keys):
                pos = 0
            point = self._py_keys[pos]
            return pos, point, self._py_ring[point]

    def get_node(self, key: Any) -> Any:
        found = self._lookup(key)
        return None if found is None else found[2]

    def get(self, key: Any) -> Any:
        found = self._lookup(key)
        return None if found is None else self._nodes[found[2]]

    def __getitem__(self, key: Any) -> Any:
        found = self._lookup(key)
        return None if found is None else self._nodes[found[2]]["instance"]

    get_node_instance = __getitem__

    def _walk(self, key: Any, unique: bool) -> list[Any]:
        point_of_key = self.hashi(key)
        with self._changing:
            pos = bisect(self._py_keys, point_of_key)
            if pos == len(self._py_keys):
                pos = 0
            names = [self._py_ring[k] for k in self._py_keys[pos:] + self._py_keys[:pos]]
        return list(dict.fromkeys(names)) if unique else names

    def get_bounded(self, key: Any, loads: Mapping[Any, float], balance_factor: float = 1.25) -> Any:
        """HashRing.get_bounded over the Python points: the first node
        along the ring from key (``iterate_nodes``' order) whose load is
        below its bound, None when the ring is empty.

        ``loads`` maps node name -> current load (a finite int or float >= 0); a
        node missing from it has load 0, an entry for a node the ring does
        not hold is ignored (in the sum too).  With ``t`` the sum of the
        loads, ``T = ceil(balance_factor * (t + 1))`` and a node of weight
        ``w`` of ``W`` may hold ``max(ceil(T * w / W), 1)``: the rule of
        ``chash.BoundedLoadRouter``.  With every load 0 the answer is
        ``get_node(key)``.  Stateless: nothing is acquired or released.
        ``ValueError`` for a negative, infinite or NaN load or a balance factor below
        1, ``TypeError`` for one that is not a number, each naming it.
        """
        # The rule of _UHashRing.get_bounded (C), over this class's _walk.
        c = _balance_factor(balance_factor)
        held = self._nodes
        own: dict[Any, float] = {}
        total = 0.0
        for node, load in loads.items():
            if node in held:
                own[node] = _load(node, load)
                total += own[node]
        walk = self._walk(key, True)
        if not walk:
            return None
        slots = math.ceil(c * (total + 1))
        weight_sum = sum(conf["weight"] for conf in held.values())
        for name in walk:
            bound = max(math.ceil(slots * held[name]["weight"] / weight_sum), 1) if weight_sum > 0 else 1
            if own.get(name, 0) < bound:
                return name
        return walk[0]

    def _points(self) -> list[tuple[Any, Any]]:
        with self._changing:
            return [(k, self._py_ring[k]) for k in self._py_keys]

    def _continuum(self) -> dict[Any, Any]:
        with self._changing:
            return dict(self._py_ring)

    def _size(self) -> int:
        return len(self._py_ring)


#: The classes _with_python_points made: one for each subclass of HashRing.
_VARIANTS: dict[type[HashRing], type[HashRing]] = {}


def _with_python_points(cls: type[HashRing]) -> type[HashRing]:
    """cls with its points in Python: the class a ``hash_fn`` callable gets
    (one a class, made once; a subclass's own methods still come first)."""
    if cls is HashRing:
        return _PythonPoints
    if cls not in _VARIANTS:
        _VARIANTS[cls] = type(cls.__name__, (cls, _PythonPoints), {"__module__": cls.__module__,
                                                                   "__qualname__": cls.__qualname__})
    return _VARIANTS[cls]
