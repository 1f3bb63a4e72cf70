"""porep-lite: a StackedDRG-shaped circuit family whose size scales from ~2^12 to ~2^24
constraints per partition. Importing this package registers every parameter set."""
from ..circuits import register
from .circuit import PorepLite
from .matrices import build_r1cs
from .params import SETS, TINY, PorepParams
from .sector import Sector, c1_document, generate

CIRCUITS = {name: register(PorepLite(prm)) for name, prm in SETS.items()}

__all__ = ["CIRCUITS", "SETS", "TINY", "PorepLite", "PorepParams", "Sector", "build_r1cs",
           "c1_document", "generate"]
