"""Seeded fuzz of per-shape code reuse (README "How it works": "metakit compiles a shape once with placeholder names
and gives each new list of names a copy" ... "A template is made only when its shape is met a second time").
The contract being checked is the one of DESIGN "Semantics" and "Public API" (keys, order, identity, replace ==
dataclasses.replace), for many classes of one shape with different names."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import InitVar, field, make_dataclass

import metakit
from metakit import OMIT, ZeroCopy

POOL = [
    "a",
    "b",
    "c",
    "d",
    "self",
    "name",
    "error",
    "changes",
    "skip_fields",
    "isinstance",
    "KeyError",
    "TypeError",
    "str",
    "bytes",
    "obj",
    "cls",
    "dict",
    "_skip_fields_text",
    "_check_skipped",
    "_skip_fields_failed",
    "_replace_by_dataclasses",
    "x" * 40,
    "é",
    "__d",
    "_",
    "match",
    "case",
    "print",
    "len",
    "getattr",
    "object",
]

KINDS = ["plain", "omit", "init_false", "initvar", "kw"]


def build(names, kinds, tag):
    spec = []
    for n, k in zip(names, kinds):
        if k == "plain":
            spec.append((n, object, field(default=None)))
        elif k == "omit":
            spec.append((n, object, field(default=None, metadata=OMIT)))
        elif k == "init_false":
            spec.append((n, object, field(default=None, init=False)))
        elif k == "initvar":
            spec.append((n, InitVar[object], field(default=None)))
        elif k == "kw":
            spec.append((n, object, field(default=None, kw_only=True)))
    return make_dataclass(f"Fz{tag}", spec, bases=(ZeroCopy,))


def test_many_classes_of_few_shapes_random_names():
    rng = random.Random(12345)
    shapes = [tuple(rng.choice(KINDS) for _ in range(rng.randint(1, 6))) for _ in range(6)]
    count = 0
    for rnd in range(40):
        for si, kinds in enumerate(shapes):
            names = rng.sample(POOL, len(kinds))
            C = build(names, kinds, f"{si}_{rnd}")
            o = C()
            real = [f.name for f in dataclasses.fields(C)]
            markers = {}
            for n in real:
                m = object()
                object.__setattr__(o, n, m)
                markers[n] = m
            traveling = [f.name for f in dataclasses.fields(C) if not f.metadata.get(next(iter(OMIT)))]
            d = o.asdict_zerocopy()
            assert list(d) == traveling, (names, kinds)
            assert all(d[k] is markers[k] for k in traveling)
            assert list(metakit.asdict_zerocopy(o)) == traveling
            t = o.astuple_zerocopy()
            assert len(t) == len(traveling) and all(a is markers[k] for a, k in zip(t, traveling))
            if traveling:
                assert list(o.asdict_zerocopy({traveling[0]})) == traveling[1:]
            # replace: same outcome as dataclasses.replace, with no change and with one change per name
            for ch in [{}] + [{n: 1} for n in names]:
                try:
                    exp = ("ok", repr(dataclasses.replace(o, **ch)))
                except Exception as e:
                    exp = ("raise", type(e), str(e))
                for fn in (metakit.replace, C.__replace__):
                    try:
                        got = ("ok", repr(fn(o, **ch)))
                    except Exception as e:
                        got = ("raise", type(e), str(e))
                    assert got == exp, (names, kinds, ch)
            count += 1
    assert count == 240
