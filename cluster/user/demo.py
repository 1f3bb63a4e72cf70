"""``zkhive demo``: the README's first command. From nothing to a verified cluster proof:

    keys      a development trusted setup of the smallest porep-lite parameter set (cached)
    up        the local cluster, unless one is running already (it is left running)
    sector    seal a synthetic sector and write its C1 input (a fresh seed each run: a new job)
    prove     submit the C1 input, follow the partitions on a progress bar
    verify    every partition proof, against public inputs recomputed here from the C1 input

then prints each step's time, the partitions' timeline and the Flower address. The keys come
first so the prover loads them before it reports ready (``[srs] preload``).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from cluster.cli import CommandError, cli_name


def _smallest_porep() -> str:
    from synthesis.porep import TINY
    return TINY


def _make_c1(circuit, out_dir: Path) -> tuple[dict, Path]:
    """A fresh sector of ``circuit`` and its C1 document (porep-lite's own sector code)."""
    from synthesis.porep import SETS, c1_document, generate

    if circuit.name not in SETS:
        raise CommandError(f"--params {circuit.name}: the demo seals porep-lite sectors only "
                           f"({', '.join(sorted(SETS))})")
    seed = os.urandom(32)  # porep-lite seeds are 32 bytes, as a sector's randomness
    sector = generate(SETS[circuit.name], seed)
    doc = c1_document(sector, seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"c1-{seed.hex()[:12]}.json"
    path.write_text(json.dumps(doc))
    return doc, path


def _key_matches(keys, circuit) -> bool:
    return keys.matches(circuit)


def _cluster_running(args) -> bool:
    from cluster.ops.supervisor import Supervisor, SupervisorError

    sup = Supervisor(Path(args.run_dir).resolve())
    try:
        if not sup.load():
            return False
    except SupervisorError as e:
        raise CommandError(str(e)) from None
    alive = sup.alive()
    if alive and len(alive) == len(sup.records):
        return True
    if alive:
        gone = [r.name for r in sup.records if r.process() is None]
        from cluster.cli import cli_name

        raise CommandError(f"the cluster in {sup.state_file} is half up ({', '.join(gone)} gone): "
                           f"run `{cli_name()} down` then `{cli_name()} demo` again")
    return False  # a stale state file: `up` reports and removes it


def _verify(rt, circuit, doc, res) -> int:
    from gpu.groth16 import Proof, verify

    vk = rt.keys.load_vk(circuit)
    c1 = circuit.parse_c1(doc)
    n = circuit.num_partitions()
    if len(res.proof) != 192 * n:
        raise CommandError(f"the proof has {len(res.proof)} bytes, expected {192 * n} ({n} partitions)")
    for k, raw in enumerate(res.partition_proofs()):
        public = circuit.public_inputs(c1, k)  # recomputed here, not taken from the result
        if not verify(vk, public, Proof.from_bytes(raw)):
            raise CommandError(f"partition {k}'s proof does NOT verify")
    return n


def cmd_demo(args) -> int:
    from cluster.ops.commands import start_cluster
    from cluster.ops.current import settings_for

    timings: list[tuple[str, float]] = []

    def step(name, t0):
        timings.append((name, time.monotonic() - t0))

    s = settings_for(args)
    from synthesis.circuits import get_circuit

    from cluster.client import submit
    from cluster.pipeline.app import runtime

    params = args.params or _smallest_porep()
    try:
        circuit = get_circuit(params)
    except KeyError as e:
        raise CommandError(e.args[0]) from None
    rt = runtime()
    if not _cluster_running(args):
        from cluster.ops.plan import check_ports

        check_ports(s)  # a clash is refused now, not after minutes of keys

    t0 = time.monotonic()
    had = rt.keys.has(circuit)
    print(f"[1/5] keys: {params} ({circuit.r1cs().num_constraints} constraints x "
          f"{circuit.num_partitions()} partitions){' (cached)' if had else ', development setup...'}")
    pk, vk = rt.keys.setup(circuit)
    if had and not _key_matches(rt.keys, circuit):
        # a circuit whose constraints changed under the same parameter-set digest: proving with
        # the cached key would fail every partition with CircuitMismatch
        print(f"      the cached key {pk} was made for other constraint matrices: regenerating it "
              f"(running provers may still hold the old one: `{cli_name()} down` first if the job fails)")
        pk, vk = rt.keys.setup(circuit, force=True)
        had = False
    step("keys" + (" (cached)" if had else ""), t0)

    t0 = time.monotonic()
    if _cluster_running(args):
        print(f"[2/5] cluster: already running (state in {Path(args.run_dir)}/cluster.json)")
        step("up (already running)", t0)
    else:
        print("[2/5] cluster: zkhive up")
        if params not in s.srs.preload:  # the prover loads the demo's key before it is ready
            os.environ["ZKHIVE_SRS__PRELOAD"] = json.dumps([*s.srs.preload, params])
            s = settings_for(args)
        start_cluster(args, s, out=print)
        step("up", t0)

    t0 = time.monotonic()
    doc, c1_path = _make_c1(circuit, Path(args.run_dir) / "demo")
    print(f"[3/5] sector: sealed a {params} sector; C1 input {c1_path}")
    step("sector + C1", t0)

    t0 = time.monotonic()
    job = submit(doc, priority="high")
    print(f"[4/5] prove: job {job.job_id} submitted ({circuit.num_partitions()} partitions)")
    from .progress import follow_job

    res = follow_job(job, args.timeout, stderr=False)
    step("prove (submit -> proof)", t0)

    t0 = time.monotonic()
    n = _verify(rt, circuit, doc, res)
    step("verify", t0)
    proof_path = c1_path.with_name(c1_path.stem.replace("c1-", "proof-") + ".bin")
    proof_path.write_bytes(res.proof)
    print(f"[5/5] verify: all {n} partition proofs verify ({len(res.proof)} bytes -> {proof_path})")

    print("\ntimings")
    for name, secs in timings:
        print(f"  {name:<26} {secs:7.2f} s")
    _print_timeline(rt, job.job_id)
    from cluster.ops.supervisor import Supervisor
    sup = Supervisor(Path(args.run_dir).resolve())
    sup.load()
    print(f"\nFlower     {sup.meta.get('flower', '?')}  (user {sup.meta.get('flower_user', '?')}, "
          f"password {sup.meta.get('flower_password', '?')})")
    from cluster.ops.commands import hints

    status, down = hints(args)
    if sup.meta.get("metrics"):
        print(f"metrics    {sup.meta['metrics']}")
    if sup.meta.get("gateway"):
        print(f"gateway    {sup.meta['gateway']}  (cuzk's gRPC service: Curio's Cuzk.Address)")
    print(f"status     {status}")
    if args.down:
        from cluster.ops.commands import cmd_down
        cmd_down(args)
    else:
        print(f"stop       {down}")
    return 0


def _print_timeline(rt, job_id: str) -> None:
    """Per partition: synthesis and prove seconds and the device, from the job's timeline."""
    from cluster.pipeline import timeline

    try:
        events = timeline.load(rt.redis, job_id)
    except Exception as e:  # the timeline is a nicety here; the proof has been verified
        print(f"  (no timeline: {e})")
        return
    at: dict[tuple[int, str], float] = {}
    device: dict[int, str] = {}
    for e in events:
        if e.get("partition") is not None:
            at.setdefault((e["partition"], e["event"]), e["t"])
            if e["event"] == "prove_end" and e.get("device"):
                device[e["partition"]] = e["device"]
    parts = sorted({k for k, _ in at})
    if not parts:
        return
    print(f"  {'partition':<10} {'synthesis':>10} {'prove':>8}  device")
    for k in parts:
        syn = at.get((k, "synthesis_end"), 0) - at.get((k, "synthesis_start"), 0)
        prv = at.get((k, "prove_end"), 0) - at.get((k, "prove_pickup"), 0)
        print(f"  {k:<10} {syn:9.2f}s {prv:7.2f}s  {device.get(k, '-')}")
    from cluster.cli import cli_name

    print(f"  (every event: {cli_name()} timeline {job_id})")


def register(sub) -> None:
    from cluster.ops.commands import add_config, add_run_dir, add_up_options

    p = sub.add_parser("demo", help="up, seal the smallest porep-lite sector, prove it on the "
                                    "cluster, verify, print timings (the first command to run)")
    p.add_argument("--params", help="parameter set (default: the smallest porep-lite)")
    p.add_argument("--timeout", type=float, default=600.0, metavar="S",
                   help="seconds to wait for the proof (default 600)")
    p.add_argument("--down", action="store_true", help="stop the cluster at the end")
    add_config(p)
    add_run_dir(p)
    add_up_options(p)  # used when the demo starts the cluster
    p.set_defaults(func=cmd_demo)
