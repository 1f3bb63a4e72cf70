"""Each input bound refuses one past its limit and accepts its limit, through every entry point
that applies it (synthesis.limits.loads / read / check; the cluster's check_c1 and
check_canonical_size): a bound that is removed or off by one fails here. Errors are one line
naming the field, the size and the setting."""
from __future__ import annotations

import json

import pytest

from cluster.errors import JobError
from cluster.pipeline.bounds import check_c1, check_canonical_size
from cluster.settings import LimitSettings, Settings
from synthesis.limits import InputError, Limits, check, loads, read

SMALL = Limits(document_bytes=200, array_items=5, object_keys=4)


def _settings(**limits) -> Settings:
    return Settings(limits=LimitSettings(**limits))


def test_array_items():
    check({"a": [0] * 5}, SMALL)
    assert loads(json.dumps({"a": [0] * 5}), SMALL) == {"a": [0] * 5}
    msg = r"^field a: an array of 6 items, over the limit of 5 \(limits\.array_items\)$"
    with pytest.raises(InputError, match=msg) as e:
        check({"a": [0] * 6}, SMALL)
    assert e.value.field == "a"
    with pytest.raises(InputError, match=msg):
        loads(json.dumps({"a": [0] * 6}), SMALL)
    with pytest.raises(InputError, match=r"^field b\[1\]: an array of 6 items"):
        check({"b": [[], [1] * 6]}, SMALL)  # nested, named by its path
    with pytest.raises(JobError, match=msg):
        check_c1(_settings(array_items=5), {"a": [0] * 6})
    check_c1(_settings(array_items=5), {"a": [0] * 5})


def test_object_keys():
    four = {f"k{i}": i for i in range(4)}
    check(four, SMALL)
    with pytest.raises(InputError, match=r"^field \(document\): an object of 5 keys, over the limit of 4 "
                                         r"\(limits\.object_keys\)$"):
        check(dict(four, k4=4), SMALL)
    with pytest.raises(InputError, match=r"^field x: an object of 5 keys, over the limit of 4"):
        loads(json.dumps({"x": dict(four, k4=4)}), SMALL)
    with pytest.raises(JobError, match=r"^field x: an object of 5 keys.*\(limits\.object_keys\)$"):
        check_c1(_settings(object_keys=4), {"x": dict(four, k4=4)})
    check_c1(_settings(object_keys=4), {"x": four})


def _doc_of(n: int) -> str:
    """A JSON document of exactly n bytes (n >= 10): trailing spaces, which check()'s estimate
    of a decoded document does not see, so only the text's own bound can refuse it."""
    doc = '{"s": "x"}' + " " * (n - 10)
    assert len(doc) == n
    return doc


def test_document_bytes_of_text_and_files(tmp_path):
    limits = Limits(document_bytes=200, string_bytes=1000)
    assert loads(_doc_of(200), limits)["s"] == "x"
    with pytest.raises(InputError, match=r"^201 bytes, over the limit of 200 \(limits\.c1_max_bytes\)$"):
        loads(_doc_of(201), limits)
    with pytest.raises(InputError, match=r"^201 bytes, over the limit of 200 \(api\.max\)$"):
        loads(_doc_of(201).encode(), limits, setting="api.max")
    path = tmp_path / "c1.json"
    path.write_text(_doc_of(200))
    assert read(path, limits)["s"] == "x"
    path.write_text(_doc_of(201))
    with pytest.raises(InputError, match=r"^201 bytes, over the limit of 200 \(limits\.c1_max_bytes\)$"):
        read(path, limits)


def test_document_bytes_of_a_decoded_document():
    """check() estimates a decoded document's size (a client's dict never was text): many small
    strings, each within string_bytes, add up past document_bytes."""
    limits = Limits(document_bytes=200, string_bytes=1000, array_items=1000)
    check(["x" * 10] * 10, limits)  # 10 x 13 + 2 = 132
    with pytest.raises(InputError, match=r"^over 200 bytes \(limits\.c1_max_bytes\) by field \[15\]$"):
        check(["x" * 10] * 20, limits)
    with pytest.raises(JobError, match=r"^over 200 bytes \(limits\.c1_max_bytes\) by field a\[\d+\]$"):
        check_c1(_settings(c1_max_bytes=200, string_bytes=1000), {"a": ["x" * 10] * 20})


def test_flat_integer_arrays_count_at_their_text_width():
    """serde's byte arrays (10 M small integers in a 32 GiB Filecoin C1, 36 MB of text) are
    counted at their widest item's width plus a comma: an upper bound of the compact text, near
    enough that a real C1 fits the bound its text fits (a flat 12 bytes an item refused the
    H200's 32 GiB job at 124 MB against 64 MiB)."""
    doc = {"d": [[i * 8 % 256 for i in range(32)] for _ in range(1000)], "n": [-5, 123456]}
    text = len(json.dumps(doc, separators=(",", ":")))
    check(doc, Limits(document_bytes=text * 6 // 5, array_items=2000))  # within 20% of the text
    with pytest.raises(InputError, match=r"^over \d+ bytes \(limits\.c1_max_bytes\) by field d\[\d+\]$"):
        check(doc, Limits(document_bytes=text - 1, array_items=2000))  # never under the text
    # an integer alone counts its digits, not 12
    check({"n": 10 ** 30}, Limits(document_bytes=2 + 5 + 32, int_digits=40))
    with pytest.raises(InputError, match=r"by field n$"):
        check({"n": 10 ** 30}, Limits(document_bytes=30, int_digits=40))


def test_c1_max_bytes_bounds_the_canonical_text():
    s = _settings(c1_max_bytes=100)
    check_canonical_size(s, b"x" * 100)
    with pytest.raises(JobError, match=r"^the C1 input is 101 bytes as JSON, over the limit of 100 "
                                       r"\(limits\.c1_max_bytes\)$"):
        check_canonical_size(s, b"x" * 101)
    # and it is the document bound check_c1 applies
    assert s.limits.limits().document_bytes == 100
    with pytest.raises(JobError, match=r"\(limits\.c1_max_bytes\)"):
        check_c1(s, {"a": ["x" * 10] * 20})
    check_c1(_settings(c1_max_bytes=1000), {"a": ["x" * 10] * 20})


def test_c1_documents_that_are_not_objects_are_refused():
    with pytest.raises(JobError, match=r"^a C1 document is a JSON object, not list$"):
        check_c1(Settings(), [])


def test_read_checks_a_file_size_before_reading_it(tmp_path, monkeypatch):
    """A file over the bound is refused from its size alone: a 1 TiB (sparse) file is never
    read into memory."""
    import pathlib

    path = tmp_path / "huge.json"
    with open(path, "wb") as f:
        f.truncate(1 << 40)

    def refuse(self):
        raise AssertionError(f"{self} was read before its size was checked")
    monkeypatch.setattr(pathlib.Path, "read_bytes", refuse)
    with pytest.raises(InputError, match=rf"^{1 << 40} bytes, over the limit of 200 \(limits\.c1_max_bytes\)$"):
        read(path, Limits(document_bytes=200))


def test_text_that_is_not_utf8_not_json_or_nested_past_the_decoder_is_one_line():
    """loads' three decoding errors, each one InputError line with its byte offset (not a
    UnicodeDecodeError, a JSONDecodeError or a RecursionError from deep in json)."""
    with pytest.raises(InputError, match=r"^not UTF-8: byte 7 \(0xff\) is not valid UTF-8") as e:
        loads(b'{"a": "\xff"}')
    assert e.value.offset == 7
    with pytest.raises(InputError, match=r"^not JSON \(line 1, column 7: Expecting value\)$") as e:
        loads('{"a": }')
    assert e.value.offset == 6
    deep = "[" * 100_000 + "]" * 100_000  # far past Python's recursion limit: json raises RecursionError
    with pytest.raises(InputError, match=r"nested deeper than 16 levels \(limits\.depth\) at byte 16$") as e:
        loads(deep)
    assert e.value.offset == 16


def test_a_document_nested_past_the_bound_never_reaches_the_decoder(monkeypatch):
    """Depth is judged before json decodes (its C scanner recursing ~1000 deep overflowed the C
    stack in a full test run): the decoder is not called for a text nested past limits.depth,
    and brackets inside strings, escaped quotes included, do not count."""
    import synthesis.limits as limits_mod

    def no_decoder(*a, **k):
        raise AssertionError("json decoded a text nested past limits.depth")

    deep = "[" * 5_000 + "]" * 5_000
    with monkeypatch.context() as m:
        m.setattr(limits_mod.json, "loads", no_decoder)
        with pytest.raises(InputError, match=r"nested deeper than 16 levels \(limits\.depth\) at byte 16$"):
            loads(deep)
    inside = '{"a": "' + "[" * 100 + '", "b": "\\"' + "{" * 100 + '"}'
    assert loads(inside) == {"a": "[" * 100, "b": '"' + "{" * 100}
    assert loads("[" * 16 + "]" * 16) == eval("[" * 16 + "]" * 16)  # exactly the bound: taken
