"""Our keys and proofs in other provers' formats: snarkjs JSON (``snarkjs``), the iden3 binary
files snarkjs reads (``iden3``: .r1cs, .wtns) and a TEST-ONLY prepared powers of tau (``ptau``)."""
