"""``metakit.testing`` on random classes: both helpers pass every correct one, and each defect
put into an override of it is reported as the override's, naming the class."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import field, make_dataclass
from typing import Any, NamedTuple

from hypothesis import given, settings
from hypothesis import strategies as st

from metakit import OMIT, ZeroCopy
from metakit.testing import assert_zerocopy, assert_zerocopy_class

NAMES = ["slot_mapping", "seq_lens", "block_tables", "is_prompt", "wrapper", "self", "skip_fields", "max_len"]


class FieldSpec(NamedTuple):
    name: str
    omitted: bool
    init: bool


class ClassSpec(NamedTuple):
    fields: list[FieldSpec]
    frozen: bool
    slots: bool
    zerocopy: bool


field_specs = st.lists(st.sampled_from(NAMES), unique=True, max_size=6).flatmap(
    lambda names: st.tuples(*[st.builds(FieldSpec, st.just(n), st.booleans(), st.booleans()) for n in names])
)
class_specs = st.builds(ClassSpec, field_specs.map(list), st.booleans(), st.booleans(), st.booleans())


def make(spec: ClassSpec, name: str = "Random", **methods: Any) -> type:
    entries = [
        (f.name, object, field(default_factory=list, init=f.init, metadata=OMIT if f.omitted else {}))
        for f in spec.fields
    ]
    return make_dataclass(
        name,
        entries,
        bases=(ZeroCopy,) if spec.zerocopy else (),
        namespace=methods,
        frozen=spec.frozen,
        slots=spec.slots,
        kw_only=True,
    )


def instance(cls: type) -> Any:
    return cls(**{f.name: [f.name] for f in dataclasses.fields(cls) if f.init})


@settings(max_examples=60, deadline=None)
@given(class_specs)
def test_both_helpers_pass_every_correct_class(spec):
    cls = make(spec)
    assert_zerocopy_class(cls)
    assert_zerocopy(instance(cls))


def reorders(self, skip_fields=None):
    return dict(reversed(ZeroCopy.asdict_zerocopy(self, skip_fields).items()))


def copies_the_first(self, skip_fields=None):
    d = ZeroCopy.asdict_zerocopy(self, skip_fields)
    if d:
        first = next(iter(d))
        d[first] = copy.copy(d[first])
    return d


def adds_a_key(self, skip_fields=None):
    return {**ZeroCopy.asdict_zerocopy(self, skip_fields), "attn_bias": None}


def adds_to_the_set(self, skip_fields=None):
    if skip_fields is not None:
        skip_fields.add(dataclasses.fields(self)[0].name)
    return ZeroCopy.asdict_zerocopy(self, skip_fields)


DEFECTS = {
    reorders: "the order differs",
    copies_the_first: "is not the object the instance holds",
    adds_a_key: "unexpected ['attn_bias']",
    adds_to_the_set: "changed the skip_fields it was given",
}


@settings(max_examples=60, deadline=None)
@given(class_specs.filter(lambda spec: sum(not f.omitted for f in spec.fields) >= 2), st.sampled_from(list(DEFECTS)))
def test_a_defect_in_an_override_of_any_class_is_reported_as_the_overrides(spec, defect):
    # ZeroCopy.asdict_zerocopy is the generated code of the instance's own
    # class, as super() reaches it.
    cls = make(spec._replace(zerocopy=True), name="Broken", asdict_zerocopy=defect)
    for check, subject in ((assert_zerocopy_class, cls), (assert_zerocopy, instance(cls))):
        try:
            check(subject)
        except AssertionError as error:
            message = str(error)
        else:
            raise AssertionError(f"{check.__name__} passed {defect.__name__} on {spec}")
        assert message.startswith("Broken: the override Broken.asdict_zerocopy: obj.asdict_zerocopy("), message
        assert DEFECTS[defect] in message, message
