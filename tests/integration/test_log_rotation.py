"""``[logs]``: the logs of ``zkhive up``'s processes rotate (issue 39: they never did). On a real
process that keeps writing to its log while the keeper rotates it."""
from __future__ import annotations

import sys
import time

import pytest

from cluster.ops.keeper import Keeper, KeeperPolicy
from cluster.ops.supervisor import ServiceSpec, Supervisor, rotate_log
from cluster.settings import SettingsError, load

PY = sys.executable
WRITER = ("import itertools, time\n"
          "for i in itertools.count():\n"
          "    print(f'line {i:08d} ' + 'x' * 100, flush=True)\n"
          "    time.sleep(0.001)\n")


def _numbers(path):
    return [int(line.split()[1]) for line in path.read_text().splitlines() if line.startswith("line ")]


def test_the_keeper_rotates_a_growing_log_and_the_process_writes_on_into_it(tmp_path):
    log = tmp_path / "chatty.log"
    spec = ServiceSpec(name="chatty", argv=[PY, "-c", WRITER], log=log, ready=lambda rec: True,
                       stop_grace_s=2)
    sup = Supervisor(tmp_path / "run")
    sup.start_all([spec])
    sup.meta["logs"] = {"max_bytes": 20_000, "backups": 2}
    sup.save()
    said = []
    keeper = Keeper(tmp_path / "run", lambda: {"chatty": spec},
                    policy=KeeperPolicy(poll_s=0.05), out=said.append)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (tmp_path / "chatty.log.2").exists():
            keeper.step()
            time.sleep(0.05)
        for _ in range(5):  # and more rotations: the oldest copies are dropped, never a .3
            keeper.step()
            time.sleep(0.1)
        assert (tmp_path / "chatty.log.1").exists() and (tmp_path / "chatty.log.2").exists(), said
        assert not (tmp_path / "chatty.log.3").exists()
        assert any("keeper: rotated" in m for m in said)
        time.sleep(0.3)
        # the process still writes into chatty.log (its O_APPEND descriptor follows the truncation),
        # after what .1 holds: nothing went to a renamed file
        newer, older = _numbers(log), _numbers(tmp_path / "chatty.log.1")
        assert newer and older and newer[0] > older[-1], (older[-3:], newer[:3])
        assert log.stat().st_size < 20_000 + 200_000  # a few steps' worth, not unbounded
        assert not log.read_bytes().startswith(b"\0")  # no hole of zeros before the new lines
    finally:
        sup.stop_all()


def test_a_log_is_rotated_when_its_process_starts_and_never_with_max_bytes_0(tmp_path):
    log = tmp_path / "big.log"
    log.write_bytes(b"old\n" * 1000)
    assert not rotate_log(log, 0, 3) and log.stat().st_size == 4000  # 0: never
    assert not rotate_log(log, 4001, 3)  # under the size: left alone
    spec = ServiceSpec(name="big", argv=[PY, "-c", "print('new run', flush=True)"], log=log,
                       ready=lambda rec: True, log_max_bytes=4000, log_backups=1)
    sup = Supervisor(tmp_path / "run")
    rec = sup.start(spec)
    rec._popen.wait(10)
    assert (tmp_path / "big.log.1").read_bytes() == b"old\n" * 1000
    assert "new run" in log.read_text() and "old" not in log.read_text()
    # backups 0: truncated, no copy kept
    log.write_bytes(b"y" * 5000)
    assert rotate_log(log, 4000, 0) and log.stat().st_size == 0
    assert (tmp_path / "big.log.1").read_bytes() == b"old\n" * 1000


@pytest.mark.parametrize("toml, message", [
    ("[logs]\nmax_bytes = -1\n", "logs.max_bytes"),
    ("[logs]\nbackups = 101\n", "logs.backups"),
])
def test_bad_log_settings_are_refused_naming_the_key(tmp_path, toml, message):
    f = tmp_path / "z.toml"
    f.write_text(toml)
    with pytest.raises(SettingsError, match=message):
        load(f)
    f.write_text("[logs]\nmax_bytes = 1024\nbackups = 2\n")
    assert load(f).logs.max_bytes == 1024 and load(f).logs.backups == 2
