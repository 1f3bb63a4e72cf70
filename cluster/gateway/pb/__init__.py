"""cuzk's ProvingEngine messages and service stubs, generated from ``proving.proto`` beside this
file by grpcio-tools (``python -m cluster.gateway.pb``) and committed: the gateway and Curio-side
tests then need only the grpcio and protobuf runtimes, no code generator at install or in the
images, and a change to the .proto shows in review as a change to the generated code.
``python -m cluster.gateway.pb --check`` (tests/unit/test_gateway_proto.py) fails when the
committed modules are not what the .proto generates.
"""
