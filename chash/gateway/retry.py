"""The gateway's retry policy: ``chash.routing.retry``, re-exported here.

The policy lives in ``chash.routing`` so that the sticky clients share it.
"""

from __future__ import annotations

from chash.routing.retry import IDEMPOTENT_METHODS, Outcome, next_attempt

__all__ = ["IDEMPOTENT_METHODS", "Outcome", "next_attempt"]
