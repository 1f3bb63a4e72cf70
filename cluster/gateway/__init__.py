"""The sealing pipeline's door: cuzk's ProvingEngine gRPC service in front of the cluster
(``zkhive gateway``: ``server``, ``service``, the stubs in ``pb``) and ``zkhive c2``, a drop-in for
``lotus-bench prove`` (``commands``); both read what Curio and lotus hand a C2 prover
(``c2input``). docs/gateway.md.
"""
