"""What is proved: the BLS12-381 scalar field, R1CS matrices, a constraint-system builder,
gadgets and circuits, and per-partition witness synthesis.

Dependency rule: ``synthesis`` imports nothing else of ours but ``arith`` (vectorised field
arithmetic: the same C++ field code the CUDA kernels use, built for the host); never ``gpu`` or
``cluster``.
"""
