"""TEST-ONLY prepared powers-of-tau file (snarkjs ``.ptau``) computed from a KNOWN secret.

    !!! The trapdoor (tau, alpha, beta) is chosen by the caller and known to it. Anyone who !!!
    !!! knows it can forge proofs for every circuit set up from this file. It exists so the !!!
    !!! benchmark and the tests can run ``snarkjs groth16 setup`` without a ceremony; never  !!!
    !!! use it, or a zkey made from it, for anything real.                                  !!!

Why: ``snarkjs powersoftau prepare phase2`` turns the powers into Lagrange form with group FFTs
and takes about 7 minutes at power 14 on this machine (far longer at 16). Knowing tau, the same
points are scalar multiples of the generators whose scalars we compute in Fr directly.

The file is what ``snarkjs powersoftau new`` + contributions + ``prepare phase2`` would produce
for that trapdoor (snarkjs src/powersoftau_preparephase2.js, powersoftau_utils.js); N = 2^power:

    1  header: n8 u32 (48), q (48 bytes LE), power u32, ceremonyPower u32
    2  tau^i G1,           i < 2N - 1          3  tau^i G2,   i < N
    4  alpha tau^i G1,     i < N               5  beta tau^i G1, i < N
    6  beta G2                                 7  contributions: count u32 = 0
    12 for p = 0..power+1: L_i(tau) G1 over the domain of size 2^p (i < 2^p)
    13, 14, 15: likewise for G2, alpha G1, beta G1, p = 0..power

Points are affine x || y with each Fq coordinate (an Fq2 one as c0 || c1) in little-endian
Montgomery form (R = 2^384), ffjavascript's "LEM". The domains are ffjavascript's: its primitive
2^32-th root of unity FFJS_ROOT_2_32 is not our synthesis.field.TWO_ADIC_ROOT (for n = 16 it is
ours to the 5th power), and the zkey's Lagrange points must match the roots snarkjs's prover
uses. The last level of section 12 is, as prepare phase2 makes it, the inverse FFT of the
2^(power+1) - 1 powers padded with one zero: L_i(tau) - tau^(M-1) w^i / M for M = 2^(power+1).
"""
from __future__ import annotations

import multiprocessing
import os
import struct
from pathlib import Path

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from arith import native
from synthesis import field

from .iden3 import write_binfile
from .snarkjs import FQ_BYTES, FQ_MODULUS

#: ffjavascript's Fr.w[32] for bls12381 (``(await getCurveFromName("bls12381")).Fr.w[32]``).
FFJS_ROOT_2_32 = 937917089079007706106976984802249742464848817460758522850752807661925904159
_R_MONT = pow(2, 8 * FQ_BYTES, FQ_MODULUS)
MAX_POWER = 27  # the largest ceremony snarkjs users download (2^28 is the Hermez file's cap)


class PtauError(ValueError):
    pass


def ffjs_root(n: int) -> int:
    """ffjavascript's primitive n-th root of unity (n a power of two up to 2^32)."""
    log_n = n.bit_length() - 1
    if n < 1 or n & (n - 1) or log_n > field.TWO_ADICITY:
        raise PtauError(f"domain size {n} is not a power of two up to 2^32")
    return pow(FFJS_ROOT_2_32, 1 << (field.TWO_ADICITY - log_n), field.MODULUS)


def lagrange_scalars(n: int, tau: int) -> np.ndarray:
    """L_i(tau) = (1 - tau^n) / n * w^i / (w^i - tau) over ffjavascript's domain of size n."""
    w_i = native.powers(n, 1, ffjs_root(n))
    den = native.sub(w_i, field.vec_from_ints([tau]))
    k = (1 - pow(tau, n, field.MODULUS)) * field.inv(n) % field.MODULUS
    return native.scale(native.mul(w_i, native.inv(den)), k)


def section12_scalars(power: int, tau: int) -> np.ndarray:
    levels = [lagrange_scalars(1 << p, tau) for p in range(power + 1)]
    m = 1 << (power + 1)
    padded = native.sub(lagrange_scalars(m, tau),
                        native.powers(m, pow(tau, m - 1, field.MODULUS) * field.inv(m), ffjs_root(m)))
    return np.concatenate(levels + [padded])


# --- fixed-base multiplication with 8-bit windows: 32 additions instead of a full scalar
# multiplication (measured here: 48 us instead of 186 us per G1 point, 100 us instead of 560 for
# G2, encoding included); tables built before the workers fork, so they are shared.
_TABLES: dict[str, list[list]] = {}


def _table(base) -> list[list]:
    rows, step = [], base
    for _ in range(32):
        row = [None, step]
        for _ in range(254):
            row.append(row[-1] + step)
        rows.append(row)
        step = row[-1] + step  # 256 * step
    return rows


def _lem(raw_le: bytes) -> bytes:
    out = bytearray()
    for i in range(0, len(raw_le), FQ_BYTES):
        x = int.from_bytes(raw_le[i:i + FQ_BYTES], "little")
        out += (x * _R_MONT % FQ_MODULUS).to_bytes(FQ_BYTES, "little")
    return bytes(out)


def _mul_chunk(args) -> bytes:
    group, raw = args
    table = _TABLES[group]
    ident = (G1Point if group == "g1" else G2Point).identity()
    size = 2 * FQ_BYTES * (1 if group == "g1" else 2)
    out = bytearray()
    for off in range(0, len(raw), 32):
        acc = ident
        for j, byte in enumerate(raw[off:off + 32]):
            if byte:
                acc = acc + table[j][byte]
        # ffjavascript's affine zero is all zero bytes, as is arkworks' encoding of it
        out += bytes(size) if acc == ident else _lem(acc.to_xy_bytes_le())
    return bytes(out)


def _points(group: str, scalars: np.ndarray, pool) -> bytes:
    raw = np.ascontiguousarray(scalars, dtype="<u8").tobytes()
    chunk = 32 * 4096
    jobs = [(group, raw[i:i + chunk]) for i in range(0, len(raw), chunk)]
    return b"".join(pool.map(_mul_chunk, jobs) if pool else map(_mul_chunk, jobs))


def write_test_ptau(path: str | os.PathLike, power: int, *, tau: int, alpha: int, beta: int,
                    workers: int | None = None) -> Path:
    """Write a prepared ptau of ``power`` for the KNOWN trapdoor (tau, alpha, beta): TEST ONLY.
    At power 16: about 40 s on the two cores here."""
    if not 1 <= power <= MAX_POWER:
        raise PtauError(f"power {power} is outside 1..{MAX_POWER}")
    for name, x in (("tau", tau), ("alpha", alpha), ("beta", beta)):
        if not 0 < x < field.MODULUS:
            raise PtauError(f"{name} must be a nonzero Fr element")
    if pow(tau, 1 << (power + 1), field.MODULUS) == 1:
        raise PtauError("tau is a root of unity of a Lagrange domain: L_i(tau) is undefined")
    n = 1 << power
    tau_pow = native.powers(2 * n - 1, 1, tau)
    lag12 = section12_scalars(power, tau)
    lag = lag12[:2 * n - 1]  # levels 0..power

    if not _TABLES:
        _TABLES["g1"], _TABLES["g2"] = _table(G1Point()), _table(G2Point())
    workers = workers or os.cpu_count() or 1
    ctx = multiprocessing.get_context("fork")
    with (ctx.Pool(workers) if workers > 1 else _NoPool()) as pool:
        pool = pool if workers > 1 else None
        header = (struct.pack("<I", FQ_BYTES) + FQ_MODULUS.to_bytes(FQ_BYTES, "little")
                  + struct.pack("<II", power, power))
        sections = [
            (1, header),
            (2, _points("g1", tau_pow, pool)),
            (3, _points("g2", tau_pow[:n], pool)),
            (4, _points("g1", native.scale(tau_pow[:n], alpha), pool)),
            (5, _points("g1", native.scale(tau_pow[:n], beta), pool)),
            (6, _points("g2", field.vec_from_ints([beta]), pool)),
            (7, struct.pack("<I", 0)),
            (12, _points("g1", lag12, pool)),
            (13, _points("g2", lag, pool)),
            (14, _points("g1", native.scale(lag, alpha), pool)),
            (15, _points("g1", native.scale(lag, beta), pool)),
        ]
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        write_binfile(f, b"ptau", 1, sections)
    os.replace(tmp, path)
    return path


class _NoPool:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
