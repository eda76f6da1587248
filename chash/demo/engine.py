"""A stand-in for an OpenAI-compatible inference engine (tests and demos).

A stand-in only: real engines (vLLM, SGLang) need a GPU.  ``StandInEngine``
is a small aiohttp server that behaves, as seen from a gateway, like one:

- ``POST /v1/chat/completions`` and ``/v1/completions``, streamed (SSE
  ``data: {...}`` chunks, then ``data: [DONE]``) or not, answering
  ``max_tokens`` (default 16) made-up tokens at ``token_rate`` a second;
- a prompt cache: an LRU of at most ``cache_blocks`` prompt blocks
  (``chash.affinity.prefix_blocks`` of the prompt, ``block_chars``
  characters a block); a prompt's cached tokens are those of its longest
  prefix of blocks held, and all its blocks are then held, most recent;
- prefill, one at a time in arrival order at ``prefill_rate`` tokens a
  second over the uncached part of the prompt only, before the first
  token: the first-token delay is in proportion to the uncached prompt;
- ``usage.prompt_tokens_details.cached_tokens`` as vLLM reports it (and
  the usage chunk of a stream when ``stream_options.include_usage``);
- counters: ``requests``, ``prompt_tokens``, ``cached_tokens``, and
  ``events`` (token events streamed).

A token is ``chash.gateway.llm.CHARS_PER_TOKEN`` characters of the prompt
(its ``role:`` lines and texts, as ``chash.gateway.llm.prompt_of`` reads
them).  ``GET /health`` answers ``ok``.  For failure tests, ``drop`` is
the number of coming completions whose connection is closed before any
byte of an answer, and ``cut_after`` (when set) the number of token events
a stream sends before its connection is cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from chash.affinity import prefix_blocks
from chash.demo.backends import LoopbackServer, web_module
from chash.gateway.llm import CHARS_PER_TOKEN, prompt_of

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["StandInEngine"]


class StandInEngine(LoopbackServer):
    """A stand-in OpenAI-compatible engine with a prompt cache; see the
    module docstring.  One event loop's."""

    SHUTDOWN_TIMEOUT = 0.5

    def __init__(self, name: str, *, token_rate: float = 200.0, prefill_rate: float = 50_000.0,
                 cache_blocks: int = 4096, block_chars: int = 256, model: str = "stand-in") -> None:
        """An engine called ``name``; ``await start()`` to listen.
        ValueError for a rate that is not > 0 or a size below 1."""
        for what, rate in (("token_rate", token_rate), ("prefill_rate", prefill_rate)):
            if not rate > 0 or math.isinf(rate):
                raise ValueError(f"{what} must be a finite number > 0, not {rate!r}")
        for what, size in (("cache_blocks", cache_blocks), ("block_chars", block_chars)):
            if size < 1:
                raise ValueError(f"{what} must be >= 1, not {size!r}")
        super().__init__()
        self.name = name
        self.model = model
        self.token_rate = token_rate
        self.prefill_rate = prefill_rate
        self.cache_blocks = cache_blocks
        self.block_chars = block_chars
        #: Completions answered (or begun), prompt tokens and the cached
        #: ones among them, since the start.
        self.requests = 0
        self.prompt_tokens = 0
        self.cached_tokens = 0
        #: Token events written to streams, since the start.
        self.events = 0
        #: Completions to drop before any byte of an answer; token events a
        #: stream sends before it is cut (None: never).
        self.drop = 0
        self.cut_after: int | None = None
        self._cache: OrderedDict[int, None] = OrderedDict()
        self._prefill_end = 0.0
        self._ids = itertools.count(1)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:port``."""
        return f"http://{self.address}"

    async def start(self) -> StandInEngine:
        """Listen on 127.0.0.1 (the same port again after a ``stop``)."""
        await self._listen()
        return self

    def _routes(self, app: web.Application) -> None:
        app.router.add_get("/health", self._health)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completion)

    async def stop(self) -> None:
        """Stop listening and drop every connection."""
        await self._close()

    def cached(self, prompt: str | list[int]) -> tuple[int, int]:
        """``(prompt tokens, cached tokens)`` of ``prompt`` now; its blocks
        are then held, most recent first."""
        if isinstance(prompt, str):
            blocks = prefix_blocks(prompt, block=self.block_chars)
            tokens = math.ceil(len(prompt) / CHARS_PER_TOKEN)
            block_tokens = self.block_chars / CHARS_PER_TOKEN
        else:
            block_tokens = float(max(1, self.block_chars // CHARS_PER_TOKEN))
            blocks = prefix_blocks(prompt, block=int(block_tokens))
            tokens = len(prompt)
        hits = 0
        for block in blocks:
            if block not in self._cache:
                break
            hits += 1
        for block in blocks:
            self._cache[block] = None
            self._cache.move_to_end(block)
        while len(self._cache) > self.cache_blocks:
            self._cache.popitem(last=False)
        return tokens, min(tokens, int(hits * block_tokens))

    async def _health(self, request: web.Request) -> web.Response:
        response: web.Response = web_module().Response(text="ok")
        return response

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, chat=True)

    async def _completion(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, chat=False)

    async def _complete(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        web_ = web_module()
        body = await request.read()
        if self.drop > 0:
            self.drop -= 1
            assert request.transport is not None
            request.transport.abort()
            raise web_.HTTPInternalServerError  # never sent: the connection is gone
        prompt = prompt_of(body)
        if prompt is None:
            return _json({"error": {"message": "no prompt in the body",
                                                "type": "invalid_request_error"}}, status=400)
        data: dict[str, Any] = json.loads(body)
        count = data.get("max_tokens", data.get("max_completion_tokens", 16))
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            return _json({"error": {"message": "max_tokens must be an integer >= 1",
                                                "type": "invalid_request_error"}}, status=400)
        tokens, cached = self.cached(prompt)
        self.requests += 1
        self.prompt_tokens += tokens
        self.cached_tokens += cached
        await self._prefill(tokens - cached)
        ident = f"{'chatcmpl' if chat else 'cmpl'}-{self.name}-{next(self._ids)}"
        usage = {"prompt_tokens": tokens, "completion_tokens": count,
                 "total_tokens": tokens + count,
                 "prompt_tokens_details": {"cached_tokens": cached}}
        if data.get("stream"):
            options = data.get("stream_options")
            with_usage = isinstance(options, dict) and bool(options.get("include_usage"))
            return await self._stream(request, ident, chat, count, usage if with_usage else None)
        await asyncio.sleep(count / self.token_rate)
        text = "".join(_token(i) for i in range(count))
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length", "logprobs": None}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        return _json({
            "id": ident, "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()), "model": self.model, "choices": [choice],
            "usage": usage})

    async def _prefill(self, uncached: int) -> None:
        """Wait for this prompt's turn and its prefill (FIFO, one at a time)."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        end = self._prefill_end = max(now, self._prefill_end) + uncached / self.prefill_rate
        await asyncio.sleep(end - now)

    async def _stream(self, request: web.Request, ident: str, chat: bool, count: int,
                      usage: dict[str, Any] | None) -> web.StreamResponse:
        web_ = web_module()
        response: web.StreamResponse = web_.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        created = int(time.time())
        kind = "chat.completion.chunk" if chat else "text_completion"

        def event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
            return b"data: " + json.dumps({"id": ident, "object": kind, "created": created,
                                           "model": self.model, "choices": choices,
                                           **extra}).encode() + b"\n\n"

        for i in range(count):
            if self.cut_after is not None and i >= self.cut_after:
                assert request.transport is not None
                request.transport.abort()
                return response
            if i:
                await asyncio.sleep(1 / self.token_rate)
            delta: dict[str, Any] = {"content": _token(i)}
            if chat and i == 0:
                delta["role"] = "assistant"
            part = {"index": 0, "delta": delta} if chat else {"index": 0, "text": _token(i)}
            last = i == count - 1
            part["finish_reason"] = "length" if last else None
            part["logprobs"] = None
            await response.write(event([part]))
            self.events += 1
        if usage is not None:
            await response.write(event([], usage=usage))
        await response.write(b"data: [DONE]\n\n")
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
        return response


def _json(data: dict[str, Any], status: int = 200) -> web.Response:
    response: web.Response = web_module().json_response(data, status=status)
    return response


def _token(i: int) -> str:
    return f" t{i}"
