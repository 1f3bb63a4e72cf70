"""filecoin: Filecoin's StackedDRG PoRep circuit (rust-fil-proofs' StackedCircuit, constraint for
constraint), its parameter sets for the published sector sizes, the sealing side and the C1
document (SealCommitPhase1Output); its FallbackPoSt sets (WinningPoSt, WindowPoSt: post.py,
post_job.py). Importing this package registers every parameter set."""
from ..circuits import register
from .circuit import FilecoinCircuit
from .params import BIG, SETS, TINY, FilecoinParams
from .post_job import CIRCUITS as _POST

CIRCUITS = {name: register(FilecoinCircuit(prm)) for name, prm in SETS.items()}
POST_CIRCUITS = {name: register(c) for name, c in _POST.items()}
# SnapDeals' EmptySectorUpdate (snap-update-2k .. -64g): synthesis/filecoin/snap_circuit.py
from . import snap_circuit  # noqa: E402
UPDATE_CIRCUITS = {name: register(c) for name, c in snap_circuit.SETS.items()}

__all__ = ["BIG", "CIRCUITS", "POST_CIRCUITS", "SETS", "TINY", "UPDATE_CIRCUITS", "FilecoinCircuit",
           "FilecoinParams"]
