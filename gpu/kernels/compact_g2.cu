// The device setup's G2 fixed-base kernels (compact.cu's bodies): a module of their own, built
// beside compact.cu's (the G2 ones are the slow ones to compile).
#define COMPACT_G2_ONLY
#include "compact.cu"
