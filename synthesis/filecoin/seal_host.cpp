// Filecoin sealing's two sequential loops in C++: the Feistel expander parents and SDR labeling.
//
// Built by synthesis/filecoin/graph.py (native()) through arith.native.build. The Python
// functions beside it (graph.exp_parents, sector.label_all's reference loop) define the same
// values and the tests compare the two; rust-fil-proofs' parent_cache.json digests check both.
//   fc_exp_parents: StackedGraph::expanded_parents (storage-proofs-porep graph.rs) for nodes
//     first..first+count: feistel::permute(8 N, 8 v + i, keys) / 8, 3 rounds, the round function
//     the first 8 bytes (big-endian) of BLAKE2b-512(right u64 BE | key u64 BE), masked.
//   fc_labels: create_label / create_label_exp (create_label/single.rs), every node of every layer.
#include <stdint.h>
#include <string.h>

#include "sha256.cuh"

typedef uint64_t u64;
typedef uint32_t u32;
typedef uint8_t u8;

namespace {

// --- SHA-256 -------------------------------------------------------------------------------------
using sha256_host::K;
using sha256_host::compress;

// SHA-256 of a message; out: the digest with the top 2 bits of byte 31 cleared
// (Sha256Domain::trim_to_fr32)
void sha256_trimmed(const u8* msg, u64 len, u8* out) {
    u32 h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    u64 full = len / 64 * 64;
    for (u64 off = 0; off < full; off += 64) compress(h, msg + off);
    u8 pad[128] = {0};
    u64 rest = len - full;
    memcpy(pad, msg + full, rest);
    pad[rest] = 0x80;
    u64 blocks = rest + 9 <= 64 ? 1 : 2;
    u64 bits = len * 8;
    for (int i = 0; i < 8; i++) pad[64 * blocks - 1 - i] = (u8)(bits >> (8 * i));
    for (u64 b = 0; b < blocks; b++) compress(h, pad + 64 * b);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (u8)(h[i] >> 24); out[4 * i + 1] = (u8)(h[i] >> 16);
        out[4 * i + 2] = (u8)(h[i] >> 8); out[4 * i + 3] = (u8)h[i];
    }
    out[31] &= 0x3F;
}

// --- BLAKE2b-512 of 16 bytes: its first 8 output bytes as a big-endian u64 -------------------------
const u64 IV[8] = {0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
                   0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL};
const u8 SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4}, {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13}, {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11}, {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5}, {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3}};

inline u64 rotr64(u64 x, int n) { return (x >> n) | (x << (64 - n)); }

inline void G(u64* v, int a, int b, int c, int d, u64 x, u64 y) {
    v[a] = v[a] + v[b] + x; v[d] = rotr64(v[d] ^ v[a], 32);
    v[c] = v[c] + v[d];     v[b] = rotr64(v[b] ^ v[c], 24);
    v[a] = v[a] + v[b] + y; v[d] = rotr64(v[d] ^ v[a], 16);
    v[c] = v[c] + v[d];     v[b] = rotr64(v[b] ^ v[c], 63);
}

u64 blake2b_first8_be(u64 right, u64 key) {
    u64 m[16] = {__builtin_bswap64(right), __builtin_bswap64(key)};  // the bytes are BE, words LE
    u64 h0 = IV[0] ^ 0x01010040ULL;                                   // no key, 64-byte digest
    u64 v[16] = {h0, IV[1], IV[2], IV[3], IV[4], IV[5], IV[6], IV[7],
                 IV[0], IV[1], IV[2], IV[3], IV[4] ^ 16, IV[5], ~IV[6], IV[7]};
    for (int r = 0; r < 12; r++) {
        const u8* s = SIGMA[r];
        G(v, 0, 4, 8, 12, m[s[0]], m[s[1]]);   G(v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
        G(v, 2, 6, 10, 14, m[s[4]], m[s[5]]);  G(v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
        G(v, 0, 5, 10, 15, m[s[8]], m[s[9]]);  G(v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
        G(v, 2, 7, 8, 13, m[s[12]], m[s[13]]); G(v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    return __builtin_bswap64(h0 ^ v[0] ^ v[8]);
}

struct Feistel {
    u64 keys[4], lmask, rmask, half, n;
    u64 encode(u64 index) const {
        u64 left = (index & lmask) >> half, right = index & rmask;
        for (int i = 0; i < 3; i++) {
            u64 l = right;
            right = left ^ (blake2b_first8_be(right, keys[i]) & rmask);
            left = l;
        }
        return (left << half) | right;
    }
    u64 permute(u64 index) const {
        u64 u = encode(index);
        while (u >= n) u = encode(u);
        return u;
    }
};

}  // namespace

extern "C" {

// out[(v - first) * 8 + i] for v in first..first+count; legacy: api 1.0.0's u32 truncation
int fc_exp_parents(u64 size, const u64* keys, u64 first, u64 count, int legacy, u32* out) {
    Feistel f;
    memcpy(f.keys, keys, sizeof f.keys);
    f.n = 8 * size;
    u64 pow4 = 4, log4 = 1;
    while (pow4 < f.n) { pow4 *= 4; log4++; }
    f.lmask = ((1ULL << log4) - 1) << log4;
    f.rmask = (1ULL << log4) - 1;
    f.half = log4;
    for (u64 k = 0; k < count; k++)
        for (u64 i = 0; i < 8; i++) {
            u64 t = f.permute(8 * (first + k) + i);
            out[8 * k + i] = (u32)((legacy ? (t & 0xFFFFFFFFULL) : t) / 8);
        }
    return 0;
}

// labels (layers, n, 32): parents (n, 14) u32 (6 DRG then 8 expander), replica_id 32 bytes
int fc_labels(u64 n, int layers, const u8* replica_id, const u32* parents, u8* labels) {
    u8 buf[64 + 37 * 32];
    memcpy(buf, replica_id, 32);
    memset(buf + 32, 0, 32);
    for (int layer = 1; layer <= layers; layer++) {
        u8* cur = labels + (u64)(layer - 1) * n * 32;
        const u8* prev = cur - n * 32;
        buf[32] = (u8)(layer >> 24); buf[33] = (u8)(layer >> 16); buf[34] = (u8)(layer >> 8); buf[35] = (u8)layer;
        for (u64 v = 0; v < n; v++) {
            for (int i = 0; i < 8; i++) buf[36 + i] = (u8)(v >> (56 - 8 * i));
            if (v == 0) {
                sha256_trimmed(buf, 64, cur);
                continue;
            }
            const u32* p = parents + 14 * v;
            for (int s = 0; s < 37; s++) {
                int j = layer == 1 ? s % 6 : s % 14;
                const u8* src = j < 6 ? cur + 32 * (u64)p[j] : prev + 32 * (u64)p[j];
                memcpy(buf + 64 + 32 * s, src, 32);
            }
            sha256_trimmed(buf, sizeof buf, cur + 32 * v);
        }
    }
    return 0;
}

}  // extern "C"
