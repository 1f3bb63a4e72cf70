"""The CUDA backend: a proving key and its circuit's matrices resident on one device; per proof
only the assignment travels in and five points come out.

Per proof, on the device (every vector stays there from the upload of z to the MSMs):
  upload z (staged through page-locked memory)             -> z
  A z, B z, C z against the resident CSR matrices (prover.cu) -> a, b, c over the domain,
      plus the QAP's input rows, and the satisfiability check (first failing constraint)
  compute_h (gpu/cuda/ntt.py: 6 NTTs, the pointwise step)  -> H coefficients, in a
  five MSMs against the resident query bases (gpu/cuda/msm.py): a_query z, b_g1_query z,
      b_g2_query z, l_query z_aux, h_query H
Each stage is timed with device events and reported into the proof's StageTimer, so the
partition's timeline shows where GPU time goes and where it idles.

Memory: what a key holds resident and what a proof needs while it runs are booked in the
device's ledger (gpu/budget.py) shared with every other process on the device: a key that does
not fit is refused with a message, a proof that does not fit now waits, and an allocation that
fails anyway raises GpuOutOfMemory after everything the attempt held has been freed, so the
worker keeps serving and the task layer can retry the partition elsewhere.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
from contextlib import contextmanager

import numpy as np

from gpu.budget import DeviceBudget
from gpu.cuda import loader
from gpu.cuda.launch import memset_words
from gpu.cuda.memory import BufferPool, DeviceBuffer, DeviceView
from gpu.errors import GpuError
from gpu.groth16.bellperson import FileQuery
from gpu.groth16.errors import BackendError, CircuitMismatch
from gpu.groth16.points import PointArray
from gpu.native import for_prover as build_host_libraries
from gpu.native.compact import compact_of

from .base import Backend, ProofTerms
from .forms import (assignment_blob, assignment_vector, circuit_digest, full_r1cs,
                    is_compact_assignment)

BLOCK = 256
#: the layout of ``CudaBackend.export``'s manifest; ``adopt`` refuses another
MANIFEST_VERSION = 1
#: Share of the device's memory zkhive may book (the rest: contexts, the driver, fragmentation).
CAPACITY_SHARE = float(os.environ.get("ZKHIVE_DEVICE_MEMORY_SHARE", "0.92"))
#: seconds between looks, while a proof's buffers are kept, for another process waiting for room
POOL_WATCH_S = 0.5

log = logging.getLogger(__name__)


def _grid(n: int) -> tuple:
    return (max(1, -(-int(n) // BLOCK)), 1)


def query_sizes(source) -> dict[str, int]:
    """{group: the longest query's length} of a proving key (its query arrays; a .params
    FileQuery knows its length before it is read) or of a Resident (its base sets): what the
    split MSM's engines are sized for. An empty query has no base set and counts for none."""
    out: dict[str, int] = {}
    for name, group in Resident.QUERIES:
        if isinstance(source, Resident):
            n = source.bases[name].n if name in source.bases else 0
        else:
            q = getattr(source, name, None)
            n = len(q) if q is not None else 0
        if n:
            out[group] = max(out.get(group, 0), int(n))
    return out


class _Matrix:
    def __init__(self, m, what: str):
        self.rows = m.rows
        self.buffers = []
        try:
            for arr, name in ((m.indptr, "indptr"), (m.indices, "indices"), (m.coeffs, "coeffs")):
                arr = np.ascontiguousarray(arr)
                buf = DeviceBuffer(max(arr.nbytes, 8), what=f"{what} {name}")
                self.buffers.append(buf)
                if arr.nbytes:
                    buf.upload(arr)
        except Exception:
            self.free()
            raise
        self.indptr, self.indices, self.coeffs = self.buffers

    @staticmethod
    def nbytes(m) -> int:
        return m.indptr.nbytes + m.indices.nbytes + m.coeffs.nbytes

    def export(self, table) -> dict:
        return {"rows": int(self.rows), **{name: table.ref(b) for name, b in
                                           zip(("indptr", "indices", "coeffs"), self.buffers)}}

    @classmethod
    def attach(cls, m, entry: dict, table, what: str) -> "_Matrix":
        """Matrix ``m``'s CSR over another process's buffers (``export``'s entry); each mapped
        allocation must hold ``m``'s array. free() leaves the memory to its owner."""
        self = cls.__new__(cls)
        self.rows = m.rows
        if entry.get("rows") != int(m.rows):
            raise GpuError(f"manifest: {what} has {entry.get('rows')} rows, the circuit's {m.rows}")
        self.indptr, self.indices, self.coeffs = (
            table.get(entry[name], max(np.asarray(getattr(m, name)).nbytes, 8), f"{what} {name}")
            for name in ("indptr", "indices", "coeffs"))
        self.buffers = []  # not ours: the Resident's table unmaps them
        return self

    def free(self) -> None:
        for b in self.buffers:
            b.free()
        self.buffers = []


class Resident:
    """One circuit's proving key and matrices on the device: the matrices as full CSR
    (``matrices``) or compact and replicated (``compact``: gpu/cuda/compact.py), the five query
    base sets (``bases``), uploaded from a ProvingKey or made on the device (``made``)."""

    QUERIES = (("a_query", "g1"), ("b_g1_query", "g1"), ("b_g2_query", "g2"),
               ("l_query", "g1"), ("h_query", "g1"))

    def __init__(self, pk, r1cs, compact=None):
        """``compact``: where the compact matrices are being put on the device by another
        thread (CudaBackend._warm_beside), a callable that waits for them and returns them
        (DeviceCompactR1CS) or raises why not: taken after the sections, owned from then on."""
        from gpu.cuda.msm import DeviceBases

        from gpu.phases import phase

        self._head(pk)
        cr = compact_of(r1cs)
        later = compact if cr is not None else None   # the matrices, made beside the sections
        try:
            if later is not None:
                pass   # taken after the sections (below)
            elif cr is not None:
                from gpu.cuda.compact import DeviceCompactR1CS
                with phase("matrices to the device"):
                    self.compact = DeviceCompactR1CS(cr)
                self.num_constraints = self.compact.rows
            else:
                r1cs = full_r1cs(r1cs)
                self.num_constraints = r1cs.num_constraints
                for name in ("a", "b", "c"):
                    self.matrices[name] = _Matrix(getattr(r1cs, name), f"matrix {name.upper()}")
            for name, group in self.fill_order(pk):
                q = getattr(pk, name)
                if isinstance(q, FileQuery):  # a query of a parameter file, streamed from disk
                    if len(q):                # by gpu/cuda/params.py ``fill``
                        from gpu.cuda.params import fill
                        with phase(f"section {q.section}"):   # its allocation and its fill
                            q.resolve()   # a and b: the densities and the length first
                            self.bases[name] = DeviceBases.filled_on_device(
                                len(q), group, lambda buffer, q=q: fill(q, buffer))
                    continue
                limbs = q.limbs() if isinstance(q, PointArray) else PointArray.from_points(
                    type(q[0]), q).limbs()
                if len(limbs):
                    self.bases[name] = DeviceBases(limbs, group)
            if later is not None:
                with phase("waited for the matrices"):
                    self.compact = later()
                self.num_constraints = self.compact.rows
        except Exception:
            if later is not None and self.compact is None:
                try:   # made beside the sections that failed: freed with them
                    later().free()
                except Exception:
                    pass
            self.free()
            raise

    @classmethod
    def fill_order(cls, pk):
        """QUERIES, a file's dense sections (h, l) first: their reads need no densities, which
        a ``read_params(later=True)`` key computes on a thread meanwhile."""
        dense = ("h_query", "l_query")
        return ([(n, g) for n, g in cls.QUERIES if n in dense]
                + [(n, g) for n, g in cls.QUERIES if n not in dense])

    def _head(self, pk) -> None:
        self.digest, self.n = pk.circuit_digest, pk.domain_size
        self.num_public, self.num_vars = pk.num_public, 1 + pk.num_public + pk.num_aux
        self.matrices, self.bases, self.compact = {}, {}, None
        self.shape = None   # the ledger's ProofShape it was admitted with (export, adopt)
        self._table = None  # attached: the mapped allocations of the process that holds it

    # -- sharing with another process (a key holder: cluster/pipeline/keyholder.py) ---------
    def export(self, pk, table) -> dict:
        """What another process needs to prove from this key without a copy: the key's host
        part (vk, beta_g1, delta_g1, counts), the ledger shape, and every device array as an
        allocation of ``table`` (gpu/cuda/memory.py ExportTable). JSON-able."""
        if self.shape is None:
            raise GpuError("a key without its ledger shape cannot be exported")
        return {
            "key": key_head(pk),
            "shape": {"num_vars": self.shape.num_vars, "num_aux": self.shape.num_aux,
                      "domain": self.shape.domain, "matrix_bytes": self.shape.matrix_bytes},
            "compact": self.compact.export(table) if self.compact is not None else None,
            "matrices": {k: m.export(table) for k, m in self.matrices.items()},
            "bases": {k: b.export(table) for k, b in self.bases.items()},
        }

    @classmethod
    def attach(cls, entry: dict, table, pk, r1cs) -> "Resident":
        """The key ``export`` described, over ``table`` (opened: the allocations mapped), for
        ``pk`` (``head_key`` of the entry) and the importer's own circuit ``r1cs``. free()
        unmaps; the memory stays with the process that exported it."""
        from gpu.cuda.msm import DeviceBases

        self = cls.__new__(cls)
        self._head(pk)
        try:
            if entry.get("compact") is not None:
                from gpu.cuda.compact import DeviceCompactR1CS
                cr = compact_of(r1cs)
                if cr is None:
                    raise GpuError("manifest: compact matrices, but the circuit has only full CSR")
                self.compact = DeviceCompactR1CS.attach(cr, entry["compact"], table)
                self.num_constraints = self.compact.rows
            else:
                full = full_r1cs(r1cs)
                self.num_constraints = full.num_constraints
                for name in ("a", "b", "c"):
                    self.matrices[name] = _Matrix.attach(getattr(full, name), entry["matrices"][name],
                                                         table, f"matrix {name.upper()}")
            for name, group in self.QUERIES:
                b = entry["bases"].get(name)
                if b is not None:
                    if b.get("group") != group:
                        raise GpuError(f"manifest: {name} in {b.get('group')!r}, not {group}")
                    self.bases[name] = DeviceBases.attach(b, table)
        except (KeyError, TypeError, AttributeError) as e:
            self.free()
            table.close()
            raise GpuError(f"manifest: malformed ({type(e).__name__}: {e})") from None
        except Exception:
            self.free()
            table.close()
            raise
        self._table = table
        return self

    @property
    def attached(self) -> bool:
        return self._table is not None

    @classmethod
    def made(cls, pk, compact, bases) -> "Resident":
        """A key made on the device (gpu/cuda/setup.py): its matrices and bases already there."""
        self = cls.__new__(cls)
        self._head(pk)
        self.compact, self.bases, self.num_constraints = compact, dict(bases), compact.rows
        return self

    @staticmethod
    def matrix_bytes(r1cs) -> int:
        cr = compact_of(r1cs)
        if cr is not None:
            from gpu.cuda.compact import DeviceCompactR1CS
            return DeviceCompactR1CS.estimate_bytes(cr)
        r1cs = full_r1cs(r1cs)
        return sum(_Matrix.nbytes(getattr(r1cs, m)) for m in "abc")

    @staticmethod
    def shape(pk, r1cs):
        """The sizes the memory ledger books (gpu/budget.py ProofShape) for a key ``pk`` (a file's
        or a host setup's) over ``r1cs``: the same as ``made_shape`` of the circuit's counts."""
        from gpu.budget import ProofShape
        return ProofShape(num_vars=1 + pk.num_public + pk.num_aux, num_aux=pk.num_aux,
                          domain=pk.domain_size, matrix_bytes=Resident.matrix_bytes(r1cs))

    @staticmethod
    def made_shape(cr):
        """The ledger's ProofShape of a key the device setup makes from compact matrices ``cr``
        (no key yet: the circuit's counts)."""
        from gpu.budget import ProofShape
        from gpu.cuda.compact import DeviceCompactR1CS
        from gpu.cuda.setup import domain_of
        nv = 1 + int(cr.num_public) + int(cr.num_aux)
        return ProofShape(num_vars=nv, num_aux=int(cr.num_aux),
                          domain=domain_of(int(cr.a.rows), int(cr.num_public)),
                          matrix_bytes=DeviceCompactR1CS.estimate_bytes(cr))

    @staticmethod
    def estimate_bytes(pk, r1cs) -> int:
        """What load() will hold (ProofShape.resident: matrices, bases, NTT tables, the MSM
        workspaces of the split and plain paths)."""
        return Resident.shape(pk, r1cs).resident_bytes()

    def free(self) -> None:
        """Free the device memory (an attached key: unmap it, the holder keeps it)."""
        for m in self.matrices.values():
            m.free()
        if self.compact is not None:
            self.compact.free()
        for b in self.bases.values():
            b.close()
        self.matrices, self.bases, self.compact = {}, {}, None
        if getattr(self, "_table", None) is not None:
            self._table.close()
            self._table = None


def key_head(pk) -> dict:
    """The host part of a proving key a proof's combine step needs (JSON-able)."""
    return {"digest": pk.circuit_digest.hex(), "num_public": int(pk.num_public),
            "num_aux": int(pk.num_aux), "num_constraints": int(pk.num_constraints),
            "domain": int(pk.domain_size), "vk": pk.vk.to_bytes().hex(),
            "beta_g1": bytes(pk.beta_g1.to_compressed_bytes()).hex(),
            "delta_g1": bytes(pk.delta_g1.to_compressed_bytes()).hex()}


def head_key(head: dict):
    """A ProvingKey without queries (``on_device``) from ``key_head``'s dict, checked: the vk
    decodes, its digest and counts agree with the head's."""
    from py_arkworks_bls12381 import G1Point

    from gpu.groth16.keys import ProvingKey, VerifyingKey
    try:
        vk = VerifyingKey.from_bytes(bytes.fromhex(head["vk"]))
        digest = bytes.fromhex(head["digest"])
        pk = ProvingKey(vk=vk, beta_g1=G1Point.from_compressed_bytes(bytes.fromhex(head["beta_g1"])),
                        delta_g1=G1Point.from_compressed_bytes(bytes.fromhex(head["delta_g1"])),
                        a_query=None, b_g1_query=None, b_g2_query=None, h_query=None, l_query=None,
                        circuit_digest=digest, num_public=int(head["num_public"]),
                        num_aux=int(head["num_aux"]), num_constraints=int(head["num_constraints"]),
                        domain_size=int(head["domain"]))
    except Exception as e:
        raise GpuError(f"manifest: the key's head does not decode ({type(e).__name__}: {e})") from None
    if vk.circuit_digest != digest or vk.num_public != pk.num_public:
        raise GpuError("manifest: the verifying key is not the head's (digest or inputs differ)")
    pk.on_device = True
    return pk


def admit_key(budget, pk, r1cs):
    """(shape, label): the ledger's admission of key ``pk`` (a file's, or a host setup's) over
    ``r1cs``: gpu/budget.py ``admit_shape`` on ``Resident.shape``, the rule and the shape a key
    made on the device from the same circuit takes (``Resident.made_shape``; its setup's
    temporaries first, then ``affine_upgrade``), so either ends with the same booking. Host
    code only (tests/unit/test_budget.py)."""
    from gpu.budget import admit_shape
    label = f"the proving key {pk.circuit_digest.hex()[:16]}" + (
        f" ({pk.num_constraints} constraints)" if pk.num_constraints else "")
    return admit_shape(budget, Resident.shape(pk, r1cs), label), label


class CudaBackend(Backend):
    name = "cuda"
    #: prove_terms takes a synthesis.assignment.Compact or its blob and expands it on the device
    accepts_compact = True

    def __init__(self, ordinal: int = 0, *, capacity: int | None = None, holder: bool = False):
        """``holder``: this process only holds keys for others (cluster/pipeline/keyholder.py):
        ``load`` and ``setup_resident`` book and make the key itself (``ProofShape.key_bytes``)
        and no proving engines; provers ``adopt`` it and book their own parts."""
        from gpu.cuda.ntt import NttEngine

        from gpu.phases import phase

        self.ordinal, self.holder = ordinal, holder
        self._thread = threading.get_ident()  # the context is current on this thread only
        with phase("CUDA context"):
            self.context = loader.init_context(ordinal)
        self.cuda = loader.driver()
        self.device = loader.device_name()
        free, total = self.cuda.mem_get_info()
        self._mem = (int(free), int(total))
        bus = self.cuda.Context.get_device().pci_bus_id()
        self.budget = DeviceBudget(f"{socket.gethostname()}-{bus}",
                                   capacity or int(total * CAPACITY_SHARE),
                                   free_bytes=self._free_now)
        with phase("cubins (NTT, prover)"):
            self._ntt = NttEngine()
            mod = loader.load_module("prover")
        if not holder:
            # g++ at start, not inside the first proof (gpu/native: 17 s of a fresh machine's
            # first partition); a machine without g++ cannot prove a compact assignment, so
            # the start fails here with the compiler's message instead of every job later
            with phase("host libraries"):
                build_host_libraries()
        self.k_spmv = loader.get_function(mod, "qap_spmv")
        self.k_inputs = loader.get_function(mod, "qap_place_inputs")
        self.k_check = loader.get_function(mod, "qap_first_unsatisfied")
        #: the device buffers of each loaded key, by circuit digest: a lookup table, not a
        #: policy (cluster.pipeline.prover.Prover decides what is loaded and evicted, gpu/backends/base.py)
        self._on_device: dict[bytes, tuple[Resident, int]] = {}
        self._split = None    # gpu.cuda.split_msm.SplitMsm, made at the first load
        self.last_matvec_planes = False  # the last proof's matvec read z from the planes
        #: per proof, per query: the witness statistics and the MSM path taken (benchmarks)
        self.last_msm: dict = {}
        self._staging = None  # page-locked host buffer for z, grown on demand
        self._flag = None     # page-locked: the first unsatisfied row, read back async
        #: seconds a proof waits for its working set before giving up (GpuOutOfMemory)
        self.admission_timeout = float(os.environ.get("ZKHIVE_ADMISSION_TIMEOUT_S", "600"))
        #: the last proof's buffers, kept for the next (gpu/cuda/memory.py BufferPool; booked as
        #: pooled in the ledger); the lock serialises the proving thread and the pool's watcher
        self._pool = BufferPool()
        self._pool_lock = threading.RLock()
        self._pool_watcher = None

    @contextmanager
    def current(self):
        """This backend's context current on the calling thread for the block (a pipelined
        prover proves ahead on its own thread; callers serialise use of the backend)."""
        if self.cuda.Context.get_current() is not None:
            yield
            return
        self.context.push()
        try:
            yield
        finally:
            self.cuda.Context.pop()

    # -- memory ---------------------------------------------------------------------------
    def _free_now(self) -> int:
        if threading.get_ident() == self._thread:
            free, total = self.cuda.mem_get_info()
            self._mem = (int(free), int(total))
        return self._mem[0]

    def memory_info(self) -> tuple[int, int]:
        """(free, total) bytes of the device: live on the owning thread, else the last reading
        (the registry heartbeat runs on another thread, where the context is not current)."""
        self._free_now()
        return self._mem

    def capacity(self) -> int:
        """What this device's ledger lets all zkhive processes book (CAPACITY_SHARE of it)."""
        return self.budget.capacity

    def working_set_bytes(self, pk) -> int:
        """z, a, b, c, the split MSM's index lists, and room for the partial sums."""
        from gpu.budget import ProofShape
        return ProofShape(1 + pk.num_public + pk.num_aux, pk.num_aux, pk.domain_size, 0).working_set_bytes()

    # -- residency ------------------------------------------------------------------------
    def resident_bytes(self, pk, r1cs) -> int:
        """What ``load`` books: the shape the ledger admits (``admit``), or the full shape
        where it admits none (``admit`` then says why)."""
        from gpu.budget import DeviceMemoryExhausted
        try:
            return self.admit(pk, r1cs)
        except DeviceMemoryExhausted:
            return Resident.estimate_bytes(pk, r1cs)

    def admit(self, pk, r1cs) -> int:
        """The bytes ``load(pk, r1cs)`` will book, by the one admission every key takes on this
        device (gpu/budget.py ``admit_shape``: a key from a file here, a key made in process in
        ``setup_resident``): the full shape where it and one proof fit the ledger's budget, else
        the lean one (no dense-engine affine buffers); DeviceMemoryExhausted naming every part
        where not even that fits. Nothing is booked or allocated."""
        return self._admitted(pk, r1cs)[0].resident_bytes()

    def _admitted(self, pk, r1cs):
        return admit_key(self.budget, pk, r1cs)

    def held_bytes(self, digest: bytes) -> int | None:
        """The bytes the ledger booked for the resident key ``digest`` (None: not resident)."""
        hit = self._on_device.get(digest)
        return hit[1] if hit is not None else None

    def load(self, pk, r1cs) -> Resident:
        """Upload the key and matrices (booked in the ledger first: DeviceMemoryExhausted when
        the booking does not fit). The caller evicts before this, never this method."""
        hit = self._on_device.get(pk.circuit_digest)
        if hit is not None:
            return hit[0]
        self._drop_pool()  # the key books against the room the kept buffers took
        if getattr(pk, "on_device", False) or pk.a_query is None:
            raise BackendError(f"proving key {pk.circuit_digest.hex()[:16]} was made on the device "
                               "and is no longer resident (unloaded): make it again (setup_resident)")
        from gpu.phases import phase
        with phase("ledger"):
            shape, label = self._admitted(pk, r1cs)  # never fits: refused now, with the breakdown
            need = shape.key_bytes() if self.holder else shape.resident_bytes()
            self.budget.reserve_resident(need, label)
        res = None
        beside = None
        try:
            if not self.holder and os.environ.get("ZKHIVE_ENGINES_BESIDE_READS", "1") != "0":
                # the compact matrices (1.3-1.6 s at 32 GiB on the H200: their checks and ~2 GB
                # of column maps) and the engines (sized by the queries' lengths, known before
                # any section is read) are made on a thread while the sections stream in
                beside = self._warm_beside(query_sizes(pk), shape.dense_affine,
                                           matrices=compact_of(r1cs))
            res = Resident(pk, r1cs, compact=beside.matrices if beside is not None else None)
            res.shape = shape
            if beside is not None:
                with phase("waited for the tail engines"):
                    beside()
                beside = None
            elif not self.holder:
                with phase("tail engines"):
                    self._warm_split(query_sizes(res), dense_affine=shape.dense_affine)
            if not self.holder:
                self._warm_ntt(shape.domain)
        except Exception:
            if beside is not None:   # the load failed first: the thread's engines go with it
                try:
                    beside()
                except Exception:
                    pass
                self._drop_engines_made(beside.before)
            if res is not None:
                res.free()
            self.budget.release_resident(need)
            raise
        self._on_device[pk.circuit_digest] = (res, need)
        return res

    def unload(self, digest: bytes) -> None:
        self._drop_pool()  # whatever is (un)loaded next books against the room it took
        hit = self._on_device.pop(digest, None)
        if hit is not None:
            hit[0].free()
            self.budget.release_resident(hit[1])

    # -- keys held by another process (CUDA IPC: cluster/pipeline/keyholder.py) --------------
    def export(self, pk) -> dict:
        """The manifest of resident key ``pk`` for another process (``adopt``): JSON-able, the
        allocations as CUDA IPC handles; ``booked``: the bytes this process booked for it."""
        from gpu.cuda.memory import ExportTable
        hit = self._on_device.get(pk.circuit_digest)
        if hit is None:
            raise BackendError(f"proving key {pk.circuit_digest.hex()[:16]} is not resident here")
        table = ExportTable()
        with self.current():
            out = hit[0].export(pk, table)
        out.update(version=MANIFEST_VERSION, buffers=table.entries, booked=int(hit[1]))
        return out

    def adopt(self, manifest: dict, r1cs):
        """Prove from a key another process holds: its allocations mapped (``Resident.attach``),
        this process's own parts booked (``ProofShape.process_bytes``: NTT tables, workspaces,
        the tail and dense engines; lean where only that fits, as ``admit`` rules) and warmed.
        Returns the key's host part (a ProvingKey without queries). The key's own bytes stay
        booked by its holder; ``unload`` unmaps and releases this process's part only."""
        from dataclasses import replace

        from gpu.budget import ProofShape, admit_shape
        from gpu.cuda.memory import ExportTable

        if not isinstance(manifest, dict) or manifest.get("version") != MANIFEST_VERSION:
            raise BackendError(f"key manifest: version {manifest.get('version') if isinstance(manifest, dict) else None!r}, "
                               f"this build reads {MANIFEST_VERSION}")
        pk = head_key(manifest.get("key") or {})
        if circuit_digest(r1cs) != pk.circuit_digest:
            raise CircuitMismatch("the held key was made for another circuit (circuit digests "
                                  f"{pk.circuit_digest.hex()[:16]} and "
                                  f"{circuit_digest(r1cs).hex()[:16]} differ)")
        hit = self._on_device.get(pk.circuit_digest)
        if hit is not None and hit[0].attached:
            return getattr(hit[0], "pk", pk)
        self.unload(pk.circuit_digest)
        try:
            sh = manifest["shape"]
            shape = ProofShape(num_vars=int(sh["num_vars"]), num_aux=int(sh["num_aux"]),
                               domain=int(sh["domain"]), matrix_bytes=int(sh["matrix_bytes"]))
        except (KeyError, TypeError, ValueError) as e:
            raise BackendError(f"key manifest: bad shape ({e})") from None
        label = f"the held proving key {pk.circuit_digest.hex()[:16]} (this prover's engines)"
        shape = admit_shape(self.budget, shape, label)
        need = shape.process_bytes()
        self.budget.reserve_resident(need, label)
        res = None
        try:
            with self.current():
                table = ExportTable.open(manifest.get("buffers"))
                res = Resident.attach(manifest, table, pk, r1cs)
                res.shape, res.pk = replace(shape), pk
                self._warm_split(query_sizes(res), dense_affine=shape.dense_affine)
                self._warm_ntt(shape.domain)
        except Exception:
            if res is not None:
                res.free()
            self.budget.release_resident(need)
            raise
        self._on_device[pk.circuit_digest] = (res, need)
        return pk

    def _warm_split(self, sizes: dict[str, int], *, dense_affine: bool = True) -> None:
        """The split MSM's tail engines and the chunked dense engine, their workspaces allocated
        now (booked with the key: gpu/budget.py ProofShape.resident), for the longest query of
        each group (``query_sizes``). dense_affine=False: the ledger admitted the key only
        without the dense engine's affine buffers; the engine sums in XYZZ from then on (its
        buffers were never booked)."""
        from gpu.cuda.split_msm import SplitMsm
        from gpu.phases import phase
        if self._split is None:
            with phase("split MSM modules"):   # inside "tail engines" at a load
                self._split = SplitMsm()
        if not dense_affine:
            self._split.dense_affine = False
        for group, n in sizes.items():
            self._split.tail(group, n).warm()
            dense = self._split.dense(group, n)  # G1 queries above a chunk: H at 2^27
            if dense is not None:
                dense.warm()

    def _warm_ntt(self, domain: int) -> None:
        """The domain's NTT tables (twiddles both ways, compute_h's scales: booked with the key,
        gpu/budget.py "ntt tables") made with the key, not by its first proof: a prover that
        takes a device over (a standby, the keeper's restart) proves its first partition
        without making them (2 x 4.3 GB of twiddles at 2^27). On by default since its GPU test
        and the whole GPU suite with it passed on an H100 (2026-12-07); ZKHIVE_NTT_AT_LOAD=0
        leaves them to the first proof, as before."""
        if os.environ.get("ZKHIVE_NTT_AT_LOAD", "1") == "0":
            return
        from gpu.phases import phase
        with phase("NTT tables"), self.current():
            self.ntt.prepare_h(int(domain).bit_length() - 1)

    def _warm_beside(self, sizes: dict[str, int], dense_affine: bool, matrices=None):
        """On a thread of its own (this context pushed there), started now: ``matrices`` (a
        compact R1CS, or None) put on the device, then ``_warm_split``. Returns a callable that
        waits for the whole thread and raises what the engines' part raised; its ``matrices``
        (None without matrices) waits for the matrices alone and hands them over (or raises
        why not), its ``before`` names the engines that were there already
        (``_drop_engines_made``). Why a thread: the sections' reads are bound by the disk and
        the copy engine, this work by the host and the driver; one after the other they added
        up (issue 40 item 3)."""
        from gpu.phases import phase
        before = self._engines_now()
        box: dict = {}
        made = threading.Event()

        def run():
            with self.current():
                if matrices is not None:
                    try:
                        from gpu.cuda.compact import DeviceCompactR1CS
                        with phase("matrices to the device (beside the reads)"):
                            box["matrices"] = DeviceCompactR1CS(matrices)
                    except BaseException as e:
                        box["matrices_error"] = e
                    finally:
                        made.set()
                try:
                    with phase("tail engines (beside the reads)"):
                        self._warm_split(sizes, dense_affine=dense_affine)
                except BaseException as e:   # raised in the loading thread by join()
                    box["error"] = e
        t = threading.Thread(target=run, name="zkhive matrices and engines", daemon=True)
        t.start()

        def join():
            t.join()
            if "error" in box:
                raise box.pop("error")

        def take_matrices():
            made.wait()
            if "matrices_error" in box:
                raise box.pop("matrices_error")
            return box.pop("matrices")
        join.before = before
        join.matrices = take_matrices if matrices is not None else None
        return join

    def _engines_now(self) -> set[int]:
        return set() if self._split is None else self._split.engines()

    def _drop_engines_made(self, before: set[int]) -> None:
        """Close the engines made since ``before`` (a load that failed: its booking is released,
        so what it warmed goes too)."""
        if self._split is not None:
            with self.current():
                self._split.close_engines_since(before)

    # -- the proof's buffers, kept between proofs --------------------------------------------
    @staticmethod
    def _pooling() -> bool:
        """Whether a proof's buffers are kept for the next (the default; its GPU tests passed
        on an H100, 2026-12-07): ZKHIVE_PROOF_POOL=0 frees them after each proof, as before
        the fourteenth session."""
        return os.environ.get("ZKHIVE_PROOF_POOL", "1") != "0"

    @property
    def pooled_bytes(self) -> int:
        """Bytes of the last proof's buffers kept for the next (freed before any key load)."""
        return self._pool.nbytes

    def _drop_pool(self) -> int:
        """Free the kept buffers and their booking; returns the bytes freed."""
        with self._pool_lock:
            bufs = self._pool.drain()
            if not bufs:
                return 0
            with self.current():
                for b in bufs:
                    try:
                        b.free()
                    except Exception:  # a dead context: its memory went with it
                        pass
            freed = sum(b.nbytes for b in bufs)
            self.budget.unpool(freed)
            return freed

    def _pool_wanted(self) -> bool:
        try:
            return self.budget.pool_wanted()
        except Exception as e:  # the ledger unreadable: keep nothing rather than guess
            log.warning("buffer pool: the ledger: %s", e)
            return True

    def _watch_pool(self) -> None:
        """While buffers are kept, look every POOL_WATCH_S whether another process waits for
        room and give them up if so (between proofs nothing else would: a proof in progress
        holds the lock and decides at its end by the same rule)."""
        if self._pool_watcher is not None and self._pool_watcher.is_alive():
            return

        def watch():
            while True:
                time.sleep(POOL_WATCH_S)
                with self._pool_lock:
                    if not len(self._pool):
                        self._pool_watcher = None
                        return
                    if self._pool_wanted():
                        self._drop_pool()

        self._pool_watcher = threading.Thread(target=watch, name="zkhive-pool-watch", daemon=True)
        self._pool_watcher.start()

    def release(self) -> None:
        """Free everything this backend holds on the device (worker shutdown)."""
        self._drop_pool()
        for digest in list(self._on_device):
            self.unload(digest)
        if self._split is not None:
            self._split.close()
            self._split = None
        if self._staging is not None:
            self._staging.base.free()
            self._staging = None
        if self._flag is not None:
            self._flag.base.free()
            self._flag = None
        if self._ntt is not None:
            self._ntt.close()
        # the process-wide instance (gpu.backends.get_backend) stays usable after a release:
        # its next proof makes the NTT's constants again (a proof after release() met "roots:
        # used after free")
        self._ntt = None
        self.budget.leave()

    @property
    def ntt(self) -> NttEngine:
        """The NTT engine (its tables), made again on first use after release()."""
        if self._ntt is None:
            from gpu.cuda.ntt import NttEngine
            self._ntt = NttEngine()
        return self._ntt

    def _stage(self, z: np.ndarray) -> np.ndarray:
        if self._staging is None or len(self._staging) < len(z):
            if self._staging is not None:
                self._staging.base.free()
            self._staging = self.cuda.pagelocked_empty((len(z), 4), np.uint64)
        host = self._staging[: len(z)]
        host[:] = z
        return host

    # -- the proof ------------------------------------------------------------------------
    def stage(self, z, num_vars: int):
        """A compact blob's planes laid out ahead in pooled page-locked memory
        (gpu.cuda.compact.stage_assignment: the checks and word offsets of the upload's host
        side), on the calling thread with this backend's context current, so that the proof's
        upload is one copy and the expansion; anything else, or with ZKHIVE_STAGE_AHEAD=0, or
        when the pool has no buffer free, z as it is. A bad blob raises here what the proof
        would (AssignmentError; FieldError for a value >= r, by its index)."""
        if os.environ.get("ZKHIVE_STAGE_AHEAD", "1") == "0" or \
                not isinstance(z, (bytes, bytearray, memoryview)):
            return z
        from gpu.cuda.compact import stage_assignment
        with self.current():
            staged = stage_assignment(bytes(z), num_vars)
        return z if staged is None else staged

    def prove_terms(self, pk, r1cs, z, timer) -> ProofTerms:
        """``r1cs``: an R1CS, a compact circuit or a circuit object (gpu/backends/forms.py);
        ``z``: an Fr vector, a synthesis.assignment.Compact or its blob (expanded on the device)."""
        if pk.circuit_digest not in self._on_device and compact_of(r1cs) is None:
            r1cs = full_r1cs(r1cs)
        if circuit_digest(r1cs) != pk.circuit_digest:
            raise CircuitMismatch("the proving key was made for another circuit (circuit digests "
                                  f"{pk.circuit_digest.hex()[:16]} and "
                                  f"{circuit_digest(r1cs).hex()[:16]} differ)")
        res = self.load(pk, r1cs)
        n, m = res.n, res.num_constraints
        log_n = n.bit_length() - 1
        if not is_compact_assignment(z) and len(z) != res.num_vars:
            from synthesis.r1cs import R1CSError
            raise R1CSError(f"assignment has {len(z)} values, the circuit has {res.num_vars} variables")
        with self._pool_lock:
            pool = self._pool
            if pool.tag != pk.circuit_digest:
                self._drop_pool()  # another key's sizes: nothing in it fits this proof
            with self.budget.working_set(self.working_set_bytes(pk), f"proof of {m} constraints",
                                         timeout=self.admission_timeout, pooled=pool.nbytes) as held:
                bufs = []

                def buf(nbytes, what):
                    b = pool.take(nbytes, what) or DeviceBuffer(nbytes, what=what)  # OOM names it
                    bufs.append(b)
                    return b
                proved = False
                try:
                    out = self._prove(res, r1cs, z, timer, buf, n, m, log_n)
                    proved = True
                    return out
                finally:
                    try:
                        self.cuda.Context.synchronize()
                    except Exception:
                        proved = False  # a fault: nothing of this context is kept
                    unused = pool.drain()  # what this proof did not take (none, for one key)
                    # after a proof the buffers stay for the next one, unless another process
                    # waits for room; after a failure they go now: the worker keeps serving
                    keep = proved and self._pooling() and not self._pool_wanted()
                    for b in unused + ([] if keep else bufs):
                        try:
                            b.free()
                        except Exception:
                            pass
                    if keep:
                        held.keep(pool.fill(pk.circuit_digest, bufs))
                        self._watch_pool()

    def _prove(self, res, r1cs, z, timer, buf, n, m, log_n) -> ProofTerms:
        cuda = self.cuda
        t_host = time.time()
        ev = {}
        overlap = os.environ.get("ZKHIVE_MSM_OVERLAP", "1") != "0"
        s_main, s_side = self._streams() if overlap else (None, None)
        # the witness MSMs need z only: with ZKHIVE_SIDE_EARLY=1 (off by default until the
        # H200 has timed and tested this version of it: docs/gpu.md) the side stream
        # starts them as soon as z is up, beside the main stream's matvec and NTTs (bound by
        # memory, where the MSMs are bound by products) instead of beside the H MSM (products
        # against products); the unsatisfied check is then read once everything has run
        early = overlap and os.environ.get("ZKHIVE_SIDE_EARLY", "0") == "1"

        def mark(name, stream=None):
            e = cuda.Event()
            e.record(stream)
            ev[name] = e

        mark("start")
        zb = buf(32 * res.num_vars, "z")
        planes = keep = None
        if is_compact_assignment(z):
            # the bit planes and the other values go up; one thread an element expands them;
            # where the matvec reads z from the planes (ZKHIVE_MATVEC_PLANES; not with the early
            # side stream, whose MSMs take the working set's room meanwhile) they stay until
            # the check has read its flag
            from gpu.cuda.compact import expand_assignment, planes_bytes
            from gpu.native.compact import matvec_reads_planes
            from synthesis.assignment import read_header
            staged = z if getattr(z, "is_staged_assignment", False) else None
            blob = assignment_blob(z)
            nbytes = planes_bytes(blob, res.num_vars)  # the header's sizes: staged or not
            if res.compact is not None and not early and matvec_reads_planes(
                    res.num_vars, read_header(blob, res.num_vars)[1], nbytes):
                keep = buf(nbytes, "assignment planes the matvec reads")
            planes = expand_assignment(staged or blob, res.num_vars, zb, keep=keep).get("planes")
        else:
            host = self._stage(z)
            with loader.guard(kernel="upload z", shape=z.shape):
                zb.upload(host)
        self.last_matvec_planes = planes is not None  # the path this proof's matvec took
        mark("upload")
        a, b, c = (buf(32 * n, f"{x} evaluations") for x in "abc")
        flag = buf(8, "first unsatisfied")
        lists = buf(4 * max(n, res.num_vars), "split MSM index lists")
        pre = s_main if early else None
        if early:
            self.ntt.prepare_h(log_n)  # its tables (made once, synchronously) before the streams
        with loader.guard(kernel="qap", shape=(m, n)):
            # the products write every row below m; only the domain's rows past m are zeroed
            # (a 2^27 domain: 12.9 GB of memset before, 3 x 32 (n - m) bytes now)
            for dst in (a, b, c):
                if n > m:
                    memset_words(dst.ptr + 32 * m, 0, 8 * (n - m), pre)
            for name, dst in (("a", a), ("b", b), ("c", c)):
                if res.compact is not None:
                    res.compact.spmv(name, zb, dst, stream=pre, planes=planes)
                    continue
                mat = res.matrices[name]
                self.k_spmv(np.int64(m), np.uintp(mat.indptr.ptr), np.uintp(mat.indices.ptr),
                            np.uintp(mat.coeffs.ptr), np.uintp(zb.ptr), np.uintp(dst.ptr),
                            block=(BLOCK, 1, 1), grid=_grid(m), stream=pre)
            memset_words(flag.ptr, 0xFFFFFFFF, 2, pre)
            self.k_check(np.int64(m), np.uintp(a.ptr), np.uintp(b.ptr), np.uintp(c.ptr),
                         np.uintp(flag.ptr), block=(BLOCK, 1, 1), grid=_grid(m), stream=pre)
            inputs = res.num_public + 1
            self.k_inputs(np.int64(m), np.int64(inputs), np.uintp(zb.ptr), np.uintp(a.ptr),
                          block=(BLOCK, 1, 1), grid=_grid(inputs), stream=pre)
        mark("matvec", pre)
        if self._flag is None:
            self._flag = cuda.pagelocked_empty(1, np.uint64)
        first = self._flag
        flag.download(first, pre)

        def satisfied():
            """Raise UnsatisfiedConstraint (index and values) where the device's check found a
            row that fails (``first`` read: at once, or after the MSMs when the side ran early)."""
            if int(first[0]) == 0xFFFFFFFFFFFFFFFF:
                return
            if res.compact is not None:
                self._unsatisfied(res, zb, int(first[0]))
            else:
                # raises UnsatisfiedConstraint with the index and the values
                full_r1cs(r1cs).check(assignment_vector(z, res.num_vars))
            raise GpuError(f"device reports constraint {int(first[0])} unsatisfied, the host "
                           "check does not: a device fault", device=self.device, kernel="qap")

        if not early:
            satisfied()
            if keep is not None:
                keep.free()  # the flag was read: the products are done (the MSMs' room back)
            self.ntt.compute_h_device(a, b, c, log_n)  # H into a
        else:
            self.ntt.compute_h_device(a, b, c, log_n, streams=(pre, pre, pre),
                                      events=(cuda.Event(), cuda.Event()))
        mark("ntt_h", pre)
        naux = res.num_vars - 1 - res.num_public
        aux = DeviceView(zb, 32 * (1 + res.num_public), 32 * naux, "z aux")
        h = DeviceView(a, 0, 32 * (n - 1), "H")
        split = self._split
        split.last = {}
        stream_of = {}

        def smark(name, stream, label):
            e = cuda.Event()
            e.record(stream)
            ev[name] = e
            stream_of[name] = label

        out, cls = {}, {}
        h_bases = res.bases.get("h_query")
        state = {"h": None}    # H's DensePending once queued; "queued" once it is

        def queue_h():
            """H onto the main stream (once). Its chunked dense MSM is ~1,500 launches: more
            than the driver's queue of pending launches takes, so the host blocks in it until
            the device has run part of it; the side stream's next query waits for that."""
            if "queued" in state:
                return
            state["queued"] = True
            smark("msm_start_main", s_main, "main")
            if h_bases is not None:
                engine = split.dense("g1", n - 1)
                if engine is not None:
                    state["h"] = engine.start(h_bases, h, n - 1, s_main)
                    split.last["h"] = {"n": n - 1, "path": "dense",
                                       "chunks": state["h"].chunks}
                else:
                    out["h"] = h_bases.msm(h, stream=s_main)
                    split.last["h"] = {"n": n - 1, "path": "pippenger", "chunks": 1}
            else:
                out["h"] = _identity("h_query")
            smark("msm_h", s_main, "main")

        queries = (("a", "a_query", zb, res.num_vars), ("b_g1", "b_g1_query", zb, res.num_vars),
                   ("b_g2", "b_g2_query", zb, res.num_vars), ("l", "l_query", aux, naux))
        if early:
            # G2's query first: the longest, it runs beside the NTTs; H is queued as soon as
            # they are done (looked at between the side's queries), the G1 queries beside it
            queries = (queries[2], queries[0], queries[1], queries[3])
        else:
            queue_h()
        smark("msm_start_side", s_side, "side")
        pending = {}
        failed = None
        try:
            if os.environ.get("ZKHIVE_MSM_DENSE_WITNESS", "1") != "0" and \
                    any(res.bases.get(name) is not None for _, name, _, _ in queries):
                cls = {"of": zb, "c": split.classify(zb, res.num_vars, lists, s_side)}
                dense = split.takes_dense("g1", cls["c"])
                if dense is not None:
                    queue_h()  # the main stream has H and the G1 queries: the side only G2
                for key, name, scalars, count in queries if dense is not None else ():
                    bases = res.bases.get(name)
                    if bases is None or bases.group.name != "g1":
                        continue
                    # l's scalars are z's tail (aux): dense where z is
                    pending[key] = dense.start(bases, scalars, count, s_main)
                    split.last[key] = {**cls["c"].stats(), "n": count, "path": "dense",
                                       "chunks": pending[key].chunks, "stream": "main"}
                    smark(f"msm_{key}", s_main, "main")
            for key, name, scalars, count in queries:
                if key in pending:
                    continue
                if early and "queued" not in state and ev["ntt_h"].query():
                    queue_h()
                bases = res.bases.get(name)
                if bases is None:
                    out[key] = _identity(name)
                else:
                    if cls.get("of") is not scalars:  # z serves a, b_g1, b_g2: classified once
                        cls = {"of": scalars, "c": split.classify(scalars, count, lists, s_side)}
                    out[key] = split.msm(bases, cls["c"], name=key, stream=s_side,
                                         dense_ok=state["h"] is None and not pending)
                smark(f"msm_{key}", s_side, "side")
            queue_h()
        except Exception as e:  # a scalar >= r (named); collected after the queued work
            failed = e
        if state["h"] is not None:
            pending = {"h": state["h"], **pending}
        for key, p in pending.items():  # each collected (its host buffer freed) whatever fails
            try:
                out[key] = p.finish()
            except Exception as e:  # a witness scalar >= r: named, raised after the others
                failed = failed or e
        if early:
            cuda.Context.synchronize()
            satisfied()  # an unsatisfied row first: it says more than what followed from it
        if failed is not None:
            raise failed
        self.last_msm = dict(split.last)
        cuda.Context.synchronize()
        # stages: each from the event before it on its stream (the pre-MSM stages and the
        # main stream's H one chain, the side stream's queries another); records say which
        # stream, so a timeline's busy time is the union, never a sum above the wall
        t0 = ev["start"]
        chain = {"main": "ntt_h", "side": "ntt_h"}
        names = list(ev)
        for prev, cur in zip(names, names[1:]):
            if cur in stream_of:
                break
            timer.add(cur, t_host + t0.time_till(ev[prev]) / 1e3,
                      t_host + t0.time_till(ev[cur]) / 1e3, device=self.device, stream="main")
        for cur, label in stream_of.items():
            prev = chain[label]
            chain[label] = cur
            if cur.startswith("msm_start"):
                continue
            timer.add(cur, t_host + t0.time_till(ev[prev]) / 1e3,
                      t_host + t0.time_till(ev[cur]) / 1e3, device=self.device,
                      stream=label if overlap else "main")
        return ProofTerms(**out)

    def _streams(self):
        """(main, side): two CUDA streams of this backend's context, made once. Blocking
        streams (flags 0), so anything still issued on the default stream orders itself
        against both (it would cost overlap, never correctness)."""
        if getattr(self, "_stream_pair", None) is None:
            self._stream_pair = (self.cuda.Stream(), self.cuda.Stream())
        return self._stream_pair

    def _unsatisfied(self, res, zb, i: int) -> None:
        """Raise UnsatisfiedConstraint for row i of compact matrices, from the few z values
        the row reads (downloaded), if the host agrees the row fails."""
        from synthesis import field
        from synthesis.r1cs import UnsatisfiedConstraint
        P = field.MODULUS

        def dot(name):
            acc = 0
            for col, coef in res.compact.row_terms(name, i):
                v = np.zeros(4, np.uint64)
                self.cuda.memcpy_dtoh(v, zb.ptr + 32 * col)
                acc += coef * field.vec_to_ints(v.reshape(1, 4))[0]
            return acc % P
        lhs, rhs = dot("a") * dot("b") % P, dot("c")
        if lhs != rhs:
            raise UnsatisfiedConstraint(i, None, lhs, rhs)

    # -- key generation -------------------------------------------------------------------
    def setup_resident(self, circuit, *, seed: bytes | None = None):
        """Make the circuit's key and hold it resident: (pk, vk). A circuit with compact
        matrices gets its key made on the device (gpu/cuda/setup.py: no host copy of the
        proving key; ``pk``'s queries are None, ``pk.on_device``); one with full CSR only, the
        host setup then ``load``. ``seed``: a development ceremony (same seed, same key on
        either backend); None: fresh secure randomness. Seconds per stage: ``last_setup``."""
        cr = compact_of(circuit)
        if cr is None:
            from gpu.groth16.setup import setup
            r1cs = full_r1cs(circuit)
            pk, vk = setup(r1cs, backend=self, seed=seed)
            self.load(pk, r1cs)
            return pk, vk
        from gpu.budget import admit_shape, affine_upgrade
        from gpu.cuda.setup import setup_on_device, temp_bytes
        digest = cr.digest()
        self.unload(digest)
        shape = Resident.made_shape(cr)
        nv, n, m = shape.num_vars, shape.domain, int(cr.a.rows)
        label = f"the proving key {digest.hex()[:16]} ({m} constraints, made on the device)"
        # the setup's temporaries count against the budget until the key is made
        shape = admit_shape(self.budget, shape, label, working=temp_bytes(nv, n))
        need = shape.key_bytes() if self.holder else shape.resident_bytes()
        self.budget.reserve_resident(need, label)
        res = None
        try:
            with self.budget.working_set(temp_bytes(nv, n), f"device setup of {m} constraints",
                                         timeout=self.admission_timeout):
                pk, vk, mats, bases, stages = setup_on_device(self, cr, seed=seed)
            res = Resident.made(pk, mats, bases)
            res.shape = shape
            if not self.holder:  # a holder's provers choose their engines (adopt)
                t = time.time()
                extra = affine_upgrade(self.budget, shape, label)  # the setup's room is free now
                need += extra
                self._warm_split(query_sizes(res), dense_affine=shape.dense_affine or extra > 0)
                stages["tail engines"] = time.time() - t
                self._warm_ntt(shape.domain)  # timed as its own phase, not as the engines
        except Exception:
            if res is not None:
                res.free()
            self.budget.release_resident(need)
            raise
        self._on_device[digest] = (res, need)
        self.last_setup = stages
        return pk, vk

    def fixed_base(self, base, scalars: np.ndarray) -> PointArray:
        """[s * base for s in scalars] on the device (gpu/kernels/fixed_base.cu), in chunks
        that fit the budget; the table of window multiples is built once per base."""
        from gpu.groth16.fixed_base import table

        kind = type(base)
        scalars = np.ascontiguousarray(scalars, dtype=np.uint64).reshape(-1, 4)
        out = PointArray.empty(kind, len(scalars))
        if not len(scalars):
            return out
        self._drop_pool()
        mod = loader.load_module("fixed_base")
        fn = loader.get_function(mod, "fixed_base_g1" if out.width == 96 else "fixed_base_g2")
        t = table(base)
        chunk = 1 << 22
        with DeviceBuffer(t.nbytes, what="fixed-base table") as tb:
            tb.upload(t)
            for lo in range(0, len(scalars), chunk):
                part = scalars[lo:lo + chunk]
                k = len(part)
                with self.budget.working_set(k * (32 + out.width), "fixed-base chunk"), \
                        DeviceBuffer(32 * k, what="fixed-base scalars") as sb, \
                        DeviceBuffer(out.width * k, what="fixed-base points") as pb:
                    sb.upload(np.ascontiguousarray(part))
                    with loader.guard(kernel="fixed_base", shape=k):
                        fn(np.int64(k), np.uintp(tb.ptr), np.uintp(sb.ptr), np.uintp(pb.ptr),
                           block=(128, 1, 1), grid=(-(-k // 128), 1))
                    pb.download(out.raw[lo:lo + k])
        return out


def _identity(name: str):
    from py_arkworks_bls12381 import G1Point, G2Point
    return G2Point.identity() if name == "b_g2_query" else G1Point.identity()
