"""The BLS12-381 scalar field Fr: reference arithmetic on Python integers.

This is the slow, obviously-correct definition every fast path (the host library, the CUDA
kernels) is tested against. Vectors of Fr elements travel as numpy ``uint64`` arrays of shape
``(n, 4)``: canonical (fully reduced, not Montgomery) little-endian 64-bit limbs, i.e. exactly
the 32-byte little-endian encoding of each element laid end to end.
"""
from __future__ import annotations

import secrets
from typing import Iterable, Sequence

import numpy as np

#: r, the order of the BLS12-381 G1/G2 subgroups and the modulus of Fr.
MODULUS = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
#: Bytes of one canonical element.
BYTES = 32
#: r - 1 = 2^TWO_ADICITY * odd.
TWO_ADICITY = 32
#: The multiplicative generator arkworks and bellperson use (also the coset shift of the QAP).
GENERATOR = 7
#: A primitive 2^32-th root of unity: GENERATOR^((r-1) / 2^32).
TWO_ADIC_ROOT = pow(GENERATOR, (MODULUS - 1) >> TWO_ADICITY, MODULUS)


class FieldError(ValueError):
    """A value is not a canonical Fr element (or a domain size is not supported)."""


def reduce(x: int) -> int:
    return x % MODULUS


def inv(x: int) -> int:
    """x^(r-2) = x^-1 (Fermat); zero has no inverse."""
    if x % MODULUS == 0:
        raise ZeroDivisionError("0 has no inverse in Fr")
    return pow(x, MODULUS - 2, MODULUS)


def random_element() -> int:
    """A uniformly random element from the OS's secure generator."""
    return secrets.randbelow(MODULUS)


def root_of_unity(n: int) -> int:
    """omega_n, a primitive n-th root of unity, for n a power of two up to 2^32."""
    if n < 1 or n & (n - 1):
        raise FieldError(f"domain size {n} is not a power of two")
    log_n = n.bit_length() - 1
    if log_n > TWO_ADICITY:
        raise FieldError(f"domain size 2^{log_n} exceeds Fr's two-adicity 2^{TWO_ADICITY}")
    return pow(TWO_ADIC_ROOT, 1 << (TWO_ADICITY - log_n), MODULUS)


def to_bytes(x: int) -> bytes:
    return int(x).to_bytes(BYTES, "little")


def from_bytes(b: bytes, *, what: str = "field element") -> int:
    """Decode 32 little-endian bytes, refusing non-canonical values."""
    if len(b) != BYTES:
        raise FieldError(f"{what}: expected {BYTES} bytes, got {len(b)}")
    x = int.from_bytes(b, "little")
    if x >= MODULUS:
        raise FieldError(f"{what}: value is not below the Fr modulus")
    return x


# --- vectors -------------------------------------------------------------------------------

def vec_from_ints(values: Iterable[int]) -> np.ndarray:
    """Pack Python ints (reduced mod r) into an (n, 4) uint64 array."""
    data = b"".join(to_bytes(v % MODULUS) for v in values)
    return np.frombuffer(data, dtype="<u8").reshape(-1, 4).copy()


def vec_to_ints(vec: np.ndarray) -> list[int]:
    vec = np.ascontiguousarray(vec, dtype="<u8").reshape(-1, 4)
    raw = vec.tobytes()
    return [int.from_bytes(raw[i:i + BYTES], "little") for i in range(0, len(raw), BYTES)]


def vec_random(n: int) -> np.ndarray:
    """n fresh uniformly random elements (rejection-sampled from the OS generator)."""
    out = np.frombuffer(secrets.token_bytes(n * BYTES), dtype="<u8").reshape(n, 4).copy()
    out[:, 3] &= np.uint64((1 << 63) - 1)  # r < 2^255: clear the top bit, then reject >= r
    bad = ~vec_is_canonical(out)
    while bad.any():
        k = int(bad.sum())
        fresh = np.frombuffer(secrets.token_bytes(k * BYTES), dtype="<u8").reshape(k, 4).copy()
        fresh[:, 3] &= np.uint64((1 << 63) - 1)
        out[bad] = fresh
        bad = ~vec_is_canonical(out)
    return out


_MOD_LIMBS = np.array([(MODULUS >> (64 * i)) & ((1 << 64) - 1) for i in range(4)], dtype=np.uint64)


def vec_is_canonical(vec: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows that are < r (lexicographic compare from the top limb)."""
    vec = np.asarray(vec, dtype=np.uint64).reshape(-1, 4)
    less = np.zeros(len(vec), dtype=bool)
    equal = np.ones(len(vec), dtype=bool)
    for i in (3, 2, 1, 0):
        less |= equal & (vec[:, i] < _MOD_LIMBS[i])
        equal &= vec[:, i] == _MOD_LIMBS[i]
    return less


def check_vec(vec: np.ndarray, *, what: str) -> np.ndarray:
    """Validate an Fr vector's shape, dtype and canonical form; name the first bad index."""
    if not isinstance(vec, np.ndarray) or vec.dtype != np.uint64 or vec.ndim != 2 or vec.shape[1] != 4:
        raise FieldError(f"{what}: expected a uint64 array of shape (n, 4), got "
                         f"{getattr(vec, 'dtype', type(vec))} {getattr(vec, 'shape', '')}")
    # fast path: an element whose top limb is below r's top limb is canonical (one compare a
    # row: this check runs on every 2^24-element assignment a prover receives)
    suspect = np.flatnonzero(vec[:, 3] >= _MOD_LIMBS[3])
    if len(suspect):
        ok = vec_is_canonical(vec[suspect])
        if not ok.all():
            i = int(suspect[np.flatnonzero(~ok)[0]])
            raise FieldError(f"{what}: element {i} is not below the Fr modulus")
    return np.ascontiguousarray(vec)


# --- naive definitions (for tests of the fast paths) ----------------------------------------

def naive_dft(values: Sequence[int], omega: int) -> list[int]:
    """out[k] = sum_j values[j] * omega^(j k): the O(n^2) definition of the NTT."""
    n = len(values)
    return [sum(v * pow(omega, j * k, MODULUS) for j, v in enumerate(values)) % MODULUS
            for k in range(n)]
