"""How a partition's assignment travels from synthesis to the device, and what is checked on the
way (issue 16: at 2^27 an assignment is 130.6 M variables).

Synthesis stores ``synthesis.assignment.encode(z)`` in the blob store (a directory every worker
mounts; never Redis: the prove message carries a BlobRef of under 4 KiB): two bit planes (is
"other", is one) and the "other" values as 32-byte elements, ~80 MB for a 32 GiB partition
instead of the 4.2 GB of the full Fr vector. The prove worker (and its prove-ahead thread,
cluster/pipeline/prefetch.py, one partition ahead) reads the blob (size checked before reading, sha256
after: cluster/pipeline/blobs.py), then ``check_encoded`` checks everything ``decode_compact`` would,
on the packed bytes (no 130 M-entry arrays): the header's count against the circuit's variables,
the length, the two planes disjoint, the count of "other" bits against the header, and every
value below r. The checked blob goes to the backend as is when it expands the compact form
itself (``Backend.accepts_compact``: the CUDA backend uploads the planes and expands on the
device); only a backend that cannot gets the Fr vector, decoded on the host.
"""
from __future__ import annotations

import numpy as np

from synthesis import field
from synthesis.assignment import _HEADER, AssignmentError, read_header


def check_encoded(blob: bytes, n: int) -> bytes:
    """``blob`` if it is a well-formed encoding of ``n`` values (AssignmentError naming what is
    wrong otherwise), without expanding it."""
    count, m, plane = read_header(blob, n)
    planes = np.frombuffer(blob, dtype=np.uint8, offset=_HEADER.size, count=2 * plane)
    other, one = planes[:plane], planes[plane:]
    if count % 8:  # bits past the last value must be clear (they would be values n, n+1, ...)
        pad = np.uint8((0xFF << (count % 8)) & 0xFF)
        if (other[-1] & pad) or (one[-1] & pad):
            raise AssignmentError(f"assignment bit planes mark values past the last one ({count})")
    both = np.flatnonzero(other & one)
    if len(both):
        byte = int(both[0])
        bit = int(np.flatnonzero(np.unpackbits(other[byte:byte + 1] & one[byte:byte + 1],
                                               bitorder="little"))[0])
        raise AssignmentError(f"assignment value {8 * byte + bit} is marked both one and a field element")
    marked = int(np.bitwise_count(other).sum())
    if marked != m:
        raise AssignmentError(f"assignment marks {marked} values as field elements, its header says {m}")
    fes = np.frombuffer(blob, dtype="<u8", offset=_HEADER.size + 2 * plane, count=4 * m)
    field.check_vec(fes.reshape(m, 4), what="assignment field elements")
    return blob
