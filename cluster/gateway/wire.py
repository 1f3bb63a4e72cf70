"""What the gateway's calls share, below the service and the per-kind request readers
(postinput, snap): a call's refusal with its gRPC status, and cuzk's priorities."""
from __future__ import annotations

import grpc

from .pb import proving_pb2 as pb

#: cuzk's Priority -> the cluster's priority names (PRIORITY_UNSPECIFIED: the kind's default;
#: PoRep's is NORMAL)
PRIORITIES = {pb.PRIORITY_UNSPECIFIED: "normal", pb.LOW: "bulk", pb.NORMAL: "normal",
              pb.HIGH: "high", pb.CRITICAL: "critical"}


class Abort(Exception):
    """A call's gRPC status and one-line message (``ProvingEngine._call`` aborts with it)."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code
