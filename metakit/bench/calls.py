"""The call table: every way to turn the 15-field record into a dict, ns per call and ratio to metakit."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any

import metakit
from metakit import ZeroCopy
from metakit.bench.report import installed, print_spread_table
from metakit.bench.subject import Subject, field_names, peer_twins
from metakit.bench.timing import Broken, Progress, Settings, make_timer, measure_ns

SKIP: frozenset[str] = frozenset({"seq_lens", "block_tables"})
"""The two names passed as ``skip_fields``."""
METHOD = "metakit_method"
"""The key of the contender every ratio is to."""


@dataclass(frozen=True)
class CallRow(ZeroCopy):
    """One contender of the call table."""

    key: str
    label: str
    ns: float | None
    """The best sample's ns per call."""
    median_ns: float | None
    ratio: float | None
    """``ns`` over the best ns of the metakit method."""
    unstable: bool
    """Whether the samples varied more than pyperf allows (``timing.UNSTABLE``)."""
    note: str | None


def _hand_written(self: Any) -> dict[str, Any]:
    """``FlashAttentionMetadata``'s dict written out by hand: the code metakit generates.

    The benchmark calls it both as a method of the record's class (see
    ``_with_hand_written``) and as a function: on Python 3.10 a method call
    alone costs several percent more than a function call.
    """
    return {
        "num_prefills": self.num_prefills,
        "num_prefill_tokens": self.num_prefill_tokens,
        "num_decode_tokens": self.num_decode_tokens,
        "slot_mapping": self.slot_mapping,
        "seq_lens": self.seq_lens,
        "seq_lens_tensor": self.seq_lens_tensor,
        "max_query_len": self.max_query_len,
        "max_prefill_seq_len": self.max_prefill_seq_len,
        "max_decode_seq_len": self.max_decode_seq_len,
        "query_start_loc": self.query_start_loc,
        "seq_start_loc": self.seq_start_loc,
        "context_lens_tensor": self.context_lens_tensor,
        "block_tables": self.block_tables,
        "use_cuda_graph": self.use_cuda_graph,
        "kv_cache_dtype": self.kv_cache_dtype,
    }


def _with_hand_written(cls: type) -> type:
    """A subclass of *cls* that adds the hand-written literal as its method ``to_dict``, and nothing else."""
    namespace = {"__module__": __name__, "__qualname__": cls.__qualname__, "to_dict": _hand_written}
    return type(cls)(cls.__name__, (cls,), namespace)


def _fields_comprehension(self: Any) -> dict[str, Any]:
    """vLLM's ``asdict_zerocopy`` as first merged."""
    return {f.name: getattr(self, f.name) for f in fields(self)}


def _vllm_asdict_zerocopy(self: Any, skip_fields: set[str] | None = None) -> dict[str, Any]:
    """vLLM's ``asdict_zerocopy`` as it stayed, with ``skip_fields``."""
    if skip_fields is None:
        skip_fields = set()
    return {field.name: getattr(self, field.name) for field in fields(self) if field.name not in skip_fields}


@dataclass(frozen=True)
class Contender:
    """One way to turn the record into a dict, as the call table times it."""

    key: str
    label: str
    stmt: str
    """The timed statement; it sees the names of the call namespace as locals."""
    copies: bool = False
    """Whether it copies the values (then only the keys are checked)."""


CONTENDERS: tuple[Contender, ...] = (
    Contender("dataclasses_asdict", "dataclasses.asdict(meta)", "dataclasses_asdict(meta)", copies=True),
    Contender("fields_comprehension", "{f.name: getattr(meta, f.name) for f in fields(meta)}", "comprehension(meta)"),
    Contender("vllm_skip_fields", "the same, if f.name not in skip_fields (vLLM, merged)", "vllm(meta)"),
    Contender("attrs_asdict", "attrs.asdict(a, recurse=False)", "attrs_asdict(attrs_record, recurse=False)"),
    Contender("msgspec_asdict", "msgspec.structs.asdict(s)", "msgspec_asdict(struct_record)"),
    Contender("hand_written", "hand-written dict literal, a method: meta.to_dict()", "hand.to_dict()"),
    # Both on ``hand``: Python 3.10 caches attribute lookups per code object,
    # and a literal that met two classes would lose that cache.
    Contender("hand_written_function", "the same, a function: to_dict(meta)", "to_dict(hand)"),
    Contender("metakit_method", "metakit: meta.asdict_zerocopy()", "meta.asdict_zerocopy()"),
    Contender("metakit_function", "metakit: metakit.asdict_zerocopy(meta)", "asdict_zerocopy(meta)"),
    Contender("metakit_skip_fields", "metakit: meta.asdict_zerocopy(skip) (2 names)", "meta.asdict_zerocopy(skip)"),
)


def attrs_asdict() -> Any:
    """``attrs.asdict``, or None where attrs is not installed."""
    if installed("attrs") is None:
        return None
    import attrs

    return attrs.asdict


def msgspec_asdict() -> Any:
    """``msgspec.structs.asdict``, or None where msgspec is not installed."""
    if installed("msgspec") is None:
        return None
    import msgspec

    return msgspec.structs.asdict


def _call_namespace(subject: Subject) -> tuple[dict[str, Any], dict[str, str]]:
    """The names the contenders' statements use, and why a peer is missing."""
    record = subject.record
    namespace: dict[str, Any] = {
        "meta": record,
        "dataclasses_asdict": dataclasses.asdict,
        "comprehension": _fields_comprehension,
        "vllm": _vllm_asdict_zerocopy,
        "to_dict": _hand_written,
        "asdict_zerocopy": metakit.asdict_zerocopy,
        "skip": SKIP,
    }
    values = {name: getattr(record, name) for name in field_names(record)}
    namespace["hand"] = _with_hand_written(subject.cls)(**values)
    peers = peer_twins(subject.cls.__name__, values)
    namespace.update(
        attrs_asdict=attrs_asdict(),
        attrs_record=peers.attrs_record,
        msgspec_asdict=msgspec_asdict(),
        struct_record=peers.struct_record,
    )
    missing = {f"{peer}_asdict": why for peer, why in peers.missing.items()}
    return namespace, missing


def _check_contender(contender: Contender, namespace: dict[str, Any], record: Any) -> None:
    """Raise ``Broken`` unless *contender* returns the record's fields, in order, uncopied."""
    result = eval(contender.stmt, {}, namespace)  # the very statement that is timed
    names = field_names(record)
    if contender.key == "metakit_skip_fields":
        names = [n for n in names if n not in SKIP]
    if list(result) != names:
        raise Broken(f"{contender.label} returned the keys {list(result)}, not {names}")
    if not contender.copies and any(result[n] is not getattr(record, n) for n in names):
        raise Broken(f"{contender.label} did not return the record's own objects")


def measure_calls(subject: Subject, settings: Settings, progress: Progress) -> tuple[list[CallRow], int]:
    """The call table: every contender on the subject record, ns per call; and the rounds."""
    namespace, missing = _call_namespace(subject)
    present = [c for c in CONTENDERS if c.key not in missing]
    for contender in present:
        _check_contender(contender, namespace, subject.record)
    timers = {c.key: make_timer(c.stmt, namespace) for c in present}
    spreads, rounds = measure_ns(timers, settings.call_seconds, settings, progress)
    method = spreads[METHOD].best
    rows = []
    for c in CONTENDERS:
        figure = spreads.get(c.key)
        if figure is None:
            rows.append(CallRow(c.key, c.label, None, None, None, False, missing.get(c.key)))
        else:
            rows.append(
                CallRow(c.key, c.label, figure.best, figure.median, figure.best / method, figure.unstable, None)
            )
    return rows, rounds


def print_calls(subject: Subject, rows: list[CallRow], rounds: int) -> None:
    """Print the call table."""
    values = "torch tensors and ints" if subject.torch_version else "plain objects"
    print(
        f"\n== Dict of {subject.cls.__qualname__} ({len(field_names(subject.cls))} fields, {values}),"
        f" {rounds} interleaved rounds"
    )
    print_spread_table([(row.label, row.ns, row.median_ns, row.ratio, row.unstable, row.note) for row in rows])
