// One field operation chosen by number, on raw limbs: the test hooks of the host library
// (gpu/native/host.cpp: fr_op, fq_op, fq2_op) and of the device (ntt_field.cu) share these
// numbers and this code, so GPU == host on any input, non-canonical ones included.
//   0 add, 1 sub, 2 mul, 3 sqr, 4 inv, 5 neg, 6 to_mont, 7 from_mont, 8 (default) raw mont_mul;
//   Fq2 only: 9 mul_by_xi, 10 conj, 11 dbl, 12 mul_lean, 13 sqr_lean (the lean G2 addition's).
#pragma once
#include "fq2.cuh"

template <class F>
FF_FN F field_op(int op, const F& x, const F& y) {
    switch (op) {
        case 0: return x + y;
        case 1: return x - y;
        case 2: return (x.to_mont() * y.to_mont()).from_mont();
        case 3: return x.to_mont().sqr().from_mont();
        case 4: return x.to_mont().inv().from_mont();
        case 5: return -x;
        case 6: return x.to_mont();
        case 7: return x.from_mont();
        default: return x * y;
    }
}

FF_FN fq2_t fq2_field_op(int op, const fq2_t& x, const fq2_t& y) {
    switch (op) {
        case 9: return x.mul_by_xi();
        case 10: return x.conj();
        case 11: return x.dbl();
        case 12: return fq2_t::mul_lean(x.to_mont(), y.to_mont()).from_mont();
        case 13: return x.to_mont().sqr_lean().from_mont();
        default: return field_op(op, x, y);
    }
}
