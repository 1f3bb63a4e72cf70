"""A job's public inputs, computed once at submission and kept as a blob beside its C1.

The aggregation checks every partition proof against the public inputs of its partition. Those
come from the C1 input, and reading a 32 GiB PoRep C1 (37.5 MB of JSON) and parsing it costs the
aggregate worker seconds after the job's last partition: measured on the H200's cluster, 3.8 to
5.2 s a job, most of it the parse, which made the proof that late and the steady rate 0.46 s a
proof worse. The submission parses the C1 anyway (workflow's schema check), and the public inputs
are then a few milliseconds more (327 a partition for 32 GiB, ~220 kB as hex); the aggregation
reads them back and never parses the C1. A record written before (no ``publics``) or a blob that
is gone (expired, collected) falls back to the C1.
"""
from __future__ import annotations

from cluster.errors import BlobError

from .blobs import BlobRef

#: the blob's kind (BlobRef.kind), for messages and clean-up
KIND = "publics"


def compute(circuit, c1) -> list[list[int]]:
    """Each partition's public inputs from the parsed C1 (``circuit.parse_c1``)."""
    return [list(circuit.public_inputs(c1, k)) for k in range(circuit.num_partitions())]


def store(blobs, params: str, pubs: list[list[int]]) -> BlobRef:
    """Store them (``compute``'s lists); the reference goes into the job record (JobRecord.publics)."""
    doc = {"params": params, "public_inputs": [[hex(x) for x in pub] for pub in pubs]}
    return blobs.put_json(doc, kind=KIND)


def read(blobs, ref: BlobRef, params: str, num_partitions: int) -> list[list[int]]:
    """The stored public inputs, one list a partition. BlobError when the blob is missing or is
    not what a job of ``params`` with ``num_partitions`` partitions stored (the caller falls back
    to the C1); the verifier checks each value's range and the count its key takes."""
    doc = blobs.get_json(ref)
    pubs = doc.get("public_inputs") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("params") != params or not isinstance(pubs, list) \
            or len(pubs) != num_partitions or not all(isinstance(p, list) for p in pubs):
        raise BlobError(f"blob {ref.short()} is not the public inputs of a {params} job "
                        f"of {num_partitions} partitions")
    try:
        return [[int(x, 16) for x in pub] for pub in pubs]
    except (TypeError, ValueError):
        raise BlobError(f"blob {ref.short()}: a public input is not a hex string") from None
