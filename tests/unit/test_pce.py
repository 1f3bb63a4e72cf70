"""cuzk's pre-compiled circuit files (curio extern/cuzk/cuzk-pce disk.rs v2), written by our
writer from porep-lite-4k's matrices: the header and layout byte by byte, the round trip, the
digest, and the row-by-row comparison naming a single swapped entry and two exchanged variables."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from synthesis import field, pce


@pytest.fixture(scope="module")
def ours():
    from synthesis.circuits import get_circuit
    c = get_circuit("porep-lite-4k")
    return c, pce.from_r1cs(c.r1cs())


def test_the_file_is_cuzks_layout_byte_by_byte(ours, tmp_path):
    c, p = ours
    r = c.r1cs()
    path = pce.write(p, tmp_path / "pce-porep-lite-4k.bin")
    raw = path.read_bytes()
    nin = r.num_public + 1
    # header: magic, version, num_inputs (ONE included), num_aux, num_constraints (+ input rows), total_nnz, 0
    assert raw[:4] == b"PCE\x02"
    assert struct.unpack_from("<IIIIQI", raw, 4) == (2, nin, r.num_aux, r.num_constraints + nin,
                                                     r.nnz + nin, 0)
    at = 32
    n = struct.unpack_from("<Q", raw, at)[0]
    assert n == r.num_constraints + nin + 1          # A.row_ptrs: u64 count, then u32s
    ptr = np.frombuffer(raw, "<u4", n, at + 8)
    assert ptr[0] == 0 and ptr[-1] == r.a.nnz + nin
    at += 8 + 4 * n
    nnz = struct.unpack_from("<Q", raw, at)[0]
    cols = np.frombuffer(raw, "<u4", nnz, at + 8)
    assert list(cols[-nin:]) == list(range(nin))      # the input rows: input i in A
    at += 8 + 4 * nnz
    assert struct.unpack_from("<Q", raw, at)[0] == nnz
    last = int.from_bytes(raw[at + 8 + 32 * (nnz - 1):at + 8 + 32 * nnz], "little")
    assert last == pce.R_MONT                          # coefficient 1 in Montgomery form: 2^256 mod r
    # the file ends with three density bitvecs (u64 words, then bit_len and popcount)
    a_aux, b_in, b_aux = pce.densities(p)
    tail = struct.unpack_from("<QQ", raw, len(raw) - 16)
    assert tail == (r.num_aux, int(b_aux.sum()))
    words = (r.num_aux + 63) // 64
    assert struct.unpack_from("<Q", raw, len(raw) - 16 - 8 * words - 8)[0] == words


def test_our_own_dump_reads_back_equal_with_the_same_digest(ours, tmp_path):
    c, p = ours
    back = pce.read(pce.write(p, tmp_path / "x.bin"))
    assert pce.compare(p, back) is None
    assert pce.digest(back) == pce.digest(p)
    a_aux, b_in, b_aux = pce.densities(p)
    assert back.density == (int(a_aux.sum()), int(b_in.sum()), int(b_aux.sum()))


def test_a_row_written_in_another_order_is_the_same_circuit(ours, tmp_path):
    """cuzk writes a row's input terms then its aux terms, each as bellpepper's LC holds them:
    a writer's order inside a row is not the circuit's; a zero coefficient is dropped."""
    c, p = ours
    back = pce.read(pce.write(p, tmp_path / "x.bin"))
    m = back.b
    i = int(np.flatnonzero(np.diff(m.row_ptrs) >= 2)[0])
    lo, hi = int(m.row_ptrs[i]), int(m.row_ptrs[i + 1])
    m.cols[lo:hi], m.vals[lo:hi] = m.cols[lo:hi][::-1].copy(), m.vals[lo:hi][::-1].copy()
    assert pce.compare(p, back) is None and pce.digest(back) == pce.digest(p)


def _swapped(p, tmp_path):
    """The file with one entry's coefficient exchanged with its neighbour's in one row of B."""
    back = pce.read(pce.write(p, tmp_path / "x.bin"))
    m = back.b
    lens = np.diff(m.row_ptrs)
    for i in np.flatnonzero(lens >= 2):
        lo = int(m.row_ptrs[i])
        if (m.vals[lo] != m.vals[lo + 1]).any():
            m.vals[[lo, lo + 1]] = m.vals[[lo + 1, lo]]
            return pce.read(pce.write(back, tmp_path / "swapped.bin")), int(i), int(m.cols[lo])
    raise AssertionError("no row of B with two different coefficients")


def test_a_single_swapped_entry_is_named_by_row_column_and_value(ours, tmp_path):
    c, p = ours
    bad, row, col = _swapped(p, tmp_path)
    diff = pce.compare(p, bad)
    want = dict(p.b.row(row))[col]
    got = dict(bad.b.row(row))[col]
    assert diff.startswith(f"matrix B row {row}, entry 0: ours column {col} coefficient {pce._coef(want)}, "
                           f"the file's column {col} coefficient {pce._coef(got)}"), diff
    assert pce.digest(bad) != pce.digest(p)
    # A and the rows before it are untouched: the first difference is that row
    assert pce.compare(pce.PCE(p.num_inputs, p.num_aux, p.num_constraints, p.a, p.a, p.c),
                       pce.PCE(p.num_inputs, p.num_aux, p.num_constraints, bad.a, bad.a, bad.c)) is None


def test_two_exchanged_aux_variables_change_the_digest_and_name_the_first_row(ours, tmp_path):
    """The counts, nonzeros and densities are blind to a reordering; the digest and the
    row-by-row comparison are not."""
    c, p = ours
    nin = p.num_inputs
    # two aux variables that occur in A in different rows
    i, j = nin + 0, nin + 1
    back = pce.read(pce.write(p, tmp_path / "x.bin"))
    for m in (back.a, back.b, back.c):
        ci, cj = m.cols == i, m.cols == j
        m.cols[ci], m.cols[cj] = j, i
    assert back.total_nnz() == p.total_nnz()
    assert [int(x.sum()) for x in pce.densities(back)][1] == [int(x.sum()) for x in pce.densities(p)][1]
    assert pce.digest(back) != pce.digest(p)
    diff = pce.compare(p, back)
    first = min(int(np.searchsorted(m.row_ptrs, int(np.flatnonzero((m.cols == i) | (m.cols == j))[0]),
                                    side="right") - 1) for m in (p.a, p.b, p.c) if ((m.cols == i) | (m.cols == j)).any())
    assert f"row {first}," in diff and ("column 6 " in diff or "column 7 " in diff), diff


@pytest.mark.parametrize("where, patch, match", [
    ("magic", lambda b: b.__setitem__(slice(0, 4), b"PCE\x01"), r"magic b'PCE\\x01' at byte offset 0"),
    ("version", lambda b: b.__setitem__(slice(4, 8), struct.pack("<I", 3)), r"version 3 at byte offset 4"),
    ("total_nnz", lambda b: b.__setitem__(slice(20, 28), struct.pack("<Q", 5)), r"total_nnz 5 at byte offset 20"),
    ("truncated", lambda b: b.__delitem__(slice(len(b) - 4, len(b))), r"density b_aux's popcount at byte offset \d+ needs 8 bytes"),
    ("trailing", lambda b: b.extend(b"\0"), r"1 bytes after the density section"),
    ("rows", lambda b: b.__setitem__(slice(16, 20), struct.pack("<I", 7)), r"A\.row_ptrs's length.*|A\.row_ptrs at byte offset 32 holds \d+ elements, expected 8"),
])
def test_a_damaged_file_is_refused_naming_the_field_and_offset(ours, tmp_path, where, patch, match):
    c, p = ours
    raw = bytearray(pce.write(p, tmp_path / "x.bin").read_bytes())
    patch(raw)
    (tmp_path / "bad.bin").write_bytes(bytes(raw))
    with pytest.raises(pce.PCEError, match=match):
        pce.read(tmp_path / "bad.bin")


def test_a_column_past_the_variables_and_a_value_past_r_are_refused(ours, tmp_path):
    c, p = ours
    raw = bytearray(pce.write(p, tmp_path / "x.bin").read_bytes())
    n = struct.unpack_from("<Q", raw, 32)[0]
    cols_at = 32 + 8 + 4 * n + 8
    struct.pack_into("<I", raw, cols_at + 4 * 3, p.num_inputs + p.num_aux)
    (tmp_path / "bad.bin").write_bytes(bytes(raw))
    with pytest.raises(pce.PCEError, match=rf"A\.cols\[3\] at byte offset {cols_at + 12} is {p.num_inputs + p.num_aux}, "
                                           rf"beyond the {p.num_inputs + p.num_aux} variables"):
        pce.read(tmp_path / "bad.bin")
    raw = bytearray(pce.write(p, tmp_path / "x.bin").read_bytes())
    nnz = struct.unpack_from("<Q", raw, cols_at - 8)[0]
    vals_at = cols_at + 4 * nnz + 8
    raw[vals_at:vals_at + 32] = field.MODULUS.to_bytes(32, "little")
    (tmp_path / "bad.bin").write_bytes(bytes(raw))
    with pytest.raises(pce.PCEError, match=r"A\.vals \(from byte offset \d+\) element\[0\] is 0x73ed.*not below r"):
        pce.read(tmp_path / "bad.bin")


def test_the_density_section_must_be_the_matrices(ours, tmp_path):
    c, p = ours
    raw = bytearray(pce.write(p, tmp_path / "x.bin").read_bytes())
    struct.pack_into("<Q", raw, len(raw) - 8, 1)    # b_aux's popcount
    (tmp_path / "bad.bin").write_bytes(bytes(raw))
    with pytest.raises(pce.PCEError, match=r"density b_aux at byte offset \d+ \(bit_len \d+, popcount 1\) "
                                           r"is not the matrices'"):
        pce.read(tmp_path / "bad.bin")


def test_zkhive_circuits_digest_and_pce(ours, tmp_path, capsys):
    from cluster.cli import main
    c, p = ours
    assert main(["circuits", "--digest", "--params", "porep-lite-4k", "--write-pce", str(tmp_path / "o.bin")]) == 0
    out = capsys.readouterr().out
    assert f"porep-lite-4k: digest {pce.digest(p)} ({p.num_constraints} rows" in out
    assert main(["circuits", "--pce", str(tmp_path / "o.bin"), "--params", "porep-lite-4k"]) == 0
    assert "equals ours row by row" in capsys.readouterr().out
    bad, row, col = _swapped(p, tmp_path)
    assert main(["circuits", "--pce", str(tmp_path / "swapped.bin"), "--params", "porep-lite-4k"]) == 1
    assert f"differs: matrix B row {row}, entry 0: ours column {col}" in capsys.readouterr().out
    assert main(["circuits", "--digest", "--params", "filecoin-32g"]) == 2
    assert "722,388,563 nonzeros, over --max-nonzeros" in capsys.readouterr().err
