"""iden3 binary files that snarkjs reads: ``.r1cs`` (circom's constraint system) and ``.wtns``
(a witness), written from our R1CS and assignment, so that snarkjs can set up and prove the very
circuit our prover proves (bench/snarkjs_compare.py).

Both are iden3 "binfiles" (@iden3/binfileutils): magic (4 bytes), version u32, section count u32,
then per section: type u32, byte length u64, the bytes. All integers little-endian; field elements
as n8 = 32 little-endian bytes in normal (not Montgomery) form, which is exactly the row layout of
our Fr vectors.

.r1cs version 1 (r1csfile/src/r1csfile.js):
  section 1 header: n8 u32, prime r (n8 bytes), nWires u32, nPubOut u32, nPubIn u32, nPrvIn u32,
                    nLabels u64, nConstraints u32
  section 2 constraints: per constraint, A, B, C each as nTerms u32, then (wire u32, coeff n8)
  section 3 wire-to-label map: one u64 per wire
Our z = (1, public inputs, aux) maps onto circom's wire order (1, outputs, public inputs, private
inputs, internal) as nPubOut = 0, nPubIn = num_public, nPrvIn = 0: the auxiliary variables are
internal wires, labels are the identity. snarkjs appends the same "input * 0 = 0" rows per public
input that gpu/groth16/qap.py does, so both provers use the same domain size.

.wtns version 2 (snarkjs src/wtns_utils.js):
  section 1: n8 u32, prime r (n8 bytes), nWitness u32;  section 2: the values, n8 bytes each
"""
from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import BinaryIO

import numpy as np

from synthesis import field
from synthesis.r1cs import R1CS

FR_BYTES = 32
_U32_MAX = (1 << 32) - 1
#: One R1CS term as stored: wire index u32, then the 32-byte coefficient (36 bytes, packed).
TERM = np.dtype([("wire", "<u4"), ("coeff", "<u8", (4,))])


class Iden3FormatError(ValueError):
    """A value does not fit an iden3 file (for example more than 2^32 - 1 wires)."""


def write_binfile(f: BinaryIO, magic: bytes, version: int, sections: list[tuple[int, bytes]]) -> None:
    f.write(magic + struct.pack("<II", version, len(sections)))
    for kind, data in sections:
        f.write(struct.pack("<IQ", kind, len(data)))
        f.write(data)


def _atomic_write(path: str | os.PathLike, magic: bytes, version: int, sections) -> Path:
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        write_binfile(f, magic, version, sections)
    os.replace(tmp, path)
    return path


def _prime() -> bytes:
    return field.MODULUS.to_bytes(FR_BYTES, "little")


def _u32(value: int, what: str) -> int:
    if not 0 <= value <= _U32_MAX:
        raise Iden3FormatError(f"{what} = {value} does not fit the u32 field of the file format")
    return value


def _terms(m) -> np.ndarray:
    t = np.empty(m.nnz, dtype=TERM)
    t["wire"] = m.indices
    t["coeff"] = m.coeffs.reshape(-1, 4)
    return t


def constraints_section(r1cs: R1CS) -> bytes:
    """Section 2, built with array scatters instead of a Python loop over rows (2^16
    constraints: about 0.1 s). Row i of the output is
    [nA u32][A terms][nB u32][B terms][nC u32][C terms]."""
    mats = (r1cs.a, r1cs.b, r1cs.c)
    counts = [np.diff(m.indptr) for m in mats]
    row_bytes = 3 * 4 + TERM.itemsize * (counts[0] + counts[1] + counts[2])
    row_start = np.concatenate(([0], np.cumsum(row_bytes)[:-1])).astype(np.int64)
    buf = np.zeros(int(row_bytes.sum()), dtype=np.uint8)
    pos = row_start.copy()  # where the next LC of each row begins
    for m, n in zip(mats, counts):
        heads = pos[:, None] + np.arange(4)
        buf[heads] = n.astype("<u4").view(np.uint8).reshape(-1, 4)
        # term k of row i goes to pos[i] + 4 + 36 (k - indptr[i])
        row_of_term = np.repeat(np.arange(len(n)), n)
        within = np.arange(m.nnz) - m.indptr[row_of_term]
        dest = pos[row_of_term] + 4 + TERM.itemsize * within
        buf[dest[:, None] + np.arange(TERM.itemsize)] = _terms(m).view(np.uint8).reshape(-1, TERM.itemsize)
        pos += 4 + TERM.itemsize * n
    return buf.tobytes()


def write_r1cs(r1cs: R1CS, path: str | os.PathLike) -> Path:
    """``r1cs`` as a circom .r1cs file (version 1) at ``path``."""
    r1cs.validate()
    wires = _u32(r1cs.num_variables, "number of wires")
    header = (struct.pack("<I", FR_BYTES) + _prime()
              + struct.pack("<IIIIQI", wires, 0, _u32(r1cs.num_public, "public inputs"), 0, wires,
                            _u32(r1cs.num_constraints, "number of constraints")))
    labels = np.arange(wires, dtype="<u8").tobytes()
    return _atomic_write(path, b"r1cs", 1, [(1, header), (2, constraints_section(r1cs)), (3, labels)])


def write_wtns(assignment: np.ndarray, path: str | os.PathLike) -> Path:
    """A full assignment z (Fr vector, z[0] = 1) as a .wtns file (version 2) at ``path``."""
    z = field.check_vec(assignment, what="assignment")
    if len(z) == 0 or field.vec_to_ints(z[:1])[0] != 1:
        raise Iden3FormatError("assignment[0] must be the constant 1 (wire 0 of the witness)")
    header = struct.pack("<I", FR_BYTES) + _prime() + struct.pack("<I", _u32(len(z), "witness size"))
    return _atomic_write(path, b"wtns", 2, [(1, header), (2, z.astype("<u8").tobytes())])
