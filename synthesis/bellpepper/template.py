"""SHA-256 compressions as recorded templates: shape from a few recordings, values natively.

bellperson's compression folds constants, so its constraints depend on which inputs are
constants (and which are ``Not``), not on which variables they are. A ``Template`` is the
compression recorded once for one such pattern (``key``: per input position 0/1 constant, 2 Is,
3 Not; the 256 state bits as 8 UInt32s least significant bit first, then the 512 block bits):
its variable inputs become slots (public inputs 1..slots of a private ConstraintSystem), its
own variables are numbered in allocation order, and every allocation's operation is kept as a
program for ``bits_host.cpp``.

``compress(s, block_bits, state_words)``:
  shape: ``TemplatingCS.instantiate`` (kept compact) or the rows substituted (a plain
    ConstraintSystem), the same constraints bellperson's synthesis makes, in its order;
  values: the program replayed for the whole batch (one row per instance), appended to
    ``s.values`` as one BitBlock, in the template's variable order;
and the output words as Booleans (variables of this instance, or constants). The tests hold
template, replay and ``sha256.compression_direct`` equal.

The values mode needs only a template's ``Program`` (replay program, output refs, slot positions,
variable count): it is saved when the template is recorded, in ``$ZKHIVE_CACHE_DIR/bellpepper``
under the pattern and the gadgets' source digest, so a witness process reads it instead of
recording (~0.5 s of Python a pattern; a 32 GiB partition has ~20 patterns).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from .. import field
from ..builder import ConstraintSystem, LinearCombination
from .core import BitBlock, Synth
from .boolean import OP_AND, OP_CH, OP_MAJ, OP_SUM, OP_XOR, AllocatedBit, Boolean
from .compression import compression_direct
from .uint32 import UInt32

P = field.MODULUS
K_C0, K_C1, K_IS, K_NOT = 0, 1, 2, 3


def kinds_of(bits: Sequence[Boolean]) -> np.ndarray:
    return np.array([b.const if b.const is not None else (K_NOT if b.neg else K_IS) for b in bits],
                    dtype=np.int8)


class Template:
    """One compression recorded for one pattern of input kinds (see the module docstring).
    ``rows``/``names``: the constraints over keys 0 (ONE), 1..slots (slot key - 1), -(j + 1)
    (own variable j); ``outputs`` unused by ``TemplatingCS`` here (outputs may be constants:
    ``out_refs``); ``prog`` the replay program."""

    def __init__(self, key: bytes):
        kinds = np.frombuffer(key, dtype=np.int8)
        if len(kinds) != 768:
            raise ValueError("a compression template takes 768 input kinds")
        self.key = key
        cs = ConstraintSystem(with_values=False)
        s = Synth(cs=cs)
        s.ops = []
        bits = []
        for k in kinds.tolist():
            if k in (K_C0, K_C1):
                bits.append(Boolean.constant(k))
            else:
                bit = AllocatedBit(next(iter(cs.alloc_input().lc().terms)), None)
                bits.append(Boolean(bit, k == K_NOT))
        state = [UInt32(bits[32 * i:32 * i + 32]) for i in range(8)]
        out = compression_direct(s, bits[256:], state)
        self.slot_positions = np.flatnonzero(kinds >= K_IS)
        self.slots = len(self.slot_positions)
        self.num_aux = cs.num_aux
        self.rows = cs._rows
        self.names = cs._names
        self.outputs = np.zeros(0, dtype=np.int64)
        self.out_refs = np.array([self._ref(b) for w in out for b in w.bits], dtype=np.int32)
        self.prog = self._program(s.ops)

    @property
    def num_constraints(self) -> int:
        return len(self.rows)

    def _ref(self, b: Boolean) -> int:
        """index into the replay's values (0, 1, slots, own) * 2 + negated."""
        if b.const is not None:
            return 2 * b.const
        k = b.bit.key
        idx = 2 + (k - 1) if k > 0 else 2 + self.slots + (-k - 1)
        return 2 * idx + int(b.neg)

    def _program(self, ops) -> np.ndarray:
        """The ops as bits_host.cpp's stream, checked: each op writes the next own variable(s)
        and reads only values already computed (the inner loop of recording: kept lean)."""
        ns2 = 2 + self.slots
        prog: list[int] = []
        ext = prog.extend

        def ref(b) -> int:
            if b.const is not None:
                return 2 * b.const
            k = b.bit.key
            return 2 * ((k + 1) if k > 0 else (ns2 - k - 1)) + (1 if b.neg else 0)

        nxt = 0  # the own variable the next op must write
        for op, args, out in ops:
            limit = 2 * (ns2 + nxt)
            if op == OP_SUM:
                if out[0] != -nxt - 1 or out[-1] != -(nxt + len(out)):
                    raise AssertionError("template ops out of allocation order")
                refs = [ref(b) for word in args for b in word]
                ext((OP_SUM, len(args), len(out)))
                nxt += len(out)
            elif op in (OP_XOR, OP_AND, OP_CH, OP_MAJ):
                if out != -nxt - 1:
                    raise AssertionError("template ops out of allocation order")
                refs = [ref(b) for b in args]
                prog.append(op)
                nxt += 1
            else:
                raise AssertionError(f"op {op} has no native replay")
            if max(refs) >= limit:
                raise AssertionError("template op reads a value not yet computed")
            ext(refs)
        if nxt != self.num_aux:
            raise AssertionError("template ops do not cover every own variable")
        return np.array(prog, dtype=np.int32)


_templates: dict[bytes, Template] = {}
_programs: dict[bytes, "Program"] = {}
_templates_lock = threading.Lock()

#: the code a template's program depends on: part of the disk cache's key
_SOURCES = ("boolean.py", "uint32.py", "multieq.py", "compression.py", "sha256.py", "template.py")


@functools.lru_cache(maxsize=1)
def _source_digest() -> str:
    h = hashlib.sha256()
    for name in _SOURCES:
        h.update(name.encode() + b"\0" + (Path(__file__).parent / name).read_bytes())
    return h.hexdigest()[:16]


class Program:
    """What the values mode needs of a template (no constraints): the replay program, the
    output refs, which inputs are slots and how many variables it allocates."""

    __slots__ = ("prog", "out_refs", "slot_positions", "slots", "num_aux")

    def __init__(self, prog, out_refs, slot_positions, num_aux):
        self.prog = np.ascontiguousarray(prog, dtype=np.int32)
        self.out_refs = np.asarray(out_refs, dtype=np.int32)
        self.slot_positions = np.asarray(slot_positions, dtype=np.int64)
        self.slots = len(self.slot_positions)
        self.num_aux = int(num_aux)


def _program_path(key: bytes) -> Path:
    from arith import native
    name = hashlib.sha256(key).hexdigest()[:24]
    return native.cache_dir("bellpepper") / f"sha256-{_source_digest()}-{name}.npz"


def template(key: bytes) -> Template:
    """The full template for a pattern (recorded once per process; its program is saved)."""
    with _templates_lock:
        t = _templates.get(key)
        if t is None:
            t = _templates[key] = Template(key)
            _programs[key] = Program(t.prog, t.out_refs, t.slot_positions, t.num_aux)
            _save_program(key, _programs[key])
        return t


def _save_program(key: bytes, p: Program) -> None:
    import os
    import tempfile
    path = _program_path(key)
    fd, tmp = tempfile.mkstemp(suffix=".npz", dir=path.parent)
    with os.fdopen(fd, "wb") as f:
        np.savez(f, key=np.frombuffer(key, np.int8), prog=p.prog, out_refs=p.out_refs,
                 slot_positions=p.slot_positions, num_aux=np.array(p.num_aux))
    os.replace(tmp, path)  # readers never see a partial file


def program(key: bytes) -> Program:
    """The values mode's view of a pattern's template: from memory, the disk cache
    ($ZKHIVE_CACHE_DIR/bellpepper, keyed by the pattern and the gadgets' source), or recorded."""
    with _templates_lock:
        p = _programs.get(key)
        if p is not None:
            return p
        path = _program_path(key)
        if path.exists():
            try:
                with np.load(path) as d:
                    if d["key"].tobytes() == key:
                        p = _programs[key] = Program(d["prog"], d["out_refs"], d["slot_positions"],
                                                     int(d["num_aux"]))
                        return p
            except (OSError, ValueError, KeyError):
                pass  # a damaged cache entry is recorded again
    template(key)
    return _programs[key]


def kernel() -> ctypes.CDLL:
    """bits_host.cpp, compiled on first use into the host library's cache."""
    from arith import native
    replay = ([ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_int64, ctypes.c_int64,
               ctypes.c_void_p, ctypes.c_void_p], ctypes.c_int)
    return native.load(Path(__file__).with_name("bits_host.cpp"), stem="bellpepper-bits",
                       signatures={"bits_replay": replay, "bits_replay64": replay})


def replay(tmpl: "Template | Program", slot_values: np.ndarray, *, sliced: bool = True) -> np.ndarray:
    """(B, num_aux) uint8: the template's variables for (B, slots) uint8 slot values; ``sliced``:
    the bit-sliced kernel (64 instances a word operation), else one instance at a time."""
    slot_values = np.ascontiguousarray(slot_values, dtype=np.uint8)
    if slot_values.ndim != 2 or slot_values.shape[1] != tmpl.slots:
        raise ValueError(f"replay: slot values of shape {slot_values.shape}, template has {tmpl.slots} slots")
    if np.any(slot_values > 1):
        raise ValueError("replay: a slot value is not a bit")
    b = len(slot_values)
    out = np.empty((b, tmpl.num_aux), dtype=np.uint8)
    lib = kernel()
    fn = lib.bits_replay64 if sliced else lib.bits_replay
    rc = fn(tmpl.prog.ctypes.data, len(tmpl.prog), tmpl.slots, tmpl.num_aux, b,
                              slot_values.ctypes.data, out.ctypes.data)
    if rc != 0:
        raise AssertionError("bits_replay: malformed template program")
    return out


def _substitute(cs: ConstraintSystem, tmpl: Template, slot_keys: list[int]) -> list[int]:
    """The template's rows into a plain ConstraintSystem: own variables allocated here."""
    start = cs.num_aux
    for _ in range(tmpl.num_aux):
        cs.alloc()
    own0 = -start - 1  # key of own variable j: own0 - j

    def sub(side: dict) -> LinearCombination:
        out: dict[int, int] = {}
        for k, c in side.items():
            k2 = 0 if k == 0 else (slot_keys[k - 1] if k > 0 else own0 - (-k - 1))
            out[k2] = (out.get(k2, 0) + c) % P
        return LinearCombination({k: c for k, c in out.items() if c})

    for (a, b, c), name in zip(tmpl.rows, tmpl.names):
        cs.enforce(sub(a), sub(b), sub(c), name)
    return [own0 - j for j in range(tmpl.num_aux)]


def compress(s: Synth, inp: Sequence[Boolean], current: Sequence[UInt32]) -> list[UInt32]:
    """``sha256_compression_function`` through a template (see the module docstring)."""
    if getattr(s, "ops", None) is not None:  # inside another recording: plain gadget code
        return compression_direct(s, inp, current)
    if len(inp) != 512 or len(current) != 8:
        raise ValueError("sha256 compression takes 512 input bits and 8 state words")
    bits = [b for w in current for b in w.bits] + list(inp)
    key = kinds_of(bits).tobytes()
    tmpl = template(key) if s.shape else program(key)
    slot_bits = [bits[i].bit for i in tmpl.slot_positions.tolist()]
    own_keys = None
    if s.shape:
        if hasattr(s.cs, "instantiate"):
            start = len(s.cs._aux)
            s.cs.instantiate(tmpl, [LinearCombination({b.key: 1}) for b in slot_bits])
            own_keys = [-(start + j) - 1 for j in range(tmpl.num_aux)]
        else:
            own_keys = _substitute(s.cs, tmpl, [b.key for b in slot_bits])
    trace = None
    if s.computing:
        sv = np.stack([b.val for b in slot_bits], axis=1) if slot_bits else \
            np.zeros((s.batch, 0), np.uint8)
        trace = replay(tmpl, sv)
        s.values.append(BitBlock(trace))
    outs = []
    ns = tmpl.slots
    for r in tmpl.out_refs.tolist():
        idx, neg = r >> 1, bool(r & 1)
        if idx < 2:
            outs.append(Boolean.constant(idx ^ int(neg)))
            continue
        if idx < 2 + ns:
            bit = slot_bits[idx - 2]
        else:
            j = idx - 2 - ns
            bit = AllocatedBit(own_keys[j] if own_keys is not None else None,
                               trace[:, j] if trace is not None else None)
        outs.append(Boolean(bit, neg))
    return [UInt32(outs[32 * i:32 * i + 32]) for i in range(8)]
