"""The one way chash imports an optional dependency (an extra).

Core chash needs nothing beyond the standard library; the subsystems that
speak HTTP, Redis or Prometheus, or draw plots, import their library through
``require`` when they first need it, so that a missing one is an
``ImportError`` saying which extra installs it, raised where it is used
rather than at ``import chash``.
"""
from __future__ import annotations

import importlib
import types

__all__ = ["MissingExtra", "missing_extra", "require"]

#: The distribution users install; extras are spelled ``chash-router[NAME]``.
DISTRIBUTION = "chash-router"


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the extra."""


def missing_extra(user: str, package: str, extra: str) -> MissingExtra:
    """The error for ``user`` (what needs it, e.g. ``"chash.gateway"``)
    lacking ``package`` (e.g. ``"aiohttp"``), installed by ``extra``:
    ``"chash.gateway needs aiohttp: pip install 'chash-router[gateway]'"``."""
    return MissingExtra(f"{user} needs {package}: pip install '{DISTRIBUTION}[{extra}]'",
                        name=package)


def require(module: str, *, user: str, extra: str, package: str | None = None) -> types.ModuleType:
    """Import and return ``module`` (a dotted name), or raise ``MissingExtra``
    (an ``ImportError``) naming ``user``, the package and the extra.

    ``package`` is the name users know (default: the top-level module name,
    e.g. ``"redis"`` for ``"redis.asyncio"``). Only a missing module becomes
    ``MissingExtra``; a package that is installed but fails on import for
    another reason raises its own error.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        # The module itself or one of its own dependencies (aiohttp's yarl,
        # say): installing the extra brings either back.
        raise missing_extra(user, package or module.split(".")[0], extra) from exc
