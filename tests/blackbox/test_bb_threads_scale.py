"""Thread safety, linecache.checkcache, bounded memory (DESIGN "Generated code": "Thread-safe: classes can be created
and methods called from many threads, and linecache.checkcache() in any thread never fails while metakit classes come
and go." "Bounded: creating classes of ever new shapes (a thousand distinct field counts) keeps memory bounded and
time linear; no cache grows without limit.")"""

from __future__ import annotations

import dataclasses
import gc
import linecache
import os
import subprocess
import sys
import threading
from dataclasses import field, make_dataclass

import metakit
from metakit import ZeroCopy


def test_checkcache_entry_vanishes_mid_iteration(monkeypatch):
    # Deterministic form of the race: a metakit entry leaves linecache while checkcache() iterates.
    fake = os.path.abspath("__metakit_blackbox_fake_trigger__.py")
    linecache.cache[fake] = (1, 1.0, ["x\n"], fake)
    holder = [make_dataclass("VanishMid", [("a", int, field(default=0))], bases=(ZeroCopy,))]
    fn = holder[0].asdict_zerocopy.__code__.co_filename
    assert fn in linecache.cache
    real_stat = os.stat

    def stat(path, *a, **k):
        if path == fake:
            holder.clear()
            gc.collect()
            raise OSError("gone")
        return real_stat(path, *a, **k)

    monkeypatch.setattr(os, "stat", stat)
    try:
        linecache.checkcache()  # must not raise KeyError
    finally:
        monkeypatch.undo()
        linecache.cache.pop(fake, None)
    assert fn not in linecache.cache


def test_checkcache_single_filename_after_collect():
    C = make_dataclass("VanishOne", [("a", int, field(default=0))], bases=(ZeroCopy,))
    fn = C.asdict_zerocopy.__code__.co_filename
    del C
    gc.collect()
    linecache.checkcache(fn)
    linecache.checkcache()


def test_threads_create_call_collect_with_checkcache_loop():
    stop = threading.Event()
    errors: list[str] = []

    def checker():
        while not stop.is_set():
            try:
                linecache.checkcache()
            except Exception as e:
                errors.append("checkcache: " + repr(e))
                return

    def worker(t):
        try:
            for i in range(40):
                n = (i + t) % 9 + 1
                names = [f"t{t}_{i % 5}_f{j}" for j in range(n)]
                C = make_dataclass(
                    f"ThreadMade{t}_{i % 3}",
                    [(nm, int, field(default=j)) for j, nm in enumerate(names)],
                    bases=(ZeroCopy,),
                )
                o = C()
                assert o.asdict_zerocopy() == {nm: j for j, nm in enumerate(names)}
                assert o.astuple_zerocopy() == tuple(range(n))
                assert o.asdict_zerocopy(skip_fields={names[0]}) == {nm: j for j, nm in enumerate(names) if j}
                r = metakit.replace(o, **{names[0]: -1})
                assert getattr(r, names[0]) == -1
                assert metakit.asdict_zerocopy(o) == o.asdict_zerocopy()
                assert "def asdict_zerocopy" in metakit.generated_source(C)
                del C, o, r
                if i % 8 == 0:
                    gc.collect()
        except Exception as e:
            errors.append(f"worker {t}: {e!r}")

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    try:
        checkers = [threading.Thread(target=checker)]
        workers = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
        for th in checkers + workers:
            th.start()
        for th in workers:
            th.join()
        stop.set()
        for th in checkers:
            th.join()
    finally:
        sys.setswitchinterval(old)
    assert errors == []
    gc.collect()
    assert not [c for c in metakit.zerocopy_classes() if c.__name__.startswith("ThreadMade")]


def test_threads_call_same_class_methods():
    @dataclasses.dataclass
    class Shared(ZeroCopy):
        a: object = None
        b: object = None

    objs = [Shared(object(), object()) for _ in range(8)]
    errors = []

    def run(o):
        try:
            for _ in range(2000):
                d = o.asdict_zerocopy()
                assert d["a"] is o.a and d["b"] is o.b
                assert o.astuple_zerocopy() == (o.a, o.b)
        except Exception as e:
            errors.append(repr(e))

    ths = [threading.Thread(target=run, args=(o,)) for o in objs]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    assert errors == []


_SCRIPT = r"""
import dataclasses, gc, os, sys, time
from dataclasses import make_dataclass
import metakit
from metakit import ZeroCopy
zc = sys.argv[1] == "z"
base = (ZeroCopy,) if zc else ()
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
def run(tag, rng):
    for n in rng:
        for r in range(2):
            C = make_dataclass(f"S{n}", [(f"{tag}{r}f{j}", int, dataclasses.field(default=j)) for j in range(n)], bases=base)
            o = C()
            metakit.asdict_zerocopy(o)
            metakit.replace(o)
            if zc:
                o.asdict_zerocopy(); o.astuple_zerocopy()
            del C, o
    gc.collect()
run("w", range(1, 10))
m0 = rss(); t0 = time.perf_counter()
run("a", range(1, 71))
m1 = rss(); t1 = time.perf_counter()
run("b", range(71, 141))
m2 = rss()
n_live = len([c for c in metakit.zerocopy_classes() if c.__name__.startswith("S")])
n_lc = len([k for k in __import__("linecache").cache if k.startswith("<metakit")])
print(m1 - m0, m2 - m1, n_live, n_lc)
"""


def test_memory_bounded_vs_plain_dataclasses():
    # 280 classes of 140 distinct field counts and 280 distinct layouts (past the 64 templates / 256 layouts that the
    # README says are kept): memory growth must track plain dataclasses', and nothing stays alive.
    procs = {k: subprocess.Popen([sys.executable, "-c", _SCRIPT, k], stdout=subprocess.PIPE, text=True) for k in "pz"}
    out = {}
    for kind, proc in procs.items():
        stdout, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        out[kind] = [int(x) for x in stdout.split()]
    p, z = out["p"], out["z"]
    mb = 1 << 20
    assert z[2] == 0, "classes stayed alive"
    assert z[3] <= 2, f"{z[3]} linecache entries stayed"
    assert z[0] <= p[0] * 1.5 + 4 * mb, (p, z)
    assert z[1] <= p[1] * 1.5 + 4 * mb, (p, z)


def test_thousands_of_distinct_classes_nothing_retained_time_linear():
    # DESIGN: "Bounded: creating classes of ever new shapes ... keeps memory bounded and time linear; no cache grows
    # without limit." and linecache entries go away with their classes.
    import time

    gc.collect()
    before_entries = {k for k in linecache.cache.copy() if k.startswith("<metakit")}
    before_classes = len(metakit.zerocopy_classes())
    times = []
    for batch in range(3):
        t0 = time.process_time()
        for i in range(800):
            n = i % 24 + 1
            C = make_dataclass(
                f"Many{batch}_{i}", [(f"b{batch}i{i}f{j}", int, field(default=j)) for j in range(n)], bases=(ZeroCopy,)
            )
            o = C()
            o.asdict_zerocopy()
            o.astuple_zerocopy()
            metakit.replace(o)
            del C, o
            if i % 100 == 99:
                gc.collect()
        gc.collect()
        times.append(time.process_time() - t0)
    after_entries = {k for k in linecache.cache.copy() if k.startswith("<metakit")}
    assert not [k for k in after_entries - before_entries if "Many" in k]
    assert len(metakit.zerocopy_classes()) <= before_classes
    assert times[2] < times[0] * 4 + 0.5, times


def test_deleting_override_on_base_never_gives_subclass_instances_base_fields_meanwhile():
    # DESIGN: "Thread-safe: classes can be created and methods called from many threads"; keys are "exactly the names
    # in dataclasses.fields(type(obj))"; "After del Cls.asdict_zerocopy the class gets its own generated method
    # back, never a base's." While one thread assigns and deletes an override on Q, a call on an instance of the
    # subclass R must return R's fields (from the generated code or through the override), never Q's alone.
    @dataclasses.dataclass
    class P(ZeroCopy):
        a: int = 1

    @dataclasses.dataclass
    class Q(P):
        b: int = 2

    @dataclasses.dataclass
    class R(Q):
        c: int = 3

    def ov(self, skip_fields=None):
        return {**super(Q, self).asdict_zerocopy(skip_fields), "ov": 1}

    def ovt(self):
        return (*super(Q, self).astuple_zerocopy(), "ov")

    stop = threading.Event()
    bad: list = []

    def toggler():
        while not stop.is_set():
            Q.asdict_zerocopy = ov
            Q.astuple_zerocopy = ovt
            del Q.asdict_zerocopy
            del Q.astuple_zerocopy

    def caller():
        r = R()
        while not stop.is_set():
            d = r.asdict_zerocopy()
            t = r.astuple_zerocopy()
            if list(d)[:3] != ["a", "b", "c"] or t[:3] != (1, 2, 3):
                bad.append((d, t))
                stop.set()

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    threads = [threading.Thread(target=toggler), threading.Thread(target=caller)]
    try:
        for th in threads:
            th.start()
        stop.wait(1.5)
    finally:
        stop.set()
        for th in threads:
            th.join()
        sys.setswitchinterval(old)
    assert bad == [], f"R's instance got {bad[0]!r}"
    assert R().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3}
