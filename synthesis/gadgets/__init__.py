"""Gadgets over Fr, written once for both constraint shape and batched witness values
(see ``core``): booleans and selection, Poseidon, Merkle-path inclusion."""
from .boolean import boolean, cond_swap, insert, to_bits
from .core import Num, Synth
from .merkle import root_from_path
from .poseidon import hash_nums, permute

__all__ = ["Num", "Synth", "boolean", "cond_swap", "insert", "to_bits", "hash_nums", "permute",
           "root_from_path"]
