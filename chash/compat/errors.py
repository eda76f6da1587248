"""The one error of the configuration readers of ``chash.compat``."""
from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A configuration chash cannot read or cannot route like its program;
    the message names the line."""
