"""The device-memory ledger across real processes (no GPU needed: it books bytes, not VRAM)."""
import multiprocessing as mp
import os
import signal
import time

from dataclasses import replace

import pytest

from gpu.budget import DeviceBudget, DeviceMemoryExhausted

GiB = 1 << 30


def _hold(ledger_dir, nbytes, ready, release):
    b = DeviceBudget("dev0", 16 * GiB, ledger_dir=ledger_dir)
    with b.working_set(nbytes, "partition 0"):
        ready.set()
        release.wait(30)


def _resident_then_sleep(ledger_dir, ready):
    b = DeviceBudget("dev0", 16 * GiB, ledger_dir=ledger_dir)
    b.reserve_resident(12 * GiB, "key porep-lite-16m")
    ready.set()
    time.sleep(60)


def test_resident_bookings_refuse_what_does_not_fit(tmp_path):
    a = DeviceBudget("dev0", 16 * GiB, ledger_dir=tmp_path)
    a.reserve_resident(12 * GiB, "key A")
    with pytest.raises(DeviceMemoryExhausted, match=r"key B needs 6.00 GiB .* only 4.00 GiB"):
        a.reserve_resident(6 * GiB, "key B")
    a.release_resident(12 * GiB)
    a.reserve_resident(6 * GiB, "key B")  # fits once A is gone
    assert a.usage()["used"] == 6 * GiB


def test_working_set_waits_for_another_process_then_proceeds(tmp_path):
    ctx = mp.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    p = ctx.Process(target=_hold, args=(tmp_path, 10 * GiB, ready, release))
    p.start()
    try:
        assert ready.wait(30)
        me = DeviceBudget("dev0", 16 * GiB, ledger_dir=tmp_path)
        with pytest.raises(DeviceMemoryExhausted, match="waited"):
            with me.working_set(8 * GiB, "partition 1", timeout=0.3):
                pass
        release.set()
        with me.working_set(8 * GiB, "partition 1", timeout=30):
            assert me.usage()["used"] == 8 * GiB  # the other process's booking is gone
    finally:
        release.set()
        p.join(30)


def test_a_working_set_larger_than_the_device_is_refused_at_once(tmp_path):
    me = DeviceBudget("dev0", 16 * GiB, ledger_dir=tmp_path)
    me.reserve_resident(10 * GiB, "key")
    t0 = time.monotonic()
    with pytest.raises(DeviceMemoryExhausted, match="can ever give it"):
        with me.working_set(7 * GiB, "partition 0", timeout=60):
            pass
    assert time.monotonic() - t0 < 5


def test_bookings_of_a_killed_process_are_dropped(tmp_path):
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    p = ctx.Process(target=_resident_then_sleep, args=(tmp_path, ready))
    p.start()
    assert ready.wait(30)
    me = DeviceBudget("dev0", 16 * GiB, ledger_dir=tmp_path)
    with pytest.raises(DeviceMemoryExhausted, match=f"pid {p.pid}"):
        me.reserve_resident(8 * GiB, "key")
    os.kill(p.pid, signal.SIGKILL)
    p.join(30)
    me.reserve_resident(8 * GiB, "key")  # the dead worker's 12 GiB no longer count
    assert me.usage()["used"] == 8 * GiB


def _wait_for(ledger_dir, nbytes, out):
    b = DeviceBudget("dev0", 16 * GiB, ledger_dir=ledger_dir)
    t = time.monotonic()
    with b.working_set(nbytes, "the other prover's proof", timeout=30):
        out.put(time.monotonic() - t)


def test_a_pool_is_booked_between_proofs_and_taken_over_by_the_next(tmp_path):
    """keep() books a working set's kept buffers as pooled when the block ends; the next proof
    that takes them over (pooled=) needs only the rest, where one that does not must find the
    whole working set beside them; unpool() gives the booking back."""
    free = [14 * GiB]   # what the device reports free (the key's 2 GiB taken)
    me = DeviceBudget("dev0", 16 * GiB, ledger_dir=tmp_path, free_bytes=lambda: free[0])
    me.reserve_resident(2 * GiB, "key")
    with me.working_set(10 * GiB, "proof 0", timeout=5) as held:
        held.keep(12 * GiB)          # at most the working set
    free[0] = 4 * GiB   # the kept buffers are on the device
    assert me.pooled() == 10 * GiB and me.usage()["used"] == 12 * GiB
    with pytest.raises(DeviceMemoryExhausted, match="10.00 GiB pooled for its next proof"):
        me.reserve_resident(5 * GiB, "key B")  # the pool counts, and the refusal says so
    # the device's free memory and the ledger (4 GiB left each) admit it only with the pool
    with pytest.raises(DeviceMemoryExhausted, match="waited"):
        with me.working_set(10 * GiB, "proof 1", timeout=0.2):
            pass
    assert "waiting" not in me.usage()["processes"][me._key]  # the refusal took its mark away
    with me.working_set(10 * GiB, "proof 1", pooled=10 * GiB, timeout=5) as held:
        assert me.pooled() == 0 and me.usage()["used"] == 12 * GiB
    assert me.pooled() == 0      # nothing kept: the block did not keep()
    free[0] = 14 * GiB
    with me.working_set(10 * GiB, "proof 2", timeout=5) as held:
        held.keep(6 * GiB)
    me.unpool(6 * GiB)
    assert me.pooled() == 0 and me.usage()["used"] == 2 * GiB


def test_a_process_waiting_for_room_is_seen_and_gets_it_once_the_pool_goes(tmp_path):
    ctx = mp.get_context("spawn")
    me = DeviceBudget("dev0", 16 * GiB, ledger_dir=tmp_path)
    with me.working_set(12 * GiB, "proof 0", timeout=5) as held:
        held.keep(12 * GiB)
    assert not me.pool_wanted()  # nobody waits
    out = ctx.Queue()
    p = ctx.Process(target=_wait_for, args=(tmp_path, 8 * GiB, out))
    p.start()
    try:
        deadline = time.monotonic() + 30
        while not me.pool_wanted():
            assert time.monotonic() < deadline and p.is_alive()
            time.sleep(0.05)
        assert out.empty()  # still waiting: 4 GiB free, 8 wanted
        me.unpool(12 * GiB)
        assert out.get(timeout=30) < 30
    finally:
        p.join(30)
    assert p.exitcode == 0 and not me.pool_wanted()  # its mark went with its admission


# the 32 GiB partition (issue 16): 130,278,869 constraints over 2^27, A, B, C as compact CSR
# (int32 column + 16-bit coefficient index: 6 bytes a nonzero, 722 M nonzeros)
SDR_32G = dict(num_vars=130_300_000, num_aux=130_299_000, domain=1 << 27,
               matrix_bytes=722_000_000 * 6 + 3 * 8 * 130_278_869)
H200 = int(139.8 * GiB * 0.92)  # the backend's budget: 92% of what the card reports


def test_the_32g_partition_fits_an_h200_and_is_refused_on_smaller_cards(tmp_path, monkeypatch):
    from gpu.budget import ProofShape, admit_shape

    monkeypatch.delenv("ZKHIVE_MSM_DENSE_AFFINE_ROUNDS", raising=False)
    monkeypatch.delenv("ZKHIVE_DENSE_CHUNK_LOG", raising=False)
    shape = ProofShape(**SDR_32G)
    # with the dense engine's affine rounds (the default: 2^24 chunks, 5-window slices) the key
    # and a proof do not fit; without them they do, and that is the shape the ledger admits
    # (the engine then sums in XYZZ)
    assert shape.resident_bytes() + shape.working_set_bytes() > H200
    admitted = admit_shape(DeviceBudget("h200", H200, ledger_dir=tmp_path), shape, "sdr-32g key")
    assert admitted.dense_affine is False and admitted == replace(shape, dense_affine=False)
    assert 80 * GiB < admitted.resident_bytes() + admitted.working_set_bytes() < H200
    # with the rounds off the shape fits as it is
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_AFFINE_ROUNDS", "0")
    assert 80 * GiB < shape.resident_bytes() + shape.working_set_bytes() < H200
    assert admit_shape(DeviceBudget("h200", H200, ledger_dir=tmp_path / "off"), shape,
                       "sdr-32g key") == shape
    for card in (16, 80):
        with pytest.raises(DeviceMemoryExhausted, match=rf"sdr-32g key cannot run on device "
                           rf"card{card}: resident .*b_g2_query bases 23.30 GiB.* budget of"):
            admit_shape(DeviceBudget(f"card{card}", int(card * GiB * 0.92), ledger_dir=tmp_path),
                        shape, "sdr-32g key")
    # with full 32-byte coefficients the matrices alone are 30 GiB: no longer fits one proof
    full = ProofShape(**{**SDR_32G, "matrix_bytes": 722_000_000 * 40 + 3 * 8 * 130_278_869})
    with pytest.raises(DeviceMemoryExhausted, match="matrices 29.81 GiB"):
        admit_shape(DeviceBudget("h200", H200, ledger_dir=tmp_path), full, "sdr-32g key")


def test_two_provers_cannot_each_hold_a_32g_key_on_one_h200(tmp_path):
    """Two prover processes each book their own resident copy: the second is refused, with who
    holds what, instead of running the card out of memory."""
    from gpu.budget import ProofShape

    shape = ProofShape(**SDR_32G)
    first = DeviceBudget("h200", H200, ledger_dir=tmp_path)
    first.reserve_resident(shape.resident_bytes(), "sdr-32g key")
    other = DeviceBudget("h200", H200, ledger_dir=tmp_path)
    other._key = "1:0.000"  # books as another process would (its own entry stays while it books)
    with pytest.raises(DeviceMemoryExhausted, match=r"sdr-32g key needs 1?\d\d\.\d\d GiB .* only"):
        other.reserve_resident(shape.resident_bytes(), "sdr-32g key")


def test_the_plan_covers_what_the_h200_held_for_filecoin_32g(tmp_path, monkeypatch):
    """Measured on the H200 (docs/performance.md, "The dense engine's affine rounds by
    default"): Filecoin's 32 GiB partition key made on the device (compact matrices 610,615,016
    bytes), after its first proof, held 111,414,177,224 bytes with the dense engine's 2^24
    chunks, the radix sort and the affine rounds' buffers (5-window slices); one proof's working
    set peaked at 17,587,219,880. The plan books at least that. It books more (within 6%)
    because each tail engine's radix list is booked for a full 2^24-scalar chunk, where this
    circuit's tails are 1.7 M scalars and the list is made at the tail's length. Before the
    rounds (2^25 chunks, XYZZ) the key held 105,698,165,832 bytes: the same margin. An 80 GiB
    card's ledger refuses the key. Since 2026-12-06 (ninth session) the engine keeps its
    running sums in its workspace's buckets (1.22 GiB less than measured then) and, at the
    default 2^25 chunks in 3-window slices, lends its rounds the radix sort's idle second list
    for their prefix products: that default is admitted on the H200 with the affine buffers."""
    from gpu.budget import ProofShape, admit_shape
    monkeypatch.delenv("ZKHIVE_MSM_DENSE_AFFINE_ROUNDS", raising=False)
    monkeypatch.setenv("ZKHIVE_DENSE_CHUNK_LOG", "24")             # as measured
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_AFFINE_WINDOWS", "5")
    shape = ProofShape(num_vars=130_170_221, num_aux=130_169_893, domain=1 << 27,
                       matrix_bytes=610_615_016)
    held, working = 111_414_177_224, 17_587_219_880
    running = (13 << 19) * 192                   # the second set of buckets it held then
    assert held - running <= shape.resident_bytes() <= held * 1.06
    assert working <= shape.working_set_bytes() <= working * 1.03
    assert admit_shape(DeviceBudget("h200", H200, ledger_dir=tmp_path), shape,
                       "filecoin-32g key") == shape
    monkeypatch.delenv("ZKHIVE_DENSE_CHUNK_LOG")                    # the default: 2^25 in 3
    monkeypatch.delenv("ZKHIVE_MSM_DENSE_AFFINE_WINDOWS")
    wide = shape.resident_bytes()
    assert admit_shape(DeviceBudget("h200", H200, ledger_dir=tmp_path), shape,
                       "filecoin-32g key") == shape                 # the affine buffers kept
    assert 0 < H200 - wide - shape.working_set_bytes() < 2 * GiB   # 1.4 GiB to spare
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_AFFINE_WINDOWS", "4")      # one window more: too much
    assert admit_shape(DeviceBudget("h200", H200, ledger_dir=tmp_path), shape,
                       "filecoin-32g key") == replace(shape, dense_affine=False)
    monkeypatch.delenv("ZKHIVE_MSM_DENSE_AFFINE_WINDOWS")
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_AFFINE_ROUNDS", "0")
    monkeypatch.setenv("ZKHIVE_DENSE_CHUNK_LOG", "25")
    assert 105_698_165_832 <= shape.resident_bytes() <= 105_698_165_832 * 1.06
    with pytest.raises(DeviceMemoryExhausted, match="budget of 73.60 GiB"):
        admit_shape(DeviceBudget("a100-80", int(80 * GiB * 0.92), ledger_dir=tmp_path), shape,
                    "filecoin-32g key")


def test_a_device_setup_is_admitted_lean_then_books_the_affine_buffers(tmp_path, monkeypatch):
    """Measured on the H200: the device setup of filecoin-32g needs 23.02 GiB of temporaries,
    which beside the key with the dense engine's affine buffers (110.7 GiB planned) exceed the
    128.6 GiB budget: the setup is admitted without them, and once its temporaries are gone the
    buffers are booked (affine_upgrade), where they and a proof fit; where they do not (another
    process holds the room) the engine stays XYZZ and nothing is booked."""
    from gpu.budget import ProofShape, admit_shape, affine_upgrade
    monkeypatch.delenv("ZKHIVE_MSM_DENSE_AFFINE_ROUNDS", raising=False)  # the defaults
    monkeypatch.delenv("ZKHIVE_DENSE_CHUNK_LOG", raising=False)
    shape = ProofShape(num_vars=130_170_221, num_aux=130_169_893, domain=1 << 27,
                       matrix_bytes=610_615_016)
    setup_temp = int(23.02 * GiB)
    budget = DeviceBudget("h200", H200, ledger_dir=tmp_path)
    assert admit_shape(budget, shape, "filecoin-32g key") == shape          # loaded: affine fits
    lean = admit_shape(budget, shape, "filecoin-32g key", working=setup_temp)
    assert lean == replace(shape, dense_affine=False)
    budget.reserve_resident(lean.resident_bytes(), "filecoin-32g key")
    extra = affine_upgrade(budget, lean, "filecoin-32g key")
    assert extra == shape.resident_bytes() - lean.resident_bytes() > 6 * GiB
    assert budget.usage()["used"] == shape.resident_bytes()
    assert affine_upgrade(budget, shape, "filecoin-32g key") == 0           # already has them
    # another process holding 20 GiB: no room for the buffers, nothing booked
    other = DeviceBudget("h200", H200, ledger_dir=tmp_path / "two")
    other.reserve_resident(20 * GiB, "someone else")       # this (live) process
    mine = DeviceBudget("h200", H200, ledger_dir=tmp_path / "two")
    mine._key = "1:0.000"  # books as another process would (its own entry stays while it books)
    mine.reserve_resident(lean.resident_bytes(), "filecoin-32g key")
    assert affine_upgrade(mine, lean, "filecoin-32g key") == 0
    assert mine.usage()["used"] == lean.resident_bytes() + 20 * GiB
    # a setup whose temporaries do not fit even beside the lean key is refused, and says so
    with pytest.raises(DeviceMemoryExhausted, match=r"device setup needs 30\.00 GiB of temporaries"):
        admit_shape(budget, shape, "filecoin-32g key", working=30 * GiB)


def test_a_key_from_a_file_is_admitted_by_the_rule_of_the_key_made_in_process(tmp_path, monkeypatch):
    """Issue 40, item 0: filecoin-32g's .params was refused at preload ("needs 148858459336
    bytes resident, more than device cuda:0 can hold") where the key made in process was held
    lean. A .params file read for a compact circuit gives the shape the device setup books for
    that circuit, and one admission (admit_shape through cuda.admit_key) ends where the in-process
    key ends (its setup's temporaries first, then affine_upgrade): full where it fits, lean
    where only that fits, refused with the bytes where not even that fits. Small chunks put
    the toy's H query through the dense engine, with its affine buffers, as 2^27 does."""
    from gpu.backends.cuda import Resident, admit_key
    from gpu.budget import admit_shape, affine_upgrade
    from gpu.groth16 import bellperson as bp
    from gpu.groth16.setup import setup as host_setup
    from tests.compact_circuits import toy

    monkeypatch.setenv("ZKHIVE_SPLIT_CHUNK_LOG", "8")
    monkeypatch.setenv("ZKHIVE_DENSE_CHUNK_LOG", "8")
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_AFFINE_ROUNDS", "2")
    cr = toy(300)
    pk, _ = host_setup(cr.to_r1cs(), seed=b"admission")
    bp.write_params(pk, cr, tmp_path / "toy.params")
    from_file = bp.read_params(tmp_path / "toy.params", cr)   # FileQuery: no point read yet
    shape = Resident.shape(from_file, cr)
    assert shape == Resident.made_shape(cr)
    lean = replace(shape, dense_affine=False)
    full_need = shape.resident_bytes() + shape.working_set_bytes()
    lean_need = lean.resident_bytes() + lean.working_set_bytes()
    assert lean_need < full_need and shape.resident_bytes() - lean.resident_bytes() > 0

    def made_in_process(budget):
        """What setup_resident books at 2^27: admitted lean beside its temporaries (23 GiB
        there; at this size they are a constant 3.5 GiB, so the lean shape is taken as given),
        then the affine buffers once the setup is done, where they and a proof fit."""
        got = admit_shape(budget, replace(Resident.made_shape(cr), dense_affine=False), "made")
        budget.reserve_resident(got.resident_bytes(), "made")
        return got.resident_bytes() + affine_upgrade(budget, got, "made")

    for cap, want in ((full_need, shape), (full_need - 1, lean), (lean_need, lean)):
        led = tmp_path / f"ledger-{cap}"
        got, label = admit_key(DeviceBudget("dev", cap, ledger_dir=led / "file"), from_file, cr)
        assert got == want, cap
        assert got.resident_bytes() == made_in_process(DeviceBudget("dev", cap, ledger_dir=led / "made"))
    # below the lean shape both are refused, naming the parts and the budget in bytes
    cap = lean_need - 1
    with pytest.raises(DeviceMemoryExhausted) as file_err:
        admit_key(DeviceBudget("dev", cap, ledger_dir=tmp_path / "small"), from_file, cr)
    with pytest.raises(DeviceMemoryExhausted):
        made_in_process(DeviceBudget("dev", cap, ledger_dir=tmp_path / "small-made"))
    msg = str(file_err.value)
    assert msg.startswith(f"the proving key {from_file.circuit_digest.hex()[:16]} cannot run on "
                          "device dev: resident ")
    assert "h_query bases" in msg and "g1 dense engine" in msg and "a proof, against a budget of" in msg
    assert file_err.value.shape == lean_need


def test_a_held_key_is_booked_once_and_each_prover_books_its_own_engines(tmp_path):
    """A key holder (cluster/pipeline/keyholder.py) books the key itself (matrices and the five
    base sets); a prover attached to it books the rest (NTT tables, tail and dense engines): the
    two add up to what one prover holding its own key books. At 32 GiB on an H200 the key and
    one prover (lean) with a proof fit; a second prover's engines do not."""
    from gpu.budget import ProofShape, admit_shape

    shape = ProofShape(**SDR_32G)
    parts = shape.resident()
    assert shape.key_bytes() + shape.process_bytes() == shape.resident_bytes()
    assert shape.key_bytes() == parts["matrices"] + sum(v for k, v in parts.items() if k.endswith(" bases"))
    assert "ntt tables" not in {k for k in parts if ProofShape.is_key_part(k)}
    import subprocess
    import sys

    import psutil

    # the holder and the first prover: live processes of their own (the ledger drops the dead)
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]) for _ in range(2)]
    try:
        holder, prover = (DeviceBudget("h200", H200, ledger_dir=tmp_path) for _ in procs)
        for b, p in zip((holder, prover), procs):
            b._key = f"{p.pid}:{psutil.Process(p.pid).create_time():.3f}"
        holder.reserve_resident(shape.key_bytes(), "the held key")
        mine = admit_shape(prover, shape, "the held key (this prover's engines)")
        prover.reserve_resident(mine.process_bytes(), "the held key (this prover's engines)")
        with prover.working_set(mine.working_set_bytes(), "one proof", timeout=0.1):
            pass
        other = DeviceBudget("h200", H200, ledger_dir=tmp_path)  # this process: a second prover
        with pytest.raises(DeviceMemoryExhausted, match="a second prover's engines needs"):
            other.reserve_resident(mine.process_bytes(), "a second prover's engines")
        procs[1].kill()  # the first prover SIGKILLed: its engines' bookings go, the key's stay
        procs[1].wait()
        other.reserve_resident(mine.process_bytes(), "the restarted prover's engines")
        assert other.usage()["used"] == shape.key_bytes() + mine.process_bytes()
    finally:
        for p in procs:
            p.kill()
            p.wait()
