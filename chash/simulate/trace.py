"""Request traces in the Mooncake FAST'25 format, read for ``chash simulate --trace``.

One JSON object a line: ``timestamp`` (milliseconds from the trace's
start), ``input_length`` and ``output_length`` (tokens) and ``hash_ids``
(one id a 512-token block of the prompt; equal ids at equal positions mean
an equal prefix).  Lines are kept in file order; blank lines are skipped.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["BLOCK_TOKENS", "TraceRequest", "parse_trace", "read_trace"]

#: Tokens a ``hash_ids`` entry stands for in the Mooncake traces.
BLOCK_TOKENS = 512


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace: arrival in seconds (``timestamp / 1000``),
    prompt and output lengths in tokens, and the prompt's block ids."""

    arrival: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


def _count(record: dict[str, object], name: str, where: str) -> int:
    value = record.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}: {name!r} must be an integer >= 0, not {value!r}")
    return value


def _request(record: object, where: str) -> TraceRequest:
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object, not {type(record).__name__}")
    stamp = record.get("timestamp")
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not stamp >= 0 \
            or stamp == float("inf"):
        raise ValueError(f"{where}: 'timestamp' must be a finite number >= 0, not {stamp!r}")
    ids = record.get("hash_ids")
    if not isinstance(ids, list) or not all(
            isinstance(h, int) and not isinstance(h, bool) for h in ids):
        raise ValueError(f"{where}: 'hash_ids' must be a list of integers")
    return TraceRequest(stamp / 1000, _count(record, "input_length", where),
                        _count(record, "output_length", where), tuple(ids))


def parse_trace(lines: Iterable[str], *, source: str = "trace") -> list[TraceRequest]:
    """The requests of ``lines`` in order; ValueError naming the line of a
    malformed one, or when there is none."""
    requests = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{source}, line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: not JSON: {exc.msg}") from exc
        requests.append(_request(record, where))
    if not requests:
        raise ValueError(f"{source}: no requests")
    return requests


def read_trace(path: str) -> list[TraceRequest]:
    """The requests of the JSONL file at ``path`` (OSError if unreadable,
    ValueError naming a malformed line)."""
    with open(path, encoding="utf-8") as file:
        return parse_trace(file, source=path)
