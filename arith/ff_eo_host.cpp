// Host build of the device's even/odd Montgomery product and square (ff_ptx.cuh,
// ff_eo::mont_mul, ff_eo::mont_sqr) with the carry flag emulated: tests/unit/test_ff_eo_host.py
// runs the exact instruction sequence the device runs and compares it with Python integers and
// with the portable CIOS product.
#define FF_PTX_EMULATE 1
#include "fr.cuh"

extern "C" {
// out = a b R^-1 (raw limbs); returns 1 when a step the bounds rule out carried out.
int eo_mul(int field, const uint32_t* a, const uint32_t* b, uint32_t* out) {
    ff_eo::lost() = 0;
    if (field == 0) ff_eo::mont_mul<fr_params, 8>(out, a, b);
    else ff_eo::mont_mul<fq_params, 12>(out, a, b);
    return (int)ff_eo::lost();
}
// out = a^2 R^-1 (raw limbs) by ff_eo::mont_sqr; returns 1 when a step the bounds rule out
// carried out.
int eo_sqr(int field, const uint32_t* a, uint32_t* out) {
    ff_eo::lost() = 0;
    if (field == 0) ff_eo::mont_sqr<fr_params, 8>(out, a);
    else ff_eo::mont_sqr<fq_params, 12>(out, a);
    return (int)ff_eo::lost();
}
}
