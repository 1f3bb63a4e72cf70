"""Retired (issue 36): neptune's parameters and the plain permutation are
``synthesis.bellpepper.neptune_params``. ``hash_ints`` stays here for
``synthesis/filecoin/post.py`` only (another branch's file at the time); delete this module once
post.py calls ``bellpepper.neptune_params.hash_ints``."""
from .bellpepper.neptune_params import hash_ints  # noqa: F401
