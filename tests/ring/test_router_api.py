"""Every router class keeps its public surface as it was at ea11c0d
(tests/vectors/router_api.json, written by tests/make_api_record.py), when
the four classes came to share one shell: the same method and property
names (no method another class has leaks in), the same signatures, the
same docstrings (a mutation's may only gain a statement of its cost), and
only ConsistentHashRouter is subclassable.  Names added since are listed
here, each with what it is."""
from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from make_api_record import PROTOCOLS, signature

import chash

RECORD = json.loads((Path(__file__).parents[1] / "vectors" / "router_api.json")
                    .read_text(encoding="utf-8"))
CLASSES: dict[str, Any] = RECORD["classes"]
#: Added after ea11c0d, on every class (weight_rule; get_bounded, the bounded
#: lookup over loads the caller tracks).
ADDED = {"weight_rule", "get_bounded"}
#: Docstrings rewritten after ea11c0d for a new layout, each now naming it
#: (None: the class's own): JumpRouter's layout="jumpback".
AMENDED = {("JumpRouter", None): "jumpback", ("JumpRouter", "layout"): "jumpback",
           ("JumpRouter", "get_target_node_by_hash"): "jumpback"}


def amended(cls: str, member: str | None, now: str | None, then: str | None) -> bool:
    """A docstring rewritten for a new layout: it names the layout, and the
    record's text was not simply dropped (it shares its first line)."""
    word = AMENDED.get((cls, member))
    return bool(word and now and then and word in now
                and now.splitlines()[0][:20] == then.splitlines()[0][:20])


def same_doc(now: str | None, then: str | None) -> bool:
    """Equal, or the old text followed by a statement of the cost."""
    if now == then:
        return True
    return bool(now and then and now.startswith(then) and "Cost:" in now[len(then):])


def same_class_doc(cls: type, then: str) -> bool:
    """Equal, or (ConsistentHashRouter only) the old text followed by the
    sentence that says it is the one subclassable router."""
    now = cls.__doc__ or ""
    if now == then:
        return True
    return (cls is chash.ConsistentHashRouter and now.startswith(then)
            and "may be subclassed" in now[len(then):])


def test_the_record_was_made_at_ea11c0d() -> None:
    # Classes added since are recorded (make_api_record.py --add) at the
    # commit that added them, the others left as they were.
    assert RECORD["made_by"].endswith(" at ea11c0d")
    assert set(CLASSES) == {"ConsistentHashRouter", "MaglevRouter", "JumpRouter",
                            "RendezvousRouter"} | set(RECORD.get("added", {}))
    assert set(RECORD.get("added", {})) == {"AnchorRouter"}


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_a_class_keeps_its_names_signatures_and_docs(name: str) -> None:
    cls = getattr(chash, name)
    then = CLASSES[name]
    now_names = {n for n in dir(cls) if not n.startswith("__")}
    assert now_names - ADDED == set(then["members"]) - ADDED
    assert now_names >= ADDED
    assert same_class_doc(cls, then["doc"]) or amended(name, None, cls.__doc__, then["doc"])
    assert signature(cls) == then["signature"]
    for member, was in then["members"].items():
        attr = inspect.getattr_static(cls, member)
        assert type(attr).__name__ == was["kind"], member
        assert signature(getattr(cls, member)) == was["signature"], member
        now = getattr(attr, "__doc__", None)
        assert same_doc(now, was["doc"]) or amended(name, member, now, was["doc"]), member
    assert sorted(p for p in PROTOCOLS if p in cls.__dict__) == then["protocols"]


def test_no_class_takes_a_method_it_lacked() -> None:
    assert not hasattr(chash.JumpRouter, "diff")
    assert not hasattr(chash.RendezvousRouter, "diff")
    assert not hasattr(chash.RendezvousRouter, "get_target_nodes_by_hash")
    assert not hasattr(chash.JumpRouter, "zones") and not hasattr(chash.MaglevRouter, "zones")
    assert not hasattr(chash.MaglevRouter, "__setstate__")
    assert not hasattr(chash.JumpRouter, "_replace_nodes")
    assert not hasattr(chash.ConsistentHashRouter, "table")
    for cls in (chash.ConsistentHashRouter, chash.MaglevRouter, chash.JumpRouter,
                chash.RendezvousRouter):
        assert not {"bucket_of", "state", "from_state"} & set(dir(cls)), cls
    assert not hasattr(chash.AnchorRouter, "diff") and not hasattr(chash.AnchorRouter, "zones")


def test_only_consistent_hash_router_is_subclassable() -> None:
    class Mine(chash.ConsistentHashRouter):
        pass

    assert Mine().layout == "python"
    for cls in (chash.MaglevRouter, chash.JumpRouter, chash.RendezvousRouter, chash.AnchorRouter):
        with pytest.raises(TypeError):
            type("Mine", (cls,), {})
