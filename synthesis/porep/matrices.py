"""The porep-lite constraint matrices: one challenge's constraints are recorded once as a
template (the gadget in shape mode) and replicated for every challenge with numpy index offsets
(``_assemble``). Variables:
  z = (1 | replica_id, comm_d, comm_r, (v, parents) x C | comm_c, comm_r_last, header aux,
       challenge 0 aux, ..., challenge C-1 aux)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..builder import ConstraintSystem
from ..family.circuit import block_inputs
from ..bellpepper.core import Synth
from ..r1cs import R1CS, SparseMatrix
from .gadget import challenge_gadget, header_gadget
from .params import PorepParams


@dataclass(frozen=True)
class Template:
    r1cs: R1CS
    locals: int  # auxiliary variables of its own (after the shared comm_c, comm_r_last)


def template(prm: PorepParams, *, header: bool) -> Template:
    cs = ConstraintSystem(with_values=False)
    s = Synth(cs=cs)
    pub = block_inputs(s, cs, prm.parents, header=header)
    if header:
        header_gadget(s, pub)
    else:
        challenge_gadget(s, prm, pub, None)
    r1cs = cs.to_r1cs()
    return Template(r1cs, r1cs.num_aux - 2)


def _assemble(hm: SparseMatrix, hmap: np.ndarray, cm: SparseMatrix, copies: int,
              base: np.ndarray, stride: np.ndarray) -> SparseMatrix:
    """Header rows (template variable x -> hmap[x]), then ``copies`` instances of the challenge
    rows (instance j maps x to base[x] + j stride[x]). Written into preallocated arrays one
    instance at a time, so the peak memory is the result itself (~8 GB at porep-lite-16m)."""
    rows, nnz = hm.rows + copies * cm.rows, hm.nnz + copies * cm.nnz
    indptr = np.empty(rows + 1, dtype=np.int64)
    indices = np.empty(nnz, dtype=np.int64)
    coeffs = np.empty((nnz, 4), dtype=np.uint64)
    indptr[:hm.rows] = hm.indptr[:-1]
    indices[:hm.nnz] = hmap[hm.indices]
    coeffs[:hm.nnz] = hm.coeffs.reshape(-1, 4)
    t_base, t_stride, t_ptr = base[cm.indices], stride[cm.indices], cm.indptr[:-1]
    for j in range(copies):
        lo, row = hm.nnz + j * cm.nnz, hm.rows + j * cm.rows
        out = indices[lo:lo + cm.nnz]
        np.multiply(t_stride, j, out=out)  # in place: no temporaries the size of a copy
        out += t_base
        coeffs[lo:lo + cm.nnz] = cm.coeffs
        indptr[row:row + cm.rows] = lo + t_ptr
    indptr[rows] = nnz
    return SparseMatrix(indptr, indices, coeffs)


def build_r1cs(prm: PorepParams) -> R1CS:
    hdr, ch = template(prm, header=True), template(prm, header=False)
    C, P = prm.challenges, prm.parents
    aux0 = 1 + prm.num_public  # index of comm_c in z
    # header: inputs 1..3 keep their index; aux a -> aux0 + a
    hmap = np.concatenate([np.arange(4), aux0 + np.arange(hdr.r1cs.num_aux)]).astype(np.int64)
    # challenge template: 0..3 shared, 4..4+P per challenge, then comm_c, comm_r_last, locals
    nvar = ch.r1cs.num_variables
    base = np.zeros(nvar, dtype=np.int64)
    stride = np.zeros(nvar, dtype=np.int64)
    base[:4] = np.arange(4)
    base[4:5 + P] = 4 + np.arange(1 + P)
    stride[4:5 + P] = 1 + P
    base[5 + P], base[6 + P] = aux0, aux0 + 1
    base[7 + P:] = aux0 + 2 + hdr.locals + np.arange(ch.locals)
    stride[7 + P:] = ch.locals
    mats = [_assemble(hm, hmap, cm, C, base, stride)
            for hm, cm in ((hdr.r1cs.a, ch.r1cs.a), (hdr.r1cs.b, ch.r1cs.b), (hdr.r1cs.c, ch.r1cs.c))]
    r1cs = R1CS(prm.num_public, 2 + hdr.locals + C * ch.locals, *mats)
    r1cs.validate()
    return r1cs
