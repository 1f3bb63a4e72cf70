"""filecoin: Filecoin's StackedDRG PoRep circuit (rust-fil-proofs' StackedCircuit, constraint for
constraint), its parameter sets for the published sector sizes, the sealing side and the C1
document (SealCommitPhase1Output). Importing this package registers every parameter set."""
from ..circuits import register
from .circuit import FilecoinCircuit
from .params import BIG, SETS, TINY, FilecoinParams

CIRCUITS = {name: register(FilecoinCircuit(prm)) for name, prm in SETS.items()}

__all__ = ["BIG", "CIRCUITS", "SETS", "TINY", "FilecoinCircuit", "FilecoinParams"]
