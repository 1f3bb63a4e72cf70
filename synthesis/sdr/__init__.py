"""sdr: a StackedDRG-shaped circuit family with SHA-256 labels and a SHA-256 TreeD, from ~2^18
constraints a partition up to the 32 GiB partition shape (~130 M). Importing this package
registers every parameter set."""
from ..circuits import register
from .circuit import CompactR1CS, SdrCircuit, build_compact
from .params import BIG, SETS, TINY, SdrParams
from .sector import Sector, c1_document, generate, interactive_seed

CIRCUITS = {name: register(SdrCircuit(prm)) for name, prm in SETS.items()}

__all__ = ["BIG", "CIRCUITS", "SETS", "TINY", "CompactR1CS", "SdrCircuit", "SdrParams", "Sector",
           "build_compact", "c1_document", "generate", "interactive_seed"]
