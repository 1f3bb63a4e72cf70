"""``zkhive sector new|c1 [--commit2]`` for the filecoin sets: files Filecoin's tools read."""
import base64
import json

from cluster.cli import main
from synthesis.filecoin import c1 as C
from synthesis.filecoin import sector as S


def test_sector_new_c1_and_commit2(tmp_path, capsys):
    data = tmp_path / "piece.bin"
    data.write_bytes(bytes(range(251)) * 8)
    sector, c1, c2 = tmp_path / "s", tmp_path / "c1.json", tmp_path / "commit2.json"
    assert main(["sector", "new", "--params", "filecoin-2k", "--seed", "x", "--data", str(data),
                 "--miner", "1234", "--sector-id", "77", "--out", str(sector)]) == 0
    out = capsys.readouterr().out
    assert "StackedDrg2KiBV1_1" in out and "sealed" in out and "BENCHMARK" not in out
    meta = json.loads((sector / "sector.json").read_text())
    assert meta["family"] == "filecoin" and meta["benchmark"] is False and meta["sector_id"] == 77
    assert bytes.fromhex(meta["prover_id"]) == S.prover_id_from_miner(1234)
    loaded = S.Sector.load(sector)
    assert S.fr32_unpad(S.raw(loaded.data))[:2008] == data.read_bytes()
    assert main(["sector", "c1", str(sector), "--out", str(c1)]) == 0
    assert main(["sector", "c1", str(sector), "--out", str(c2), "--commit2"]) == 0
    doc = json.loads(c2.read_bytes())
    assert list(doc) == ["SectorNum", "Phase1Out", "SectorSize"] and doc["SectorNum"] == 77
    assert base64.b64decode(doc["Phase1Out"]) == c1.read_bytes() and doc["SectorSize"] == 2048
    prm, parsed, facts = C.load(c2.read_bytes())
    assert facts == {"sector_num": 77, "sector_size": 2048} and len(C.verify(prm, parsed)) == 1
    # a sector replaced only with --force; --data too big is one line
    assert main(["sector", "new", "--params", "filecoin-2k", "--seed", "x", "--out", str(sector)]) == 2
    data.write_bytes(bytes(2033))
    assert main(["sector", "new", "--params", "filecoin-2k", "--seed", "x", "--data", str(data),
                 "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert "already holds a sector" in err and "2033 bytes of data do not fit a 2048-byte sector" in err


def test_benchmark_sector_says_so(tmp_path, capsys):
    sector, c1 = tmp_path / "b", tmp_path / "c1.json"
    assert main(["sector", "new", "--params", "filecoin-512m", "--seed", "b", "--out", str(sector)]) == 0
    assert "BENCHMARK SECTOR" in capsys.readouterr().out
    assert json.loads((sector / "sector.json").read_text())["note"].startswith("benchmark sector")
    assert main(["sector", "c1", str(sector), "--out", str(c1)]) == 0
    assert "BENCHMARK SECTOR" in capsys.readouterr().out
    doc = json.loads(c1.read_bytes())
    assert doc[C.BENCHMARK_KEY].startswith("filecoin-512m: benchmark sector")
    prm, parsed, _ = C.load(c1.read_bytes())
    assert C.verify(prm, parsed)[0].benchmark
    # its seed is the one it was populated for; another is one line
    assert main(["sector", "c1", str(sector), "--out", str(c1), "--challenge-seed", "other"]) == 2
    assert main(["sector", "new", "--params", "filecoin-512m", "--seed", "b", "--data", str(c1),
                 "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "populated for one seed" in err and "benchmark sector here: it seals no data" in err


def test_job_document_reads_filecoins_files(tmp_path):
    from synthesis import limits
    from synthesis.circuits import C1Error
    from synthesis.filecoin.commands import job_document

    sector = S.generate(S.SETS["filecoin-2k"], b"job")
    raw = C.dumps(C.c1_document(sector, S.interactive_seed(sector)))
    (tmp_path / "c1.json").write_bytes(raw)
    (tmp_path / "c2.json").write_bytes(C.commit2_input(raw, 1, 2048))
    for name in ("c1.json", "c2.json"):
        doc = job_document(tmp_path / name, limits.DEFAULT)
        assert doc["params"] == "filecoin-2k" and doc["comm_r"] == list(sector.comm_r)
    (tmp_path / "other.json").write_text('{"params": "porep-lite-2k"}')
    assert job_document(tmp_path / "other.json", limits.DEFAULT) is None
    (tmp_path / "bad.json").write_bytes(b'{"SectorNum":1,"Phase1Out":"%%%","SectorSize":2048}')
    try:
        job_document(tmp_path / "bad.json", limits.DEFAULT)
        raise AssertionError("bad base64 accepted")
    except C1Error as e:
        assert "field Phase1Out: is not valid base64" in str(e)
    small = limits.Limits(document_bytes=50_000)
    try:
        job_document(tmp_path / "c2.json", small)
        raise AssertionError("oversized Commit2 accepted")
    except limits.InputError as e:
        assert "over the limit of 66922" in str(e) and "as base64" in str(e)
