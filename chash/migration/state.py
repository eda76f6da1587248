"""The JSON form of a migration's state: which keys are done, for which
pair of rings (their fingerprints), so a migration can stop and resume.

Keys are str or bytes; JSON has only strings, so bytes keys are written
as ``{"bytes": "<hex>"}``.
"""
from __future__ import annotations

from typing import Any

FORMAT = "chash-migration/1"

Key = str | bytes


def encode_key(key: Key) -> Any:
    """A key as JSON: a str as is, bytes as ``{"bytes": hex}``."""
    if isinstance(key, bytes):
        return {"bytes": key.hex()}
    return key


def decode_key(value: Any) -> Key:
    """The key :func:`encode_key` wrote; ValueError for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"bytes"} and isinstance(value["bytes"], str):
        try:
            return bytes.fromhex(value["bytes"])
        except ValueError as exc:
            raise ValueError(f"migration state: bad bytes key {value!r}") from exc
    raise ValueError(f"migration state: a key must be a str or {{'bytes': hex}}, not {value!r}")


def dump(old_fingerprint: str, new_fingerprint: str, done: list[Key], committed: bool) -> dict[str, Any]:
    """The state as a JSON-ready dict."""
    return {
        "format": FORMAT,
        "old": old_fingerprint,
        "new": new_fingerprint,
        "committed": committed,
        "done": [encode_key(k) for k in done],
    }


def load(state: Any, old_fingerprint: str, new_fingerprint: str) -> tuple[list[Key], bool]:
    """The done keys and committed flag of a state :func:`dump` wrote for
    these two rings; ValueError naming what does not match."""
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError(f"migration state: not a {FORMAT} state")
    if state.get("old") != old_fingerprint or state.get("new") != new_fingerprint:
        raise ValueError(
            "migration state: saved for other rings (fingerprints "
            f"{state.get('old')!r} -> {state.get('new')!r}, these are "
            f"{old_fingerprint!r} -> {new_fingerprint!r})")
    done = state.get("done")
    if not isinstance(done, list):
        raise ValueError("migration state: 'done' must be a list of keys")
    committed = state.get("committed", False)
    if not isinstance(committed, bool):
        raise ValueError("migration state: 'committed' must be true or false")
    return [decode_key(k) for k in done], committed
