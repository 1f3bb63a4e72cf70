"""bellpepper-core / bellperson / storage-proofs-core gadgets, constraint for constraint.

Our code, written from reading theirs (bellpepper-core 0.2.1 ``gadgets/{boolean,num}.rs`` and
``lc.rs``; bellperson 0.27 ``gadgets/{uint32,multieq,sha256,multipack}.rs``; rust-fil-proofs'
``storage-proofs-core/src/gadgets/{uint64,constraint}.rs``; neptune 11 ``src/circuit.rs``): the
same constraints in the same order, the same linear combinations, the same variables in the same
allocation order, the same constant folding. A Groth16 key is tied to the exact R1CS.

Linear combinations: bellpepper-core's ``LinearCombination`` keeps one term per variable (an
``Indexer`` sorted by index: adding a variable already present adds to its coefficient), and a
coefficient that sums to zero stays as a zero term, which every R1CS recorder (bellperson's key
generator, Curio's cuzk ``RecordingCS``) skips. ``synthesis.builder.LinearCombination`` (a dict
that merges and drops zeros) is the same matrix entry for entry, so the gadgets use it.

Every gadget takes a ``synthesis.bellpepper.core.Synth``: shape mode records into a
``ConstraintSystem(with_values=False)`` (or a ``TemplatingCS``), values mode computes a batch of
values (one row per instance) of every allocated variable in allocation order; both at once in
tests. Bits are (B,) uint8 arrays in values mode and are handed to ``Synth.values`` as
``BitBlock``s.
"""
from .boolean import AllocatedBit, Boolean, Unsatisfiable
from .num import AllocatedNum, alloc_num, equal, inputize, to_bits_le, to_bits_le_strict
from .uint32 import UInt32
from .multieq import MultiEq
from .uint64 import UInt64

__all__ = ["AllocatedBit", "Boolean", "Unsatisfiable", "AllocatedNum", "alloc_num", "equal",
           "inputize", "to_bits_le", "to_bits_le_strict", "UInt32", "MultiEq", "UInt64"]
