"""The settings of a shared ring, validated once.

Every driver takes the same keywords (``name``, ``quorum``, ``vote_ttl``,
``resync_interval``, ``reporter``, ``prefix``, ``bootstrap``); they become
one ``MembershipSettings``, checked when it is made, so that a bad value is
refused before any driver or store exists.  ``SharedConfig`` reads the
settings a ring was made with, as its store keeps them, for a tool that
joins a ring it did not make (``chash ring``).
"""

from __future__ import annotations

import math
import os
import secrets
import socket
from dataclasses import dataclass

from chash._chash import HASHES, LAYOUTS, AnchorRouter, ConsistentHashRouter

__all__ = ["QUORUMS", "MembershipSettings", "SharedConfig", "default_reporter"]

#: Quorum names the stores know, besides a positive integer.
QUORUMS = ("majority", "any", "all")


def default_reporter() -> str:
    """A reporter id unique to this process and instance."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


@dataclass(frozen=True)
class MembershipSettings:
    """How one instance takes part in a shared ring (see ``RedisMembership``
    for each field).  ``quorum`` and ``vote_ttl`` must be the same on every
    instance of a ring (the store checks it); the others are this
    instance's own.  ``reporter=None`` stands for ``default_reporter()``,
    drawn by each instance.

    Raises ValueError (TypeError for a ``bootstrap`` that is not a bool)
    when a field is out of range.
    """

    name: str = "default"
    quorum: str | int = "majority"
    vote_ttl: float = 30.0
    resync_interval: float = 5.0
    reporter: str | None = None
    prefix: str = "chash"
    bootstrap: bool = False

    def __post_init__(self) -> None:
        for label, value in (("name", self.name), ("prefix", self.prefix)):
            if not isinstance(value, str) or not value or "{" in value or "}" in value:
                raise ValueError(f"{label} must be a non-empty str without braces, not {value!r}")
        quorum = self.quorum
        if isinstance(quorum, bool) or not (
                quorum in QUORUMS or (isinstance(quorum, int) and quorum >= 1)):
            raise ValueError(
                f"quorum must be 'majority', 'any', 'all' or an int >= 1, not {quorum!r}")
        for label, seconds in (("vote_ttl", self.vote_ttl),
                               ("resync_interval", self.resync_interval)):
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
                    or not math.isfinite(seconds) or seconds <= 0:
                raise ValueError(f"{label} must be a positive number of seconds, not {seconds!r}")
        if self.vote_ttl < 0.01:
            raise ValueError(f"vote_ttl must be at least 0.01 seconds, not {self.vote_ttl!r}")
        reporter = self.reporter
        if reporter is not None and (not isinstance(reporter, str) or not reporter):
            raise ValueError(f"reporter must be a non-empty str, not {reporter!r}")
        if not isinstance(self.bootstrap, bool):
            raise TypeError(f"bootstrap must be a bool, not {self.bootstrap!r}")


@dataclass(frozen=True)
class SharedConfig:
    """The settings every instance of a ring shares, as the store keeps
    them (``layout=... hash=... virtual_node_count=... quorum=...
    vote_ttl=...``, written by the instance that made the ring; an
    ``AnchorRouter``'s ring has ``layout=anchor`` and no
    virtual_node_count, read as 0)."""

    layout: str
    hash: str
    """A hash function's name, or the module and name of an application's own."""
    virtual_node_count: int
    quorum: str
    vote_ttl: float

    @classmethod
    def parse(cls, text: str) -> SharedConfig:
        """The settings ``text`` names; ValueError if it names no chash ring's."""
        if not isinstance(text, str):
            raise TypeError(f"the settings must be a str, not {type(text).__name__}")
        fields = dict(item.partition("=")[::2] for item in text.split())
        try:
            vnodes = fields.get("virtual_node_count", "0") if fields.get("layout") == "anchor" \
                else fields["virtual_node_count"]
            made = cls(layout=fields["layout"], hash=fields["hash"],
                       virtual_node_count=int(vnodes),
                       quorum=fields["quorum"], vote_ttl=float(fields["vote_ttl"]))
        except (KeyError, ValueError):
            raise ValueError(f"not a chash ring: its settings read {text!r}") from None
        if not math.isfinite(made.vote_ttl) or made.vote_ttl <= 0:
            raise ValueError(f"not a chash ring: its settings read {text!r}")
        return made

    def router(self) -> ConsistentHashRouter | AnchorRouter:
        """An empty router made with these settings (an ``AnchorRouter``
        for ``layout=anchor``); ValueError if they name a layout or hash
        this build has not (a hash function of the application's own), or
        make no router."""
        if self.layout == "anchor" and self.hash in HASHES:
            return AnchorRouter(hash=self.hash)
        if self.layout not in LAYOUTS or self.hash not in HASHES:
            raise ValueError(f"the ring's router uses layout={self.layout} and "
                             f"hash={self.hash}, which cannot be made here (a hash function "
                             "of the application's own?)")
        try:
            return ConsistentHashRouter(self.virtual_node_count, hash=self.hash,
                                        layout=self.layout)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not a chash ring: its settings make no router ({exc})") from None

    def quorum_arg(self) -> str | int:
        """The quorum as the drivers take it (a count as an int)."""
        return int(self.quorum) if self.quorum.isdigit() else self.quorum
