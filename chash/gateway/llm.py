"""Routing OpenAI-compatible completions by their prompt (``--affinity prefix``).

An inference engine (vLLM, SGLang) keeps the KV cache of the prompts it
served, so a completion whose prompt prefix it holds skips most of its
prefill.  ``PromptRoutes`` reads the JSON body of ``POST
/v1/chat/completions`` and ``/v1/completions``, takes its prompt (the
``messages``, each role and its text parts in order, or ``prompt``), cuts
it into chained block hashes (``chash.affinity.prefix_blocks``) and asks a
``PrefixAffinity`` for the engine, on this process's own view of each
engine: its requests in flight (the proxy's counts) and an estimate of the
prefill still ahead of them: the tokens of each request it sent there that
its record did not expect in the engine's cache, until the request's first
event arrives (a stream) or it ends (an answer in one piece, which comes
whole after its generation).  The rest of the preference list
follows, for failover.

- A request with a session (the ``x-session-id`` header, else the
  gateway's key rule) goes by the ring instead, bounded: the first node of
  the key's preference list under its share of ceil(c x (in flight + 1)),
  c = ``balance_factor`` (consistent hashing with bounded loads, weighted;
  the rule ``chash.simulate``'s ``chwbl`` uses): the router's own
  ``get_bounded`` when the gateway routes on the router itself, the same
  rule over the preference list of the zones or the shared ring's local
  verdicts when they reorder or filter it.
- A body that is not JSON or holds no prompt goes to the least-loaded node
  (logged), never refused here: the engine says what is wrong with it.

The counts are the gateway's: with ``--workers N`` each worker writes its
in-flight counts and estimates to its row of a table in memory all the
workers share (``workers``, a ``chash.gateway.worker_loads.WorkerRow``),
and routes on the sums of every row, read at each choice.  ``shared``
(``chash.gateway.shared_loads``) adds the other gateways' (replicas'),
read from Redis at an interval.

``relay_events`` and ``error_event`` are the streaming half: a chunked
``text/event-stream`` answer is relayed a whole chunk at a time, each as it
arrives, so that a backend failing mid-stream leaves the client at a chunk
boundary, where the gateway ends the stream with an error event.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from chash.affinity import PrefixAffinity, prefix_blocks
from chash.gateway.bodies import parse_chunk_size
from chash.gateway.channel import Channel
from chash.gateway.heads import HttpError, RequestHead, ResponseHead
from chash.gateway.shared_loads import SharedLoads
from chash.gateway.worker_loads import WorkerRow

__all__ = ["PATHS", "Choice", "PromptRoutes", "error_event", "event_stream", "prompt_of",
           "relay_events"]

logger = logging.getLogger("chash.gateway")

#: The paths whose JSON body carries a prompt.
PATHS = frozenset({b"/v1/chat/completions", b"/v1/completions"})
#: Characters a token stands for in the estimates (engines' tokenizers
#: average about four characters of English a token).
CHARS_PER_TOKEN = 4
_SESSION = b"x-session-id"


class _Ranking(Protocol):
    def get_preference_list(self, key: Any, n: int, /) -> list[str]: ...


class _Router(_Ranking, Protocol):
    def __len__(self) -> int: ...


def prompt_of(body: bytes) -> str | list[int] | None:
    """The prompt of a completion's JSON ``body``: for ``messages``, each
    message's role and its text (a string, or its ``text`` parts in
    order) on lines of their own; else ``prompt`` (a string, a list of
    strings joined by newlines, or a list of token ids).  None when the
    body is not JSON or holds no prompt."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    messages = data.get("messages")
    if isinstance(messages, list) and messages:
        lines: list[str] = []
        for message in messages:
            if not isinstance(message, dict):
                return None
            lines.append(f"{message.get('role', '')}:")
            content = message.get("content")
            if isinstance(content, str):
                lines.append(content)
            elif isinstance(content, list):
                lines.extend(part["text"] for part in content if isinstance(part, dict)
                             and part.get("type") == "text" and isinstance(part.get("text"), str))
        return "\n".join(lines)
    prompt = data.get("prompt")
    if isinstance(prompt, str) and prompt:
        return prompt
    if isinstance(prompt, list) and prompt:
        if all(isinstance(part, str) for part in prompt):
            return "\n".join(prompt)
        if all(isinstance(token, int) and not isinstance(token, bool) and 0 <= token < 1 << 64
               for token in prompt):
            return list(prompt)
    return None


def event_stream(response: ResponseHead) -> bool:
    """Whether ``response`` is a chunked ``text/event-stream``."""
    return response.chunked and any(
        line[:13].lower() == b"content-type:" and b"text/event-stream" in line.lower()
        for line in response.relay)


def error_event(reason: str) -> bytes:
    """The chunk that ends a relayed event stream whose backend failed: an
    ``error`` event (the OpenAI clients raise it), then the last chunk."""
    event = b"data: " + json.dumps({"error": {
        "message": f"the backend failed mid-stream: {reason}", "type": "gateway_error",
        "code": 502}}).encode() + b"\n\n"
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(event), event)


async def relay_events(source: Channel, sink: Channel, timeout: float,
                       first: Callable[[], object] | None = None) -> None:
    """Copy a chunked body from ``source`` to ``sink`` a whole chunk at a
    time, each written as soon as it has arrived (never held for the
    next), then the last chunk (trailer fields dropped); ``first`` is
    called when the first chunk has.  EOFError, ReadTimeout or
    HttpError(400) as ``copy_chunked``; the client has then received whole
    chunks only."""
    while True:
        size = parse_chunk_size(await source.read_line(64, timeout))
        if size == 0:
            break
        data = await source.read_exact(size, timeout)
        if await source.read_line(2, timeout) != b"":
            raise HttpError(400, "malformed chunked body")
        sink.write(b"%x\r\n%s\r\n" % (size, data))
        if first is not None:
            first()
            first = None
        await sink.drain()
    while await source.read_line(8192, timeout):
        pass
    sink.write(b"0\r\n\r\n")


@dataclass
class Choice:
    """Where one completion goes: ``nodes`` in the order to try them, and
    what to undo when it ends (``PromptRoutes.done``)."""

    nodes: list[str]
    #: How it was chosen: "prefix", "session" or "least-loaded".
    how: str
    #: Tokens of prefill this request adds to ``nodes[0]``'s estimate.
    queued: float = 0.0
    node: str = field(default="")


class PromptRoutes:
    """Chooses the node of each completion; see the module docstring.

    ``routes``: the gateway's ranking (zones and local verdicts applied);
    ``router``: its ring, for the node count and weights; ``in_flight``:
    the proxy's live counts, read at each choice.  ``block_chars``: the
    characters of a block of text (token prompts: ``block_chars //
    CHARS_PER_TOKEN`` tokens); ``capacity``: blocks remembered a node;
    ``workers``: this worker's row of the table the workers of ``--workers
    N`` share (its ``in_flight`` is then the proxy's counts), or None.
    Not thread-safe: one event loop's."""

    def __init__(self, routes: _Ranking, router: _Router, in_flight: Mapping[str, int], *,
                 block_chars: int = 256, capacity: int = 16_384,
                 balance_factor: float = 1.25, workers: WorkerRow | None = None) -> None:
        if block_chars < CHARS_PER_TOKEN:
            raise ValueError(f"block_chars must be >= {CHARS_PER_TOKEN}, not {block_chars}")
        self._routes = routes
        self._router = router
        self._in_flight = in_flight
        self._block_chars = block_chars
        self._block_tokens = block_chars // CHARS_PER_TOKEN
        self._factor = balance_factor
        self.affinity = PrefixAffinity(_Ordered(routes, router), capacity=capacity,
                                       block_tokens=self._block_tokens)
        #: Estimated tokens of prefill ahead, a node (see the module docs).
        self.queued: dict[str, float] = {}
        #: Completions routed, by how ("prefix", "session", "least-loaded").
        self.routed: dict[str, int] = {"prefix": 0, "session": 0, "least-loaded": 0}
        #: The choice of the completion each client connection is being
        #: answered (kept by the proxy, for ``started``).
        self.under_way: dict[object, Choice] = {}
        #: The other replicas' loads, through Redis; None: this one's only.
        self.shared: SharedLoads | None = None
        #: This worker's row of the workers' table, or None (one process).
        self.workers = workers

    def own_view(self) -> tuple[dict[str, int], dict[str, float]]:
        """This replica's ``(in flight, queued)`` by node, as shared: this
        gateway's (every worker's, with ``workers``)."""
        row = self.workers
        if row is None:
            return dict(self._in_flight), dict(self.queued)
        row.know(self._routes.get_preference_list(b"", len(self._router)))
        loads, queued = row.totals()
        return loads, {node: float(amount) for node, amount in queued.items()}

    def views(self, nodes: Sequence[str] = ()) -> tuple[Mapping[str, float], Mapping[str, float]]:
        """The ``(loads, queued)`` routed on: this gateway's live counts
        (every worker's, ``nodes`` among them, with ``workers``), plus the
        other replicas' as last read when loads are shared."""
        row = self.workers
        own: tuple[Mapping[str, float], Mapping[str, float]]
        if row is None:
            own = self._in_flight, self.queued
        else:
            row.know(nodes)
            own = row.totals()
        shared = self.shared
        if shared is None or not shared.up:
            return own
        loads, queued = (dict(part) for part in shared.others())
        for node, count in own[0].items():
            loads[node] = loads.get(node, 0.0) + count
        for node, amount in own[1].items():
            queued[node] = queued.get(node, 0.0) + amount
        return loads, queued

    def routed_totals(self) -> dict[str, int]:
        """Completions routed, by how: every worker's with ``workers``,
        else this process's (``routed``)."""
        return dict(self.routed) if self.workers is None else self.workers.routed_totals()

    def status(self) -> dict[str, Any]:
        """What ``/-/status`` shows under ``affinity``: with ``workers``,
        the gateway's counts and the table (each worker's row)."""
        row = self.workers
        if row is None:
            queued = {node: round(value) for node, value in self.queued.items()}
        else:
            row.know(self._routes.get_preference_list(b"", len(self._router)))
            queued = {node: amount for node, amount in row.totals()[1].items() if amount}
        return {"policy": "prefix", "routed": self.routed_totals(), "queued_tokens": queued,
                "shared_loads": None if self.shared is None else self.shared.status(),
                **({} if row is None else {"workers": row.status()})}

    async def start(self) -> None:
        """Start sharing loads, if they are shared."""
        if self.shared is not None:
            await self.shared.start()

    async def stop(self) -> None:
        """Stop sharing loads, if they are shared."""
        if self.shared is not None:
            await self.shared.stop()

    @staticmethod
    def serves(request: RequestHead) -> bool:
        """Whether ``request`` is a completion routed by its prompt."""
        return request.method == "POST" and request.target.split(b"?", 1)[0] in PATHS

    @staticmethod
    def session_of(request: RequestHead) -> bytes | None:
        """The ``x-session-id`` header's value, if the request has one."""
        for name, value in request.fields:
            if name.lower() == _SESSION and value:
                return value
        return None

    def choose(self, body: bytes | None, session: bytes | None, attempts: int) -> Choice:
        """The nodes for a completion with ``body`` (None: streamed, not
        read) and ``session`` (a key, or None), ``attempts`` at most."""
        if session is not None:
            nodes = self._routes.get_preference_list(session, len(self._router))
            if not nodes:
                return Choice([], "session")
            loads, _ = self.views(nodes)
            bounded = getattr(self._routes, "get_bounded", None)
            first = bounded(session, loads, self._factor) if bounded is not None \
                else self._bounded(nodes, loads)
            choice = Choice(_first(nodes, first, attempts), "session")
        else:
            prompt = None if body is None else prompt_of(body)
            if prompt is None:
                logger.info("a completion without a prompt the gateway can read (%s): "
                            "routed to the least-loaded backend",
                            "a streamed body" if body is None else "not JSON, or no prompt")
                choice = self._least_loaded(attempts)
            else:
                choice = self._prefix(prompt, attempts)
        if choice.nodes:
            node = choice.node = choice.nodes[0]
            queued = self.queued[node] = self.queued.get(node, 0.0) + choice.queued
            self.routed[choice.how] += 1
            row = self.workers
            if row is not None:
                row.set_queued(node, queued)
                row.routed(choice.how)
        return choice

    def started(self, connection: object) -> None:
        """The first event of the stream answering ``connection``'s
        completion arrived: its prefill is over, and leaves the estimate."""
        choice = self.under_way.get(connection)
        if choice is not None:
            self.done(choice)

    def done(self, choice: Choice) -> None:
        """``choice``'s completion ended (answered or not): its prefill
        leaves the estimate of its node (once, however often called)."""
        node = choice.node
        if node and node in self.queued:
            left = self.queued[node] - choice.queued
            if left <= 0.5:
                del self.queued[node]
                left = 0.0
            else:
                self.queued[node] = left
            if self.workers is not None:
                self.workers.set_queued(node, left)
        choice.queued = 0.0

    def forget(self, node: str) -> None:
        """``node`` left the gateway's configuration: its record of
        prefixes goes (a node that comes back, restarted, holds none of
        them) with its estimate of queued prefill.  Completions under way
        there end without changing the estimate."""
        try:
            self.affinity.forget(node)
        except KeyError:  # no preference list has named it
            pass
        if self.queued.pop(node, None) is not None and self.workers is not None:
            self.workers.set_queued(node, 0.0)

    def prune(self, kept: Callable[[str], bool]) -> list[str]:
        """``forget()`` every node with a record or an estimate for which
        ``kept`` is false; the nodes forgotten."""
        gone = [node for node in dict.fromkeys([*self.affinity.nodes(), *self.queued])
                if not kept(node)]
        for node in gone:
            self.forget(node)
        return gone

    def _prefix(self, prompt: str | list[int], attempts: int) -> Choice:
        if isinstance(prompt, str):
            blocks = prefix_blocks(prompt, block=self._block_chars)
            tokens = math.ceil(len(prompt) / CHARS_PER_TOKEN)
        else:
            blocks = prefix_blocks(prompt, block=self._block_tokens)
            tokens = len(prompt)
        key = ",".join(map(str, blocks[:2]))
        nodes = self._routes.get_preference_list(key, len(self._router))
        if not nodes:
            return Choice([], "prefix")
        affinity = self.affinity
        held = {node: affinity.match(node, blocks) for node in nodes}
        loads, queued = self.views(nodes)
        node = affinity.route(blocks, loads=loads, queued=queued, tokens=tokens)
        affinity.done(node)  # its in-flight count is the proxy's
        uncached = max(0.0, tokens - held.get(node, 0) * self._block_tokens)
        return Choice(_first(nodes, node, attempts), "prefix", uncached)

    def _least_loaded(self, attempts: int) -> Choice:
        nodes = self._routes.get_preference_list(b"", len(self._router))
        if not nodes:
            return Choice([], "least-loaded")
        loads, queued = self.views(nodes)
        node = min(nodes, key=lambda n: (loads.get(n, 0), queued.get(n, 0.0)))
        return Choice(_first(nodes, node, attempts), "least-loaded")

    def _bounded(self, nodes: Sequence[str], loads: Mapping[str, float]) -> str:
        """get_bounded's rule over ``nodes``, a preference list the routes
        reordered or filtered."""
        weights: Mapping[str, float] = getattr(self._router, "weights", None) or {}
        total = math.ceil(self._factor * (sum(loads.get(n, 0) for n in nodes) + 1))
        whole = sum(weights.get(n, 1.0) for n in nodes)
        for node in nodes:
            if loads.get(node, 0) < max(math.ceil(total * weights.get(node, 1.0) / whole), 1):
                return node
        return nodes[0]  # unreachable: the bounds sum above the loads


class _Ordered:
    """The ranking with the ring's node count, as ``PrefixAffinity`` asks."""

    def __init__(self, routes: _Ranking, router: _Router) -> None:
        self._routes = routes
        self._router = router

    def get_preference_list(self, key: str, n: int, /) -> list[str]:
        return self._routes.get_preference_list(key, n)

    def __len__(self) -> int:
        return len(self._router)


def _first(nodes: Sequence[str], node: str, attempts: int) -> list[str]:
    """``node``, then the others of ``nodes`` in order: ``attempts`` at most."""
    return ([node] + [n for n in nodes if n != node])[:attempts]
