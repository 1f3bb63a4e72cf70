"""Groth16 parameter files as bellperson writes them (Filecoin's ``.params`` and ``.vk``).

bellperson src/groth16/{verifying_key.rs, params.rs}: every integer big-endian, every point
uncompressed in the ZCash BLS12-381 encoding (G1 96 bytes: x || y; G2 192 bytes:
x.c1 || x.c0 || y.c1 || y.c0; each coordinate 48 bytes big-endian; the three top bits of the
first byte are flags: compressed (must be 0 here), infinity, sort (must be 0)):

    .vk      alpha_g1, beta_g1, beta_g2, gamma_g2, delta_g1, delta_g2,
             u32 len, ic[len]                    (G1: the public-input terms, ONE first)
    .params  the .vk bytes, then five sections, each u32 len and len points:
             h (G1: tau^i Z(tau) / delta, i < domain - 1), l (G1: one a auxiliary variable),
             a (G1), b_g1 (G1), b_g2 (G2)

bellperson's generator.rs drops the points at infinity from a, b_g1 and b_g2: the A query
holds every input (the input rows x_i * 0 = 0 put each one in A) and the auxiliary variables
that appear in A; the B queries the variables, inputs included, that appear in B. Its prover
(prover/mod.rs, lc.rs ``eval_with_trackers``) counts exactly the variables with a nonzero
coefficient in A (aux) and B (inputs, aux) and walks the query in that order. ``densities``
computes those sets from our R1CS; reading a file expands each query to one point a variable
(the identity where the density omits it), the layout our backends prove from.

Checks, each error naming the section and the byte offset: a regular file (a FIFO, device or
directory refused at once: keys.open_regular), the lengths against the circuit as each is read
(IC = inputs, h = domain - 1, l = auxiliary variables, a and b = the densities: a wrong length
is named in its own section) and against the file size, the flags (no point at infinity:
bellperson refuses them too; no section may hold the identity), no zero-filled point (our
layout's identity), coordinates below p, every point on the curve (on the host:
gpu/native/points_host.cpp; on the device as it is uploaded: gpu/cuda/msm.py ``load_bases``),
with ``points="full"`` (``check_file``'s default: ``zkhive keys check`` and ``import``) every
point in the prime-order subgroup too (host: arkworks' ``is_in_subgroup``, ~55 us a G1 point,
~100 us a G2 point here, or a batch test given to ``set_subgroup_check``; device:
gpu/kernels/subgroup.cu, [r] P == O; Filecoin itself maps its files unchecked and trusts the
digest), the verifying key's six single points always in the subgroup and its
beta_g1/beta_g2 and delta_g1/delta_g2 pairs against each other (two pairings), and on request
the file's digest as paramfetch computes it: BLAKE2b-512 of the whole file, the first 32 hex
digits (filecoin-proofs src/param.rs ``get_digest_for_file_within_cache``).
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import threading
from dataclasses import dataclass, field as dc_field
from pathlib import Path
from typing import BinaryIO

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from .compress import FQ_MODULUS
from .errors import KeyFormatError
from .keys import ProvingKey, VerifyingKey, open_regular
from .points import PointArray

G1_UNC, G2_UNC = 96, 192
WIDTH = {1: G1_UNC, 2: G2_UNC}
POINT = {1: G1Point, 2: G2Point}
#: the .vk's fixed part: six points, then IC's length at this offset
VK_FIXED = (("alpha_g1", 1), ("beta_g1", 1), ("beta_g2", 2), ("gamma_g2", 2), ("delta_g1", 1),
            ("delta_g2", 2))
FIXED_NAMES = frozenset(name for name, _ in VK_FIXED)
IC_LEN_AT = sum(WIDTH[k] for _, k in VK_FIXED)  # 864
QUERIES = (("h", 1), ("l", 1), ("a", 1), ("b_g1", 1), ("b_g2", 2))
#: our ProvingKey's name for each bellperson query
OURS = {"h": "h_query", "l": "l_query", "a": "a_query", "b_g1": "b_g1_query", "b_g2": "b_g2_query"}
CHUNK = 1 << 16  # points a read/convert step (G2: 12 MiB)
_P_LIMBS = np.frombuffer(FQ_MODULUS.to_bytes(48, "little"), dtype="<u4")
POINT_CHECKS = ("none", "curve", "full")
#: a point whose 96 | 192 bytes are all zero: (0, 0), no flag (bellperson's identity is 0x40
#: then zeros, refused as the point at infinity)
ZERO_FILLED = "every byte zero (a zero-filled point: (0, 0) is not on the {g} curve)"


# --- the layout ----------------------------------------------------------------------------

@dataclass
class Section:
    name: str
    kind: int          # 1 G1, 2 G2
    count: int
    start: int         # byte offset of the first point (after the length, where there is one)

    @property
    def width(self) -> int:
        return WIDTH[self.kind]

    @property
    def end(self) -> int:
        return self.start + self.count * self.width

    def offset(self, i: int) -> int:
        return self.start + i * self.width


@dataclass
class Layout:
    """Where each section of a .vk or .params file lies (read from its length fields only)."""
    path: Path
    size: int
    sections: dict[str, Section] = dc_field(default_factory=dict)

    @property
    def is_params(self) -> bool:
        return "h" in self.sections


def _u32(f: BinaryIO, path, at: int, what: str, size: int) -> int:
    if at + 4 > size:
        raise KeyFormatError(f"{path}: {what}: the length field at byte offset {at} lies past the "
                             f"end of the file ({size} bytes): truncated")
    f.seek(at)
    return int.from_bytes(f.read(4), "big")


def scan(path, *, params: bool | None = None, want: dict[str, tuple[int, str]] | None = None) -> Layout:
    """The layout of a .vk (``params=False``) or .params file (True; None: by the extension),
    checked against the file's size: a length that runs past the end, or bytes left after the
    last section, are refused naming the section and offset. ``want``: section -> (count, why),
    the circuit's lengths (``Shape.want_why``), each compared as its length field is read, so a
    wrong length is named in its own section, not in the next one it throws off."""
    path = Path(path)
    if params is None:
        params = path.suffix != ".vk"
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        lay = Layout(path, size)
        at = 0
        for name, kind in VK_FIXED:
            lay.sections[name] = Section(name, kind, 1, at)
            at += WIDTH[kind]
        if at > size:
            raise KeyFormatError(f"{path}: {size} bytes is too short for a verifying key "
                                 f"({IC_LEN_AT + 4} bytes before the IC points)")
        n = _u32(f, path, at, "ic", size)
        _expect(path, want, "ic", n, at)
        sec = Section("ic", 1, n, at + 4)
        lay.sections["ic"] = sec
        at = sec.end
        for name, kind in (QUERIES if params else ()):
            n = _u32(f, path, at, name, size)
            _expect(path, want, name, n, at)
            sec = Section(name, kind, n, at + 4)
            lay.sections[name] = sec
            if sec.end > size:
                raise KeyFormatError(f"{path}: section {name}: its length field at byte offset {at} "
                                     f"says {n} points ({n * sec.width} bytes from offset {sec.start}), "
                                     f"but the file ends at {size}: truncated or a wrong length")
            at = sec.end
        if at > size:
            last = list(lay.sections.values())[-1]
            raise KeyFormatError(f"{path}: section {last.name}: {last.count} points from byte offset "
                                 f"{last.start} run past the end of the file ({size} bytes)")
        if at != size:
            last = list(lay.sections.values())[-1]
            raise KeyFormatError(f"{path}: {size - at} bytes after the last section ({last.name}, "
                                 f"ending at byte offset {at}): not a bellperson "
                                 f"{'parameter' if params else 'verifying key'} file, or padded")
    return lay


def _expect(path, want, name: str, n: int, at: int) -> None:
    if want is not None and name in want and n != want[name][0]:
        need, why = want[name]
        raise KeyFormatError(f"{path}: section {name}: the length field at byte offset {at} says "
                             f"{n} points, the circuit needs {need} ({why})")


# --- point encodings -----------------------------------------------------------------------

def _fail(lay_or_path, sec: Section, i: int, what: str):
    path = lay_or_path.path if isinstance(lay_or_path, Layout) else lay_or_path
    raise KeyFormatError(f"{path}: section {sec.name}, point {i} at byte offset {sec.offset(i)}: {what}")


def _below_p(limbs: np.ndarray) -> np.ndarray:
    """Rows of 12 little-endian u32 limbs that are < p."""
    lt = np.zeros(len(limbs), dtype=bool)
    undecided = np.ones(len(limbs), dtype=bool)
    for i in reversed(range(12)):
        col = limbs[:, i]
        lt |= undecided & (col < _P_LIMBS[i])
        undecided &= col == _P_LIMBS[i]
    return lt


def from_uncompressed(buf: np.ndarray, kind: int, *, where=None, first: int = 0,
                      range_check: bool = True) -> np.ndarray:
    """(n, 96 | 192) ZCash uncompressed bytes -> (n, 96 | 192) our xy little-endian layout
    (gpu/groth16/points.py). ``where``: (layout, section) for errors; refuses flags, a
    zero-filled point (always: our layout would take it for the identity) and, with
    ``range_check``, coordinates >= p (not the curve equation: ``first_bad``; the device's
    ``load_bases`` checks the range itself)."""
    n = len(buf)
    flags = buf[:, 0] >> 5          # the top three bits: compressed 4, infinity 2, sort 1
    bad = np.flatnonzero(flags)
    if len(bad):
        i = int(bad[0])
        f = int(flags[i])
        fixed = where is not None and where[1].name in FIXED_NAMES
        what = ("the compressed flag is set in an uncompressed point" if f & 4 else
                ("the point at infinity (a Groth16 key's alpha, beta, gamma, delta never are)" if fixed
                 else "the point at infinity (bellperson's reader refuses it in IC and the queries)")
                if f & 2 else "the sort flag is set in an uncompressed point")
        if where is None:
            raise KeyFormatError(f"point {first + i}: {what}")
        _fail(where[0], where[1], first + i, what)
    zero = np.flatnonzero(~buf.any(axis=1))
    if len(zero):   # our layout's identity is all zeros: refused here, before it could pass as one
        i = int(zero[0])
        what = ZERO_FILLED.format(g="G1" if kind == 1 else "G2")
        if where is None:
            raise KeyFormatError(f"point {first + i}: {what}")
        _fail(where[0], where[1], first + i, what)
    coords = buf.reshape(n, 2 * kind, 48)[:, :, ::-1]       # each coordinate little-endian
    if kind == 2:
        coords = coords[:, [1, 0, 3, 2]]                   # c1, c0 -> c0, c1
    out = np.ascontiguousarray(coords).reshape(n, WIDTH[kind])
    if not range_check:
        return out
    limbs = out.view("<u4").reshape(n, 2 * kind, 12)
    ok = np.ones(n, dtype=bool)
    for c in range(limbs.shape[1]):
        ok &= _below_p(limbs[:, c])
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        if where is None:
            raise KeyFormatError(f"point {first + i}: a coordinate is not below the field modulus")
        _fail(where[0], where[1], first + i, "a coordinate is not below the field modulus")
    return out


def to_uncompressed(raw: np.ndarray, kind: int) -> np.ndarray:
    """Our xy little-endian layout -> ZCash uncompressed bytes (identity: 0x40 then zeros)."""
    n = len(raw)
    coords = np.ascontiguousarray(raw).reshape(n, -1, 48)[:, :, ::-1]
    if kind == 2:
        coords = coords[:, [1, 0, 3, 2]]
    out = np.ascontiguousarray(coords).reshape(n, WIDTH[kind])
    ident = ~raw.any(axis=1)
    out[ident, 0] = 0x40
    return out


def not_in_subgroup(raw: np.ndarray, kind: int) -> int:
    """Index of the first point not on the curve or not in the prime-order subgroup, or -1
    (arkworks' checked decoding)."""
    dec = POINT[kind].from_xy_bytes_le
    w = WIDTH[kind]
    flat = raw.tobytes()
    for i in range(len(raw)):
        try:
            dec(flat[i * w:(i + 1) * w])
        except Exception:
            return i
    return -1


_subgroup_check = None


def set_subgroup_check(check) -> None:
    """Replace the host's per-point subgroup test of ``points="full"`` (arkworks') with
    ``check(raw, kind) -> index of the first point outside the prime-order subgroup, or -1``,
    ``raw`` a chunk in our layout already on the curve (a batch test on a device: helper
    i40-params); None restores arkworks'."""
    global _subgroup_check
    _subgroup_check = check


_lib = None
_REASONS = {1: "a coordinate is not below the field modulus", 2: "not on the {g} curve",
            3: "not in the prime-order subgroup"}


def _host():
    """The host build of gpu/kernels/subgroup.cuh (gpu/native/points_host.cpp, OpenMP)."""
    global _lib
    if _lib is None:
        import ctypes
        from arith.native import build
        here = Path(__file__).resolve().parent.parent
        so = build(here / "native" / "points_host.cpp", stem="points",
                   flags=["-O3", "-std=c++17", "-fopenmp", "-shared", "-fPIC", "-Wno-unknown-pragmas"],
                   include_dirs=(here / "kernels",))
        lib = ctypes.CDLL(str(so))
        for g in ("g1", "g2"):
            f = getattr(lib, f"host_check_{g}")
            f.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
            f.restype = ctypes.c_int64
        _lib = lib
    return _lib


def first_bad(raw: np.ndarray, kind: int, points: str, *, native_subgroup: bool = False) -> tuple[int, str]:
    """(index, reason) of the first point of ``raw`` (our layout) that fails ``points``
    ("curve": on the curve; "full": and in the subgroup), or (-1, ""). On the host the curve
    check is the host build of the device's (OpenMP, ~12 us a point on this shared 2-core
    machine), the subgroup check arkworks' (``is_in_subgroup`` by endomorphism: ~55 us a
    G1 point, ~100 us a G2 point, 2026-12-04) or the one given to ``set_subgroup_check``;
    ``native_subgroup`` runs the device's [r]P test on the host instead (milliseconds a point:
    for its tests only)."""
    import ctypes
    if points == "none" or not len(raw):
        return -1, ""
    raw = np.ascontiguousarray(raw)
    why = ctypes.c_int()
    mode = 1 + bool(native_subgroup)   # 2: the device's [r] P test too
    bad = int(getattr(_host(), f"host_check_g{kind}")(len(raw), raw.ctypes.data, mode,
                                                       ctypes.byref(why)))
    if bad >= 0:
        return bad, _REASONS[why.value].format(g="G1" if kind == 1 else "G2")
    if points == "full" and not native_subgroup:
        bad = (_subgroup_check or not_in_subgroup)(raw, kind)
        if bad >= 0:
            return bad, _REASONS[3]
    return -1, ""


def _check_points(lay: Layout, sec: Section, raw: np.ndarray, first: int, points: str) -> None:
    bad, why = first_bad(raw, sec.kind, points)
    if bad >= 0:
        _fail(lay, sec, first + bad, why)


def read_section(f: BinaryIO, lay: Layout, name: str, *, points: str = "curve", out=None,
                 index: np.ndarray | None = None, lo: int = 0, hi: int | None = None,
                 range_check: bool = True) -> np.ndarray:
    """Points lo..hi of a section in our layout, checked (``points``: "none", "curve", "full").
    ``out`` with ``index``: scatter point j to ``out[index[j]]`` (a query expanded to one row a
    variable) instead of returning a new array; the points are read CHUNK at a time, so the
    section is never held twice."""
    sec = lay.sections[name]
    hi = sec.count if hi is None else hi
    if out is None:
        out = np.empty((hi - lo, sec.width), dtype=np.uint8)
        index = None
        base = lo
    buf = np.empty((CHUNK, sec.width), dtype=np.uint8)   # untouched rows cost nothing
    f.seek(sec.offset(lo))
    for i in range(lo, hi, CHUNK):
        k = min(CHUNK, hi - i)
        view = memoryview(buf[:k]).cast("B")
        if f.readinto(view) != k * sec.width:
            _fail(lay, sec, i, "truncated")
        raw = from_uncompressed(buf[:k], sec.kind, where=(lay, sec), first=i, range_check=range_check)
        _check_points(lay, sec, raw, i, points)
        if index is None:
            out[i - base:][:k] = raw
        else:
            out[index[i:i + k]] = raw
    return out


# --- which variables each query holds ---------------------------------------------------------

@dataclass
class Shape:
    """What a parameter file must hold for a circuit: the sizes and the A/B densities."""
    num_public: int       # without ONE
    num_aux: int
    domain: int
    a_density: np.ndarray  # bool (num_vars,): the variables the a query holds
    b_density: np.ndarray  # bool (num_vars,): the variables b_g1 and b_g2 hold

    @property
    def num_vars(self) -> int:
        return 1 + self.num_public + self.num_aux

    def want(self) -> dict[str, int]:
        return {"ic": self.num_public + 1, "h": self.domain - 1, "l": self.num_aux,
                "a": int(self.a_density.sum()), "b_g1": int(self.b_density.sum()),
                "b_g2": int(self.b_density.sum())}

    def want_why(self) -> dict[str, tuple[int, str]]:
        """``want`` with what each length counts (for the errors)."""
        why = {"ic": f"{self.num_public} public inputs + ONE", "h": f"domain {self.domain} - 1",
               "l": "the auxiliary variables", "a": "the inputs and the auxiliary variables in A",
               "b_g1": "the variables in B", "b_g2": "the variables in B"}
        return {name: (n, why[name]) for name, n in self.want().items()}

    def index(self, name: str) -> np.ndarray | None:
        """Variable index of each point of query ``name`` (None: the section is dense); int32,
        made once (2^27 variables: 0.5 GB for a)."""
        if name not in ("a", "b_g1", "b_g2"):
            return None
        key = "a" if name == "a" else "b"
        cache = self.__dict__.setdefault("_index", {})
        if key not in cache:
            with self.__dict__.setdefault("_index_lock", threading.Lock()):
                if key not in cache:
                    cache[key] = density_index(self.a_density if key == "a" else self.b_density)
        return cache[key]


#: density entries a step of ``density_index``: its int64 temporaries stay in the CPU's cache
INDEX_STEP = 1 << 22


def density_index(density: np.ndarray) -> np.ndarray:
    """np.flatnonzero(density).astype(np.int32), INDEX_STEP entries at a time: the whole
    array's int64 indices first (1 GB for filecoin-32g's a) then their int32 copy took 4-9 s
    on the 2-core development machine (page faults on two fresh arrays), where this takes
    0.7 s (2026-12-05, bench/params_phases.py); the load waited for it before section a."""
    if len(density) >= 1 << 31:
        raise ValueError(f"{len(density)} variables do not fit the int32 density index")
    out = np.empty(int(np.count_nonzero(density)), np.int32)
    at = 0
    for lo in range(0, len(density), INDEX_STEP):
        nz = np.flatnonzero(density[lo:lo + INDEX_STEP]).astype(np.int32)
        nz += np.int32(lo)
        out[at:at + len(nz)] = nz
        at += len(nz)
    return out


def _columns(m, num_vars: int) -> np.ndarray:
    """bool (num_vars,): the variables with a nonzero coefficient in matrix ``m`` (CSR or
    compact replicated)."""
    out = np.zeros(num_vars, dtype=bool)
    if hasattr(m, "indices"):  # synthesis.r1cs.SparseMatrix: zero coefficients are never stored,
        nz = m.coeffs.any(axis=1)   # but check: a stored zero is no density
        out[np.asarray(m.indices)[nz]] = True
        return out
    from gpu.native.compact import parts
    p = parts(m)
    nzt = np.asarray(p["table"]).any(axis=1)
    out[p["h_col"][nzt[p["h_coef"]]]] = True
    if p["copies"] and len(p["b_col"]):
        used = np.zeros(len(p["base"]), dtype=bool)   # marks, not np.unique: 10x faster at 2^27
        used[p["b_col"][nzt[p["b_coef"]]]] = True
        local = np.flatnonzero(used)
        base, stride = p["base"][local], p["stride"][local]
        for j in range(p["copies"]):
            out[base + j * stride] = True
    return out


#: one computation of a Shape at a time: a thread that asks while another computes it waits
#: for that one (cluster/pipeline/lifecycle.py prepares the preloaded circuits on a thread)
_SHAPE_LOCK = threading.Lock()


def densities_of(circuit) -> Shape:
    """``shape_of`` with the a and b indices made too: what a load of a .params needs before it
    reads a or b (the prover's preparation thread and ``Densities`` make it ahead of the reads)."""
    shape = shape_of(circuit)
    for name in ("a", "b_g1"):
        shape.index(name)
    return shape


def _matrices_of(circuit):
    from gpu.backends.forms import full_r1cs
    from gpu.native.compact import compact_of
    cr = compact_of(circuit)
    return cr if cr is not None else full_r1cs(circuit)


def _cached_shape(circuit) -> Shape | None:
    return getattr(_matrices_of(circuit), "__dict__", {}).get("_bellperson_shape")


def shape_of(circuit) -> Shape:
    """The Shape of a circuit (an R1CS, a compact circuit, or a circuit object); computed once
    per matrices object (a 2^27 circuit's densities take seconds)."""
    m = _matrices_of(circuit)
    cached = getattr(m, "__dict__", {}).get("_bellperson_shape")
    if cached is not None:
        return cached
    with _SHAPE_LOCK:
        cached = getattr(m, "__dict__", {}).get("_bellperson_shape")
        if cached is not None:
            return cached
        shape = _shape(m)
        try:
            m.__dict__["_bellperson_shape"] = shape   # the matrices are immutable by contract
        except (AttributeError, TypeError):
            pass
    return shape


def _sizes(circuit) -> tuple[int, int, int]:
    """(public inputs, auxiliary variables, domain) without the densities (cheap)."""
    from gpu.backends.forms import full_r1cs
    from gpu.native.compact import compact_of
    m = compact_of(circuit)
    m = m if m is not None else full_r1cs(circuit)
    npub, naux = int(m.num_public), int(m.num_aux)
    need = int(m.a.rows) + npub + 1
    return npub, naux, 1 << max(1, (need - 1).bit_length())


def _dense_want(npub: int, naux: int, domain: int) -> dict[str, tuple[int, str]]:
    """``Shape.want_why`` of the sections the densities do not decide (IC, h, l)."""
    return {"ic": (npub + 1, f"{npub} public inputs + ONE"), "h": (domain - 1, f"domain {domain} - 1"),
            "l": (naux, "the auxiliary variables")}


def _shape(m) -> Shape:
    npub, naux, domain = _sizes(m)
    nv = 1 + npub + naux
    a = _columns(m.a, nv)
    a[:npub + 1] = True   # the input rows x_i * 0 = 0: every input is in A
    return Shape(npub, naux, domain, a, _columns(m.b, nv))


# --- reading -------------------------------------------------------------------------------

def _single(f, lay: Layout, name: str, points: str):
    raw = read_section(f, lay, name, points=points)
    return POINT[lay.sections[name].kind].from_xy_bytes_unchecked_le(raw.tobytes())   # one point


def _read_vk_parts(f, lay: Layout, points: str) -> dict:
    singles = {name: _single(f, lay, name, "full" if points != "none" else "none")
               for name, _ in VK_FIXED}
    ic = PointArray(G1Point, read_section(f, lay, "ic", points=points))
    if points != "none":
        from . import curve
        g1, g2 = curve.g1(), curve.g2()
        for a, b in (("beta_g1", "beta_g2"), ("delta_g1", "delta_g2")):
            if not curve.pairing_check([singles[a], -g1], [g2, singles[b]]):
                sec = lay.sections[a]
                raise KeyFormatError(f"{lay.path}: section {a} at byte offset {sec.start} and "
                                     f"{b} at {lay.sections[b].start} are not the same scalar "
                                     f"(e({a}, g2) != e(g1, {b}))")
    singles["ic"] = ic
    return singles


def read_vk(path, *, circuit=None, digest: bytes | None = None, points: str = "full") -> VerifyingKey:
    """A bellperson .vk (or the verifying key at the head of a .params) as our VerifyingKey;
    ``circuit``: check IC's length against it and take its digest. The six single points are
    always fully checked; ``points`` applies to IC. ``.beta_g1`` and ``.delta_g1`` ride along."""
    if points not in POINT_CHECKS:
        raise ValueError(f"points must be one of {POINT_CHECKS}")
    path = Path(path)
    sizes = _sizes(circuit) if circuit is not None else None
    want = {"ic": (sizes[0] + 1, f"{sizes[0]} public inputs + ONE")} if sizes else None
    lay = scan(path, params=path.suffix == ".params", want=want)
    with open_regular(path) as f:
        s = _read_vk_parts(f, lay, points)
    if circuit is not None and digest is None:
        from gpu.backends.forms import circuit_digest
        digest = circuit_digest(circuit)
    vk = VerifyingKey(s["alpha_g1"], s["beta_g2"], s["gamma_g2"], s["delta_g2"], s["ic"],
                      circuit_digest=digest or b"\0" * 32,
                      num_aux=sizes[1] if sizes else 0, domain_size=sizes[2] if sizes else 0)
    vk.beta_g1, vk.delta_g1 = s["beta_g1"], s["delta_g1"]
    return vk


class FileQuery(PointArray):
    """One query of a .params file, expanded to one point a variable (the identity where the
    density leaves a variable out), read on demand: ``raw`` reads and checks it into host memory
    once (the CPU backend); gpu/cuda/params.py ``fill`` streams it straight into a device base
    buffer a chunk at a time (the CUDA backend: gpu/backends/cuda.py Resident), so the key is
    never held in host memory at all."""

    __slots__ = ("_raw", "lay", "section", "_index", "_pending", "n", "points", "chunk",
                 "host_convert")

    def __init__(self, lay: Layout, section: str, n: int, index, points: str):
        """``index``: the density's index of the section's points (None: dense), or a
        ``Densities`` still being computed (``read_params(later=True)``), taken by ``resolve``."""
        self.kind = POINT[lay.sections[section].kind]
        self._objects, self._raw = None, None
        self.lay, self.section, self.n, self.points = lay, section, n, points
        self._index, self._pending = (None, index) if isinstance(index, Densities) else (index, None)
        self.chunk = 1 << 20  # variables a device upload step (G2: 192 MiB of host staging)
        #: convert and scatter on the host (numpy) instead of the device (ZKHIVE_PARAMS_HOST_CONVERT=1)
        self.host_convert = os.environ.get("ZKHIVE_PARAMS_HOST_CONVERT", "0") == "1"

    @property
    def index(self) -> np.ndarray | None:
        """Variable index of each point of the section (None: dense); resolved first."""
        self.resolve()
        return self._index

    def index_source(self):
        """What ``__init__`` takes as ``index`` to make the same query (mirror.py MirrorQuery)."""
        return self._pending if self._pending is not None else self._index

    def resolve(self) -> None:
        """A section whose densities were still being computed (``read_params(later=True)``):
        wait for them, then its length against them (KeyFormatError naming the section and the
        length field's offset, as ``scan`` names it) before any of it is allocated or read."""
        pending = self._pending
        if pending is None:
            return
        from gpu.phases import phase
        with phase("waited for the densities"):   # ~0 where h and l took longer to read
            shape = pending.result()
        sec = self.lay.sections[self.section]
        _expect(self.lay.path, shape.want_why(), self.section, sec.count, sec.start - 4)
        self._index, self._pending = shape.index(self.section), None

    @property
    def raw(self) -> np.ndarray:
        if self._raw is None:
            sec = self.lay.sections[self.section]
            with open_regular(self.lay.path) as f:
                if self.index is None:
                    self._raw = read_section(f, self.lay, self.section, points=self.points)
                else:
                    out = np.zeros((self.n, sec.width), dtype=np.uint8)
                    self._raw = read_section(f, self.lay, self.section, points=self.points,
                                             out=out, index=self.index)
        return self._raw

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        return PointArray(self.kind, self.raw)[i]


class Densities:
    """A circuit's Shape and its a and b indices computed on a thread (``read_params(later=
    True)``): while the dense sections h and l stream to the device (gpu/backends/cuda.py
    fills them first), not before the first read."""

    def __init__(self, circuit):
        self._out: dict = {}
        self._thread = threading.Thread(target=self._run, args=(circuit,), daemon=True,
                                         name="params-densities")
        self._thread.start()

    def _run(self, circuit) -> None:
        from gpu.phases import phase
        try:
            with phase("circuit shape and density index (beside the reads)"):
                self._out["shape"] = densities_of(circuit)
        except BaseException as e:   # raised where the load waits for it
            self._out["error"] = e

    def result(self) -> "Shape":
        self._thread.join()
        if "error" in self._out:
            raise self._out["error"]
        return self._out["shape"]


def read_params(path, circuit, *, points: str = "curve", vk_points: str | None = None,
                eager: bool = False, later: bool = False) -> ProvingKey:
    """A bellperson .params file as our ProvingKey for ``circuit``, checked against the
    circuit's shape first (sizes and densities: nothing else is read when they differ). The
    queries are FileQuery objects (read on first use, or now with ``eager``). ``later``: the
    densities on a thread (``Densities``): IC's, h's and l's lengths checked now, a's and
    b's when each is first used (``FileQuery.resolve``: before it is allocated or read)."""
    if points not in POINT_CHECKS:
        raise ValueError(f"points must be one of {POINT_CHECKS}")
    from gpu.backends.forms import circuit_digest
    from gpu.phases import phase
    path = Path(path)
    with phase("matrices (host)"):   # built, or read from $ZKHIVE_CACHE_DIR/r1cs
        from gpu.native.compact import compact_of
        compact_of(circuit)
    cached = _cached_shape(circuit)
    if later and cached is None:
        npub, naux, domain = _sizes(circuit)
        shape = pending = Densities(circuit)
        want = _dense_want(npub, naux, domain)
    else:
        with phase("circuit shape (densities)"):
            shape = shape_of(circuit)
        npub, naux, domain = shape.num_public, shape.num_aux, shape.domain
        pending, want = None, shape.want_why()
    with phase("params scan (lengths)"):
        try:
            lay = scan(path, params=True, want=want)
        except KeyFormatError:
            if pending is None:
                raise
            # the file's sizes do not add up: with the densities the error names the section
            # whose length is wrong (a's or b's), not a later one it threw off
            scan(path, params=True, want=pending.result().want_why())
            raise
    with phase("circuit digest"):
        digest = circuit_digest(circuit)
    with phase("verifying key"), open_regular(path) as f:
        s = _read_vk_parts(f, lay, vk_points or points)
    vk = VerifyingKey(s["alpha_g1"], s["beta_g2"], s["gamma_g2"], s["delta_g2"], s["ic"],
                      circuit_digest=digest, num_aux=naux,
                      num_constraints=0, domain_size=domain)
    vk.beta_g1, vk.delta_g1 = s["beta_g1"], s["delta_g1"]
    q = {}
    with phase("density index"):
        for name, _ in QUERIES:
            n = {"h": domain - 1, "l": naux}.get(name, 1 + npub + naux)
            dense = name in ("h", "l")
            q[OURS[name]] = FileQuery(lay, name, n, None if dense else pending or shape.index(name),
                                      points)
    pk = ProvingKey(vk=vk, beta_g1=s["beta_g1"], delta_g1=s["delta_g1"], circuit_digest=digest,
                    num_public=npub, num_aux=naux, num_constraints=0,
                    domain_size=domain, **q)
    if eager:
        for v in q.values():
            v.raw
    return pk


def check_file(path, circuit, *, points: str = "full") -> Layout:
    """Check a whole .params (or .vk) file against ``circuit`` without keeping it: the lengths
    and densities, then every point of every section, read a million at a time (host memory:
    one chunk). ``zkhive keys check``; a 2^27 file's 0.6 G points take minutes on the host."""
    path = Path(path)
    params = path.suffix != ".vk"
    if not params:
        read_vk(path, circuit=circuit, points=points)
        return scan(path, params=False)
    lay = scan(path, params=True, want=shape_of(circuit).want_why())
    with open_regular(path) as f:
        _read_vk_parts(f, lay, points)
        for name, _ in QUERIES:
            n = lay.sections[name].count
            for lo in range(0, n, ROWS):
                read_section(f, lay, name, points=points, lo=lo, hi=min(n, lo + ROWS))
    return lay


# --- writing -------------------------------------------------------------------------------

def _points_of(v, kind: int) -> PointArray:
    if isinstance(v, PointArray):
        return v
    if isinstance(v, list):
        return PointArray.from_points(POINT[kind], v)
    return PointArray.from_points(POINT[kind], [v])


def _write_points(f, name: str, arr: PointArray, kind: int, *, length: bool = True) -> None:
    """The verifying key's points uncompressed (``length``: after a u32 count); refuses an
    identity, as bellperson's reader would."""
    if length:
        f.write(struct.pack(">I", len(arr)))
    ident = np.flatnonzero(~arr.raw.any(axis=1))
    if len(ident):
        raise KeyFormatError(f"section {name}: point {int(ident[0])} is the identity, which a "
                             "bellperson file cannot hold")
    f.write(to_uncompressed(arr.raw, kind).tobytes())


def _write_vk_stream(f, pk) -> None:
    vk = pk.vk
    beta_g1 = getattr(pk, "beta_g1", None)
    delta_g1 = getattr(pk, "delta_g1", None)
    if beta_g1 is None or delta_g1 is None:
        raise KeyFormatError("a bellperson verifying key holds beta_g1 and delta_g1: write it from "
                             "the proving key (or a verifying key read from a bellperson file)")
    singles = {"alpha_g1": vk.alpha_g1, "beta_g1": beta_g1, "beta_g2": vk.beta_g2,
               "gamma_g2": vk.gamma_g2, "delta_g1": delta_g1, "delta_g2": vk.delta_g2}
    for name, kind in VK_FIXED:
        _write_points(f, name, _points_of(singles[name], kind), kind, length=False)
    _write_points(f, "ic", _points_of(vk.gamma_abc_g1, 1), 1)


def _atomic(path, write) -> Path:
    path = Path(path)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def write_vk(key, path) -> Path:
    """``key``: a ProvingKey (or a VerifyingKey read from a bellperson file, which carries
    beta_g1 and delta_g1)."""
    if isinstance(key, VerifyingKey):
        holder = type("VkHolder", (), {})()
        holder.vk, holder.beta_g1, holder.delta_g1 = key, getattr(key, "beta_g1", None), getattr(key, "delta_g1", None)
        key = holder
    return _atomic(path, lambda f: _write_vk_stream(f, key))


def write_params(pk: ProvingKey, circuit, path) -> Path:
    """``pk`` (made for ``circuit``, its queries in host memory) as bellperson writes it."""
    return write_params_from(pk, circuit, path, lambda name, lo, hi: getattr(pk, name).raw[lo:hi])


ROWS = 1 << 20  # variables a write step (G2: 192 MiB)


def write_params_from(pk, circuit, path, rows, *, encoded: bool = False) -> Path:
    """Write ``pk``'s key for ``circuit`` as a .params file, the queries read through
    ``rows(query, lo, hi)``, ROWS at a time: our layout, one row a variable (host arrays, or a
    key resident on a device: gpu.cuda.params.device_rows), or with ``encoded`` already in the
    file's encoding, identity 0x40 (``device_rows(..., encoded=True)``: converted on the
    device). The a and b queries are filtered by the circuit's densities: a point the density
    keeps must not be the identity and one it drops must be (either would mean the key is not
    the circuit's); no section may hold the identity, as bellperson's reader refuses it (an
    auxiliary variable no constraint uses makes one in l)."""
    from gpu.backends.forms import circuit_digest
    if circuit_digest(circuit) != pk.circuit_digest:
        raise KeyFormatError("the proving key was made for another circuit (digests differ)")
    shape = shape_of(circuit)
    if pk.domain_size != shape.domain:
        raise KeyFormatError(f"the key's domain {pk.domain_size} is not the circuit's {shape.domain}")

    def body(f):
        _write_vk_stream(f, pk)
        for name, kind in QUERIES:
            total = {"h": shape.domain - 1, "l": shape.num_aux}.get(name, shape.num_vars)
            dens = {"a": shape.a_density, "b_g1": shape.b_density, "b_g2": shape.b_density}.get(name)
            f.write(struct.pack(">I", total if dens is None else int(dens.sum())))
            written = 0
            for lo in range(0, total, ROWS):
                hi = min(total, lo + ROWS)
                raw = np.asarray(rows(OURS[name], lo, hi))
                var = np.arange(lo, hi)
                is_id = (raw[:, 0] & 0x40 != 0) if encoded else ~raw.any(axis=1)
                if dens is not None:
                    keep = dens[lo:hi]
                    extra = np.flatnonzero(~keep & ~is_id)
                    if len(extra):
                        raise KeyFormatError(
                            f"section {name}: variable {lo + int(extra[0])} is not in the circuit's "
                            f"{'A' if name == 'a' else 'B'} density but its point is not the "
                            "identity: the key is not this circuit's")
                    raw, var, is_id = raw[keep], var[keep], is_id[keep]
                ident = np.flatnonzero(is_id)
                if len(ident):
                    j = int(ident[0])
                    why = (" (an auxiliary variable no constraint uses: bellperson refuses such "
                           "circuits)" if name == "l" else "")
                    raise KeyFormatError(f"section {name}: point {written + j} (variable {int(var[j])}) "
                                         f"is the identity, which a bellperson file cannot hold{why}")
                f.write(raw.tobytes() if encoded else to_uncompressed(raw, kind).tobytes())
                written += len(raw)
    return _atomic(path, body)


# --- digests and names ----------------------------------------------------------------------

def file_digest(path) -> str:
    """paramfetch's digest: BLAKE2b-512 of the whole file, the first 32 hex digits."""
    h = hashlib.blake2b()
    with open_regular(path) as f:
        while True:
            b = f.read(1 << 24)
            if not b:
                break
            h.update(b)
    return h.hexdigest()[:32]


def check_digest(path, manifest) -> str:
    """The file's digest against ``manifest`` (parameters.json: a path or its parsed dict),
    keyed by the file's name; returns the digest. A name missing from the manifest or a
    different digest is refused."""
    path = Path(path)
    if not isinstance(manifest, dict):
        manifest = json.loads(Path(manifest).read_text())
    entry = manifest.get(path.name)
    if not isinstance(entry, dict) or "digest" not in entry:
        raise KeyFormatError(f"{path}: {path.name} is not in the parameters manifest")
    got = file_digest(path)
    if got != entry["digest"]:
        raise KeyFormatError(f"{path}: digest {got} (BLAKE2b-512 of bytes 0..{path.stat().st_size}, "
                             f"first 32 hex digits) differs from the manifest's {entry['digest']}")
    return got


VERSION = 28


def porep_identifier(*, sector_size: int, layers: int, challenges: int, arities: tuple) -> str:
    """storage-proofs-porep's PublicParams::identifier() for a StackedDRG PoRep (degree 6,
    expansion 8, Poseidon trees): the string whose SHA-256 names the file."""
    tree = "merkletree-poseidon_hasher-" + "-".join(str(a) for a in arities)
    return ("layered_drgporep::PublicParams{ graph: stacked_graph::StackedGraph{expansion_degree: 8 "
            f"base_graph: drgraph::BucketGraph{{size: {sector_size // 32}; degree: 6; hasher: "
            f"poseidon_hasher}} }}, challenges: LayerChallenges {{ layers: {layers}, max_count: "
            f"{challenges} }}, tree: {tree} }}")


def porep_file_stem(*, sector_size: int, layers: int, challenges: int, arities: tuple) -> str:
    """v28-stacked-proof-of-replication-<tree>-sha256_hasher-<sha256(identifier)> (parameter_cache.rs
    ``cache_identifier`` and ``parameter_cache_params_path``); add ``.params`` / ``.vk``."""
    ident = porep_identifier(sector_size=sector_size, layers=layers, challenges=challenges,
                             arities=arities)
    tree = "merkletree-poseidon_hasher-" + "-".join(str(a) for a in arities)
    return (f"v{VERSION}-stacked-proof-of-replication-{tree}-sha256_hasher-"
            f"{hashlib.sha256(ident.encode()).hexdigest()}")


#: Filecoin's PoRep sizes: (layers, challenges a partition, (base, sub, top) arities)
FILECOIN_POREP = {2048: (2, 2, (8, 0, 0)), 8 << 20: (2, 2, (8, 0, 0)), 512 << 20: (2, 2, (8, 0, 0)),
                  32 << 30: (11, 18, (8, 8, 0)), 64 << 30: (11, 18, (8, 8, 2))}


#: our ``filecoin`` family's sets (synthesis/filecoin) by sector size
FILECOIN_SETS = {"filecoin-2k": 2048, "filecoin-8m": 8 << 20, "filecoin-512m": 512 << 20,
                 "filecoin-32g": 32 << 30, "filecoin-64g": 64 << 30}


def filecoin_stem(sector_size: int) -> str:
    layers, challenges, arities = FILECOIN_POREP[sector_size]
    return porep_file_stem(sector_size=sector_size, layers=layers, challenges=challenges,
                           arities=arities)


def is_bellperson_vk(path) -> bool:
    """A .vk file in bellperson's format rather than ours (gpu/groth16/keys.py: magic)."""
    from .keys import MAGIC
    with open_regular(path) as f:
        return f.read(len(MAGIC)) != MAGIC
