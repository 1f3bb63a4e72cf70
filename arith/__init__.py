"""The shared field arithmetic of BLS12-381: the ``__host__ __device__`` headers (``include/``:
Montgomery Fr and Fq, Fq2, sparse row products) that the CUDA kernels, the host library and the
Poseidon kernel all include, and the host library itself (``native``: vectorised Fr operations,
NTT, compute_h, built with g++).

The lowest layer: it imports nothing of ours. ``synthesis`` (what is proved) and ``gpu`` (how)
both build on it; neither needs the other for field arithmetic.
"""

#: r, the order of BLS12-381's prime subgroup: the scalar field Fr that circuits are written over
#: (``params.cuh`` holds the same value for the C++ side; tests/unit/test_field_host.py checks)
FR_MODULUS = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
