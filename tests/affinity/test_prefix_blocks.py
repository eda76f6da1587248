"""chash.affinity.prefix_blocks: chained block hashes of text and token ids,
checked against their definition with the xxhash library and the engine's
mixer rule restated in Python, and an error matrix."""
from __future__ import annotations

from typing import Any

import pytest
import xxhash

from chash.affinity import prefix_blocks

TEXT_SEED = int.from_bytes(b"chashTXT", "big")
TOKEN_SEED = int.from_bytes(b"chashTOK", "big")
M64 = (1 << 64) - 1


def text_oracle(text: str, block: int, limit: int) -> list[int]:
    out: list[int] = []
    h = TEXT_SEED
    for start in range(0, len(text), block):
        if len(out) == limit:
            break
        h = xxhash.xxh64_intdigest(text[start:start + block].encode(), seed=h)
        out.append(h)
    return out


def fmix64(x: int) -> int:
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & M64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & M64
    return x ^ (x >> 33)


def token_oracle(tokens: list[int], block: int, limit: int) -> list[int]:
    out: list[int] = []
    h = TOKEN_SEED
    for start in range(0, len(tokens), block):
        if len(out) == limit:
            break
        chunk = tokens[start:start + block]
        acc = h
        for t in chunk:
            acc = (fmix64(acc ^ t) + 0x9E3779B97F4A7C15) & M64
        h = fmix64(acc ^ len(chunk))
        out.append(h)
    return out


@pytest.mark.parametrize("text", ["", "a", "hello, world", "é" * 7 + "x", "日本語のテキスト" * 5,
                                  "emoji 🙂 and more" * 3])
@pytest.mark.parametrize("block,limit", [(1, 128), (3, 2), (5, 100), (128, 128)])
def test_text_blocks_follow_the_definition(text: str, block: int, limit: int) -> None:
    assert prefix_blocks(text, block=block, limit=limit) == text_oracle(text, block, limit)


@pytest.mark.parametrize("tokens", [[], [0], [1, 2, 3, 4, 5], list(range(300)), [2**64 - 1, 7]])
@pytest.mark.parametrize("block,limit", [(1, 128), (2, 3), (128, 128)])
def test_token_blocks_follow_the_definition(tokens: list[int], block: int, limit: int) -> None:
    assert prefix_blocks(tokens, block=block, limit=limit) == token_oracle(tokens, block, limit)
    assert prefix_blocks(tuple(tokens), block=block, limit=limit) == token_oracle(tokens, block, limit)


def test_equal_prefix_equal_hashes_and_only_then() -> None:
    a = prefix_blocks("system prompt. user one", block=4)
    b = prefix_blocks("system prompt. user two", block=4)
    same = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
    assert same == len("system prompt. user ") // 4
    assert a[same:] != b[same:] and all(x != y for x, y in zip(a[same:], b[same:], strict=True))


def test_defaults_are_128_and_128() -> None:
    assert len(prefix_blocks("a" * (128 * 3))) == 3
    assert len(prefix_blocks("a" * (128 * 3 + 1))) == 4
    assert len(prefix_blocks("a" * 128 * 500)) == 128
    assert prefix_blocks(list(range(1000))) == token_oracle(list(range(1000)), 128, 128)


def test_text_and_tokens_never_share_a_chain() -> None:
    assert prefix_blocks("ab", block=1) != prefix_blocks([97, 98], block=1)


@pytest.mark.parametrize("data,kwargs,error,message", [
    (b"bytes", {}, TypeError, "not bytes"),
    (bytearray(b"x"), {}, TypeError, "not bytes"),
    (12, {}, TypeError, "str or a sequence"),
    ([1, "2"], {}, TypeError, "must hold ints"),
    ([1.5], {}, TypeError, "must hold ints"),
    ([-1], {}, ValueError, "0 .. 2\\*\\*64-1"),
    ([2**64], {}, ValueError, "0 .. 2\\*\\*64-1"),
    ("x", {"block": 0}, ValueError, "block must be >= 1"),
    ("x", {"limit": 0}, ValueError, "limit must be >= 1"),
    ("x", {"block": -3}, ValueError, "block must be >= 1"),
    ("x", {"block": "2"}, TypeError, "integer"),
])
def test_bad_input_is_named(data: Any, kwargs: dict[str, Any], error: type[Exception],
                            message: str) -> None:
    with pytest.raises(error, match=message):
        prefix_blocks(data, **kwargs)


def test_block_and_limit_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        prefix_blocks("abc", 2)  # type: ignore[call-arg]
