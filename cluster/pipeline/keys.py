"""The key cache (``[srs] param_cache``): one proving and one verifying key per parameter set.

    <param_cache>/<params>.<digest16>.pk    ProvingKey file (gpu.groth16.keys format)
    <param_cache>/<params>.<digest16>.vk    VerifyingKey file

``digest16`` is the first 16 hex digits of ``circuit.digest()``, so a changed circuit definition
never picks up an old key. ``zkhive keys setup --params NAME`` makes them (``gpu.setup`` on the
circuit's R1CS). The key file's size is what routing assumes a prover needs to hold it resident.
"""
from __future__ import annotations

import os
from pathlib import Path

from cluster.errors import KeyMissing


class KeyCache:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def path(self, circuit, kind: str) -> Path:
        if kind not in ("pk", "vk"):
            raise ValueError(f"key kind must be pk or vk, not {kind!r}")
        return self.root / f"{circuit.name}.{circuit.digest()[:16]}.{kind}"

    def has(self, circuit) -> bool:
        return self.path(circuit, "pk").exists() and self.path(circuit, "vk").exists()

    def size(self, circuit) -> int:
        """Bytes of the proving key file (0 when absent)."""
        try:
            return self.path(circuit, "pk").stat().st_size
        except FileNotFoundError:
            return 0

    def _need(self, circuit, kind: str) -> Path:
        p = self.path(circuit, kind)
        if p.is_dir():  # one line, not an IsADirectoryError traceback at open
            raise KeyMissing(f"{'proving' if kind == 'pk' else 'verifying'} key for parameter set "
                             f"{circuit.name!r}: {p} is a directory, not a key file")
        if not p.exists():
            raise KeyMissing(f"no {'proving' if kind == 'pk' else 'verifying'} key for parameter set "
                             f"{circuit.name!r} at {p}: run `zkhive keys setup --params {circuit.name}`")
        return p

    def load_pk(self, circuit):
        from gpu.groth16 import ProvingKey
        return ProvingKey.load(self._need(circuit, "pk"))

    def load_vk(self, circuit):
        from gpu.groth16 import VerifyingKey
        return VerifyingKey.load(self._need(circuit, "vk"))

    def setup(self, circuit, *, force: bool = False, backend: str = "cpu") -> tuple[Path, Path]:
        """Generate and store the keys (a trusted setup for tests and development only).
        ``backend="cuda"`` (or "auto" on a GPU machine) computes the queries with the device's
        batched fixed-base multiplication: 6 s at 2^20, 79 s at 2^24 on the H200."""
        from gpu import setup

        pk_path, vk_path = self.path(circuit, "pk"), self.path(circuit, "vk")
        if self.has(circuit) and not force:
            return pk_path, vk_path
        self.root.mkdir(parents=True, exist_ok=True)
        pk, vk = setup(circuit.r1cs(), backend=backend)
        # save() writes a temporary file and renames it: a worker never loads half a key
        pk.save(pk_path)
        vk.save(vk_path)
        return pk_path, vk_path
