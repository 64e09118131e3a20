"""A mutation fuzzer of ``metakit.wire.unpack``: what a peer sends can make it raise ``WireError``, nothing else.

Random records of the classes in ``wire_fuzz`` (engine metadata shapes:
ints, bools, floats, strings, bytes, ``None``, optional tensors, lists,
tuples and dicts of values and tensors, dtypes, devices, nested records,
``init=False``, ``OMIT`` and default fields, an ``asdict_zerocopy`` override
and a ``__getstate__`` that drop fields, tensors of a dozen dtypes, shapes
and strides, views of one another, 0-dim, empty, and one of over 1 MiB in a
buffer of its own) are packed with the public ``wire.pack``.  Then the
header is mutated (bytes flipped, cut, extended, inserted, deleted,
repeated, spliced with another record's header; 1, 2, 4 and 8-byte windows
at every offset set to 0, -1, 2**31 and 2**63 in both byte orders; msgpack
integers set to those values or to a value of another type, msgpack lengths
to huge ones; deep nesting), the buffers too (shorter, longer, at an odd address, read-only,
as tensors, as slices of one ring, swapped, missing, extra, another
record's, noisy), and each mutation is given to the public ``wire.unpack``.

The only outcomes allowed: ``WireError``, or a record of the class sent (of
either, for a splice) whose values have their declared types, whose
``OMIT`` fields and post-init attributes are as ``__init__`` makes them, and
whose every tensor's bytes lie inside one of the buffers given (within the
size of a read-only one, which ``unpack`` may copy), at an address that is a
multiple of its item size (torch crashes copying a complex128 tensor that is
not); two tensors share bytes only as views of memory sent for them.  The
record as packed must arrive equal, in every form of buffers but those at an
odd address (where ``WireError`` is fine too).  Any other exception, an audit event (``import``, ``exec``,
``compile``, ``pickle.find_class``, ``os.system``, ``subprocess.Popen``,
``open``, ``ctypes.*`` and a few more) while ``unpack`` runs, a crash, a hang
(``METAKIT_FUZZ_CASE_TIMEOUT`` seconds on one case) or running out of the
address space limit (3 GiB over the worker's start) fails.

The hand-made attack: a header whose bytes carry a pickle (``os.system``,
``importlib.import_module``, ``exec``, ``torch.load``) where a value would
be, over it and its head, padded or not, must raise ``WireError`` with no
audit event.  And the fuzzer's own checks are tested with broken ``unpack``
functions of each kind it must catch (a pickle call, a raw exception, a
tensor outside the buffers or past a slice, another class, an attribute
``__init__`` does not make, a value that is not plain data, an allocation
over the limit, a hang, a crash).

The cases run in a worker subprocess (``wire_fuzz.py``): an audit hook can
never be removed.  Before arming the hook the worker packs and unpacks one
record of each class, as an engine's first step would: the lazy work done
once per class is not what a peer's bytes make happen.  Each failure is
reported with its seed, record and mutation, and a command that replays it
in a fresh worker::

    python tests/torch/wire_fuzz.py repro SEED RECORD MUTATION

Environment:

- ``METAKIT_FUZZ_CASES``: how many ``unpack`` calls the main test makes
  (default 60000: the file takes about 30 s on two busy cores); a long run
  takes ``METAKIT_FUZZ_CASES=300000`` or more.
- ``METAKIT_FUZZ_SEED``: the seed of the records and mutations (default 0).
- ``METAKIT_FUZZ_CASE_TIMEOUT``: seconds one case may take (default 20).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import wire_fuzz

CASES = int(os.environ.get("METAKIT_FUZZ_CASES", "60000"))
SEED = int(os.environ.get("METAKIT_FUZZ_SEED", "0"))
CASE_TIMEOUT = float(os.environ.get("METAKIT_FUZZ_CASE_TIMEOUT", "20"))
RESTARTS = 3
"""How many times a fuzz run goes on, in a fresh worker, after one crashed or hung."""


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[wire_fuzz.Supervisor]:
    supervisor = wire_fuzz.Supervisor(str(tmp_path_factory.mktemp("wire-fuzz")), CASE_TIMEOUT)
    yield supervisor
    supervisor.close()


def _report(title: str, counts: dict[str, int], examples: list[dict[str, object]], deaths: list[str]) -> str:
    lines = [title]
    for death in deaths:
        lines += ["", death]
    for signature, count in sorted(counts.items(), key=lambda item: -item[1]):
        lines += ["", f"{count} x {signature}"]
        for example in [e for e in examples if e["signature"] == signature][:2]:
            where = f"record {example['record']} mutation {example['mutation']}" if "record" in example else ""
            lines.append(f"  - {where} ({example.get('class', '')}): {example['what']}")
            lines += ["      " + line for line in str(example["detail"]).splitlines()[-12:]]
            if "record" in example:
                repro = (
                    f"python tests/torch/wire_fuzz.py repro {example['seed']} {example['record']} {example['mutation']}"
                )
                lines.append(f"      reproduce: {repro}")
            if "header" in example:
                lines.append(f"      header: {example['header']}")
    return "\n".join(lines)


def test_mutated_frames_raise_wire_error_or_arrive_as_a_valid_record(worker: wire_fuzz.Supervisor) -> None:
    counts: dict[str, int] = {}
    examples: list[dict[str, object]] = []
    deaths: list[str] = []
    outcomes: dict[str, int] = {}
    first, done = 0, 0
    while done < CASES and len(deaths) <= RESTARTS:
        reply = worker.command({"cmd": "fuzz", "seed": SEED, "first": first, "cases": CASES - done})
        for signature, count in reply.counts.items():
            counts[signature] = counts.get(signature, 0) + count
        examples += reply.examples
        if reply.died is None:
            for kind, count in reply.summary["outcomes"].items():
                outcomes[kind] = outcomes.get(kind, 0) + count
            done += reply.summary["cases"]
            break
        # SEED RECORD MUTATION DONE: go on after the record it died on, in a fresh worker.
        progress = reply.progress.split()
        if len(progress) != 4:  # it died before its first case
            deaths.append(reply.died)
            break
        _, record, mutation, done_before = map(int, progress)
        repro = f"python tests/torch/wire_fuzz.py repro {SEED} {record} {mutation}"
        deaths.append(f"{reply.died}\n  reproduce: {repro}")
        first, done = record + 1, done + done_before + 1
    print(f"{done} cases, outcomes: {outcomes}", file=sys.stderr)
    assert not counts, _report(f"unpack failed in {sum(counts.values())} of {done} cases:", counts, examples, deaths)
    assert not deaths, _report("the worker died:", counts, examples, deaths)
    records = outcomes.get("record", 0) + outcomes.get("usual record", 0)
    assert records > done // 50, f"too few cases arrived as a record to tell much: {outcomes}"
    assert outcomes.get("usual record", 0) > done // 1000, f"too few cases took unpack's usual way: {outcomes}"


def test_a_pickle_in_the_header_runs_nothing(worker: wire_fuzz.Supervisor) -> None:
    reply = worker.command({"cmd": "attack"})
    assert reply.died is None, reply.died
    assert not reply.counts, _report("a header carrying a pickle:", reply.counts, reply.examples, [])
    assert reply.summary["outcomes"] == {"WireError": reply.summary["cases"]}


@pytest.mark.parametrize(
    ("fake", "expected"),
    [
        ("right", None),
        ("refuse", None),
        ("outside", "invalid: a tensor's bytes lie outside every buffer given"),
        ("past_slice", "invalid: a tensor's bytes lie outside every buffer given"),
        ("pickle", "audit: ['os.system', 'pickle.find_class'"),
        ("raw_error", "exception: builtins.IndexError"),
        ("other_class", "invalid: a wire_fuzz.SeqGroup came back, not a ['Probe']"),
        ("extra_attribute", "invalid: $ has attributes that __init__ does not make: ['__wire_extra__']"),
        ("not_plain", "invalid: $ is declared int, but a Unsendable came"),
        ("allocate", "exception: builtins.RuntimeError"),  # torch's "can't allocate memory"
    ],
)
def test_the_fuzzer_tells_a_broken_unpack(worker: wire_fuzz.Supervisor, fake: str, expected: str | None) -> None:
    reply = worker.command({"cmd": "selftest", "fake": fake})
    assert reply.died is None, reply.died
    if expected is None:
        assert reply.counts == {}
    else:
        assert [signature[: len(expected)] for signature in reply.counts] == [expected], reply.examples
    if fake == "allocate":
        assert "allocate memory" in reply.examples[0]["detail"], "the address space limit, not another error"


@pytest.mark.parametrize(
    ("fake", "expected"), [("hang", "one case ran for more than 1 s"), ("crash", "exit status -11")]
)
def test_the_fuzzer_tells_a_hang_or_a_crash(tmp_path: Path, fake: str, expected: str) -> None:
    supervisor = wire_fuzz.Supervisor(str(tmp_path), case_timeout=1)
    try:
        reply = supervisor.command({"cmd": "selftest", "fake": fake})
    finally:
        supervisor.close()
    assert reply.died is not None
    assert expected in reply.died
    assert "selftest " + fake in reply.died
    assert "_fake_" + fake in reply.died, "the stack of the case, from faulthandler"
