"""A property-based fuzzer of C1 documents (issue 15, part of the fault suite): valid porep-lite
documents, mutated (wrong types, missing and extra fields, huge integers, deep nesting,
bad hex, wrong lengths, non-UTF-8 bytes, truncation, NaN, lone surrogates, huge strings), go
through every input check a C1 meets: the command line's loader (``synthesis.cli.c1_from_bytes``:
bounds, then the schema), the cluster's submit check (``cluster.pipeline.bounds.check_c1``, what the
client and the submit task run on a decoded document) and synthesis of every partition.

Each mutation must end in one line naming what is wrong (a field path, a byte offset) or be
accepted; an accepted one must be harmless: every partition's witness equal to the original's.
Anything else (a traceback of another exception, a multi-line or value-echoing message, an
example over the deadline) fails the test. CI: derandomized, no example database, bounded
examples and a per-example deadline (about 15 s in all on 2 cores).
"""
from __future__ import annotations

import copy
import functools
import json
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, note, settings, strategies as st

pytestmark = pytest.mark.faults

def fuzz(max_examples: int) -> settings:
    return settings(derandomize=True, database=None, deadline=3000, print_blob=True, max_examples=max_examples,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


#: a marker the text-level mutations replace in the serialized document
MARK = "\u2603MARK\u2603"
#: what a one-line error must point at
NAMES_WHAT = re.compile(r"field \S|byte \d|not JSON|a C1 document is|partition \d|over the limit")


@functools.cache
def base(family: str):
    """(circuit, document, the witnesses of every partition) of one valid C1 document."""
    from synthesis.circuits import get_circuit

    from synthesis.porep import SETS, TINY, c1_document, generate

    doc = c1_document(generate(SETS[TINY], b"\x05" * 32), b"\x05" * 32)
    circuit = get_circuit(doc["params"])
    c1 = circuit.parse_c1(doc)
    return circuit, doc, tuple(circuit.synthesize(c1, k) for k in range(circuit.num_partitions()))


def paths(doc, prefix=()):
    yield prefix
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        yield from paths(v, prefix + (k,))


def at(doc, path):
    for p in path:
        doc = doc[p]
    return doc


def replace(doc, path, value):
    if not path:
        return value
    at(doc, path[:-1])[path[-1]] = value
    return doc


# -- mutations: each a strategy of (what, bytes) --------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.text(max_size=12)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3),
    max_leaves=6)


def bad_hex(s: str):
    digits = s[2:] if isinstance(s, str) and s.startswith("0x") else "1"
    return st.sampled_from([
        digits,                                   # no 0x
        "0x", "0X" + digits, "0x" + digits + "g", "0x " + digits, " 0x" + digits,
        "0x" + "f" * 64,                           # not below r
        "0x" + "1" * 65,                           # one digit too many
        "0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001",  # r itself
        "0x" + "\u0661\u0662",                     # Arabic-Indic digits: int(..., 16) takes them
        "-0x1", "0x-1", "0x1_0", "0x" + digits.upper(),
    ])


KINDS = ("type", "drop", "extra", "hex", "int", "length", "deepen", "bigint_text", "deep_text", "non_utf8",
         "truncate", "constant", "surrogate", "huge_string", "bom", "utf16")
#: the mutations that keep a document within the bounds: they reach synthesis
SCHEMA_KINDS = ("type", "drop", "hex", "int", "length")


@st.composite
def mutated(draw, family: str, kinds: tuple[str, ...] = KINDS):
    circuit, doc, _ = base(family)
    doc = copy.deepcopy(doc)
    kind = draw(st.sampled_from(kinds))
    # where the mutation applies: every kind changes the document
    suits = {"drop": lambda p, v: bool(p), "hex": lambda p, v: isinstance(v, str),
             "length": lambda p, v: isinstance(v, list),
             "int": lambda p, v: isinstance(v, int) or (isinstance(v, str) and not p[-1:] == ("params",))}
    fits = suits.get(kind, lambda p, v: True)
    path = draw(st.sampled_from([p for p in paths(doc) if fits(p, at(doc, p))]))
    node = at(doc, path)
    text_sub = None
    if kind == "type":
        doc = replace(doc, path, draw(json_values))
    elif kind == "drop":
        parent = at(doc, path[:-1])
        del parent[path[-1]]
    elif kind == "extra":
        value = draw(json_values)
        if isinstance(node, dict):
            node[draw(st.text(min_size=1, max_size=12))] = value
        elif isinstance(node, list):
            node.append(copy.deepcopy(node[-1]) if node and draw(st.booleans()) else value)
        else:
            doc = replace(doc, path, [node, value])
    elif kind == "hex":
        doc = replace(doc, path, draw(bad_hex(node)))
    elif kind == "int":
        doc = replace(doc, path, draw(st.sampled_from([-1, 1 << 30, 1 << 64, True, 10 ** 39, 10 ** 41,
                                                       10 ** draw(st.integers(42, 4000))])))
    elif kind == "length":
        if node and draw(st.booleans()):
            del node[draw(st.integers(0, len(node) - 1))]
        else:
            node.extend(copy.deepcopy(node[:1]) * draw(st.integers(1, 3)))
    elif kind == "deepen":
        depth = draw(st.integers(1, 40))
        doc = replace(doc, path, json.loads("[" * depth + "0" + "]" * depth))
    elif kind == "bigint_text":
        text_sub = "9" * draw(st.integers(4200, 6000))  # past Python's int(str) limit
    elif kind == "deep_text":
        depth = draw(st.integers(900, 5000))
        text_sub = "[" * depth + "]" * depth
    elif kind == "constant":
        text_sub = draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e999"]))
    elif kind == "surrogate":
        text_sub = draw(st.sampled_from(['"\\ud800"', '"0x\\udfff"', '"\\u0000"']))
    elif kind == "huge_string":
        doc = replace(doc, path, "0x" + "a" * draw(st.integers(300, 200_000)))
    if text_sub is not None:
        doc = replace(doc, path, MARK)
    raw = json.dumps(doc, ensure_ascii=draw(st.booleans())).encode()
    if text_sub is not None:
        raw = raw.replace(json.dumps(MARK).encode(), text_sub.encode(), 1).replace(
            json.dumps(MARK, ensure_ascii=False).encode(), text_sub.encode(), 1)
    if kind == "non_utf8":
        i = draw(st.integers(0, len(raw) - 1))
        raw = raw[:i] + draw(st.sampled_from([b"\xff", b"\x80", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"])) + raw[i + 1:]
    elif kind == "truncate":
        raw = raw[:draw(st.integers(0, len(raw) - 1))]
    elif kind == "bom":
        raw = b"\xef\xbb\xbf" + raw
    elif kind == "utf16":
        raw = raw.decode().encode("utf-16")
    note(f"{kind} at {path!r}: {raw[:200]!r}... ({len(raw)} bytes)")
    return kind, path, raw


def one_line(msg: str) -> str:
    assert "\n" not in msg and "Traceback" not in msg, msg[:500]
    assert len(msg) < 400, f"{len(msg)} characters: {msg[:400]}"
    assert NAMES_WHAT.search(msg), msg
    return msg


def check_everywhere(family: str, kind: str, path, raw: bytes) -> str:
    """Run ``raw`` through every check; returns 'rejected' or 'accepted' (asserting the rest)."""
    from cluster.pipeline.bounds import check_c1
    from cluster.errors import JobError
    from cluster.settings import Settings
    from synthesis.circuits import C1Error
    from synthesis.cli import CommandError, c1_from_bytes

    circuit, _, witnesses = base(family)
    # the cluster's submit check, on what a client or Flower would have decoded
    try:
        decoded = json.loads(raw)
    except (ValueError, RecursionError):
        decoded = None  # Flower answers 400 for these (cluster.pipeline.bounds.bound_flower_requests)
    cluster_error = None
    if decoded is not None:
        try:
            check_c1(Settings(), decoded)
        except JobError as e:
            cluster_error = one_line(str(e))
    try:
        got, c1 = c1_from_bytes(raw, "c1.json")
    except CommandError as e:
        one_line(str(e))
        return "rejected"
    # what the command line's bounds accept, the cluster's accept too (same limits but the size)
    assert cluster_error is None, cluster_error
    assert got is circuit
    for k in range(circuit.num_partitions()):
        try:
            z = circuit.synthesize(c1, k)
        except C1Error as e:
            one_line(str(e))
            return "rejected"
        # accepted: the mutation must not have changed what is proved
        assert np.array_equal(z, witnesses[k]), f"{kind} at {path!r} was accepted with another witness"
    return "accepted"


@fuzz(600)
@given(case=mutated("porep-lite"))
def test_mutated_porep_lite_c1_is_one_line_or_harmless(case):
    event(f"{case[0]}: {check_everywhere('porep-lite', *case)}")


HARMLESS = {
    "reordered": lambda doc: json.dumps(dict(reversed(list(doc.items()))), indent=3),
    "upper-case-hex": lambda doc: re.sub(r'"0x([0-9a-f]+)"', lambda m: f'"0x{m.group(1).upper()}"', json.dumps(doc)),
    # field elements may drop leading zeros (the seed is exactly 32 bytes: it keeps them)
    "leading-zeros-dropped": lambda doc: re.sub(r'(?<!"seed": )"0x0+([0-9a-f])', r'"0x\1', json.dumps(doc)),
}


@pytest.mark.parametrize("what", sorted(HARMLESS))
def test_harmless_mutations_are_accepted_with_the_same_witness(what):
    """For every "accepts" the fuzzer finds, these are the known harmless mutations; the proof of
    one is checked end to end in tests/integration/test_faults_c1_cluster.py."""
    _, doc, _ = base("porep-lite")
    raw = HARMLESS[what](copy.deepcopy(doc)).encode()
    assert raw != json.dumps(doc).encode()
    assert check_everywhere("porep-lite", what, (), raw) == "accepted"


@pytest.mark.parametrize("raw,message", [
    (b'{"params": "porep-lite-4k", \xff}', "c1.json: not UTF-8: byte 28 (0xff)"),
    (b"[" * 3000 + b"]" * 3000, "c1.json: field [0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]: nested deeper "
                                "than 16 levels (limits.depth) at byte 16"),
    (b'{"a": ' * 20 + b"1" + b"}" * 20, "c1.json: field a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a: nested deeper than 16 levels"),
    (b'{"version": ' + b"7" * 5000 + b"}", "c1.json: field version: an integer of 5000 digits, over the limit of 40"),
    (b'{"partitions": [{"x": NaN}]}', "c1.json: field partitions[0].x: NaN is not a JSON number"),
    (b'{"params": "' + b"p" * 100_000 + b'"}', "c1.json: field params: a string of 100000 bytes, over the limit of 256"),
    (b'{"params": "porep-lite-4k"', "c1.json: not JSON (line 1, column 27"),
])
def test_each_input_class_has_its_one_line(raw, message):
    from synthesis.cli import CommandError, c1_from_bytes

    with pytest.raises(CommandError) as e:
        c1_from_bytes(raw, "c1.json")
    assert str(e.value).startswith(message) and "\n" not in str(e.value) and len(str(e.value)) < 300, str(e.value)
