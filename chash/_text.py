"""Wording shared by everything that prints: counts with their nouns."""
from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``"1 node"``, ``"3 nodes"``, ``"1,000 keys"``: ``count`` and its noun,
    ``many`` (default ``noun + "s"``) unless the count is one."""
    return f"{count:,} {noun if count == 1 else many or noun + 's'}"
