"""chash: a consistent-hash router for Python gateways, with a C ring engine.

``ConsistentHashRouter`` routes exactly like the documented pure-Python
router (MD5, ``{node}_virtual_{i}``, first point >= the key's hash), only
faster, and adds weights, other hash functions and layouts, replica lists.
``layout="envoy"`` and ``"grpc"`` build Envoy's and gRPC's 64-bit rings, and
``MaglevRouter`` is Envoy's Maglev table; ``JumpRouter`` is jump consistent
hash (and Guava's ``Hashing.consistentHash``); ``RendezvousRouter`` is highest
random weight, weighted or exactly as pymemcache, Caddy and Squid score.
``AnchorRouter`` is hash4j's JumpBackAnchor: any node removed, only its keys
moved, its mapping shared between processes as ``state()`` bytes.
"""
from pathlib import Path as _Path


def _missing_extension(exc: ModuleNotFoundError) -> ImportError:
    """The error to raise when ``chash._chash`` (the C extension) is absent.

    Most often Python found the source folder of a checkout first (its parent
    is the current directory or on ``sys.path``) while the built package lives
    elsewhere: say so, and what to run, rather than a bare module name.
    """
    package = _Path(__file__).resolve().parent
    if (package.parent / "pyproject.toml").is_file() and (package.parent / "csrc").is_dir():
        message = (
            f"chash is imported from the source folder {package}, whose C extension "
            "(chash._chash) is not built. Run `pip install -e .` in "
            f"{package.parent} to build it in place, or run from another folder so "
            "that an installed chash is imported instead.")
    else:
        message = (
            f"chash's C extension (chash._chash) is missing from {package}; "
            "reinstall it: pip install --force-reinstall chash-router")
    return ImportError(message, name="chash._chash", path=str(package))


try:
    from chash._chash import (
        HASHES,
        LAYOUTS,
        MAX_NODE_POINTS,
        MAX_NODES,
        MAX_POINTS,
        MAX_VIRTUAL_NODES,
        AnchorRouter,
        ConsistentHashRouter,
        JumpRouter,
        MaglevRouter,
        Move,
        RendezvousRouter,
    )
except ModuleNotFoundError as _exc:
    if _exc.name != "chash._chash":
        raise
    raise _missing_extension(_exc) from _exc
from chash._version import __version__ as __version__  # noqa: E402
from chash.bounded import BoundedLoadRouter  # noqa: E402  (needs the extension, checked above)

__all__ = [
    "AnchorRouter",
    "BoundedLoadRouter",
    "ConsistentHashRouter",
    "HASHES",
    "JumpRouter",
    "LAYOUTS",
    "MAX_NODE_POINTS",
    "MAX_NODES",
    "MAX_POINTS",
    "MAX_VIRTUAL_NODES",
    "MaglevRouter",
    "Move",
    "RendezvousRouter",
]
