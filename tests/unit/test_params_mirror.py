"""The compressed mirror of a .params file (gpu/groth16/mirror.py, cluster/pipeline/keys.py;
issue 40 item 3), on the CPU:

- the .params' uncompressed points compressed as arkworks / ZCash compress them (random points,
  both signs, G1 and G2), and decompressed back;
- a mirror written from a .params and read through it (host decompression) gives the same
  ProvingKey points, and a proof from it verifies (through the key cache: the tiny porep set);
- refused, naming file, section and byte offset, and the load falling back to the .params: a
  flipped byte in a section (digest), a point that does not decompress (digests made to
  match), the point at infinity, a truncated mirror, a mirror of another .params (binding), a
  .params changed after its mirror was written (stale); the writer refuses a .params that
  changed since it was loaded.
"""
import hashlib
import json
import logging
import os
import random
import re
import shutil
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from gpu import prove, setup, verify
from gpu.groth16 import KeyFormatError, bellperson as bp
from gpu.groth16 import mirror as mr
from gpu.groth16.compress import compress, decompress
from gpu.groth16.points import PointArray
from synthesis import field as F
from synthesis.builder import ONE, ConstraintSystem

R = F.MODULUS


def _circuit(x: int, n: int = 40):
    """A chain of n squarings with three public inputs and a variable only in C (so the a and
    b queries are density-filtered)."""
    cs = ConstraintSystem()
    ins = [cs.alloc_input(x)]
    cur, val = ins[0], x
    for _ in range(n):
        val = val * val % R
        nxt = cs.alloc(val)
        cs.enforce(cur, cur, nxt)
        cur = nxt
    out = cs.alloc_input(val)
    cs.enforce(cur, ONE, out)
    extra = cs.alloc_input((x + 1) % R)
    cs.enforce(ins[0] + 1, ONE, extra)
    w = cs.alloc(2 * val % R)
    cs.enforce(out * 2, ONE, w)
    return cs


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("mirror")
    cs = _circuit(random.randrange(R))
    r1cs = cs.to_r1cs()
    pk, vk = setup(r1cs, seed=b"mirror test")
    bp.write_params(pk, r1cs, d / "k.params")
    mr.write_mirror(d / "k.params", d / "k.params.mirror", block_points=8)
    return d, cs, r1cs, vk


def _copy(files, tmp_path):
    """The .params and its mirror copied (mtime kept, so the binding still holds)."""
    import shutil
    d = files[0]
    for n in ("k.params", "k.params.mirror"):
        shutil.copy2(d / n, tmp_path / n)
    return tmp_path / "k.params", tmp_path / "k.params.mirror"


def _points(pk):
    return {n: np.asarray(getattr(pk, n).raw) for n in bp.OURS.values()}


def _read_through(params, mirror, r1cs, points="curve"):
    pk = bp.read_params(params, r1cs, points=points)
    m = mr.open_mirror(mirror, params)
    dropped = []
    mr.attach(pk, m, on_bad=lambda m, why: dropped.append(why))
    return pk, dropped


# --- the encoding ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", [1, 2])
def test_compressed_as_arkworks_compresses_both_ways(kind):
    rnd = random.Random(kind)
    gen = G1Point() if kind == 1 else G2Point()
    pts = []
    for _ in range(24):
        p = gen * Scalar(rnd.randrange(1, R))
        pts += [p, -p]     # both signs of y
    raw = PointArray.from_points(type(gen), pts).raw
    unc = bp.to_uncompressed(raw, kind)
    got = mr.compress_uncompressed(unc, kind)
    want = np.array([np.frombuffer(p.to_compressed_bytes(), np.uint8) for p in pts])
    assert np.array_equal(got, want)
    assert np.array_equal(got, compress(raw, kind))              # our key files' compressor
    assert np.array_equal(decompress(got, kind, device=False), raw)
    back = [type(gen).from_compressed_bytes(bytes(r)) for r in got]
    assert back == pts


def test_compressor_refuses_flags_and_zero_filled_points():
    unc = bp.to_uncompressed(PointArray.from_points(G1Point, [G1Point()] * 3).raw, 1)
    bad = unc.copy()
    bad[2, 0] |= 0x40
    with pytest.raises(mr.MirrorError, match=r"sec h: point 7: a flag bit is set"):
        mr.compress_uncompressed(bad, 1, where="sec h", first=5)
    bad = unc.copy()
    bad[1] = 0
    with pytest.raises(mr.MirrorError, match=r"point 1: every byte zero"):
        mr.compress_uncompressed(bad, 1)


def test_larger_half_decides_at_the_boundary():
    half = (bp.FQ_MODULUS - 1) // 2
    ys = [half - 1, half, half + 1, 0, bp.FQ_MODULUS - 1]
    rows = np.array([np.frombuffer(y.to_bytes(48, "big"), np.uint8) for y in ys])
    assert mr._larger_half_be(rows).tolist() == [False, False, True, False, True]


# --- round trip ------------------------------------------------------------------------------

def test_mirror_is_half_and_reads_back_the_same_key_and_proves(files, tmp_path):
    d, cs, r1cs, vk = files
    params, mirror = d / "k.params", d / "k.params.mirror"
    m = mr.open_mirror(mirror, params)
    lay = bp.scan(params)
    body = sum(s.count * s.width for s in m.sections.values())
    assert body * 2 == sum(lay.sections[n].count * lay.sections[n].width for n, _ in bp.QUERIES)
    assert len(m.sections["h"].blocks) > 1     # several blocks a section at block_points=8
    plain = _points(bp.read_params(params, r1cs))
    pk, dropped = _read_through(params, mirror, r1cs, points="full")
    assert all(isinstance(getattr(pk, n), mr.MirrorQuery) for n in bp.OURS.values())
    got = _points(pk)
    for n in plain:
        assert np.array_equal(got[n], plain[n]), n
    assert not dropped and all(getattr(pk, n).fell_back is None for n in bp.OURS.values())
    proof = prove(pk, r1cs, cs.assignment(), backend="cpu")
    pub = cs.public_inputs()
    assert verify(vk, pub, proof)
    assert not verify(vk, [pub[0] + 1, *pub[1:]], proof)


def test_writing_again_is_byte_identical(files, tmp_path):
    d = files[0]
    again = mr.write_mirror(d / "k.params", tmp_path / "again.mirror", block_points=8, threads=3)
    assert again.read_bytes() == (d / "k.params.mirror").read_bytes()
    assert not list(tmp_path.glob("*.tmp*"))


def test_a_mirror_leaves_the_blob_store_its_free_space_where_they_share_a_disk(files, tmp_path,
                                                                                monkeypatch):
    """On the H200 host (2026-12-06) a partial mirror planned for the disk's free space less 512
    MiB left 0.83 GB, and the next job's submit was refused (BlobStoreFull: under
    blobs.min_free_bytes). mirror_room takes off what each ``keep`` path on the same filesystem
    must find free (a path not made yet: its nearest existing ancestor's), not another
    filesystem's; KeyCache.from_settings keeps the blob store's; the plan follows the room."""
    from cluster.pipeline.keys import KeyCache
    from cluster.settings import Settings
    monkeypatch.setenv("ZKHIVE_PARAMS_MIRROR_SPARE", "0")
    base, _ = mr.mirror_room(tmp_path)
    room, said = mr.mirror_room(tmp_path, [(tmp_path / "var" / "blobs", 5 << 30, "blobs.min_free_bytes")])
    assert base - room == 5 << 30 or abs(base - room - (5 << 30)) < 64 << 20   # the disk moves
    assert "blobs.min_free_bytes" in said and str(tmp_path / "var" / "blobs") in said
    other = Path("/dev/shm")
    if other.is_dir() and os.stat(other).st_dev != os.stat(tmp_path).st_dev:
        room2, said2 = mr.mirror_room(tmp_path, [(other, 5 << 30, "blobs.min_free_bytes")])
        assert abs(room2 - base) < 64 << 20 and "blobs.min_free_bytes" not in said2
    s = Settings()
    s.blobs.dir, s.blobs.min_free_bytes = tmp_path / "blobs", 3 << 30
    keys = KeyCache.from_settings(s, root=tmp_path / "keys")
    assert keys.keep_free == [(tmp_path / "blobs", 3 << 30, "blobs.min_free_bytes")]
    s.blobs.backend = "redis"
    assert KeyCache.from_settings(s, root=tmp_path / "keys").keep_free == []
    # the writer plans with it: room for h and l less what the blobs keep
    d = files[0]
    lay = bp.scan(d / "k.params")
    need = mr.mirror_bytes(lay, 8, ["h", "l"])
    monkeypatch.setenv("ZKHIVE_PARAMS_MIRROR_SPARE", str(max(base - need, 0)))
    free_for, _ = mr.mirror_room(tmp_path)
    if free_for >= need:   # the disk did not move under the test
        k = need - mr.mirror_bytes(lay, 8, ["h"]) + 1      # h and l no longer fit together
        expect = mr.plan_sections(lay, free_for - k, 8)
        assert expect and expect != ["h", "l"]
        out = mr.write_mirror(d / "k.params", tmp_path / "k.mirror", block_points=8,
                              keep=[(tmp_path, k, "x")])
        assert list(mr.open_mirror(out, d / "k.params").sections) == expect
    # the key cache passes its keep_free to the writer: all the disk kept, no mirror
    monkeypatch.setenv("ZKHIVE_PARAMS_MIRROR_SPARE", "0")
    shutil.copy(d / "k.params", tmp_path / "c.params")
    keys.keep_free = [(tmp_path, shutil.disk_usage(tmp_path).free, "blobs.min_free_bytes")]
    with pytest.raises(mr.MirrorError, match="blobs.min_free_bytes.*no mirror written"):
        keys.write_mirror(tmp_path / "c.params")
    assert keys.mirrors["c.params"]["state"] == "failed"
    keys.keep_free = []
    assert keys.write_mirror(tmp_path / "c.params") is not None


def test_progress_reaches_its_total_only_once_the_mirror_is_in_place(files, tmp_path, monkeypatch):
    """A status reader that stops the prover at progress 1 (bench/params_up.py did, at 14 GB
    written on the H200, 2026-12-06) must find the mirror: every report before it is in place
    is below the total, the one after it equals it; the key cache's state says 1.0 only when
    it is ready, with its share."""
    from cluster.pipeline.keys import KeyCache
    d = files[0]
    out = tmp_path / "p.mirror"
    seen = []
    mr.write_mirror(d / "k.params", out, block_points=8,
                    progress=lambda done, total: seen.append((done, total, out.exists())))
    assert len(seen) > 2 and len({t for _, t, _ in seen}) == 1
    *during, last = seen
    assert all(done < total and not there for done, total, there in during), during[-3:]
    assert last[0] == last[1] and last[2]
    keys = KeyCache(tmp_path / "keys")
    shutil.copy(d / "k.params", tmp_path / "k.params")
    states = []
    real = mr.write_mirror

    def watched(*a, progress=None, **kw):   # the cache's own callback, its state read after each
        name = Path(a[0]).name
        return real(*a, progress=lambda dn, tt: (progress(dn, tt), states.append(
            dict(keys.mirrors[name])))[0], **kw)
    monkeypatch.setattr(mr, "write_mirror", watched)
    assert keys.write_mirror(tmp_path / "k.params") is not None
    assert states and all(st["progress"] < 1 and st["state"] == "writing" for st in states)
    st = keys.mirrors["k.params"]
    assert st["state"] == "ready" and st["progress"] == 1.0 and st["share"] == 1.0


def test_mirror_bytes_bounds_the_file_and_a_full_disk_refuses_before_writing(files, tmp_path,
                                                                             monkeypatch):
    """mirror_bytes is an upper bound of the file written (close to it); a filesystem with less
    free than that plus the spare is refused at once, naming both figures and the setting, and
    nothing is left behind; ZKHIVE_PARAMS_MIRROR_SPARE must be a byte count."""
    import shutil
    d = files[0]
    lay = bp.scan(d / "k.params")
    size = (d / "k.params.mirror").stat().st_size
    assert size <= mr.mirror_bytes(lay, 8) <= size + 64 * 1024
    free = shutil.disk_usage(tmp_path).free
    monkeypatch.setenv("ZKHIVE_PARAMS_MIRROR_SPARE", str(free))   # leaves too little room
    with pytest.raises(mr.MirrorError, match=r"needs 0\.\d\d GB \(its smallest section alone "
                       r"0\.\d\d GB\) and .* GB to spare "
                       r"\(ZKHIVE_PARAMS_MIRROR_SPARE\), the filesystem has .* GB free: no mirror "
                       r"written .*\[srs\] param_cache"):
        mr.write_mirror(d / "k.params", tmp_path / "full.mirror", block_points=8)
    assert not list(tmp_path.glob("full.mirror*"))
    monkeypatch.setenv("ZKHIVE_PARAMS_MIRROR_SPARE", "0")
    again = mr.write_mirror(d / "k.params", tmp_path / "room.mirror", block_points=8)
    assert again.read_bytes() == (d / "k.params.mirror").read_bytes()
    monkeypatch.setenv("ZKHIVE_PARAMS_MIRROR_SPARE", "a lot")
    with pytest.raises(mr.MirrorError, match=r"ZKHIVE_PARAMS_MIRROR_SPARE='a lot': expected"):
        mr.write_mirror(d / "k.params", tmp_path / "x.mirror", block_points=8)


def test_a_disk_with_room_for_some_sections_gets_a_partial_mirror_that_proves(files, tmp_path,
                                                                               caplog):
    """Room for h and l but not a (mirror_bytes of each prefix): the mirror holds h and l, says
    which sections stay on the .params; a load reads h and l through it and a, b_g1, b_g2 from
    the .params, the points equal the .params', a proof verifies and a wrong input is refused;
    its share and load bytes count only what it holds. One byte less than h's room: no mirror."""
    d, cs, r1cs, vk = files
    params = d / "k.params"
    lay = bp.scan(params)
    room = mr.mirror_bytes(lay, 8, ["h", "l"])
    assert room < mr.mirror_bytes(lay, 8, ["h", "l", "a"])
    assert mr.plan_sections(lay, room, 8) == ["h", "l"]
    with caplog.at_level(logging.WARNING, logger="gpu.groth16.mirror"):
        out = mr.write_mirror(params, tmp_path / "part.mirror", block_points=8, room=room)
    assert "holds sections h, l" in caplog.text and "not a, b_g1, b_g2" in caplog.text
    assert out.stat().st_size <= room
    m = mr.open_mirror(out, params)
    assert list(m.sections) == ["h", "l"]
    want = mr.params_bytes(lay, ["h", "l"]) / mr.params_bytes(lay, ["h", "l", "a", "b_g1", "b_g2"])
    assert m.share(lay) == pytest.approx(want) and 0 < want < 1
    assert m.load_bytes(lay) == out.stat().st_size + mr.params_bytes(lay, ["a", "b_g1", "b_g2"])
    plain = _points(bp.read_params(params, r1cs))
    pk, dropped = _read_through(params, out, r1cs, points="full")
    assert [n for n in bp.OURS.values() if isinstance(getattr(pk, n), mr.MirrorQuery)] == \
        [bp.OURS["h"], bp.OURS["l"]]
    got = _points(pk)
    for n in plain:
        assert np.array_equal(got[n], plain[n]), n
    assert not dropped
    proof = prove(pk, r1cs, cs.assignment(), backend="cpu")
    pub = cs.public_inputs()
    assert verify(vk, pub, proof)
    assert not verify(vk, [pub[0] + 1, *pub[1:]], proof)
    least = min(mr.mirror_bytes(lay, 8, [q]) for q, _ in bp.QUERIES)
    assert mr.plan_sections(lay, least, 8) != []
    with pytest.raises(mr.MirrorError, match=r"its smallest section alone .* and room for .*: no "
                                             r"mirror written"):
        mr.write_mirror(params, tmp_path / "none.mirror", block_points=8, room=least - 1)
    assert not list(tmp_path.glob("none.mirror*"))


# --- rejects -----------------------------------------------------------------------------------

def _falls_back(params, mirror, r1cs, caplog, match, files):
    """Reading through the mirror falls back to the .params, says so naming ``match``, and
    still gives the .params' points."""
    plain = _points(bp.read_params(params, r1cs))
    pk, dropped = _read_through(params, mirror, r1cs)
    with caplog.at_level(logging.WARNING, logger="gpu.groth16.mirror"):
        got = _points(pk)
    for n in plain:
        assert np.array_equal(got[n], plain[n]), n
    assert len(dropped) == 1
    import re
    assert re.search(match, dropped[0]), dropped[0]
    assert "reading section" in caplog.text and str(params) in caplog.text
    return dropped[0]


def test_flipped_byte_named_by_section_and_offset_and_the_params_read(files, tmp_path, caplog):
    params, mirror = _copy(files, tmp_path)
    m = mr.open_mirror(mirror, params)
    sec = m.sections["b_g2"]
    at = sec.offset + 9 * sec.width + 17     # point 9: block 1 at 8 points a block
    buf = bytearray(mirror.read_bytes())
    buf[at] ^= 0x01
    mirror.write_bytes(bytes(buf))
    os.utime(mirror)
    why = _falls_back(params, mirror, files[2], caplog,
                      rf"section b_g2, block 1 \(points 8\.\.16, byte offsets "
                      rf"{sec.offset + 8 * sec.width}\.\.{sec.offset + 16 * sec.width}\): SHA-256 "
                      "differs", files)
    assert str(mirror) in why


def _rewrite_block(mirror, params, name, j, edit):
    """Point j of section ``name`` edited, its block's digest and the section's made to match
    (a mirror whose digests agree but whose point is wrong: decompression must refuse it)."""
    m = mr.open_mirror(mirror, params)
    sec = m.sections[name]
    buf = bytearray(mirror.read_bytes())
    at = sec.offset + j * sec.width
    edit(buf, at, sec.width)
    b = j // sec.block_points
    j0, j1 = sec.block_range(b)
    sec.blocks[b] = hashlib.sha256(bytes(buf[sec.offset + j0 * sec.width:
                                             sec.offset + j1 * sec.width])).hexdigest()
    head = m.header
    for d in head["sections"]:
        if d["name"] == name:
            d["blocks"], d["digest"] = sec.blocks, mr._section_digest(sec.blocks)
    n = struct.unpack("<Q", bytes(buf[-16:-8]))[0]
    del buf[len(buf) - 16 - n:]
    new = json.dumps(head).encode()
    buf += new + struct.pack("<Q", len(new)) + mr.END
    mirror.write_bytes(bytes(buf))


def _non_residue_x(width):
    """A compressed point whose x has no curve point (x^3 + 4 a non-residue)."""
    for x in range(2, 200):
        rhs = (x ** 3 + 4) % bp.FQ_MODULUS
        if pow(rhs, (bp.FQ_MODULUS - 1) // 2, bp.FQ_MODULUS) != 1:
            b = bytearray(x.to_bytes(48, "big"))
            b[0] |= 0x80
            return bytes(b) if width == 48 else None
    raise AssertionError("no non-residue")


def test_point_that_does_not_decompress_is_named_and_the_params_read(files, tmp_path, caplog):
    params, mirror = _copy(files, tmp_path)
    bad = _non_residue_x(48)

    def edit(buf, at, w):
        buf[at:at + w] = bad
    _rewrite_block(mirror, params, "l", 11, edit)
    sec = mr.open_mirror(mirror, params).sections["l"]   # digests agree now
    _falls_back(params, mirror, files[2], caplog,
                rf"section l, point 11 at byte offset {sec.offset + 11 * 48}: does not decompress",
                files)


def test_point_at_infinity_in_a_mirror_is_refused(files, tmp_path, caplog):
    params, mirror = _copy(files, tmp_path)

    def edit(buf, at, w):
        buf[at:at + w] = b"\xc0" + b"\0" * (w - 1)
    _rewrite_block(mirror, params, "a", 3, edit)
    sec = mr.open_mirror(mirror, params).sections["a"]
    _falls_back(params, mirror, files[2], caplog,
                rf"section a, point 3 at byte offset {sec.offset + 3 * 48}: the point at infinity",
                files)


def test_truncated_mirror_refused(files, tmp_path):
    params, mirror = _copy(files, tmp_path)
    data = mirror.read_bytes()
    mirror.write_bytes(data[:len(data) // 2])
    with pytest.raises(mr.MirrorError, match=rf"{mirror}: byte offset \d+: no end marker: truncated"):
        mr.open_mirror(mirror, params)
    mirror.write_bytes(data[:10])
    with pytest.raises(mr.MirrorError, match="truncated"):
        mr.open_mirror(mirror, params)


def test_mirror_of_another_params_refused(files, tmp_path):
    d, _, r1cs, _ = files
    params, mirror = _copy(files, tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    pk2, _ = setup(r1cs, seed=b"another key")
    bp.write_params(pk2, r1cs, other / "k.params")
    st = params.stat()
    os.utime(other / "k.params", ns=(st.st_atime_ns, st.st_mtime_ns))   # same name, size, mtime
    with pytest.raises(mr.MirrorError, match=rf"made from another \.params than {other}/k\.params "
                                             r"\(source vk_sha256: .*\): stale"):
        mr.open_mirror(mirror, other / "k.params")


def test_params_changed_after_its_mirror_is_stale(files, tmp_path):
    params, mirror = _copy(files, tmp_path)
    mr.open_mirror(mirror, params)
    os.utime(params, ns=(0, params.stat().st_mtime_ns + 1_000_000))
    with pytest.raises(mr.MirrorError, match=r"\(source mtime_ns: \d+ != \d+\): stale"):
        mr.open_mirror(mirror, params)


def test_writer_refuses_a_params_changed_since_it_was_loaded(files, tmp_path):
    params, _ = _copy(files, tmp_path)
    st = params.stat()
    out = tmp_path / "new.mirror"
    with pytest.raises(mr.MirrorError, match=r"changed since it was loaded"):
        mr.write_mirror(params, out, expect=(st.st_size, st.st_mtime_ns - 1))
    assert not out.exists() and not list(tmp_path.glob("new.mirror.tmp*"))


def test_header_section_digest_and_block_points_checked(files, tmp_path):
    params, mirror = _copy(files, tmp_path)
    data = mirror.read_bytes()
    n = struct.unpack("<Q", data[-16:-8])[0]
    head = json.loads(data[-16 - n:-16])

    def put(h):
        new = json.dumps(h).encode()
        mirror.write_bytes(data[:-16 - n] + new + struct.pack("<Q", len(new)) + mr.END)
    h = json.loads(json.dumps(head))
    h["sections"][0]["blocks"][0] = "00" * 32
    put(h)
    with pytest.raises(mr.MirrorError, match=r"section h: the block digests do not hash"):
        mr.open_mirror(mirror, params)
    h = json.loads(json.dumps(head))
    h["block_points"] = 0
    put(h)
    with pytest.raises(mr.MirrorError, match=r"block_points 0 is not in"):
        mr.open_mirror(mirror, params)
    h = json.loads(json.dumps(head))
    h["sections"][2]["offset"] += 4096
    put(h)
    with pytest.raises(mr.MirrorError, match=r"section a: the header's count or offset"):
        mr.open_mirror(mirror, params)


# --- through the key cache and the command line ------------------------------------------------

def test_key_cache_writes_prefers_and_drops_a_mirror(tmp_path, caplog, monkeypatch):
    """The tiny porep set: a checked load writes its mirror in the background (mirror_later),
    the next load reads through it and proves a verified proof; a damaged mirror falls back to
    the .params and is removed so that it is written again."""
    from cluster.pipeline.keys import KeyCache
    from synthesis.circuits import get_circuit
    from synthesis.porep import TINY, c1_document, generate

    monkeypatch.setenv("ZKHIVE_PARAMS_MIRROR", "1")   # opt-in (keys.mirrors_enabled)
    keys = KeyCache(tmp_path / "keys")
    circuit = get_circuit(TINY)
    keys.setup(circuit)
    pk = keys.load_pk(circuit)
    assert pk.mirror is None
    mp0 = keys.mirror_path(keys.find(circuit, "params"))
    dead = mp0.with_name(mp0.name + ".tmp999999999.1")   # a killed writer's: removed
    dead.write_bytes(b"partial")
    th = keys.mirror_later(pk)
    th.join(timeout=120)
    path = keys.find(circuit, "params")
    mp = keys.mirror_path(path)
    assert mp.exists() and keys.mirrors[path.name]["state"] == "ready"
    assert not dead.exists()
    assert keys.mirror_later(pk) is not None    # the writer keeps a matching mirror
    assert mp.stat().st_size < path.stat().st_size * 0.55

    pk2 = keys.load_pk(circuit)
    assert pk2.mirror is not None and keys.mirror_later(pk2) is None
    vk = keys.load_vk(circuit)
    c1 = circuit.parse_c1(c1_document(generate(circuit.prm, b"\x31" * 32), b"\x32" * 32))
    proof = prove(pk2, circuit.r1cs(), circuit.synthesize(c1, 0), backend="cpu")
    assert verify(vk, circuit.public_inputs(c1, 0), proof)
    assert all(getattr(pk2, n).fell_back is None for n in bp.OURS.values())

    buf = bytearray(mp.read_bytes())
    buf[4096 + 5] ^= 0x20     # section h, block 0
    mp.write_bytes(bytes(buf))
    pk3 = keys.load_pk(circuit)
    with caplog.at_level(logging.WARNING):
        proof = prove(pk3, circuit.r1cs(), circuit.synthesize(c1, 0), backend="cpu")
    assert verify(vk, circuit.public_inputs(c1, 0), proof)
    assert pk3.h_query.fell_back and "section h, block 0" in pk3.h_query.fell_back
    assert pk3.mirror.refused == pk3.h_query.fell_back   # the sections read after it: the .params
    assert not mp.exists() and f"removed the mirror {mp}" in caplog.text

    # off by default: no mirror written, and one present is not read
    keys.mirror_later(keys.load_pk(circuit)).join(timeout=60)
    assert mp.exists()
    for off in ("0", None):
        if off is None:
            monkeypatch.delenv("ZKHIVE_PARAMS_MIRROR")
        else:
            monkeypatch.setenv("ZKHIVE_PARAMS_MIRROR", off)
        pk = keys.load_pk(circuit)
        assert pk.mirror is None and keys.mirror_later(pk) is None, off


def test_key_cache_keeps_a_full_mirror_and_rewrites_a_partial_one_where_more_fits(tmp_path):
    """A partial mirror (written with room for h only) is replaced by the whole one once the disk
    has room (the state's share and sections say so); a whole matching mirror is kept as is."""
    from cluster.pipeline.keys import KeyCache
    from synthesis.circuits import get_circuit
    from synthesis.porep import TINY

    keys = KeyCache(tmp_path / "keys")
    circuit = get_circuit(TINY)
    keys.setup(circuit)
    path = keys.find(circuit, "params")
    mp = keys.mirror_path(path)
    lay = bp.scan(path, params=True)
    mr.write_mirror(path, mp, room=mr.mirror_bytes(lay, names=["h"]))
    assert list(mr.open_mirror(mp, path).sections) == ["h"]
    assert keys.write_mirror(path) == mp
    m = mr.open_mirror(mp, path)
    assert list(m.sections) == [q for q, _ in bp.QUERIES]
    st = keys.mirrors[path.name]
    assert st["state"] == "ready" and st["share"] == 1.0 and len(st["sections"]) == 5
    before = mp.stat().st_mtime_ns
    assert keys.write_mirror(path) == mp and mp.stat().st_mtime_ns == before   # kept


def test_a_prover_reports_why_its_mirror_was_not_written(tmp_path, monkeypatch):
    """A prover's checked .params load starts the mirror in the background; where the disk has
    no room for it (the spare raised past the filesystem's free space) the writer refuses before
    writing, nothing is left behind, key_loads says -1 and mirror_errors (the registry's
    key_mirror_errors, `zkhive status`) the reason."""
    import shutil
    from cluster.pipeline.keys import KeyCache
    from cluster.pipeline.prover import Prover, parse_device
    from synthesis.circuits import get_circuit
    from synthesis.porep import TINY

    monkeypatch.setenv("ZKHIVE_PARAMS_MIRROR", "1")
    keys = KeyCache(tmp_path / "keys")
    circuit = get_circuit(TINY)
    keys.setup(circuit)
    monkeypatch.setenv("ZKHIVE_PARAMS_MIRROR_SPARE", str(shutil.disk_usage(tmp_path).free))
    prover = Prover(parse_device("cpu:0"), keys)
    prover.load(circuit)
    path = keys.find(circuit, "params")
    for _ in range(600):
        if keys.mirrors.get(path.name, {}).get("state") not in (None, "writing"):
            break
        time.sleep(0.1)
    assert prover.key_loads()[circuit.name]["mirror_progress"] == -1.0
    why = prover.mirror_errors()[circuit.name]
    assert "the filesystem has" in why and why.endswith("to a directory on a larger disk)"), why
    assert not keys.mirror_path(path).exists()
    assert not list(keys.mirror_path(path).parent.glob("*.mirror.tmp*"))


def test_command_writes_the_mirror_after_checking_points(tmp_path, capsys, monkeypatch):
    from cluster.cli import main
    from cluster.pipeline.keys import KeyCache
    from synthesis.circuits import get_circuit
    from synthesis.porep import TINY

    keys = KeyCache(tmp_path / "keys")
    circuit = get_circuit(TINY)
    keys.setup(circuit)
    monkeypatch.setenv("ZKHIVE_SRS__PARAM_CACHE", str(keys.root))
    assert main(["keys", "mirror", "--params", TINY]) == 0
    out = capsys.readouterr().out
    path = keys.find(circuit, "params")
    assert f"{keys.mirror_path(path)}" in out and "points checked: curve" in out
    mr.open_mirror(keys.mirror_path(path), path)
    assert main(["keys", "mirror", "--params", "no-such-set"]) != 0


def _off_subgroup_compressed() -> bytes:
    """A compressed G1 point on the curve but outside the prime-order subgroup."""
    x = 5
    while True:
        rhs = (x ** 3 + 4) % bp.FQ_MODULUS
        y = pow(rhs, (bp.FQ_MODULUS + 1) // 4, bp.FQ_MODULUS)
        if y * y % bp.FQ_MODULUS == rhs:
            raw = np.frombuffer(x.to_bytes(48, "little") + y.to_bytes(48, "little"),
                                np.uint8).reshape(1, 96)
            if bp.first_bad(raw, 1, "full")[0] == 0:
                b = bytearray(x.to_bytes(48, "big"))
                b[0] |= 0x80
                return bytes(b)
        x += 1


def test_subgroup_policy_is_the_params_path_s(files, tmp_path, caplog):
    """points="full": a point outside the subgroup refused (the .params read); "curve" takes it,
    as the .params path with "curve" would."""
    params, mirror = _copy(files, tmp_path)
    comp = _off_subgroup_compressed()

    def edit(buf, at, w):
        buf[at:at + w] = comp
    _rewrite_block(mirror, params, "h", 4, edit)
    sec = mr.open_mirror(mirror, params).sections["h"]
    pk, dropped = _read_through(params, mirror, files[2], points="full")
    plain = bp.read_params(params, files[2]).h_query.raw
    assert np.array_equal(pk.h_query.raw, plain)
    assert len(dropped) == 1 and re.search(
        rf"section h, point 4 at byte offset {sec.offset + 4 * 48}: not in the prime-order subgroup",
        dropped[0]), dropped
    pk, dropped = _read_through(params, mirror, files[2], points="curve")
    assert not np.array_equal(pk.h_query.raw[4], plain[4]) and not dropped


def test_g2_sign_from_c0_where_y_c1_is_zero():
    """G2's sign bit: y.c1 decides unless it is 0, then y.c0 (arkworks' Fq2 order). Random
    coordinates below p (not points: neither compressor looks at the curve), half of them with
    y.c1 = 0, against gpu/groth16/compress.py's compressor on our layout."""
    rng = random.Random(7)
    rows = []
    for i in range(64):
        c = [rng.randrange(bp.FQ_MODULUS) for _ in range(4)]   # x.c1, x.c0, y.c1, y.c0
        if i % 2:
            c[2] = 0
        rows.append(np.frombuffer(b"".join(v.to_bytes(48, "big") for v in c), np.uint8))
    unc = np.array(rows)
    ours = bp.from_uncompressed(unc, 2)
    got = mr.compress_uncompressed(unc, 2)
    assert np.array_equal(got, compress(ours, 2))
    signs = (got[1::2, 0] & 0x20) != 0     # y.c1 = 0: y.c0's half decides
    y0 = [int.from_bytes(bytes(r[144:192]), "big") for r in unc[1::2]]
    assert signs.tolist() == [v > (bp.FQ_MODULUS - 1) // 2 for v in y0]
    assert 0 < signs.sum() < len(signs)


@pytest.mark.parametrize("kind", [1, 2])
def test_the_device_point_code_on_the_host(kind):
    """gpu/kernels/mirror.cuh's mirror_point (host build): the decompressed point equals
    compress.py's decompression; the identity (why 1), x >= p (2) and a non-residue x (3, G1)
    refused with the smallest index."""
    gen = G1Point() if kind == 1 else G2Point()
    pts = [gen * Scalar(random.randrange(1, R)) for _ in range(6)]
    raw = PointArray.from_points(type(gen), pts).raw
    comp = compress(raw, kind)
    got, word = mr.host_mirror(comp, kind)
    assert word == -1 and np.array_equal(got, raw)
    bad = comp.copy()
    bad[4] = 0
    bad[4, 0] = 0xC0                                   # the identity
    assert mr.host_mirror(bad, kind)[1] == (4 << 3) | 1
    bad[2, :48] = np.frombuffer(bp.FQ_MODULUS.to_bytes(48, "big"), np.uint8)
    bad[2, 0] |= 0x80                                  # x = p
    assert mr.host_mirror(bad, kind)[1] == (2 << 3) | 2
    if kind == 1:
        bad[1] = np.frombuffer(_non_residue_x(48), np.uint8)
        assert mr.host_mirror(bad, kind)[1] == (1 << 3) | 3


# --- every header check, the binding's digests, the host reader's first point -----------------

def _parts(mirror):
    """(bytes, header length, header dict) of a mirror file."""
    data = mirror.read_bytes()
    n = struct.unpack("<Q", data[-16:-8])[0]
    return data, n, json.loads(data[-16 - n:-16])


def _with_header(mirror, data, n, head):
    """``data`` (a mirror's bytes) with its header replaced by ``head`` (a dict, or raw bytes)."""
    new = head if isinstance(head, bytes) else json.dumps(head).encode()
    mirror.write_bytes(data[:-16 - n] + new + struct.pack("<Q", len(new)) + mr.END)
    return len(data) - n + len(new)     # the new size


def _refused(mirror, params, msg):
    """open_mirror refuses ``mirror`` with exactly ``msg`` (the whole line)."""
    with pytest.raises(mr.MirrorError) as e:
        mr.open_mirror(mirror, params)
    assert str(e.value) == msg


def test_binding_digests_are_of_the_files_first_bytes(files, tmp_path):
    """The binding's SHA-256s cover the verifying-key part, the first and the last MiB exactly
    (offset 0 on); the layout is scanned when none is given."""
    params, _ = _copy(files, tmp_path)
    data = params.read_bytes()
    lay = bp.scan(params)
    b = mr.binding(params)
    assert b == mr.binding(params, lay)
    sha = lambda x: hashlib.sha256(x).hexdigest()   # noqa: E731
    assert b["vk_sha256"] == sha(data[:lay.sections["ic"].end])
    assert b["head_sha256"] == sha(data[:1 << 20]) and b["tail_sha256"] == sha(data[-(1 << 20):])
    assert len(data) < 1 << 20     # one MiB covers it: head and tail both the whole file
    big = tmp_path / "big.params"   # over a MiB: the tail is the last MiB, not the whole file
    big.write_bytes(data + b"\x07" * (1 << 20))
    b = mr.binding(big, lay)
    got = big.read_bytes()
    assert b["head_sha256"] == sha(got[:1 << 20]) and b["tail_sha256"] == sha(got[-(1 << 20):])
    assert b["vk_sha256"] == sha(got[:lay.sections["ic"].end])


def test_params_changed_only_in_its_first_byte_is_stale(files, tmp_path):
    """Same name, size and mtime, one bit of byte 0 (the vk's alpha_g1) flipped: stale, the vk
    digest named."""
    params, mirror = _copy(files, tmp_path)
    st = params.stat()
    buf = bytearray(params.read_bytes())
    buf[0] ^= 0x01
    params.write_bytes(bytes(buf))
    os.utime(params, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(mr.MirrorError, match=rf"^{mirror}: made from another \.params than "
                                             rf"{params} \(source vk_sha256: '[0-9a-f]{{64}}' != "
                                             r"'[0-9a-f]{64}'\): stale$"):
        mr.open_mirror(mirror, params)
    buf[0] ^= 0x01     # restored: accepted again
    params.write_bytes(bytes(buf))
    os.utime(params, ns=(st.st_atime_ns, st.st_mtime_ns))
    mr.open_mirror(mirror, params)


def test_short_files_and_the_header_length_field(files, tmp_path):
    """Under 32 bytes: truncated; 32 bytes (an empty header): not JSON at offset 16; a header
    length that reaches into the first 16 bytes: does not fit; one that fills them exactly: read
    (then refused as not a mirror header)."""
    params, mirror = _copy(files, tmp_path)
    start = mr.MAGIC + struct.pack("<II", mr.FORMAT, 0)
    mirror.write_bytes(start + b"\0" * 7 + mr.END)             # 31 bytes
    _refused(mirror, params, f"{mirror}: 31 bytes: truncated (no header)")
    mirror.write_bytes(start + struct.pack("<Q", 0) + mr.END)  # 32 bytes, a header of 0
    _refused(mirror, params, f"{mirror}: the header at byte offset 16 is not JSON "
                             "(Expecting value: line 1 column 1 (char 0))")
    mirror.write_bytes(start + b"[]" + struct.pack("<Q", 2) + mr.END)   # 34: fits exactly
    _refused(mirror, params, f"{mirror}: the header is not a format-2 mirror header")
    mirror.write_bytes(start + b"[]" + struct.pack("<Q", 3) + mr.END)   # one byte too long
    _refused(mirror, params, f"{mirror}: byte offset 18: a header of 3 bytes does not fit in 34")
    mirror.write_bytes(start + b"[]" + struct.pack("<Q", 1 << 40) + mr.END)
    _refused(mirror, params, f"{mirror}: byte offset 18: a header of {1 << 40} bytes does not "
                             "fit in 34")


def test_truncated_and_damaged_headers_name_their_offsets(files, tmp_path):
    params, mirror = _copy(files, tmp_path)
    data, n, head = _parts(mirror)
    mirror.write_bytes(data[:-1])
    _refused(mirror, params, f"{mirror}: byte offset {len(data) - 17}: no end marker: truncated "
                             "or partly written")
    size = _with_header(mirror, data, n, b"{not json")
    _refused(mirror, params, f"{mirror}: the header at byte offset {size - 16 - 9} is not JSON "
                             "(Expecting property name enclosed in double quotes: line 1 column 2 "
                             "(char 1))")
    size = _with_header(mirror, data, n, b"\xff\xfe")      # not UTF-8: a ValueError too
    with pytest.raises(mr.MirrorError, match=rf"^{mirror}: the header at byte offset {size - 18} "
                                             r"is not JSON \(.*\)$"):
        mr.open_mirror(mirror, params)
    h = json.loads(json.dumps(head))
    h["format"] = 1                                        # a dict, another format
    _with_header(mirror, data, n, h)
    _refused(mirror, params, f"{mirror}: the header is not a format-2 mirror header")
    bad = data[:8] + struct.pack("<I", 3) + data[12:]       # a format this reader does not know
    _with_header(mirror, bad, n, head)
    _refused(mirror, params, f"{mirror}: byte offset 8: format 3, this reader knows 1, 2")
    _with_header(mirror, data, n, head)
    mr.open_mirror(mirror, params)                         # the same bytes back: accepted


def test_block_points_bounds_are_1_and_2_to_the_22(files, tmp_path):
    """Mirrors written at block_points 1 and 2^22 are read; 2^22 + 1 and 0 are refused."""
    params, _ = _copy(files, tmp_path)
    for bpts in (1, 1 << 22):
        out = mr.write_mirror(params, tmp_path / f"bp{bpts}.mirror", block_points=bpts)
        m = mr.open_mirror(out, params)
        assert all(s.block_points == bpts and len(s.blocks) == -(-s.count // bpts)
                   for s in m.sections.values())
    data, n, head = _parts(out)          # 2^22: one block a section, so 2^22 + 1 changes nothing else
    for bad in ((1 << 22) + 1, 0, "8", None):
        _with_header(out, data, n, dict(head, block_points=bad))
        _refused(out, params, f"{out}: the header's block_points {bad!r} is not in 1..4194304")


def test_malformed_section_entries_are_named(files, tmp_path):
    """A key missing (KeyError), a null count (TypeError), a count that is not a number
    (ValueError), a wrong name, count or offset: each refused naming the section."""
    params, mirror = _copy(files, tmp_path)
    data, n, head = _parts(mirror)
    lay = bp.scan(params)

    def edit(i, **kw):
        h = json.loads(json.dumps(head))
        h["sections"][i].update(kw)
        for k, v in kw.items():
            if v is KeyError:
                del h["sections"][i][k]
        _with_header(mirror, data, n, h)
    for i, kw in ((0, {"count": KeyError}), (1, {"count": None}), (2, {"count": "x"}),
                  (3, {"blocks": 5})):
        edit(i, **kw)
        _refused(mirror, params, f"{mirror}: section {bp.QUERIES[i][0]}: malformed header entry")
    s = head["sections"]
    edit(1, name="h")     # twice, or out of the .params' order
    _refused(mirror, params, f"{mirror}: the header's section entry 1 is named 'h', not one of "
                             "l, a, b_g1, b_g2 (each section at most once, in the .params' order)")
    edit(0, name="g1")
    _refused(mirror, params, f"{mirror}: the header's section entry 0 is named 'g1', not one of "
                             "h, l, a, b_g1, b_g2 (each section at most once, in the .params' order)")
    edit(0, count=s[0]["count"] - 1)
    _refused(mirror, params, f"{mirror}: section h: the header's count or offset "
                             f"({s[0]['count'] - 1} at 4096) is not the .params' "
                             f"({lay.sections['h'].count} at 4096)")
    edit(4, offset=s[4]["offset"] + 4096)
    _refused(mirror, params, f"{mirror}: section b_g2: the header's count or offset "
                             f"({s[4]['count']} at {s[4]['offset'] + 4096}) is not the .params' "
                             f"({s[4]['count']} at {s[4]['offset']})")
    # a subset in format 2 must start at the first offset: l alone is not where h was
    _with_header(mirror, data, n, dict(head, sections=head["sections"][1:2]))
    _refused(mirror, params, f"{mirror}: section l: the header's count or offset "
                             f"({s[1]['count']} at {s[1]['offset']}) is not the .params' "
                             f"({lay.sections['l'].count} at 4096)")
    _with_header(mirror, data, n, dict(head, sections=[]))
    _refused(mirror, params, f"{mirror}: the header lists no section")
    # format 1 (written before partial mirrors) held all five: four is a damaged header
    one = data[:8] + struct.pack("<I", 1) + data[12:]
    _with_header(mirror, one, n, dict(head, format=1, sections=head["sections"][:4]))
    _refused(mirror, params, f"{mirror}: the header lists 4 sections, not 5")
    _with_header(mirror, one, n, dict(head, format=2))
    _refused(mirror, params, f"{mirror}: the header is not a format-1 mirror header")
    _with_header(mirror, one, n, dict(head, format=1))
    assert len(mr.open_mirror(mirror, params).sections) == 5


def test_sections_running_into_the_header_are_truncated(files, tmp_path):
    """One byte cut before the header (the last section's padding): the sections end one byte
    past the header's start."""
    params, mirror = _copy(files, tmp_path)
    data, n, head = _parts(mirror)
    hat = len(data) - 16 - n
    last = head["sections"][-1]
    assert last["offset"] + last["count"] * 96 < hat     # padding there: the digests still agree
    mirror.write_bytes(data[:hat - 1] + data[hat:])
    _refused(mirror, params, f"{mirror}: the sections end at byte offset {hat}, past the header "
                             f"at {hat - 1}: truncated")


def _read_host(mirror, params, name, points="curve"):
    m = mr.open_mirror(mirror, params)
    sec = m.sections[name]
    out = np.zeros((sec.count, 2 * sec.width), dtype=np.uint8)
    return mr.read_section_host(m, name, out=out, index=None, points=points), sec


def test_host_reader_names_the_first_flag_and_why_a_point_does_not_decompress(files, tmp_path):
    """check_flags names the first bad point of a block (the compressed flag cleared, before
    the point at infinity); a non-residue x at index 0 of a section is named with its reason."""
    params, mirror = _copy(files, tmp_path)
    good, sec = _read_host(mirror, params, "h")
    assert good.any()

    def flags(buf, at, w):
        buf[at] = (buf[at] & 0x1F) | 0x01                   # no flag bit set, bit 0 set
        buf[at + 2 * w] = 0xC0                              # point + 2: the point at infinity
        buf[at + 2 * w + 1:at + 3 * w] = b"\0" * (w - 1)
    _rewrite_block(mirror, params, "h", 9, flags)           # points 9 and 11, block 1
    with pytest.raises(mr.MirrorError) as e:
        _read_host(mirror, params, "h")
    assert str(e.value) == (f"{mirror}: section h, point 9 at byte offset {sec.offset + 9 * 48}: "
                            "the compressed flag is not set")
    params, mirror = _copy(files, tmp_path)
    bad = _non_residue_x(48)

    def nonres(buf, at, w):
        buf[at:at + w] = bad
    _rewrite_block(mirror, params, "l", 0, nonres)
    sec = mr.open_mirror(mirror, params).sections["l"]
    with pytest.raises(mr.MirrorError) as e:
        _read_host(mirror, params, "l")
    assert str(e.value) == (f"{mirror}: section l, point 0 at byte offset {sec.offset}: does not "
                            "decompress: not on the curve: no curve point has that x (a non-residue)")


@pytest.mark.parametrize("j", [0, 8])
def test_off_subgroup_point_first_in_a_block_is_refused(files, tmp_path, j):
    """points="full": a point outside the subgroup at index 0 of the section (j=0) or of its
    second block (j=8) is refused, naming it; "curve" reads it."""
    params, mirror = _copy(files, tmp_path)
    comp = _off_subgroup_compressed()

    def edit(buf, at, w):
        buf[at:at + w] = comp
    _rewrite_block(mirror, params, "h", j, edit)
    sec = mr.open_mirror(mirror, params).sections["h"]
    with pytest.raises(mr.MirrorError) as e:
        _read_host(mirror, params, "h", points="full")
    assert str(e.value) == (f"{mirror}: section h, point {j} at byte offset {sec.offset + j * 48}: "
                            "not in the prime-order subgroup")
    got, _ = _read_host(mirror, params, "h", points="curve")
    assert got[j].any()


def test_host_mirror_of_no_points():
    for kind in (1, 2):
        out, word = mr.host_mirror(np.zeros((0, 48 * kind), np.uint8), kind)
        assert word == -1 and out.shape == (0, 96 * kind)
