"""The host side of a key manifest (gpu/backends/cuda.py ``key_head``/``head_key``,
gpu/cuda/memory.py ``ExportTable``/``IpcBuffer``): what a prover rebuilds from a key holder's
manifest before any device call, and the malformed manifests it refuses in one line. The device
side (export, attach, proofs) is tests/gpu/test_keyholder_cuda.py."""
from __future__ import annotations

import json

import pytest

from gpu.errors import GpuError


@pytest.fixture(scope="module")
def keys():
    from gpu.groth16.setup import setup
    from tests.compact_circuits import toy

    return setup(toy(9).to_r1cs(), seed=b"manifest"), setup(toy(8).to_r1cs(), seed=b"manifest")


def test_key_head_round_trip_keeps_what_combine_needs(keys):
    from gpu.backends.cuda import head_key, key_head

    (pk, vk), _ = keys
    head = json.loads(json.dumps(key_head(pk)))  # as it travels
    back = head_key(head)
    assert back.on_device and back.a_query is None and back.h_query is None
    assert back.vk.to_bytes() == vk.to_bytes() and back.circuit_digest == pk.circuit_digest
    assert back.beta_g1 == pk.beta_g1 and back.delta_g1 == pk.delta_g1
    assert (back.num_public, back.num_aux, back.num_constraints, back.domain_size) == \
        (pk.num_public, pk.num_aux, pk.num_constraints, pk.domain_size)


def test_key_head_refuses_a_head_that_does_not_hold_together(keys):
    from gpu.backends.cuda import head_key, key_head

    (pk, _), (other, _) = keys
    head = key_head(pk)
    mixed = {**head, "vk": key_head(other)["vk"]}  # another circuit's verifying key
    with pytest.raises(GpuError, match=r"^manifest: the verifying key is not the head's \(digest or inputs differ\)$"):
        head_key(mixed)
    for bad in ({**head, "beta_g1": "00" * 48}, {**head, "vk": "zz"}, {k: v for k, v in head.items() if k != "domain"}):
        with pytest.raises(GpuError, match="^manifest: the key's head does not decode") as e:
            head_key(bad)
        assert "\n" not in str(e.value)


def test_export_table_refuses_malformed_buffers_before_any_device_call():
    from gpu.cuda.memory import ExportTable

    good = "ab" * 64
    for entries, says in [("x", "'buffers' is not a list"),
                          ([7, {"handle": good, "nbytes": 8}], "buffer 0 is not an object"),
                          ([{"handle": "ab" * 63, "nbytes": 8, "what": "g1 bases"}],
                           "g1 bases: not a CUDA IPC handle of 64 bytes"),
                          ([{"handle": "not hex", "nbytes": 8}], "handle of 0 bytes"),
                          ([{"handle": good, "nbytes": 0}], "0 bytes)")]:
        with pytest.raises(GpuError, match="manifest: " if "buffer" in says else None) as e:
            ExportTable.open(entries)
        assert says in str(e.value) and "\n" not in str(e.value)


def test_export_table_get_names_the_buffer_and_the_size():
    from gpu.cuda.memory import ExportTable, IpcBuffer

    table = ExportTable()
    b = IpcBuffer.__new__(IpcBuffer)  # a mapped buffer's fields without a device
    b.nbytes, b.what, b._alloc = 64, "matrix A h_ptr", None
    table.opened.append(b)
    assert table.get(0, 64) is b
    with pytest.raises(GpuError, match=r"manifest: matrix A h_col names buffer 3, there are 1"):
        table.get(3, 8, "matrix A h_col")
    with pytest.raises(GpuError, match=r"manifest: matrix A h_ptr \(buffer 0\) has 64 bytes, 72 needed"):
        table.get(0, 72, "matrix A h_ptr")
    with pytest.raises(GpuError, match="names buffer '0'"):
        table.get("0", 8, "x")
