"""How many prover processes share one device: ``[worker] gpu_workers_per_device``, unless the
keys they preload cannot be held once per process, then one key owner with a deeper prove-ahead.

Why not N processes each with its own copy: at 2^27 one copy of sdr-32g's key and its device
state is ~98 GiB resident (docs/gpu.md, "Device memory by shape") and one proof's working set
16.5 GiB, against an H200 budget of 128.6 GiB: two copies cannot exist. Why not a second process
attached to the first one's allocations (CUDA IPC): what it would share is everything resident
(bases, matrices, the NTT tables and the split MSM's tail-engine workspaces; the last two are
21 GiB the attacher cannot afford twice either), so its device work must take turns with the
owner's (the workspaces are one), and two working sets (2 x 16.5 GiB) beside the shared 98 GiB
do not fit either, so the ledger would serialise them too. What a second process could still
add is overlap of one proof's host work (fetch, hash and decode the assignment, combination,
storing the proof) with the other's device work, and that is what the prover's prove-ahead
threads already do in one process (cluster/pipeline/prefetch.py: 97.7% device busy with one prover
against 98.6% with two at 2^20, the same seconds a proof). So where N copies do not fit, ``up``
starts as many provers as copies fit (at least one: a key that cannot fit once is refused by
that prover with the ledger's breakdown) and gives the owner a prove-ahead of 2 for the slots it
stands in for, and says so in its output and in the state file. A second prover started by hand
is refused by the device's memory ledger with who holds what (gpu/budget.py), never an
out-of-memory.

The sizes are the ledger's own (gpu.budget.ProofShape) from the circuit's counts
(``circuit.size()``: no matrices built); the device's memory comes from ``up``'s device probe.
"""
from __future__ import annotations

from dataclasses import dataclass

GiB = 1 << 30


@dataclass(frozen=True)
class DevicePlan:
    device: str
    asked: int                 # worker.gpu_workers_per_device
    provers: int               # processes started on the device
    prove_ahead: int | None    # ZKHIVE_PROVE_AHEAD for them (None: the default)
    note: str | None = None    # why fewer than asked


def key_shape(circuit):
    """The ledger's ProofShape of a circuit from its counts, or None when it has none cheap."""
    from gpu.budget import ProofShape

    size = getattr(circuit, "size", None)
    if size is None:
        return None
    sz = size()
    cons, nv, nnz, npub = sz["constraints"], sz["variables"], sz["nonzeros"], sz.get("public_inputs", 0)
    need = cons + npub + 1
    domain = sz.get("domain") or 1 << max(1, (need - 1).bit_length())
    compact = hasattr(circuit, "compact_r1cs")
    # compact CSR (int32 column + 16-bit coefficient index) where the family has it, else full
    # CSR (8-byte index + 32-byte coefficient), plus the row pointers of A, B, C
    matrix = nnz * (6 if compact else 40) + 3 * 8 * (cons + 1)
    return ProofShape(num_vars=nv, num_aux=nv - 1 - npub, domain=domain, matrix_bytes=matrix)


def plan_device(device: str, asked: int, keys: list[str], capacity: int | None,
                shape_of=None, held: bool = False) -> DevicePlan:
    """Provers for ``device`` holding the keys named ``keys`` (``[srs] preload``) each, in a
    ledger budget of ``capacity`` bytes (None: unknown, as asked). ``held``: the device's key
    holder holds each key once (``[gpu] key_holder``, cluster/pipeline/keyholder.py) and every
    prover books only its own engines and a proof beside it (``ProofShape.process_bytes``): at
    2^26 two provers fit an H200 that way where two copies do not; at 2^27 still one."""
    from gpu.budget import _fmt

    if asked <= 1 or not device.startswith("cuda") or not keys or capacity is None:
        return DevicePlan(device, asked, asked, None)
    if shape_of is None:
        from synthesis.circuits import get_circuit
        shape_of = lambda name: key_shape(get_circuit(name))
    shapes = [shape_of(name) for name in keys]
    if any(s is None for s in shapes):
        return DevicePlan(device, asked, asked, None)
    work = max(s.working_set_bytes() for s in shapes)
    if held:
        shared = sum(s.key_bytes() for s in shapes)
        resident = sum(s.process_bytes() for s in shapes)
        fits = max(1, min(asked, (capacity - shared) // (resident + work)))
        what = (f"the key holder holds {', '.join(keys)} once ({_fmt(shared)}) and each prover "
                f"books its own engines ({_fmt(resident)}) + {_fmt(work)} a proof")
    else:
        resident = sum(s.resident_bytes() for s in shapes)
        fits = max(1, min(asked, capacity // (resident + work)))
        what = (f"each would hold its own copy of {', '.join(keys)} ({_fmt(resident)} resident + "
                f"{_fmt(work)} a proof)")
    if fits >= asked:
        return DevicePlan(device, asked, asked, None)
    ahead = min(2, 1 + asked - fits)
    note = (f"{device}: {asked} provers asked (worker.gpu_workers_per_device = {asked}), but {what} "
            f"in a budget of {_fmt(capacity)}: {fits} prover{'s' if fits > 1 else ''} "
            f"{'attached to' if held else 'holding'} the key, "
            f"with prove-ahead {ahead} for the other slot{'s' if asked - fits > 1 else ''} "
            f"(cluster/pipeline/devshare.py)")
    return DevicePlan(device, asked, fits, ahead, note)


def device_capacities(devices: list[str]) -> dict[str, int]:
    """The ledger budget (CAPACITY_SHARE of total memory) of each ``cuda:N``, asked in a child
    process (``up`` itself must hold no CUDA context); {} when PyCUDA cannot tell."""
    import json
    import os
    import subprocess
    import sys

    idx = [int(d.split(":")[1]) for d in devices if d.startswith("cuda:")]
    if not idx:
        return {}
    code = ("import json, pycuda.driver as d\nd.init()\n"
            f"print(json.dumps({{i: d.Device(i).total_memory() for i in {idx!r}}}))\n")
    try:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        totals = json.loads(res.stdout.strip().splitlines()[-1]) if res.returncode == 0 else {}
    except (subprocess.TimeoutExpired, ValueError, OSError, IndexError):
        return {}
    share = float(os.environ.get("ZKHIVE_DEVICE_MEMORY_SHARE", "0.92"))
    return {f"cuda:{i}": int(int(t) * share) for i, t in totals.items()}


def plans_for(s, devices: list[str]) -> dict[str, DevicePlan]:
    """Each device's plan under settings ``s`` (``worker.device_memory_bytes`` as the budget
    when set, else the device's own)."""
    asked = s.worker.gpu_workers_per_device
    keys = list(s.srs.preload)
    caps: dict[str, int] = {}
    if asked > 1 and keys:
        caps = ({d: s.worker.device_memory_bytes for d in devices} if s.worker.device_memory_bytes
                else device_capacities(devices))
    held = bool(getattr(getattr(s, "gpu", None), "key_holder", False))
    return {d: plan_device(d, asked, keys, caps.get(d), held=held) for d in devices}
