"""The demo before the timings: what metakit generated for the subject, and that its dict holds the very objects."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import metakit
from metakit.bench.subject import Subject, field_names
from metakit.bench.timing import Broken


def print_header(versions: Mapping[str, str | None], quick: bool) -> None:
    """The first line of the run: what it runs on, and what it measures without torch."""
    peers = ", ".join(f"{name} {versions[name] or 'not installed'}" for name in ("torch", "attrs", "msgspec"))
    mode = " (--quick)" if quick else ""
    print(
        f"metakit {versions['metakit']} (source {versions['source']}) benchmark{mode}:"
        f" {versions['implementation']} {versions['python']}"
        f" on {versions['platform']}; {peers}"
    )
    if versions["torch"] is None:
        print(
            "torch is not installed: measuring torch-free twins of the engine classes (the same field names,"
            " plain objects as values); the tensor-size sweep is skipped."
        )


def demo(subject: Subject) -> None:
    """Show what metakit does on the subject; raise ``Broken`` if it does not do it."""
    cls, meta = subject.cls, subject.record
    names = field_names(cls)
    print(f"\n== Demo: {cls.__qualname__}, {len(names)} fields")
    print("What metakit generated for it, metakit.generated_source(cls):\n")
    print("\n".join(f"    {line}" for line in metakit.generated_source(cls).splitlines()))
    d = meta.asdict_zerocopy()
    facts = {
        "list(d) == [f.name for f in fields(meta)]": list(d) == names,
        "all(d[k] is getattr(meta, k) for k in d)": all(d[name] is getattr(meta, name) for name in names),
        f"{cls.__name__}(**d) == meta": cls(**d) == meta,
    }
    print("With d = meta.asdict_zerocopy():")
    for fact, holds in facts.items():
        print(f"    {fact:<62}  {holds}")
    if not all(facts.values()):
        raise Broken(f"{cls.__qualname__}.asdict_zerocopy() is wrong")
    if subject.torch_version is not None:
        copy = dataclasses.asdict(meta)["slot_mapping"]
        fact = "dataclasses.asdict(meta)['slot_mapping'] is meta.slot_mapping"
        print(f"    {fact:<62}  {copy is meta.slot_mapping}  (it copied {copy.numel():,} elements)")
        _demo_omit()


def _demo_omit() -> None:
    from metakit.examples import engine

    meta = engine.make_flashinfer_metadata()
    d = meta.asdict_zerocopy()
    names = field_names(meta)
    omitted = [name for name in names if name not in d]
    post_init = [name for name in vars(meta) if name not in names]
    print(
        f"FlashInferMetadata: {len(d)} of its {len(names)} fields are in its dict; not the OMIT fields"
        f" {', '.join(omitted)}, nor the attributes set in __post_init__, {', '.join(post_init)}."
    )
    if any(name in d for name in post_init):
        raise Broken("FlashInferMetadata.asdict_zerocopy() holds an attribute that is not a field")
