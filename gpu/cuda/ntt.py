"""Drivers for gpu/kernels/ntt.cu: (coset) NTTs and the H polynomial with data on the device.

One :class:`NttEngine` per CUDA context (the worker's). It keeps, per domain size, the twiddle
tables of both directions and the small coset/normalisation tables on the device, computed
once by kernels. Device vectors are :class:`gpu.cuda.memory.DeviceBuffer` of ``32 n`` bytes in
the ``synthesis.field`` layout (canonical little-endian limbs).

Orders: ``"N"`` natural, ``"R"`` bit-reversed. Forward natural->bit-reversed is one DIF run,
bit-reversed->natural one DIT run; N->N and R->R add one bit-reversal permutation.
:meth:`NttEngine.compute_h_device` needs none (see ntt.cu).

Sizes 2^1 .. 2^27 (``MAX_LOG_N``); 2^0 is the identity and handled here.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field

import numpy as np

from gpu.cuda import loader
from gpu.cuda.memory import DeviceBuffer, is_pinned
from gpu.errors import GpuInputError
from synthesis import field as fr

MAX_LOG_N = 27
#: Largest tile of a pass: 2^TILE_BITS elements in shared memory (16 KB at 9), 2^(TILE_BITS-1)
#: threads a block (at most NTT_MAX_THREADS of ntt.cu, 512). 9 measured 15% faster than 10 at
#: 2^24 on the H200 (docs/performance.md). Override: ZKHIVE_NTT_TILE_BITS.
TILE_BITS = int(os.environ.get("ZKHIVE_NTT_TILE_BITS", "9"))
if not 4 <= TILE_BITS <= 10:
    raise ValueError(f"ZKHIVE_NTT_TILE_BITS={TILE_BITS}: must be in 4..10")
#: Coalescing bits of the passes above the lowest: runs of 2^3 elements = 256 bytes per warp row.
COALESCE_BITS = 3
#: Radix-4 passes (ntt.cu pass4: two stages in registers per trip through shared memory).
#: ZKHIVE_NTT_RADIX4=0 runs the radix-2 passes (bench/gpu_ntt.py compares them).
RADIX4 = os.environ.get("ZKHIVE_NTT_RADIX4", "1") != "0"


def trimmed() -> bool:
    """The products by 1 and the constants' products left out (ZKHIVE_NTT_TRIM, default on;
    read at each call, so bench/gpu_ntt.py --trim-ab times both in one process): bit 0's stage
    of every radix-4 transform without its twiddles (ntt.cu pass4), compute_h's pointwise step
    in one product with Z(g)^-1 on the inverse coset NTT's last scale ("inv_coset_h"), and a
    constant scale (g = 1: C's 1/(n Z(g)), a plain inverse's 1/n) without a product to build
    it. 5 of compute_h's ~91 products an element."""
    return os.environ.get("ZKHIVE_NTT_TRIM", "1") != "0"


_R = 1 << 256
_U32 = np.uint32


def mont(x: int) -> np.ndarray:
    """One Fr constant in Montgomery form, as a (1, 4) uint64 vector."""
    return fr.vec_from_ints([x % fr.MODULUS * _R % fr.MODULUS])


def plan(log_n: int) -> list[tuple[int, int, int]]:
    """Passes (lo, kb, cb) from the lowest bits up: kb stages of bits lo.., cb coalescing bits.

    The lowest pass takes up to TILE_BITS bits (its stages are contiguous, so it needs no
    coalescing bits); the rest is split as evenly as possible into passes of at most
    TILE_BITS - COALESCE_BITS bits, so no tile exceeds 2^TILE_BITS elements.
    """
    if not 1 <= log_n <= MAX_LOG_N:
        raise GpuInputError(f"NTT size 2^{log_n} outside 2^1..2^{MAX_LOG_N}")
    k0 = min(log_n, TILE_BITS)
    out = [(0, k0, 0)]
    rest = log_n - k0
    if rest:
        per = TILE_BITS - COALESCE_BITS
        count = -(-rest // per)
        lo = k0
        for i in range(count):
            kb = rest // count + (1 if i < rest % count else 0)
            out.append((lo, kb, COALESCE_BITS))
            lo += kb
    return out


def z_inv(log_n: int) -> int:
    """Z(g)^-1 = (g^n - 1)^-1 for the coset shift g = 7: the vanishing polynomial of H is this
    constant on g H."""
    return fr.inv((pow(fr.GENERATOR, 1 << log_n, fr.MODULUS) - 1) % fr.MODULUS)


@functools.cache
def scale_kind(kind: str, log_n: int) -> tuple[int, int]:
    """(g, c) of a scale kind, factor(e) = c g^e (NttEngine._scale lists them); cached, as
    every transform asks for its kind's."""
    n = 1 << log_n
    zn = fr.inv(n) * z_inv(log_n) % fr.MODULUS
    return {"coset": (fr.GENERATOR, 1), "inv": (1, fr.inv(n)),
            "inv_coset": (fr.inv(fr.GENERATOR), fr.inv(n)),
            "h_pre": (fr.GENERATOR, fr.inv(n)),
            "inv_z": (1, zn),
            "inv_coset_h": (fr.inv(fr.GENERATOR), zn * _R % fr.MODULUS)}[kind]


def log2_size(n: int, what: str = "vector") -> int:
    if n < 1 or n & (n - 1):
        raise GpuInputError(f"{what}: length {n} is not a power of two")
    log_n = n.bit_length() - 1
    if log_n > MAX_LOG_N:
        raise GpuInputError(f"{what}: length 2^{log_n} exceeds the supported 2^{MAX_LOG_N}")
    return log_n


@dataclass
class Domain:
    """Device tables of one size: twiddles per direction, scale tables per kind."""
    log_n: int
    tw: dict[bool, DeviceBuffer] = field(default_factory=dict)       # inverse -> table
    # kind -> (lo, hi); "<kind> const" -> (None, its one element) under trimmed()
    scales: dict[str, tuple[DeviceBuffer | None, DeviceBuffer]] = field(default_factory=dict)
    z_r2: DeviceBuffer | None = None  # Z(g)^-1 R^2 for the pointwise step of H

    def free(self) -> None:
        for b in self.tw.values():
            b.free()
        if self.z_r2 is not None:
            self.z_r2.free()
            self.z_r2 = None
        for lo, hi in self.scales.values():
            if lo is not None:
                lo.free()
            hi.free()
        self.tw.clear()
        self.scales.clear()


class NttEngine:
    """NTTs and compute_h on the current context's device. Use as a context manager, or call
    :meth:`close`, to free the tables deterministically."""

    def __init__(self):
        loader.init_context()
        self.module = loader.load_module("ntt")
        f = lambda name, sig: self._prepare(name, sig)  # noqa: E731
        self.k_dif = f("ntt_dif_pass", "PiiiiPPPii")
        self.k_dit = f("ntt_dit_pass", "PiiiiPPPii")
        self.k_dif4 = f("ntt_dif_pass4", "PiiiiPPPiii")
        self.k_dit4 = f("ntt_dit_pass4", "PiiiiPPPiii")
        self.k_twiddles = f("ntt_twiddles", "PiP")
        self.k_scales = f("ntt_scale_tables", "PPiPP")
        self.k_bitrev = f("ntt_bit_reverse", "Pi")
        self.k_point = f("ntt_h_pointwise", "PPiP")
        self.k_sub = f("ntt_h_sub_coeffs", "PPi")
        self.k_check = f("ntt_check_canonical", "PIP")
        self.domains: dict[int, Domain] = {}
        # omega_{2^k} for k = 0..32 and their inverses, Montgomery form, on the device
        roots = [fr.root_of_unity(1 << k) for k in range(33)]
        self._roots = {inv: self._const(np.vstack([mont(fr.inv(w) if inv else w) for w in roots]),
                                        "roots") for inv in (False, True)}
        self._consts: list[DeviceBuffer] = list(self._roots.values())
        self._flag = DeviceBuffer(12, what="canonical check flags")

    def _prepare(self, name: str, sig: str):
        fn = loader.get_function(self.module, name)
        fn.prepare(sig)
        return fn

    def _const(self, vec: np.ndarray, what: str) -> DeviceBuffer:
        buf = DeviceBuffer(vec.nbytes, what=what)
        buf.upload(np.ascontiguousarray(vec))
        return buf

    # --- tables ---------------------------------------------------------------------------

    def domain(self, log_n: int) -> Domain:
        """Tables for 2^log_n, built on first use and kept."""
        d = self.domains.get(log_n)
        if d is None:
            d = Domain(log_n)
            n = 1 << log_n
            with loader.guard(kernel="ntt_twiddles", shape=n):
                for inv in (False, True):
                    d.tw[inv] = DeviceBuffer(32 * (n - 1) if n > 1 else 32, what="twiddles")
                    runs = -(-(n - 1) // 32)
                    self.k_twiddles.prepared_call(((runs + 127) // 128, 1), (128, 1, 1),
                                                  d.tw[inv].ptr, np.int32(log_n),
                                                  self._roots[inv].ptr)
            self.domains[log_n] = d
        return d

    def _scale(self, d: Domain, kind: str) -> tuple[DeviceBuffer | None, DeviceBuffer]:
        """(lo, hi) tables with factor(e) = c g^e for one kind:
        "coset" g=7, c=1; "inv" g=1, c=1/n; "inv_coset" g=7^-1, c=1/n; "h_pre" g=7, c=1/n;
        "inv_z" g=1, c=1/(n Z(7)) (C's coefficients over Z, compute_h_device);
        "inv_coset_h" g=7^-1, c=R/(n Z(7)) (after the pointwise step's a b R^-1, trimmed()).
        Under trimmed() a kind with g = 1 is its constant alone: (None, [c]), which ntt.cu's
        factor() reads with no product to build it."""
        g, c = scale_kind(kind, d.log_n)
        const = g == 1 and trimmed()
        key = f"{kind} const" if const else kind
        if key in d.scales:
            return d.scales[key]
        if const:
            d.scales[key] = (None, self._const(mont(c), "scale constant"))
        else:
            n = 1 << d.log_n
            count_hi = ((n - 1) >> 10) + 1
            lo, hi = DeviceBuffer(32 * 1024, what="scale lo"), DeviceBuffer(32 * count_hi,
                                                                            what="scale hi")
            with DeviceBuffer(32, what="g") as gb, DeviceBuffer(32, what="c") as cb:
                gb.upload(mont(g))
                cb.upload(mont(c))
                with loader.guard(kernel="ntt_scale_tables", shape=n):
                    blocks = (max(1024, count_hi) + 255) // 256
                    self.k_scales.prepared_call((blocks, 1), (256, 1, 1), lo.ptr, hi.ptr,
                                                np.int32(count_hi), gb.ptr, cb.ptr)
                    loader.driver().Context.synchronize()
            d.scales[key] = (lo, hi)
        return d.scales[key]

    # --- transforms on device buffers ------------------------------------------------------

    def _run(self, dit: bool, ptr: int, log_n: int, inverse: bool, scale: str | None,
             rev: bool, mode: int, stream=None) -> None:
        """All passes of one DIF (natural->reversed) or DIT (reversed->natural) run; the scale
        kind applies on load (mode 1) of the first pass or on store (mode 2) of the last."""
        d = self.domain(log_n)
        passes = plan(log_n)
        if not dit:
            passes = passes[::-1]  # DIF goes from the top bits down
        s_lo = s_hi = 0
        if scale:
            lo, hi = self._scale(d, scale)
            s_lo, s_hi = (lo.ptr if lo is not None else 0), hi.ptr
        trim = np.int32(trimmed())
        with loader.guard(kernel="ntt_dit_pass" if dit else "ntt_dif_pass", shape=1 << log_n):
            for idx, (lo_bit, kb, cb) in enumerate(passes):
                m = mode if scale and ((mode == 1 and idx == 0) or
                                       (mode == 2 and idx == len(passes) - 1)) else 0
                tile = 1 << (kb + cb)
                args = (ptr, np.int32(log_n), np.int32(lo_bit), np.int32(kb), np.int32(cb),
                        d.tw[inverse].ptr, s_lo, s_hi, np.int32(rev), np.int32(m))
                if RADIX4 and tile >= 4:  # four elements a thread
                    kern, threads = (self.k_dit4 if dit else self.k_dif4), tile // 4
                    args += (trim,)
                else:
                    kern, threads = (self.k_dit if dit else self.k_dif), tile // 2
                kern.prepared_async_call(((1 << log_n) // tile, 1), (threads, 1, 1), stream,
                                         *args, shared_size=32 * tile)

    def bit_reverse(self, buf: DeviceBuffer, log_n: int, stream=None) -> None:
        n = 1 << log_n
        with loader.guard(kernel="ntt_bit_reverse", shape=n):
            self.k_bitrev.prepared_async_call(((n + 255) // 256, 1), (256, 1, 1), stream,
                                              buf.ptr, np.int32(log_n))

    def transform(self, buf: DeviceBuffer, log_n: int, *, inverse: bool = False,
                  coset: bool = False, order: str = "NN", stream=None) -> None:
        """In-place (coset) NTT or inverse of the 2^log_n elements at ``buf``.

        ``order`` is input then output order, each N or R. Forward coset evaluates on g H
        (g = 7): a_k -> sum a_k g^k w^(jk); inverse coset undoes it (scales by n^-1 g^-k).
        """
        if order not in ("NN", "NR", "RN", "RR"):
            raise GpuInputError(f"order {order!r}: expected NN, NR, RN or RR")
        if buf.nbytes < 32 << log_n:
            raise GpuInputError(f"buffer of {buf.nbytes} bytes is too small for 2^{log_n}")
        if log_n == 0:
            return  # 1 point: every variant is the identity (g^0 = 1, n^-1 = 1)
        if order == "RR":
            self.bit_reverse(buf, log_n, stream)
            order = "NR"
        dit = order == "RN"
        if inverse:
            scale, mode = ("inv_coset" if coset else "inv"), 2
            rev = not dit  # DIF leaves coefficients bit-reversed; DIT natural
        else:
            scale, mode = ("coset" if coset else None), 1
            rev = dit      # DIT reads coefficients bit-reversed
        self._run(dit, buf.ptr, log_n, inverse, scale, rev, mode, stream)
        if order == "NN":
            self.bit_reverse(buf, log_n, stream)

    def compute_h_device(self, a: DeviceBuffer, b: DeviceBuffer, c: DeviceBuffer, log_n: int,
                         streams=None, events=None) -> DeviceBuffer:
        """H coefficients into ``a`` (natural order) from the evaluations a, b, c on H.

        Same math as arith/host.cpp's fr_compute_h, in six NTTs where arkworks' witness_map
        and bellperson take seven:
          a and b: inverse NTT (DIF, N->R, scaled by n^-1 g^k on store) then forward NTT (DIT,
          R->N): their evaluations on the coset g H;
          c: inverse NTT only (DIF, N->R, scaled by n^-1 Z(g)^-1): C's coefficients / Z(g),
          bit-reversed;
          pointwise a b / Z(g) written bit-reversed; inverse coset NTT (DIT, R->N); then
          h[k] -= c[bitrev(k)].
        Why: Z is the constant Z(g) = g^n - 1 on the coset, the inverse coset NTT is linear and
        C has degree < n, so iNTT_coset(C's coset evaluations) is C's coefficients: c's forward
        coset NTT and its share of the last inverse cancel. The same H to the bit, satisfied or
        not (tests/unit/test_field.py checks the host's against the seven-NTT sequence).
        With ``streams`` (three) the three vectors' transforms run concurrently, each on its own
        stream after its upload; ``events`` (two) order a's stream after b's and c's.
        """
        n = 1 << log_n
        for buf, name in ((a, "a"), (b, "b"), (c, "c")):
            if buf.nbytes < 32 * n:
                raise GpuInputError(f"compute_h: {name} holds {buf.nbytes} bytes, needs {32 * n}")
        if log_n == 0:
            raise GpuInputError("compute_h: the domain needs at least 2 points")
        sa, sb, sc = streams or (None, None, None)
        z_r2 = self.prepare_h(log_n)
        trim = trimmed()
        for buf, s in ((a, sa), (b, sb)):
            self._run(False, buf.ptr, log_n, True, "h_pre", True, 2, s)
            self._run(True, buf.ptr, log_n, False, None, False, 0, s)
        self._run(False, c.ptr, log_n, True, "inv_z", True, 2, sc)
        if streams:
            events[0].record(sb)
            events[1].record(sc)
            sa.wait_for_event(events[0])
            sa.wait_for_event(events[1])
        grid = ((n + 255) // 256, 1)
        with loader.guard(kernel="ntt_h_pointwise", shape=n):
            self.k_point.prepared_async_call(grid, (256, 1, 1), sa, a.ptr, b.ptr,
                                             np.int32(log_n), 0 if trim else z_r2.ptr)
        self._run(True, a.ptr, log_n, True, "inv_coset_h" if trim else "inv_coset", False, 2, sa)
        with loader.guard(kernel="ntt_h_sub_coeffs", shape=n):
            self.k_sub.prepared_async_call(grid, (256, 1, 1), sa, a.ptr, c.ptr, np.int32(log_n))
        return a

    def prepare_h(self, log_n: int) -> DeviceBuffer:
        """Build every table compute_h_device uses for 2^log_n (synchronously, so none is made
        while its streams run); returns the Z(g)^-1 R^2 constant."""
        d = self.domain(log_n)
        for kind in ("h_pre", "inv_coset_h" if trimmed() else "inv_coset", "inv_z"):
            self._scale(d, kind)
        if d.z_r2 is None:
            d.z_r2 = self._const(mont(z_inv(log_n) * _R), "Z^-1 R^2")  # mont() adds the second R
        return d.z_r2

    # --- validation ----------------------------------------------------------------------

    def reset_flags(self) -> None:
        loader.driver().memset_d32(self._flag.ptr, 0xFFFFFFFF, 3)

    def queue_check(self, buf: DeviceBuffer, n: int, slot: int, stream=None) -> None:
        """Queue the canonical-form check of ``buf`` into flag ``slot`` (0..2); no sync."""
        with loader.guard(kernel="ntt_check_canonical", shape=n):
            self.k_check.prepared_async_call(((n + 255) // 256, 1), (256, 1, 1), stream, buf.ptr,
                                             np.uint32(n), self._flag.ptr + 4 * slot)

    def read_flags(self) -> list[int | None]:
        """First non-canonical index per slot (None: all canonical); call after a sync."""
        out = np.empty(3, dtype=_U32)
        with loader.guard(kernel="read flags"):
            loader.driver().memcpy_dtoh(out, self._flag.ptr)
        return [None if x == 0xFFFFFFFF else int(x) for x in out]

    # --- host-array drivers ----------------------------------------------------------------

    def ntt(self, a: np.ndarray, *, inverse: bool = False, coset: bool = False) -> np.ndarray:
        """Host Fr vector in, host Fr vector out, natural order both (as arith.native.ntt)."""
        a = _host_vec(a, "ntt input")
        log_n = log2_size(len(a), "ntt input")
        out = np.empty_like(a)
        with DeviceBuffer(a.nbytes, what="ntt data") as d:
            d.upload(a)
            self.reset_flags()
            self.queue_check(d, len(a), 0)
            self._raise_bad(["ntt input"])
            self.transform(d, log_n, inverse=inverse, coset=coset, order="NN")
            d.download(out)
        return out

    def compute_h(self, a: np.ndarray, b: np.ndarray, c: np.ndarray,
                  out: np.ndarray | None = None) -> np.ndarray:
        """H coefficients from host evaluations a, b, c (as arith.native.compute_h).

        When a, b, c are page-locked (``gpu.cuda.memory.pinned``), the uploads are asynchronous
        on three streams: b and c travel while a is already being transformed. Plain arrays are
        copied synchronously. ``out`` (pinned for an asynchronous download) receives H.
        """
        vecs = [_host_vec(v, f"compute_h {name}") for v, name in ((a, "a"), (b, "b"), (c, "c"))]
        n = len(vecs[0])
        if any(len(v) != n for v in vecs):
            raise GpuInputError(f"compute_h: lengths differ ({', '.join(str(len(v)) for v in vecs)})")
        log_n = log2_size(n, "compute_h input")
        if out is None:
            out = np.empty_like(vecs[0])
        elif out.shape != vecs[0].shape or out.dtype != np.uint64 or not out.flags.c_contiguous:
            raise GpuInputError(f"compute_h: out must be a contiguous uint64 array of shape {(n, 4)}")
        self.prepare_h(log_n)
        cuda = loader.driver()
        pinned = all(is_pinned(v) for v in vecs)
        bufs = [DeviceBuffer(32 * n, what=f"compute_h {name}") for name in "abc"]
        try:
            with loader.guard(kernel="compute_h", shape=n):
                streams = [cuda.Stream() for _ in range(3)] if pinned else None
                events = [cuda.Event(), cuda.Event()] if pinned else None
                self.reset_flags()
                for i, (buf, v) in enumerate(zip(bufs, vecs)):
                    s = streams[i] if pinned else None
                    buf.upload(v, s)
                    self.queue_check(buf, n, i, s)  # read after the work: no sync here
                self.compute_h_device(*bufs, log_n, streams, events)
                bufs[0].download(out, streams[0] if pinned and is_pinned(out) else None)
                cuda.Context.synchronize()
            self._raise_bad([f"compute_h {name}" for name in "abc"])
        finally:
            for buf in bufs:
                buf.free()
        return out

    def _raise_bad(self, names: list[str]) -> None:
        for name, bad in zip(names, self.read_flags()):
            if bad is not None:
                raise GpuInputError(f"{name}: element {bad} is not below the Fr modulus")

    def close(self) -> None:
        for d in self.domains.values():
            d.free()
        self.domains.clear()
        for b in self._consts:
            b.free()
        self._flag.free()

    def __enter__(self) -> "NttEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _host_vec(v, what: str) -> np.ndarray:
    if not isinstance(v, np.ndarray) or v.dtype != np.uint64 or v.ndim != 2 or v.shape[1] != 4:
        raise GpuInputError(f"{what}: expected a uint64 array of shape (n, 4), got "
                            f"{getattr(v, 'dtype', type(v))} {getattr(v, 'shape', '')}")
    if not v.flags.c_contiguous:
        raise GpuInputError(f"{what}: array is not C-contiguous")
    return v
