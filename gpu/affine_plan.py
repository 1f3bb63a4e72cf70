"""The sizes of the batched affine accumulation (gpu/cuda/affine_acc.py): rounds, each round's
bound on its points, the inversion's levels and the device bytes, without CUDA (the memory
ledger, gpu/budget.py, books them before a device is touched)."""
from __future__ import annotations

import math
import os

from gpu.errors import GpuError

#: pairs a thread takes in a round: its share of the batched inversion (3 products a pair,
#: one product a pair a level up). Measured at G1 2^24 (5 rounds, H200, the first version of
#: the passes): K = 4 / 16 / 64 gave 95.9 / 89.8 / 94.0 ms (K = 4: the levels above take 4x
#: the values; K = 64: a quarter of the threads, too few to hide the gathers' latency)
PAIRS_PER_THREAD = 16
#: values a thread takes at the inversion's levels above the round: each level is a chain of
#: that many dependent products (and again on the way down), latency the chip waits out once a
#: round, so narrower levels (more of them) are faster as long as launches stay cheap
LEVEL_WIDTH = 16
#: values the last level's single thread inverts (with one binary-Euclid inversion)
TOP = 64
#: the inversion's top levels in one thread block (ZKHIVE_MSM_INV_BLOCK): its threads (a power
#: of two; ~70 registers a thread for the product, so 512 fit an SM) and the longest chain a
#: thread walks before the product tree: the block takes the last <= 512 x 32 values
BLOCK_THREADS, BLOCK_WIDTH = 512, 32
#: bytes of an Fq value and of an affine G1 point (Montgomery limbs)
FQ_BYTES, POINT_BYTES = 48, 96
SCAN_CHUNK = 4096
#: the split MSM's 1s by affine chains (ones_affine.cu, ZKHIVE_MSM_ONES_AFFINE): threads a
#: block (the kernel's ONES_BT: its tree's shared memory) and the chains each thread walks a
#: step: a block's step is 8,192 additions for its one inversion (a binary-Euclid root on one
#: thread). H100, 2^26 G1 / 2^25 G2 1s (bench/gpu_split_msm.py --mixes bits, 2026-12-06):
#: 16 / 32 / 64 chains 19.9 / 17.8 / 17.3 ms G1 and 30.4 / 28.9 / 27.4 ms G2 against the
#: XYZZ sum's 18.8 and 30.0; half the blocks of each SM a step late (their inversions apart)
#: 18.0 and 29.3 at 32: not kept
ONES_THREADS, ONES_CHAINS = 128, 64
#: steps at least (else the XYZZ sum takes the 1s): a step's tree and inversion are paid once
#: a block, and the An accumulators are summed in XYZZ after the chains
ONES_MIN_STEPS = 4
#: an accumulator's bytes on the device: its affine point and its prefix product (G2: Fq2,
#: twice G1's)
ONES_ACC_BYTES = {"g1": POINT_BYTES + FQ_BYTES, "g2": 2 * (POINT_BYTES + FQ_BYTES)}


def default_rounds(items: int, buckets: int) -> int:
    """Rounds that leave about 2 to 4 points a bucket for the XYZZ tail: floor(log2(mean
    run)) - 1, 0 (no rounds: the XYZZ accumulation) when runs average under 4 points. The later
    rounds are small and each pays its serial inversion chain (the levels and the top), so
    halving all the way is not worth it (G1 2^24 over precomputed tables on the H200: 4 / 5
    rounds 83.3 / 82.4 ms; before the binary-Euclid top, 4 / 5 / 6 rounds 85.8 / 85.4 / 85.9)."""
    mean = items / max(1, buckets)
    return max(0, int(math.floor(math.log2(mean))) - 1) if mean >= 4 else 0


def env_switch(var: str, default: bool = False) -> bool:
    """An on/off setting read where it is used (benchmarks flip it between proofs): 0 off, 1 on,
    unset or empty ``default``; anything else refused by name."""
    v = os.environ.get(var, "")
    if v == "":
        return default
    if v in ("0", "1"):
        return v == "1"
    raise GpuError(f"{var}={v!r}: expected 0 or 1")


def affine_slice_range() -> bool:
    """ZKHIVE_MSM_AFFINE_SLICE_RANGE (default 1): each slice's round 0 lays out its own stretch
    of the sorted items (msm_slice_items finds it; the keys ascend) and every round halves and
    scans its own buckets; 0 runs one thread an item of the whole sorted list and one a bucket
    of all of them for every slice (the dense engine: 13 windows a chunk, 5 a slice, so round
    0's layout touches each digit three times). The same sums. The H query alone at 2^27 on an
    H100 (bench/gpu_dense_steps.py, 2026-12-06): 841.5 -> 820.7 ms, the layout 49.6 -> 28.4."""
    return env_switch("ZKHIVE_MSM_AFFINE_SLICE_RANGE", default=True)


def dense_final_into() -> bool:
    """ZKHIVE_MSM_DENSE_FINAL_INTO (default 1): the dense engine's affine tail adds each
    bucket's last points into the running buckets (msm_affine.cuh bucket_final_into) and skips
    the chunk's merge (g1_merge_buckets): per bucket and chunk one read and one write of an XYZZ
    point instead of four, and no full addition; 0 writes the chunk's buckets and merges them.
    The same sums. The H query alone at 2^27 on an H100 (bench/gpu_dense_steps.py,
    2026-12-06): 841.5 -> 801.3 ms (merge 60.3 ms gone, the tail 55.9 -> 74.2), both steps
    together 780.0."""
    return env_switch("ZKHIVE_MSM_DENSE_FINAL_INTO", default=True)


def inv_block() -> bool:
    """ZKHIVE_MSM_INV_BLOCK (default 1): the batched inversion's levels stop at BLOCK_THREADS x
    BLOCK_WIDTH values and one thread block takes the rest (fq_batch_block: chains of at most
    BLOCK_WIDTH, a product tree, one inversion, back down) instead of further levels of
    LEVEL_WIDTH and one thread's TOP values: ~124 dependent products and five launches a round
    of 2^26 pairs against ~176 and nine. The same inverses. The H query alone at 2^27 on an
    H100 (bench/gpu_dense_steps.py, 2026-12-06): 777.9 -> 771.9 ms, the inversions 50.4 -> 44.7;
    0 takes the levels and the one thread."""
    return env_switch("ZKHIVE_MSM_INV_BLOCK", default=True)


def ones_affine() -> bool:
    """ZKHIVE_MSM_ONES_AFFINE (default 1): the split MSM's 1s summed by chains of affine
    additions (ones_affine.cu: 6 Fq products an addition, G2 17, against the XYZZ mixed
    addition's 10 and 28), in memory lent by the group's tail engine; 0 takes the XYZZ sum.
    H100 (bench/gpu_split_msm.py, 2026-12-06): 1s only, G1 2^26 18.8 -> 17.3 ms, G2 2^25
    30.0 -> 27.4 (64 chains); filecoin-32g's mix at G1 2^27 53.9 -> 51.6, G2 2^26 85.9 ->
    82.8 (32 chains). The chains reach ~12 G Fq products/s where the XYZZ sum reaches ~19
    (16 warps an SM; what holds them is not profiled), so the gain is a fraction of the
    products'."""
    return env_switch("ZKHIVE_MSM_ONES_AFFINE", default=True)


#: the 1s' chains' kernel forms a group has (ones_affine.cu's default "whole";
#: ones_affine*_variants.cu the others): "lean" the apply a coordinate at a time (ptxas: G2 226
#: registers against 255, G1 118 against 126, the same blocks an SM), a digit the blocks an SM
#: its registers are held to (G2 "lean3" / "whole3": 168 registers, 3 blocks where 2 run, with
#: spills of 344 / 432 and 196 / 700 bytes a thread; G1 "lean5": 96, 5 blocks where 4 run, 36
#: / 72). H200 (2026-12-06), G2 2^25 1s: whole 26.6-26.9 ms, lean 26.7, lean3 28.1, whole3
#: 29.0; in the partition all held forms together 1,304 against 1,254 ms: "whole" stays
ONES_KERNELS = {"g1": ("whole", "lean", "lean5"), "g2": ("whole", "lean", "lean3", "whole3")}


def ones_kernel(group: str) -> str:
    """ZKHIVE_MSM_ONES_KERNEL: the form of ``group``'s 1s' chains kernel (ONES_KERNELS): one
    form for both groups ("lean") or one a group ("g1=lean5,g2=lean3", or with ";" where a
    comma separates settings; a group not named keeps "whole"). A form a group lacks is refused
    by name."""
    v = os.environ.get("ZKHIVE_MSM_ONES_KERNEL", "").strip()
    if not v:
        return "whole"
    forms = {}
    for part in v.replace(";", ",").split(","):
        g, sep, form = part.strip().partition("=")
        if not sep:
            g, form = "*", g
        forms[g.strip().lower()] = form.strip()
    form = forms.get(group, forms.get("*", "whole"))
    bad = [g for g in forms if g not in ("*", "g1", "g2")]
    if bad or form not in ONES_KERNELS[group]:
        raise GpuError(f"ZKHIVE_MSM_ONES_KERNEL={v!r}: {group}'s forms are "
                       f"{', '.join(ONES_KERNELS[group])} (groups g1, g2)")
    return form


def ones_chains_kernel(group: str, form: str) -> tuple[str, str]:
    """(module, kernel) of ``group``'s 1s' chains in ``form``: the default in ones_affine.cu /
    ones_affine_g2.cu, the others in the *_variants.cu beside them."""
    module, name = ("ones_affine" if group == "g1" else "ones_affine_g2"), f"{group}_ones_chains"
    return (module, name) if form == "whole" else (f"{module}_variants", f"{name}_{form}")


#: the affine rounds' apply kernel forms (msm_affine.cu's default "whole";
#: msm_affine_variants.cu the others): "lean" the chord a coordinate at a time
#: (pair_apply's Lean; ptxas: 123 registers against 120), "lean5" held to 5 blocks of 128
#: threads an SM (96 registers, 100 / 104 bytes of spills a thread against the whole form's 232
#: / 144 held so; the default runs 4 blocks). H200 (2026-12-06), the H query alone at 2^27:
#: whole 692.4 ms, lean5 724.6: "whole" stays
APPLY_KERNELS = ("whole", "lean", "lean5")


def apply_kernel() -> str:
    """ZKHIVE_MSM_APPLY_KERNEL: the form of the affine rounds' apply (APPLY_KERNELS), read at
    each AffineBuckets run; a form that is not one is refused by name."""
    v = os.environ.get("ZKHIVE_MSM_APPLY_KERNEL", "").strip() or "whole"
    if v not in APPLY_KERNELS:
        raise GpuError(f"ZKHIVE_MSM_APPLY_KERNEL={v!r}: use one of {', '.join(APPLY_KERNELS)}")
    return v


def apply_kernel_of(name: str, form: str) -> tuple[str, str]:
    """(module, kernel) of the rounds' apply ``name`` (g1_pair_apply_table, g1_pair_apply) in
    ``form``: msm_affine.cu's, or msm_affine_variants.cu's ``name_form``."""
    return ("msm_affine", name) if form == "whole" else ("msm_affine_variants", f"{name}_{form}")


def blocks_per_sm(regs: int, smem: int, threads: int = ONES_THREADS) -> int:
    """Resident blocks an SM holds of a kernel with ``regs`` registers a thread and ``smem``
    bytes of shared memory a block (sm_90: 64 K registers allocated 8 a thread at a time, 228
    KiB of shared memory with 1 KiB reserved a block, 64 warps, 32 blocks)."""
    by_regs = 65536 // (max(1, -(-int(regs) // 8) * 8) * threads)
    by_smem = (228 << 10) // (int(smem) + 1024)
    return max(1, min(by_regs, by_smem, 64 // -(-threads // 32), 32))


def ones_chains() -> int:
    """ZKHIVE_MSM_ONES_CHAINS (default ONES_CHAINS): the chains a thread walks each step of the
    1s' affine chains: more chains, fewer steps (each a tree and an inversion a block) and more
    accumulators left to the XYZZ sum after them."""
    v = os.environ.get("ZKHIVE_MSM_ONES_CHAINS", "")
    if v == "":
        return ONES_CHAINS
    if not v.isdigit() or not 1 <= int(v) <= 1024:
        raise GpuError(f"ZKHIVE_MSM_ONES_CHAINS={v!r}: expected a count of chains, 1 to 1024")
    return int(v)


def ones_plan(group: str, ones: int, sms: int, per_sm: int, room: int,
              chains: int = ONES_CHAINS) -> tuple[int, int] | None:
    """(blocks, steps) of the affine chains for ``ones`` points, ``chains`` a thread: at most
    ``per_sm`` blocks an SM (blocks_per_sm), their accumulators within ``room`` bytes, at
    least ONES_MIN_STEPS steps; None where that leaves fewer blocks than SMs (the XYZZ sum's
    1,024 threads an SM serve such a sum better)."""
    per_block = ONES_THREADS * int(chains)
    G = min(int(sms) * int(per_sm), int(room) // (per_block * ONES_ACC_BYTES[group]),
            int(ones) // (ONES_MIN_STEPS * per_block))
    if G < max(1, int(sms)):
        return None
    return G, -(-int(ones) // (G * per_block))


def _rounds(var: str, unset: int, auto: int) -> int:
    """A count of rounds from the environment: unset or empty -> ``unset``, ``auto`` -> ``auto``,
    else a whole number 0..40 (0: the XYZZ accumulation)."""
    v = os.environ.get(var, "")
    if v == "":
        return unset
    if v == "auto":
        return auto
    try:
        r = int(v)
    except ValueError:
        raise GpuError(f"{var}={v!r}: expected auto or a whole number of rounds (0: the XYZZ "
                       "accumulation)") from None
    if not 0 <= r <= 40:
        raise GpuError(f"{var}={r}: expected 0..40")
    return r


def rounds_from_env(items: int, buckets: int) -> int:
    """ZKHIVE_MSM_AFFINE_ROUNDS (precomputed tables; 0: the XYZZ accumulation) or, unset or
    auto, default_rounds."""
    auto = default_rounds(items, buckets)
    return _rounds("ZKHIVE_MSM_AFFINE_ROUNDS", auto, auto)


#: the dense engine's windows a slice (ZKHIVE_MSM_DENSE_AFFINE_WINDOWS): filecoin-32g on the
#: H200 at 2^24 chunks, 4 rounds: 3 / 4 / 5 / 13 windows a slice gave 1,614.9 / 1,508.7 /
#: 1,484.6 / 1,440.2 ms a partition (XYZZ at 2^25 chunks: 1,586.0); at 2^25 chunks (5
#: rounds) the H query alone on an H100 (2026-12-06): 2 / 3 / 4 windows 758.1 / 741.2 / 734.5
#: ms (2^24 in 5: 772.5). 3 is the widest whose buffers fit the ledger next to
#: filecoin-32g's key and a proof on the H200 (dense_sharing; 4: 1.2 GiB over)
DENSE_WINDOWS = 3


def dense_affine_rounds(chunk: int, c: int) -> int:
    """ZKHIVE_MSM_DENSE_AFFINE_ROUNDS: rounds of batched affine additions in the dense engine's
    accumulation of chunks of ``chunk`` scalars at c-bit windows. Unset or ``auto``:
    default_rounds (4 at 2^24 chunks and c = 20, 0 where runs are short); 0: the XYZZ
    accumulation; a number: that many. The default since filecoin-32g's key, made on the H200
    (its setup's 23 GiB of temporaries admitted beside the lean shape, the buffers booked after:
    gpu/budget.py affine_upgrade), held 103.76 GiB after its first proof, against a plan of
    109.38, and proved in 1,466.9 ms against 1,586.0 with XYZZ (docs/performance.md)."""
    auto = default_rounds(int(chunk), 1 << (int(c) - 1))
    return _rounds("ZKHIVE_MSM_DENSE_AFFINE_ROUNDS", auto, auto)


def dense_affine_windows(W: int) -> int:
    """ZKHIVE_MSM_DENSE_AFFINE_WINDOWS: the windows of a chunk the dense engine's affine rounds
    sum at a time (default DENSE_WINDOWS, at most W): each slice's buffers hold chunk x windows
    digits, so a smaller slice costs less memory and more rounds (each with its serial
    inversion chain)."""
    v = os.environ.get("ZKHIVE_MSM_DENSE_AFFINE_WINDOWS", "") or str(DENSE_WINDOWS)
    try:
        w = int(v)
    except ValueError:
        raise GpuError(f"ZKHIVE_MSM_DENSE_AFFINE_WINDOWS={v!r}: expected a number of windows") \
            from None
    if w < 1:
        raise GpuError(f"ZKHIVE_MSM_DENSE_AFFINE_WINDOWS={w}: expected at least 1")
    return min(w, W)


def dense_affine_bytes(chunk: int, c: int, *, pre_elsewhere: bool = False) -> int:
    """The dense engine's affine buffers for chunks of ``chunk`` scalars at c-bit windows
    (0 when its rounds are off); pre_elsewhere: less the prefix products (dense_sharing)."""
    from gpu.msm_input import windows
    rounds = dense_affine_rounds(chunk, c)
    if rounds <= 0:
        return 0
    W, B = windows(c), 1 << (c - 1)
    wps = dense_affine_windows(W)
    return estimate_bytes(chunk * W, W * B, rounds, slice_items=chunk * wps,
                          slice_buckets=wps * B, pre_elsewhere=pre_elsewhere)


def dense_sharing(chunk: int, c: int, *, radix: bool) -> tuple[int, bool]:
    """What the dense engine's affine accumulation keeps in memory the engine already holds,
    one rule for the engine (gpu/cuda/msm.py DenseEngine.warm) and the ledger
    (gpu/budget.py dense_engine_bytes): (the bytes of the prefix products lent from the radix
    sort's second list, 0 where they are the accumulation's own; whether the running buckets
    are the workspace's own).

    Why: the radix sort's passes end in the workspace's list, so its second list (8 bytes a
    digit: 3.25 GiB at 2^25 chunks) lies idle while the chunk's rounds run, and the next
    chunk's digits are written there only after them (one stream); with the tail into the
    running buckets (ZKHIVE_MSM_DENSE_FINAL_INTO) the chunk's own buckets are never written
    or read (1.22 GiB at c = 20). Together they let 2^25 chunks in 3-window slices fit beside
    filecoin-32g's key on the H200."""
    from gpu.msm_input import windows
    rounds = dense_affine_rounds(chunk, c)
    if rounds <= 0:
        return 0, False
    W, B = windows(c), 1 << (c - 1)
    wps = dense_affine_windows(W)
    pre = prefix_bytes(chunk * W, W * B, rounds, slice_items=chunk * wps,
                       slice_buckets=wps * B)
    return (pre if radix and pre <= 8 * chunk * W else 0), dense_final_into()


def round_bounds(items: int, buckets: int, rounds: int) -> list[int]:
    """The most points each round can leave: a run of c becomes ceil(c / 2), so m points in at
    most min(B, m) runs become at most (m + min(B, m)) / 2."""
    out, m = [], int(items)
    for _ in range(rounds):
        m = (m + min(buckets, m)) // 2
        out.append(m)
    return out


def level_sizes(n: int, top: int = TOP) -> list[tuple[int, int]]:
    """(values, threads) of each level of the inversion of n values, until ``top`` are left
    (TOP for one thread; BLOCK_THREADS x BLOCK_WIDTH for the block, inv_block)."""
    out = []
    while n > top:
        t = -(-n // LEVEL_WIDTH)
        out.append((n, t))
        n = t
    return out


def threads(m: int) -> int:
    """Threads of a round with m pairs (PAIRS_PER_THREAD each)."""
    return max(1, -(-m // PAIRS_PER_THREAD))


def prefix_bytes(items: int, buckets: int, rounds: int, *, slice_items: int | None = None,
                 slice_buckets: int | None = None) -> int:
    """Bytes of AffineBuckets' prefix products (one Fq a pair of round 0, the largest round):
    what a caller may hand it in memory of its own (``pre=``), as the dense engine does."""
    if rounds < 1:
        return 0
    si = items if slice_items is None else slice_items
    sb = buckets if slice_buckets is None else slice_buckets
    return FQ_BYTES * round_bounds(si, sb, rounds)[0]


def estimate_bytes(items: int, buckets: int, rounds: int, *, slice_items: int | None = None,
                   slice_buckets: int | None = None, pre_elsewhere: bool = False) -> int:
    """Device bytes of AffineBuckets(items, buckets, rounds, slice_items=, slice_buckets=): six
    arrays over every bucket (the runs, two rounds' starts and lengths), the rest sized by one
    slice's bounds; pre_elsewhere: without the prefix products (prefix_bytes), which the
    caller lends."""
    if rounds < 1:
        return 0
    si = items if slice_items is None else slice_items
    sb = buckets if slice_buckets is None else slice_buckets
    b = round_bounds(si, sb, rounds)
    b0, b1 = b[0], b[1] if rounds > 1 else 1
    T0 = threads(b0)
    total = 6 * 4 * buckets + 4 * -(-buckets // SCAN_CHUNK) + 8 * rounds
    total += 4 * b0 + 4 * (b0 + b1) + POINT_BYTES * (b0 + b1) + FQ_BYTES * T0
    total += 0 if pre_elsewhere else FQ_BYTES * b0
    total += sum(FQ_BYTES * (n + t) for n, t in level_sizes(T0)) + FQ_BYTES * TOP
    total += FQ_BYTES * BLOCK_THREADS * (BLOCK_WIDTH + 2)  # the block's prefixes and tree
    return total
