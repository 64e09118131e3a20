"""A field written ``__secret`` in a class body is ``_Private__secret`` at run time: Python mangles it.

mypy keeps the name as written; the plugin's keys are those of the dict.
"""

from dataclasses import dataclass
from typing import TypedDict

from typing_extensions import assert_type

from metakit import ZeroCopy


@dataclass
class Private(ZeroCopy):
    __secret: int
    self: str


PrivateDict = TypedDict("PrivateDict", {"_Private__secret": int, "self": str})


def the_keys_are_the_mangled_names(private: Private) -> None:
    assert_type(private.asdict_zerocopy(), PrivateDict)
    assert_type(private.asdict_zerocopy()["_Private__secret"], int)
    assert_type(private.asdict_zerocopy(skip_fields={"_Private__secret"})["self"], str)
    private.asdict_zerocopy()["__secret"]  # E: the key is _Private__secret
    private.asdict_zerocopy(skip_fields={"__secret"})  # E: so is the field's name
