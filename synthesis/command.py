"""What the synthesis commands share (synthesis/cli.py and the filecoin family's
synthesis/filecoin/commands.py): their one-line error and the seed argument's parsing."""
from __future__ import annotations

import hashlib
import re


class CommandError(Exception):
    """A user-facing failure of a synthesis command; the ``zkhive`` command prints it as one
    line (cluster.cli.main), exit status 2."""


def parse_seed(text: str) -> bytes:
    """``0x`` + 64 hex digits is taken as is; any other text is hashed (SHA-256) to 32 bytes."""
    if re.fullmatch(r"0x[0-9a-fA-F]{64}", text):
        return bytes.fromhex(text[2:])
    return hashlib.sha256(text.encode()).digest()
