// The BLS12-381 fields as instances of ff<>.
#pragma once
#include "params.cuh"
#include "ff.cuh"

typedef ff<fr_params> fr_t;
typedef ff<fq_params> fq_t;
