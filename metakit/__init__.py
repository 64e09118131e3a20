"""Zero-copy ``asdict`` and ``astuple`` for dataclasses, generated per class.

``ZeroCopyFields`` writes an ``asdict_zerocopy`` and an ``astuple_zerocopy``
method for every dataclass it creates, compiled for that class's own fields.
They return the very objects the instance holds, without copying or
recursing, and leave out attributes that are not fields.

>>> from dataclasses import dataclass
>>> import metakit
>>> @dataclass
... class Step(metakit.ZeroCopy):
...     is_prompt: bool
...     slot_mapping: list[int]
>>> step = Step(True, [0, 1])
>>> step.asdict_zerocopy()
{'is_prompt': True, 'slot_mapping': [0, 1]}
>>> step.asdict_zerocopy()["slot_mapping"] is step.slot_mapping
True

This package imports neither torch nor mypy.
"""

from metakit import testing
from metakit._errors import SkipFieldsError
from metakit._fields import OMIT
from metakit._functions import asdict_zerocopy, astuple_zerocopy, generated_source, replace
from metakit._meta import ZeroCopy, ZeroCopyFields, zerocopy_classes

__all__ = [
    "OMIT",
    "SkipFieldsError",
    "ZeroCopy",
    "ZeroCopyFields",
    "asdict_zerocopy",
    "astuple_zerocopy",
    "generated_source",
    "replace",
    "testing",
    "zerocopy_classes",
]

__version__ = "0.1.0"
