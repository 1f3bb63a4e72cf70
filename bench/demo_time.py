"""``zkhive demo --down`` of a checkout, timed, on free ports with its own run, state and key
directories (so it is safe beside other clusters on the machine); prints the demo's step times
and the wall time:

    python3 bench/demo_time.py [CHECKOUT]       # default: this checkout

Two checkouts in turn (e.g. a ``git archive`` of the previous commit) compare a change's demo
time under the same load (docs/operations.md, issue 36)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    code = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT
    sys.path.insert(0, str(ROOT))
    from cluster.ops.supervisor import free_ports

    tmp = Path(tempfile.mkdtemp(prefix="zkhive-demo-time."))
    redis, flower, metrics, gateway = free_ports(4)
    settings = {"redis": {"url": f"redis://127.0.0.1:{redis}/0", "password": os.urandom(8).hex()},
                "blobs": {"dir": str(tmp / "blobs")}, "srs": {"param_cache": str(tmp / "keys")},
                "flower": {"port": flower, "password": os.urandom(8).hex()},
                "metrics": {"port": metrics}, "gateway": {"port": gateway}}
    cfg = tmp / "zk.toml"
    cfg.write_text("".join(f"[{part}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in kv.items())
                           for part, kv in settings.items()))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZKHIVE_")}
    env["PYTHONPATH"] = str(code)
    env["ZKHIVE_STATE_DIR"] = str(tmp / "state")
    t = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "cluster", "demo", "--config", str(cfg), "--run-dir",
                          str(tmp / "run"), "--devices", "cpu:0", "--down"], cwd=code, env=env,
                         capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t
    steps = re.findall(r"^  (keys|up|sector \+ C1|prove \(submit -> proof\)|verify)\s+([\d.]+) s$",
                       res.stdout, re.M)
    print(res.stdout if res.returncode else "\n".join(f"  {k:<26} {v} s" for k, v in steps))
    if res.returncode:
        print(res.stderr[-2000:], file=sys.stderr)
    print(f"{code}: zkhive demo --down {wall:.1f} s wall, rc {res.returncode}, "
          f"load {os.getloadavg()[0]:.1f}")
    return res.returncode


if __name__ == "__main__":
    sys.exit(main())
