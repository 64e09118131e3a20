"""The replace table: a new record with one field changed, by every way there is, on 15 and 23 fields.

The 15-field record is the subject of the call table; the 23-field one,
``CommonAttentionRecord``, is modelled on vLLM V1's
``CommonAttentionMetadata``, whose ``replace(**kwargs)`` calls
``dataclasses.replace`` and runs every step in its attention backends and
speculative decoding.  The third is the 15-field record's frozen twin, as
vLLM's model inputs are frozen: there every way calls an ``__init__`` that
sets each field through ``object.__setattr__``.  Each way is checked first:
it must return a new record that holds the very objects of the old one, the
changed field apart.
"""

from __future__ import annotations

import copy
import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import metakit
from metakit import ZeroCopy
from metakit.bench.report import print_spread_table
from metakit.bench.subject import Subject, field_names, peer_twins
from metakit.bench.timing import Broken, Progress, Settings, make_timer, measure_ns

METHOD = "metakit_replace"
"""The key of the contender every ratio is to."""


@dataclass
class CommonAttentionRecord(ZeroCopy):
    """A 23-field record with the shape of vLLM V1's per-batch attention metadata.

    Nine fields every batch sets (tensors and counts), then fourteen with
    defaults that only some backends or features use.  The types are loose
    (``Any``) so that the record needs no torch: ``replace`` never copies or
    inspects a value, so the kind of value does not change its cost.
    """

    query_start_loc: Any
    query_start_loc_cpu: Any
    seq_lens: Any
    num_reqs: int
    num_actual_tokens: int
    max_query_len: int
    max_seq_len: int
    block_table_tensor: Any
    slot_mapping: Any
    causal: bool = True
    logits_indices_padded: Any = None
    num_logits_indices: int | None = None
    encoder_seq_lens: Any = None
    encoder_seq_lens_cpu: Any = None
    dcp_local_seq_lens: Any = None
    dcp_local_seq_lens_cpu: Any = None
    positions: Any = None
    is_prefilling: Any = None
    seq_lens_cpu_upper_bound: Any = None
    num_input_tokens: int = 0
    seq_lens_host: Any = None
    num_computed_tokens_host: Any = None
    num_computed_tokens_cache: Any = None


def make_common_attention_record() -> CommonAttentionRecord:
    """A record with a distinct object in every field, as the benchmark replaces it."""
    values: dict[str, Any] = {name: object() for name in field_names(CommonAttentionRecord)}
    return CommonAttentionRecord(**values)


def _hand_replace_15(self: Any, **changes: Any) -> Any:
    """A replace written by hand for the 15-field record: its fields, the changes, ``__init__``."""
    values = {
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
    values.update(changes)
    return self.__class__(**values)


def _hand_replace_23(self: Any, **changes: Any) -> Any:
    """The same for ``CommonAttentionRecord``."""
    values = {
        "query_start_loc": self.query_start_loc,
        "query_start_loc_cpu": self.query_start_loc_cpu,
        "seq_lens": self.seq_lens,
        "num_reqs": self.num_reqs,
        "num_actual_tokens": self.num_actual_tokens,
        "max_query_len": self.max_query_len,
        "max_seq_len": self.max_seq_len,
        "block_table_tensor": self.block_table_tensor,
        "slot_mapping": self.slot_mapping,
        "causal": self.causal,
        "logits_indices_padded": self.logits_indices_padded,
        "num_logits_indices": self.num_logits_indices,
        "encoder_seq_lens": self.encoder_seq_lens,
        "encoder_seq_lens_cpu": self.encoder_seq_lens_cpu,
        "dcp_local_seq_lens": self.dcp_local_seq_lens,
        "dcp_local_seq_lens_cpu": self.dcp_local_seq_lens_cpu,
        "positions": self.positions,
        "is_prefilling": self.is_prefilling,
        "seq_lens_cpu_upper_bound": self.seq_lens_cpu_upper_bound,
        "num_input_tokens": self.num_input_tokens,
        "seq_lens_host": self.seq_lens_host,
        "num_computed_tokens_host": self.num_computed_tokens_host,
        "num_computed_tokens_cache": self.num_computed_tokens_cache,
    }
    values.update(changes)
    return self.__class__(**values)


@dataclass(frozen=True)
class ReplaceRow(ZeroCopy):
    """One way to replace a field, on one record."""

    record: str
    """The record's class name."""
    fields: int
    key: str
    label: str
    ns: float | None
    """The best sample's ns per call."""
    median_ns: float | None
    ratio: float | None
    """``ns`` over the best ns of ``metakit.replace`` on the same record."""
    unstable: bool
    note: str | None
    frozen: bool = False
    """Whether the record's class is ``frozen=True``."""


@dataclass(frozen=True)
class _Contender:
    key: str
    label: str
    stmt: str
    """The timed statement; ``CHANGE`` stands for the keyword argument, e.g. ``max_query_len=1``."""
    on: str = "meta"
    """The name of the record it replaces in (a twin for the peers)."""


_CONTENDERS: tuple[_Contender, ...] = (
    _Contender("init", "Cls(**fields): __init__ alone, the floor", "cls(**values)"),
    _Contender("dataclasses_replace", "dataclasses.replace(meta, ...)", "dataclasses_replace(meta, CHANGE)"),
    _Contender("copy_replace", "copy.replace(meta, ...) (3.13+: metakit's __replace__)", "copy_replace(meta, CHANGE)"),
    _Contender("attrs_evolve", "attrs.evolve(a, ...)", "attrs_evolve(attrs_record, CHANGE)", on="attrs_record"),
    _Contender(
        "msgspec_replace",
        "msgspec.structs.replace(s, ...)",
        "msgspec_replace(struct_record, CHANGE)",
        on="struct_record",
    ),
    _Contender("hand_written", "hand-written: fields dict, update, Cls(**d)", "hand(meta, CHANGE)"),
    _Contender(METHOD, "metakit.replace(meta, ...)", "metakit_replace(meta, CHANGE)"),
)


@dataclass(frozen=True)
class _Record:
    record: Any
    change: str
    """The field that is changed (to the int 1)."""
    hand: Callable[..., Any]


def _records(subject: Subject) -> list[_Record]:
    return [
        _Record(subject.record, "max_query_len", _hand_replace_15),
        _Record(make_common_attention_record(), "num_actual_tokens", _hand_replace_23),
        _Record(frozen_twin(subject.record), "max_query_len", _hand_replace_15),
    ]


def frozen_twin(record: Any) -> Any:
    """A record of a ``frozen=True`` twin of *record*'s class (the same fields, in order), with the same objects."""
    cls = type(record)
    twin = dataclasses.make_dataclass(
        f"Frozen{cls.__name__}",
        [(f.name, f.type) for f in dataclasses.fields(cls)],
        bases=(ZeroCopy,),
        frozen=True,
        namespace={"__module__": __name__},
    )
    return twin(**{name: getattr(record, name) for name in field_names(record)})


def _namespace(entry: _Record) -> tuple[dict[str, Any], dict[str, str]]:
    """The names the statements use on *entry*'s record, and why a contender cannot run."""
    record = entry.record
    values = {name: getattr(record, name) for name in field_names(record)}
    peers = peer_twins(type(record).__name__, values, frozen=type(record).__dataclass_params__.frozen)
    missing = {
        f"{'attrs_evolve' if peer == 'attrs' else 'msgspec_replace'}": why for peer, why in peers.missing.items()
    }
    namespace: dict[str, Any] = {
        "meta": record,
        "cls": type(record),
        "values": values,
        "dataclasses_replace": dataclasses.replace,
        "hand": entry.hand,
        "metakit_replace": metakit.replace,
        "attrs_record": peers.attrs_record,
        "struct_record": peers.struct_record,
    }
    if sys.version_info >= (3, 13):
        namespace["copy_replace"] = copy.replace
    else:
        missing["copy_replace"] = "copy.replace is new in Python 3.13"
    if peers.attrs_record is not None:
        import attrs

        namespace["attrs_evolve"] = attrs.evolve
    if peers.struct_record is not None:
        import msgspec

        namespace["msgspec_replace"] = msgspec.structs.replace
    return namespace, missing


def _statement(contender: _Contender, entry: _Record) -> str:
    return contender.stmt.replace("CHANGE", f"{entry.change}=1")


def _check(contender: _Contender, stmt: str, namespace: dict[str, Any], entry: _Record) -> None:
    """Raise ``Broken`` unless the statement returns a new record: the old one's objects, one field changed."""
    old = namespace[contender.on]
    new = eval(stmt, {}, namespace)  # the very statement that is timed
    label = f"{contender.label} on {type(entry.record).__name__}"
    if new is old or type(new) is not type(old):
        raise Broken(f"{label} did not return a new {type(old).__name__}")
    changed = 1 if contender.key != "init" else getattr(old, entry.change)
    for name in field_names(entry.record):
        want = changed if name == entry.change else getattr(old, name)
        if getattr(new, name) is not want:
            raise Broken(
                f"{label}: field {name!r} is not {'the new value' if name == entry.change else 'the old object'}"
            )


def measure_replace(subject: Subject, settings: Settings, progress: Progress) -> tuple[list[ReplaceRow], int]:
    """The replace table, both records side by side in the same rounds; and the rounds."""
    timers = {}
    missing: dict[tuple[int, str], str] = {}
    entries = _records(subject)
    for index, entry in enumerate(entries):
        namespace, absent = _namespace(entry)
        for contender in _CONTENDERS:
            if contender.key in absent:
                missing[index, contender.key] = absent[contender.key]
                continue
            stmt = _statement(contender, entry)
            _check(contender, stmt, namespace, entry)
            timers[f"{index} {contender.key}"] = make_timer(stmt, namespace)
    spreads, rounds = measure_ns(timers, settings.replace_seconds, settings, progress)
    rows = []
    for index, entry in enumerate(entries):
        name, count = type(entry.record).__name__, len(field_names(entry.record))
        frozen = type(entry.record).__dataclass_params__.frozen
        method = spreads[f"{index} {METHOD}"].best
        for c in _CONTENDERS:
            figure = spreads.get(f"{index} {c.key}")
            if figure is None:
                note = missing[index, c.key]
                rows.append(ReplaceRow(name, count, c.key, c.label, None, None, None, False, note, frozen))
            else:
                ratio = figure.best / method
                rows.append(
                    ReplaceRow(
                        name, count, c.key, c.label, figure.best, figure.median, ratio, figure.unstable, None, frozen
                    )
                )
    return rows, rounds


def print_replace(rows: list[ReplaceRow], rounds: int) -> None:
    """Print one table per record."""
    for record in dict.fromkeys(row.record for row in rows):
        mine = [row for row in rows if row.record == record]
        print(f"\n== Replace one field of {record} ({mine[0].fields} fields), {rounds} interleaved rounds")
        print_spread_table([(row.label, row.ns, row.median_ns, row.ratio, row.unstable, row.note) for row in mine])
