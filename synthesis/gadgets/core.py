"""Alias of ``synthesis.bellpepper.core`` for ``synthesis/filecoin/post.py`` only (see
``synthesis/gadgets/__init__.py``): nothing else may import it."""
from ..bellpepper.core import Synth  # noqa: F401
