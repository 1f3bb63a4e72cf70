"""The family base (synthesis.family): what porep-lite and filecoin share, and what a new family plugs
into: the family table, C1 validation's one-line errors, the sector store, the matrix cache."""
from __future__ import annotations

import json

import numpy as np
import pytest

from synthesis import family
from synthesis.circuits import C1Error, known
from synthesis.family import c1 as fc1
from synthesis.family import sector as store
from synthesis.family.circuit import cached


def test_every_family_registers_its_sets_and_names_its_sealing_side():
    names = known()
    for fam in family.FAMILIES.values():
        side = family.sealing(fam.name)
        for attr in ("Sector", "generate", "c1_document", "interactive_seed"):
            assert hasattr(side, attr), f"{fam.name}'s sealing side lacks {attr}"
        assert "properties" in family.schema(fam.name).json_schema()
    assert any(n.startswith("porep-lite-") for n in names) and any(n.startswith("filecoin-test-") for n in names)
    assert not any(n.startswith("sdr-") for n in names)  # retired (issue 36)


def test_unknown_family_is_refused_naming_the_known_ones():
    with pytest.raises(KeyError, match=r"unknown circuit family 'nope'; known: filecoin, porep-lite\"?$"):
        family.sealing("nope")


def test_unknown_parameter_set_is_one_short_line_with_the_close_names():
    """The registry holds dozens of sets (PoRep, PoSt, SnapDeals at every size): listing them
    all made a 642-character error (the C1 fuzz test's one-line bound is 400). The error names
    the close ones and the families, and points to `zkhive circuits`."""
    from synthesis.circuits import get_circuit

    for name, close in (("winning-post-32", "winning-post-32g"), ("1", None),
                        ("x" * 500, None), (["porep-lite-4k"], None)):
        with pytest.raises(KeyError) as e:
            get_circuit(name)
        msg = e.value.args[0]
        assert "\n" not in msg and len(msg) < 300, msg
        assert msg.startswith("unknown parameter set ") and "`zkhive circuits` lists them" in msg
        assert "porep-lite" in msg and "window-post" in msg and "test-" not in msg.split(";")[1]
        assert (f"did you mean {close}" in msg) if close else "did you mean" not in msg, msg
    assert get_circuit("winning-post-32g").name == "winning-post-32g"


def test_validate_turns_the_first_pydantic_error_into_one_line_with_field_and_partition():
    from synthesis.porep import c1 as porep_c1
    from synthesis.porep.params import SETS
    prm = SETS["porep-lite-4k"]
    with pytest.raises(C1Error) as e:
        porep_c1.parse(prm, {"version": 1, "circuit": "porep-lite", "params": prm.name,
                             "seed": "0x" + "00" * 32, "replica_id": "0x1", "comm_d": "0x1",
                             "comm_r": "0x1", "comm_c": "0x1", "comm_r_last": "0x1",
                             "partitions": [{"challenges": [{"node": -1}]}]})
    msg = str(e.value)
    assert "\n" not in msg
    assert e.value.partition == 0 and e.value.field == "partitions[0].challenges[0].node"
    assert msg.startswith("partition 0; field partitions[0].challenges[0].node: ")
    with pytest.raises(C1Error, match=r"a C1 document is a JSON object, not list"):
        porep_c1.parse(prm, [])


def test_field_elements_must_be_canonical_and_digests_below_2_254():
    from synthesis import field
    assert fc1.canonical_fr(hex(field.MODULUS - 1))
    with pytest.raises(ValueError, match="not below the BLS12-381 scalar field modulus"):
        fc1.canonical_fr(hex(field.MODULUS))
    assert fc1.below_2_254(hex((1 << 254) - 1))
    with pytest.raises(ValueError, match="top two bits must be clear"):
        fc1.below_2_254(hex(1 << 254))


def test_length_check_names_the_path():
    fc1.expect(3, 3, "partitions", None, "partitions")
    with pytest.raises(C1Error, match=r"partition 2; field partitions\[2\]\.challenges: has 4 "
                                      r"challenges, 5 expected for this parameter set"):
        fc1.expect(4, 5, "partitions[2].challenges", 2, "challenges")


def test_sector_store_round_trip_and_its_one_line_errors(tmp_path):
    sets = {"x": object()}
    meta = {"version": 1, "family": "filecoin", "params": "x", "seed": "0x" + "ab" * 32,
            "replica_id": store.hexfe(7), "comm_r": store.hexfe(9)}
    store.save(tmp_path / "s", {"data": np.arange(8, dtype=np.uint64).reshape(2, 4)}, meta)
    got, prm, seed, rid = store.read_meta(tmp_path / "s", sets)
    assert (got, prm, seed, rid) == (meta, sets["x"], bytes([0xab]) * 32, 7)
    assert store.read_arrays(tmp_path / "s", ["data"])["data"].tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert store.family_of(tmp_path / "s", "porep-lite") == "filecoin"
    store.check_commitment(tmp_path / "s", meta, 9)
    with pytest.raises(store.SectorError, match="does not match comm_r in sector.json"):
        store.check_commitment(tmp_path / "s", meta, 10)
    with pytest.raises(store.SectorError, match=r"not a sector directory \(.*sector.json is missing\)"):
        store.read_meta(tmp_path / "none", sets)
    assert store.family_of(tmp_path / "none", "porep-lite") == "porep-lite"
    (tmp_path / "s" / "sector.json").write_text(json.dumps({**meta, "params": "y"}))
    with pytest.raises(store.SectorError, match=r"sector.json: malformed \(KeyError\('y'\)\)"):
        store.read_meta(tmp_path / "s", sets)
    with pytest.raises(store.SectorError, match=r"sector.npz: unreadable or incomplete"):
        store.read_arrays(tmp_path / "s", ["labels"])


def test_matrix_cache_is_rebuilt_when_unreadable(tmp_path):
    path = tmp_path / "m.npz"
    built, saved = [], []

    def load():
        with np.load(path, allow_pickle=False) as z:
            return int(z["v"])

    def build():
        built.append(1)
        return 5

    def save(v):
        saved.append(v)
        np.savez(path, v=np.array(v))

    assert cached(load, build, save) == 5 and built == [1] and saved == [5]   # missing
    assert cached(load, build, save) == 5 and built == [1]                     # read back
    path.write_bytes(b"PK\x03\x04 half a zip")
    assert cached(load, build, save) == 5 and built == [1, 1]                  # corrupt: rebuilt
