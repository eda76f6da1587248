"""chash._text: counts with their nouns, as everything that prints words them."""
from __future__ import annotations

import pytest

from chash._text import plural


@pytest.mark.parametrize(("count", "text"), [
    (0, "0 nodes"), (1, "1 node"), (2, "2 nodes"), (1000, "1,000 nodes"),
])
def test_plural(count: int, text: str) -> None:
    assert plural(count, "node") == text


def test_plural_irregular() -> None:
    assert plural(1, "virtual node per", "virtual nodes per") == "1 virtual node per"
    assert plural(2, "virtual node per", "virtual nodes per") == "2 virtual nodes per"


def test_plural_groups_thousands_and_keeps_the_sign() -> None:
    assert plural(1_234_567, "key") == "1,234,567 keys"
    assert plural(-1, "node") == "-1 nodes"
