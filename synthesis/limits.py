"""Bounds on a JSON document from outside (a C1 input): its size, nesting, strings and numbers.

Every way a C1 document comes in goes through here before it is parsed further or stored: a file
(``zkhive submit|prove|verify|synth``: ``loads``), a dict (``cluster.client.submit``, the
``zkhive.submit`` task's argument as Flower sent it: ``check``), Flower's request body (``loads``).
A violation is one ``InputError`` line naming the field as a JSON path
(``partitions[3].challenges[0].node``) and its size, never a traceback and never more than a
few dozen characters of the value (``clip``).

Defaults are derived from the largest real C1 document, sdr-32g's (10 partitions x 18
challenges, 16.4 MB as ``zkhive sector c1`` writes it, nesting depth 9, longest string 66
characters, longest array 30 items, at most 10 keys an object, integers below 2^30): each bound
is 2-4x what that document needs. porep-lite-4m/16m's synthetic documents (35/140 MB) are
larger than the document bound: raise ``limits.c1_max_bytes`` to submit those to a cluster.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

#: Python refuses int(str) beyond this many digits (sys.get_int_max_str_digits); our bound is far
#: below it, so the ValueError of int() is never reached.
_PY_INT_DIGITS = 4300


class InputError(ValueError):
    """A document outside the bounds, or not JSON: one line, ``field`` the JSON path ('' for the
    document itself), ``offset`` the byte offset when the problem is in the raw bytes."""

    def __init__(self, message: str, *, field: str | None = None, offset: int | None = None):
        self.field, self.offset = field, offset
        where = f"field {field}: " if field else ""
        super().__init__(where + message)


class _TooDeep(InputError):
    """``check``'s depth error: ``loads``, which has the text, adds the byte offset."""


@dataclass(frozen=True)
class Limits:
    #: the whole document as JSON text (sdr-32g's: 16.4 MB)
    document_bytes: int = 64 << 20
    #: containers inside containers (sdr-32g: 9, root object to a TreeC sibling list)
    depth: int = 16
    #: one string value, UTF-8 bytes (a field element is 66 characters)
    string_bytes: int = 256
    #: one object key (the longest C1 key is 11 characters)
    key_bytes: int = 64
    #: items of one array (sdr-32g: 30 levels of a TreeD path; porep-lite-16m: 895 challenges)
    array_items: int = 4096
    #: keys of one object (a C1 document's top level: 10)
    object_keys: int = 64
    #: decimal digits of one integer (a node index has at most 10)
    int_digits: int = 40


DEFAULT = Limits()


def clip(value: Any, n: int = 40) -> str:
    """``repr(value)`` cut to about ``n`` characters, with the full length said: an error may
    name a value, never echo a 50 MB one."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"<an integer of about {_digits(value)} digits>"
    if isinstance(value, (str, bytes)) and len(value) > n:
        return f"{value[:n]!r}... ({len(value)} {'characters' if isinstance(value, str) else 'bytes'})"
    text = repr(value) if not isinstance(value, (list, dict, tuple)) else \
        f"<{type(value).__name__} of {len(value)} items>"
    return text if len(text) <= n + 10 else text[:n] + "..."


def json_path(parts) -> str:
    """``("partitions", 3, "node")`` -> ``partitions[3].node``; each key clipped, and a path of
    more than 160 characters shortened in its middle."""
    pieces = []
    for part in parts:
        if isinstance(part, int):
            pieces.append(f"[{part}]")
        else:
            name = part if len(part) <= 40 else f"{part[:24]}...({len(part)} chars)"
            pieces.append(f".{name}")
    if sum(map(len, pieces)) > 160:
        pieces = pieces[:3] + [f"...({len(pieces) - 6} levels)..."] + pieces[-3:]
    return "".join(pieces).removeprefix(".")


def _where(path: tuple) -> str:
    return json_path(path) or "(document)"


def _digits(x: int) -> int:
    return max(1, math.ceil(abs(x).bit_length() * math.log10(2)))


class _Literal:
    """A number the decoder did not convert (too many digits, not finite): ``check`` reports it
    with its path."""

    def __init__(self, text: str, why: str):
        self.text, self.why = text, why

    def __repr__(self) -> str:
        return clip(self.text)


def _parse_int(limits: Limits):
    def parse(text: str):
        digits = len(text) - (text[0] == "-")
        if digits > limits.int_digits:
            return _Literal(text, f"an integer of {digits} digits, over the limit of {limits.int_digits} "
                                  "(limits.int_digits)")
        return int(text)
    return parse


def _parse_float(limits: Limits):
    def parse(text: str):
        if len(text) > limits.int_digits + 16:
            return _Literal(text, f"a number of {len(text)} characters, over the limit of "
                                  f"{limits.int_digits + 16} (limits.int_digits + 16)")
        x = float(text)
        return x if math.isfinite(x) else _Literal(text, f"the number {clip(text)} is not finite")
    return parse


def _parse_constant(text: str):
    return _Literal(text, f"{text} is not a JSON number")


_DIGITS_TO_0 = str.maketrans("123456789", "000000000")


def loads(data: bytes | str, limits: Limits = DEFAULT, *, setting: str = "limits.c1_max_bytes") -> Any:
    """Decode a JSON document within ``limits``; InputError (one line) for anything else: over the
    size, not UTF-8 (the byte offset), not JSON (line and column), nested too deep (the depth and
    path), an integer with too many digits, a string too long (each with the field's path).
    ``setting`` names the size bound in the message (the cluster's settings key)."""
    if len(data) > limits.document_bytes:
        raise InputError(f"{len(data)} bytes, over the limit of {limits.document_bytes} ({setting})")
    if isinstance(data, (bytes, bytearray)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"not UTF-8: byte {e.start} (0x{data[e.start]:02x}) "
                             f"is not valid UTF-8 ({e.reason})", offset=e.start) from None
    else:
        text = data
    if _deeper_than(text, limits.depth):
        # refused before the decoder recurses: json's C scanner recursing ~1000 levels overflowed
        # the C stack in a test run (a segfault, not a RecursionError), so depth is never left to it
        raise _too_deep_in_text(text, limits)
    try:
        # the digit bound on integers costs a Python call per integer; when no run of digits in
        # the text is that long (a scan at C speed), the decoder's own int() is as safe
        long_int = "0" * (limits.int_digits + 1) in text.translate(_DIGITS_TO_0)
        doc = json.loads(text, parse_int=_parse_int(limits) if long_int else None,
                         parse_float=_parse_float(limits), parse_constant=_parse_constant)
    except json.JSONDecodeError as e:
        raise InputError(f"not JSON (line {e.lineno}, column {e.colno}: {e.msg})", offset=e.pos) from None
    except RecursionError:
        # deeper than Python's decoder recurses (~1000): find where it passed our bound
        raise _too_deep_in_text(text, limits) from None
    try:
        check(doc, limits, setting=setting)
    except _TooDeep:
        # the same error, with its byte offset, whether or not the decoder recursed that deep
        # (that depends on the process's recursion limit)
        raise _too_deep_in_text(text, limits) from None
    return doc


def read(path, limits: Limits = DEFAULT, *, setting: str = "limits.c1_max_bytes") -> Any:
    """``loads`` of a file, its size checked before it is read. OSError is the caller's."""
    from pathlib import Path

    p = Path(path)
    size = p.stat().st_size
    if size > limits.document_bytes:
        raise InputError(f"{size} bytes, over the limit of {limits.document_bytes} ({setting})")
    return loads(p.read_bytes(), limits, setting=setting)


#: a JSON string, escapes included (the unrolled form: C speed on long strings)
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')


def _deeper_than(text: str, depth: int) -> bool:
    """Whether the text's brackets, outside strings, nest deeper than ``depth`` (a scan at C
    speed: the strings removed by one regex, the brackets' running sum by numpy)."""
    import numpy as np

    if text.count("[") + text.count("{") <= depth:
        return False
    bare = _STRING.sub("", text).encode("utf-8", "replace")
    a = np.frombuffer(bare, dtype=np.uint8)
    at = np.flatnonzero((a == 0x5B) | (a == 0x7B) | (a == 0x5D) | (a == 0x7D))
    if len(at) == 0:
        return False
    steps = np.where((a[at] == 0x5B) | (a[at] == 0x7B), 1, -1).astype(np.int32)
    return int(np.cumsum(steps).max()) > depth


def _too_deep_in_text(text: str, limits: Limits) -> InputError:
    """The error for a text nested deeper than ``limits.depth``, with the path of the first
    container beyond it (scans only up to there)."""
    import re

    token = re.compile(r'"(?:[^"\\]|\\.)*"\s*:?|[\[\]{},]')
    stack: list[list] = []  # [kind, index or key]
    for m in token.finditer(text):
        tok = m.group()
        if tok in "[{":
            if stack and stack[-1][0] == "[" and stack[-1][1] is None:
                stack[-1][1] = 0
            if len(stack) >= limits.depth:
                path = tuple(p for _, p in stack if p is not None)
                return InputError(f"nested deeper than {limits.depth} levels (limits.depth) at byte "
                                  f"{m.start()}", field=_where(path), offset=m.start())
            stack.append([tok, None])
        elif tok in "]}":
            if stack:
                stack.pop()
        elif tok == ",":
            if stack and stack[-1][0] == "[":
                stack[-1][1] = (stack[-1][1] or 0) + 1
        elif tok.endswith(":") and stack and stack[-1][0] == "{":
            stack[-1][1] = json.loads(tok[:-1].rstrip()) if len(tok) < 200 else tok[1:40]
        elif stack and stack[-1][0] == "[" and stack[-1][1] is None:
            stack[-1][1] = 0
    return InputError(f"nested deeper than the decoder allows (more than {limits.depth} levels, limits.depth)")


def check(doc: Any, limits: Limits = DEFAULT, *, setting: str = "limits.c1_max_bytes") -> None:
    """Check a decoded document (from ``json.loads``, a client's dict, a task's argument) against
    ``limits`` without recursion; InputError names the first field outside them. Also refuses
    what is not JSON data (a Python object, a non-string key, a lone surrogate)."""
    size = 0
    stack: list[tuple[Any, tuple, int]] = [(doc, (), 1)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > limits.depth:
                raise _TooDeep(f"nested deeper than {limits.depth} levels (limits.depth)",
                               field=_where(path))
            if isinstance(value, dict):
                if len(value) > limits.object_keys:
                    raise InputError(f"an object of {len(value)} keys, over the limit of "
                                     f"{limits.object_keys} (limits.object_keys)", field=_where(path))
                for key, item in value.items():
                    if not isinstance(key, str):
                        raise InputError(f"key {clip(key)} is not a string", field=_where(path))
                    _string(key, path, limits.key_bytes, "key", "limits.key_bytes")
                    size += len(key) + 4
                    stack.append((item, path + (key,), depth + 1))
            else:
                if len(value) > limits.array_items:
                    raise InputError(f"an array of {len(value)} items, over the limit of "
                                     f"{limits.array_items} (limits.array_items)", field=_where(path))
                width = _small_ints(value, limits) if value else 0
                if width:
                    # a flat array of in-bound integers (serde's [u8; 32] domains: 10M of them in a
                    # 32 GiB Filecoin C1) costs one pass, not a stack entry an item; counted at the
                    # widest item's width and a comma each (a flat 12 bytes an item put the 36 MB
                    # text of a 32 GiB C1 at 124 MB, over the 64 MiB bound: the H200 run, stop 23)
                    size += width * len(value)
                else:
                    for i in range(len(value) - 1, -1, -1):
                        stack.append((value[i], path + (i,), depth + 1))
            size += 2
        elif isinstance(value, str):
            size += _string(value, path, limits.string_bytes, "string", "limits.string_bytes") + 3
        elif isinstance(value, bool) or value is None:
            size += 5
        elif isinstance(value, int):
            if value.bit_length() > limits.int_digits * 3.33 or len(str(value)) > limits.int_digits:
                raise InputError(f"an integer of {_digits(value)} digits, over the limit of "
                                 f"{limits.int_digits} (limits.int_digits)", field=_where(path))
            size += len(str(value)) + 1
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise InputError(f"the number {value} is not finite", field=_where(path))
            size += 24
        elif isinstance(value, _Literal):
            raise InputError(value.why, field=_where(path))
        else:
            raise InputError(f"a {type(value).__name__} is not a JSON value", field=_where(path))
        if size > limits.document_bytes:
            raise InputError(f"over {limits.document_bytes} bytes ({setting}) by field {json_path(path)}")


def _small_ints(items: list, limits: Limits) -> int:
    """When every item is a plain int within ``limits.int_digits``: the bytes the widest one takes
    in JSON text with its comma (an upper bound for each); else 0 (the caller walks them one by
    one and reports the first bad one with its path)."""
    if not all(type(x) is int for x in items):
        return 0
    bound = 10 ** limits.int_digits
    lo, hi = min(items), max(items)
    if not (-bound < lo and hi < bound):
        return 0
    return max(len(str(lo)), len(str(hi))) + 1


def _string(s: str, path: tuple, bound: int, what: str, setting: str) -> int:
    """The UTF-8 size of ``s``; InputError when over ``bound`` or not encodable (a lone surrogate)."""
    if s.isascii():
        n = len(s)
    else:
        try:
            n = len(s.encode("utf-8"))
        except UnicodeEncodeError as e:
            raise InputError(f"{what} has a lone surrogate at character {e.start}",
                             field=_where(path)) from None
    if n > bound:
        raise InputError(f"a {what} of {n} bytes, over the limit of {bound} ({setting})",
                         field=_where(path if what == "string" else path + (s,)))
    return n


def schema_message(err: dict) -> str:
    """One of pydantic's error dicts (``ValidationError.errors()[i]``) in our one-line wording:
    what is wrong with the value, never pydantic's class names or its documentation URL."""
    kind, ctx, value = err.get("type", ""), err.get("ctx") or {}, err.get("input")
    got = type(value).__name__
    if kind == "missing":
        return "is missing"
    if kind == "extra_forbidden":
        return "is not a field of this document"
    if kind == "string_pattern_mismatch":
        return f"{clip(value)} does not match {ctx.get('pattern')}"
    if kind in ("string_type", "str_type"):
        return f"must be a string, not {got}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"must be an integer, not {clip(value)}"
    if kind in ("list_type", "tuple_type"):
        return f"must be a list, not {got}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"must be an object, not {got}"
    if kind in ("bool_type", "bool_parsing"):
        return f"must be true or false, not {clip(value)}"
    if kind == "too_short":
        return f"has {ctx.get('actual_length')} items, at least {ctx.get('min_length')} expected"
    if kind == "too_long":
        return f"has {ctx.get('actual_length')} items, at most {ctx.get('max_length')} allowed"
    if kind == "string_too_short":
        return f"is shorter than {ctx.get('min_length')} characters"
    if kind == "string_too_long":
        return f"is longer than {ctx.get('max_length')} characters"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        op = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[kind]
        bound = next(iter(ctx.values()), "?")
        # a number, also one given as text (an environment variable), reads as the number
        shown = value if isinstance(value, (int, float)) or (isinstance(value, str) and len(value) <= 40) else clip(value)
        return f"{shown} is not {op} {bound}"
    if kind == "literal_error":
        return f"{clip(value)} is not one of {ctx.get('expected')}"
    if kind == "value_error":  # our own validators' messages, without pydantic's "Value error, "
        return str(ctx.get("error") or err.get("msg", "")).removeprefix("Value error, ")
    return str(err.get("msg", kind)).splitlines()[0]


def validation_line(e) -> tuple[tuple, str]:
    """(location, one line) of a pydantic ValidationError: its first error, and how many more."""
    err = e.errors()[0]
    more = f" (and {e.error_count() - 1} more errors)" if e.error_count() > 1 else ""
    return tuple(err["loc"]), schema_message(err) + more
