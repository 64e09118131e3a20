"""metakit._weak: dicts of weak references whose entries go with their values."""

from __future__ import annotations

import gc
import weakref

import pytest

from metakit import _weak


class Value:
    pass


@pytest.mark.parametrize("forget_dead", [_weak.forget_dead, _weak._forget_dead_in_python], ids=["c", "python"])
def test_forget_dead_removes_a_dead_reference_and_keeps_a_live_one(forget_dead):
    alive, dying = Value(), Value()
    refs = {"alive": weakref.ref(alive), "dying": weakref.ref(dying)}
    del dying
    gc.collect()
    forget_dead(refs, "dying")
    forget_dead(refs, "alive")
    forget_dead(refs, "absent")  # no entry: nothing to do, no error
    assert list(refs) == ["alive"]
    assert _weak.live(refs, "alive") is alive


def test_a_key_held_again_keeps_its_new_value_when_the_old_ones_callback_runs():
    refs: dict[str, weakref.ref[Value]] = {}
    old = Value()
    refs["key"] = weakref.ref(old, lambda _ref: _weak.forget_dead(refs, "key"))
    new = Value()
    refs["key"] = weakref.ref(new)  # held again, while the old value still lives
    del old
    gc.collect()
    assert _weak.live(refs, "key") is new


def test_prune_drops_the_dead_and_says_when_to_prune_again():
    values = [Value() for _ in range(10)]
    refs = {i: weakref.ref(value) for i, value in enumerate(values)}
    del values[5:]
    gc.collect()
    assert _weak.prune(refs) == 64  # at least 64
    assert sorted(refs) == [0, 1, 2, 3, 4]
    assert [key for key, _ in _weak.live_items(refs)] == [0, 1, 2, 3, 4]
    many = [Value() for _ in range(100)]
    refs.update({100 + i: weakref.ref(value) for i, value in enumerate(many)})
    assert _weak.prune(refs) == 2 * 105  # twice the live


def test_live_is_none_for_a_missing_or_dead_key():
    value = Value()
    refs = {"dead": weakref.ref(Value()), "live": weakref.ref(value)}
    gc.collect()
    assert _weak.live(refs, "missing") is None
    assert _weak.live(refs, "dead") is None
    assert _weak.live_items(refs) == [("live", value)]
