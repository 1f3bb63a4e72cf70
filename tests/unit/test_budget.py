"""The device-memory ledger across real processes (no GPU needed: it books bytes, not VRAM)."""
import multiprocessing as mp
import os
import signal
import time

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
