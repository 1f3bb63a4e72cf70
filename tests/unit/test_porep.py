"""porep-lite: matrices, synthesis, the vanilla-proof checks, the C1 model and the cache."""
import copy
import json

import numpy as np
import pytest

from synthesis import field as F
from synthesis.assignment import values_array
from synthesis.builder import ConstraintSystem
from synthesis.circuits import C1Error, get_circuit
from synthesis.bellpepper.core import Synth
from synthesis.bellpepper.core import const_vec, small_ints_vec
from synthesis.porep import SETS, PorepLite, PorepParams, c1_document, generate
from synthesis.porep import circuit as pc
from synthesis.porep.sector import Sector, SectorError
from synthesis.r1cs import UnsatisfiedConstraint

SEED, CHALLENGE_SEED = b"\x11" * 32, b"\x22" * 32
#: Two challenges, two partitions, both kinds of parents: small, but every offset is exercised.
SMALL = PorepParams("porep-lite-test", log_nodes=3, layers=2, base_degree=1, exp_degree=1,
                    challenges=2, partitions=2)


@pytest.fixture(autouse=True)
def cache_dir(tmp_path_factory, monkeypatch):
    from arith import native
    native.lib()  # the host library stays in its usual cache; only matrices go to the temp dir
    d = tmp_path_factory.getbasetemp() / "zkhive-cache"
    monkeypatch.setenv("ZKHIVE_CACHE_DIR", str(d))
    return d


@pytest.fixture(scope="module")
def small():
    circuit = PorepLite(SMALL)
    sector = generate(SMALL, SEED)
    doc = c1_document(sector, CHALLENGE_SEED)
    return circuit, sector, doc


def direct_partition(prm: PorepParams, c1, k: int):
    """The whole partition in one constraint system, shape and values, no templates."""
    circuit = PorepLite(prm)
    pub_ints = circuit.public_inputs(c1, k)
    cs = ConstraintSystem(with_values=False)
    s = Synth(cs=cs, batch=1)
    v = lambda x: const_vec(x, 1)  # noqa: E731
    pub = {n: s.input(cs.alloc_input(), v(x)) for n, x in zip(("replica_id", "comm_d", "comm_r"), pub_ints)}
    per = []
    for i in range(prm.challenges):
        row = pub_ints[3 + i * prm.public_per_challenge:3 + (i + 1) * prm.public_per_challenge]
        per.append([s.input(cs.alloc_input(), small_ints_vec(np.array([x]))) for x in row])
    comm_c, comm_r_last = int(c1.comm_c, 16), int(c1.comm_r_last, 16)
    pub["comm_c"] = s.input(cs.alloc(), v(comm_c))
    pub["comm_r_last"] = s.input(cs.alloc(), v(comm_r_last))
    pc.header_gadget(s, pub)
    wit = circuit._witness(c1.partitions[k])
    for i in range(prm.challenges):
        one = pc.ChallengeWitness(*(getattr(wit, f)[i:i + 1] for f in pc.ChallengeWitness.__dataclass_fields__))
        pc.challenge_gadget(s, prm, {**pub, "challenge": per[i][0], "parents": per[i][1:]}, one)
    z = np.concatenate([F.vec_from_ints([1, *pub_ints, comm_c, comm_r_last]),
                        values_array(s.values, 1).reshape(-1, 4)])
    return cs.to_r1cs(), z


def test_replicated_matrices_and_batched_witness_equal_a_direct_build(small):
    circuit, _, doc = small
    c1 = circuit.parse_c1(doc)
    r1cs = circuit.r1cs()
    for k in range(SMALL.partitions):
        direct, z_direct = direct_partition(SMALL, c1, k)
        assert (direct.num_public, direct.num_aux) == (r1cs.num_public, r1cs.num_aux)
        for mine, ref in ((r1cs.a, direct.a), (r1cs.b, direct.b), (r1cs.c, direct.c)):
            assert np.array_equal(mine.indptr, ref.indptr)
            assert np.array_equal(mine.indices, ref.indices)
            assert np.array_equal(mine.coeffs, ref.coeffs)
        z = circuit.synthesize(c1, k, check=True)
        assert np.array_equal(z, z_direct)
        assert F.vec_to_ints(z[1:1 + r1cs.num_public]) == circuit.public_inputs(c1, k)


@pytest.mark.parametrize("name", ["porep-lite-4k", "porep-lite-16k", "porep-lite-64k",
                                  "porep-lite-256k",
                                  pytest.param("porep-lite-1m", marks=pytest.mark.slow)])
def test_every_parameter_set_satisfies_its_r1cs(name):
    circuit = get_circuit(name)
    prm = circuit.prm
    c1 = circuit.parse_c1(c1_document(generate(prm, SEED), CHALLENGE_SEED))
    r1cs = circuit.r1cs()
    size = circuit.size()
    assert (r1cs.num_constraints, r1cs.num_variables, r1cs.nnz) == \
        (size["constraints"], size["variables"], size["nonzeros"])
    k = prm.partitions - 1
    z = circuit.synthesize(c1, k)
    r1cs.check(z)
    z[-1] = F.vec_from_ints([3])[0]  # the backstop: a wrong witness value fails the matrices
    with pytest.raises(UnsatisfiedConstraint):
        r1cs.check(z)


def test_parameter_sets_fit_their_names_domain():
    for name in SETS:
        size = get_circuit(name).size()
        rows = size["constraints"] + size["public_inputs"] + 1  # plus the input rows of the QAP
        want = {"k": 1 << 10, "m": 1 << 20}[name[-1]] * int(name.split("-")[-1][:-1])
        assert want // 2 < rows <= want, (name, rows)
    assert get_circuit("porep-lite-1m").num_partitions() == 10
    assert get_circuit("porep-lite-16m").num_partitions() == 10


def tampered(doc, path, fn):
    """A copy of ``doc`` with the value at ``path`` (a list of keys) replaced by fn(value)."""
    doc = copy.deepcopy(doc)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = fn(node[path[-1]])
    return doc


def flip_hex(x: str) -> str:
    """Change one hex digit (one byte's low nibble), staying canonical."""
    return x[:-1] + ("0" if x[-1] != "0" else "1")


CH = ["partitions", 1, "challenges", 1]
AT = "partitions[1].challenges[1]"


@pytest.mark.parametrize("path,fn,field", [
    (CH + ["tree_d_path", 2], flip_hex, f"{AT}.tree_d_path"),
    (CH + ["data_leaf"], flip_hex, f"{AT}.tree_d_path"),
    (CH + ["parents", 0, "column", 0], flip_hex, f"{AT}.parents[0]"),
    (CH + ["parents", 1, "tree_c_path", 0, 3], flip_hex, f"{AT}.parents[1]"),
    (CH + ["column", 1], flip_hex, f"{AT}.column[1]"),
    (CH + ["tree_c_path", 0, 6], flip_hex, f"{AT}.tree_c_path"),
    (CH + ["tree_r_path", 0, 0], flip_hex, f"{AT}.tree_r_path"),
    (CH + ["node"], lambda v: v % 7 + 1, f"{AT}.node"),
    (CH + ["parents", 1, "node"], lambda v: (v + 1) % 8, f"{AT}.parents[1].node"),
])
def test_tampered_vanilla_proof_is_rejected_naming_partition_and_challenge(small, path, fn, field):
    circuit, _, doc = small
    bad = tampered(doc, path, fn)
    c1 = circuit.parse_c1(bad)
    circuit.synthesize(c1, 0)  # the other partition is untouched and still synthesizes
    with pytest.raises(C1Error) as e:
        circuit.synthesize(c1, 1)
    assert e.value.partition == 1
    assert e.value.field == field
    assert "challenge 1" in str(e.value) and "partition 1" in str(e.value)


def test_tampered_commitments_and_seed_are_rejected(small):
    circuit, _, doc = small
    with pytest.raises(C1Error) as e:
        circuit.synthesize(circuit.parse_c1(tampered(doc, ["comm_r"], flip_hex)), 0)
    assert e.value.field == "comm_r"
    with pytest.raises(C1Error) as e:
        circuit.synthesize(circuit.parse_c1(tampered(doc, ["comm_d"], flip_hex)), 1)
    assert e.value.field == "partitions[1].challenges[0].tree_d_path"
    with pytest.raises(C1Error) as e:  # the challenges no longer come from the seed
        circuit.synthesize(circuit.parse_c1(tampered(doc, ["seed"], flip_hex)), 1)
    assert e.value.field == "partitions[1].challenges[0].node"


@pytest.mark.parametrize("path,fn,field,match", [
    (CH + ["tree_d_path", 2], lambda v: hex(F.MODULUS), f"{AT}.tree_d_path[2]", "modulus"),
    (CH + ["tree_d_path", 2], lambda v: "12", f"{AT}.tree_d_path[2]", "does not match"),
    (CH + ["tree_d_path"], lambda v: v[:-1], f"{AT}.tree_d_path", "2 levels, 3 expected"),
    (CH + ["tree_r_path", 0], lambda v: v[:-1], f"{AT}.tree_r_path[0]", "at least 7"),
    (CH + ["parents"], lambda v: v[:1], f"{AT}.parents", "1 parents, 2 expected"),
    (CH + ["parents", 0, "column"], lambda v: v * 2, f"{AT}.parents[0].column", "4 labels, 2 expected"),
    (CH + ["node"], lambda v: 8, f"{AT}.node", "outside the sector"),
    (["partitions", 1, "challenges"], lambda v: v * 3000, "partitions[1].challenges", "at most 4096"),
    (["partitions", 1, "challenges"], lambda v: v * 2, "partitions[1].challenges", "4 challenges, 2 expected"),
    (["partitions"], lambda v: v[:1], "partitions", "1 partitions, 2 expected"),
    (CH + ["extra"], lambda v: 1, f"{AT}.extra", "is not a field of this document"),
])
def test_malformed_c1_is_rejected_naming_the_field(small, path, fn, field, match):
    circuit, _, doc = small
    if path[-1] == "extra":
        bad = copy.deepcopy(doc)
        bad["partitions"][1]["challenges"][1]["extra"] = 1
    else:
        bad = tampered(doc, path, fn)
    with pytest.raises(C1Error, match=match) as e:
        circuit.parse_c1(bad)
    assert e.value.field == field
    if field.startswith("partitions[1]"):
        assert e.value.partition == 1


def test_c1_document_level_errors(small):
    circuit, _, doc = small
    with pytest.raises(C1Error, match="parameter set 'porep-lite-4k'"):
        circuit.parse_c1({**doc, "params": "porep-lite-4k"})
    with pytest.raises(C1Error) as e:
        circuit.parse_c1({**doc, "version": 2})
    assert e.value.field == "version"
    with pytest.raises(C1Error, match="JSON object"):
        circuit.parse_c1([doc])
    c1 = circuit.parse_c1(json.loads(json.dumps(doc)))  # survives a JSON round trip
    with pytest.raises(C1Error, match="outside 0..1"):
        circuit.synthesize(c1, 2)


def test_matrices_are_cached_on_disk_by_digest(small, cache_dir):
    circuit = PorepLite(SMALL)
    r1cs = circuit.r1cs()
    path = cache_dir / "r1cs" / f"{SMALL.digest()}.npz"
    assert path.exists()
    again = PorepLite(SMALL).r1cs()  # a fresh instance reads the file
    assert again.digest() == r1cs.digest()
    for damaged in (b"not a zip file", b"PK\x03\x04 truncated"):  # rebuilt, not trusted
        path.write_bytes(damaged)
        assert PorepLite(SMALL).r1cs().digest() == r1cs.digest()
    with pytest.raises(ValueError, match="public inputs"):
        pc.load_r1cs(path, SETS["porep-lite-4k"])
    other = PorepParams(**{**SMALL.__dict__, "challenges": 3})
    assert other.digest() != SMALL.digest()


def test_sector_is_deterministic_and_round_trips(small, tmp_path):
    _, sector, _ = small
    again = generate(SMALL, SEED)
    assert again.comm_r == sector.comm_r and again.comm_d == sector.comm_d
    assert generate(SMALL, b"\x12" * 32).comm_r != sector.comm_r
    sector = generate(SETS["porep-lite-4k"], SEED)  # files name a registered parameter set
    sector.save(tmp_path / "s")
    loaded = Sector.load(tmp_path / "s")
    assert loaded.comm_r == sector.comm_r and np.array_equal(loaded.labels, sector.labels)
    meta = json.loads((tmp_path / "s" / "sector.json").read_text())
    (tmp_path / "s" / "sector.json").write_text(json.dumps({**meta, "comm_r": "0x1"}))
    with pytest.raises(SectorError, match="does not match comm_r"):
        Sector.load(tmp_path / "s")
    with pytest.raises(SectorError, match="not a sector directory"):
        Sector.load(tmp_path / "missing")
    (tmp_path / "s" / "sector.json").write_text(json.dumps(meta))
    (tmp_path / "s" / "sector.npz").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(SectorError, match="unreadable or incomplete"):
        Sector.load(tmp_path / "s")


def test_labels_follow_their_definition_on_python_ints():
    from synthesis.bellpepper import neptune_params as ps
    from synthesis.porep import graph
    from synthesis.porep.sector import label_layers
    prm, rid = SETS["porep-lite-16k"], 987654321
    labels = label_layers(prm, rid)
    par = graph.parents(prm).tolist()
    ref: list[list[int]] = []
    for layer in range(1, prm.layers + 1):
        cur, prev = [], ref[-1] if ref else None
        for v in range(prm.nodes):
            base = [cur[p] if v else 0 for p in par[v][:prm.base_degree]]
            exp = [prev[p] for p in par[v][prm.base_degree:]] if prev else [0] * prm.exp_degree
            cur.append(ps.hash_ints([rid, graph.layer_tag(layer, v), *base, *exp]))
        ref.append(cur)
    assert [F.vec_to_ints(lv) for lv in labels] == ref
    assert F.vec_to_ints(label_layers(prm, rid + 1)[0][:1]) != ref[0][:1]


def test_challenges_avoid_node_zero_and_parents_precede():
    from synthesis.porep import graph
    prm = SETS["porep-lite-64k"]
    par = graph.parents(prm)
    v = np.arange(prm.nodes)
    assert np.all(par[1:, 0] == v[1:] - 1)
    assert np.all(par[1:, :prm.base_degree] < v[1:, None])
    assert np.all((par >= 0) & (par < prm.nodes))
    ch = [graph.challenge(prm, b"\x00" * 32, 5, k, i) for k in range(4) for i in range(50)]
    assert min(ch) >= 1 and max(ch) < prm.nodes and len(set(ch)) > 100


def test_json_schema_accepts_documents_and_rejects_malformed_ones(small):
    jsonschema = pytest.importorskip("jsonschema")
    from synthesis.porep import c1 as c1mod
    _, _, doc = small
    schema = c1mod.json_schema()
    jsonschema.validate(json.loads(json.dumps(doc)), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(tampered(doc, CH + ["tree_d_path", 0], lambda v: "zz"), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**doc, "circuit": "other"}, schema)


def test_parameter_sets_are_registered_circuits():
    from synthesis.circuits import Circuit, known
    from synthesis.porep import TINY
    assert set(SETS) <= set(known())
    circuit = get_circuit(TINY)
    assert isinstance(circuit, Circuit) and circuit.num_partitions() == 2
    assert len({get_circuit(n).digest() for n in SETS}) == len(SETS)
    with pytest.raises(KeyError, match="porep-lite-4k"):
        get_circuit("porep-lite-3k")
