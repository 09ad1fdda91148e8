// Checks compressed page bodies before nvCOMP sees them. nvCOMP's headers make corrupt input undefined
// behaviour (its Snappy kernel was seen reading gigabytes past its input on a flipped byte), so every
// body is checked here first. One warp per body, its first lane walking (grid n, block 32): bodies of a
// step walk in parallel on every SM, and a walk never diverges from another in the same warp.
//   SNAPPY, LZ4_RAW: the whole stream is walked: every literal and match inside the input, every match
//     offset inside what was produced, the output exactly the declared size, the input used up.
//   ZSTD: the frame magic number, and the frame content size, which the frame header must give, equal
//     to the declared size.
//   GZIP: the member header (1f 8b 08), and ISIZE (the last 4 bytes) equal to the declared size modulo
//     2^32; a body of several members fails this check and goes to the host decompressor.
// Twin: reference/validate.rs (validate_one). status[i]: 0 valid, otherwise a VALIDATE_* code.

#define CODEC_SNAPPY 1u
#define CODEC_ZSTD 2u
#define CODEC_LZ4_RAW 3u
#define CODEC_GZIP 4u

#define VALIDATE_OK 0u
#define VALIDATE_TRUNCATED 1u
#define VALIDATE_BAD_OFFSET 2u
#define VALIDATE_WRONG_SIZE 3u
#define VALIDATE_BAD_HEADER 4u
#define VALIDATE_TRAILING 5u

struct ValidateItem {
    u64 src;
    u64 src_len;
    u64 dst_len;
    u32 codec;
    u32 status;
};
static_assert(sizeof(ValidateItem) == 32, "ValidateItem must match layout.rs");

__device__ inline u32 validate_snappy(const u8* s, u64 n, u64 want) {
    u64 p = 0, total = 0;
    // Preamble: the uncompressed length as a varint.
    if (!read_uleb128(s, &p, n, &total)) return VALIDATE_TRUNCATED;
    if (total != want) return VALIDATE_WRONG_SIZE;
    u64 out = 0;
    while (p < n) {
        const u8 tag = s[p++];
        u64 len, offset = 0;
        switch (tag & 3) {
        case 0: {
            u32 l = tag >> 2;
            if (l >= 60) {
                const u32 extra = l - 59;
                if (p + extra > n) return VALIDATE_TRUNCATED;
                u64 v = 0;
                for (u32 i = 0; i < extra; i++) v |= (u64)s[p + i] << (8 * i);
                p += extra;
                len = v + 1;
            } else {
                len = l + 1;
            }
            if (len > n - p) return VALIDATE_TRUNCATED;
            p += len;
            break;
        }
        case 1:
            if (p + 1 > n) return VALIDATE_TRUNCATED;
            len = ((tag >> 2) & 7) + 4;
            offset = ((u64)(tag >> 5) << 8) | s[p];
            p += 1;
            break;
        case 2:
            if (p + 2 > n) return VALIDATE_TRUNCATED;
            len = (tag >> 2) + 1;
            offset = (u64)s[p] | ((u64)s[p + 1] << 8);
            p += 2;
            break;
        default:
            if (p + 4 > n) return VALIDATE_TRUNCATED;
            len = (tag >> 2) + 1;
            offset = (u64)s[p] | ((u64)s[p + 1] << 8) | ((u64)s[p + 2] << 16) | ((u64)s[p + 3] << 24);
            p += 4;
            break;
        }
        if ((tag & 3) != 0 && (offset == 0 || offset > out)) return VALIDATE_BAD_OFFSET;
        if (len > want - out) return VALIDATE_WRONG_SIZE;
        out += len;
    }
    return out == want ? VALIDATE_OK : VALIDATE_WRONG_SIZE;
}

__device__ inline u32 validate_lz4_block(const u8* s, u64 n, u64 want) {
    u64 p = 0, out = 0;
    while (true) {
        if (p >= n) return VALIDATE_TRUNCATED;
        const u8 token = s[p++];
        u64 lit = token >> 4;
        if (lit == 15) {
            u8 b;
            do {
                if (p >= n) return VALIDATE_TRUNCATED;
                b = s[p++];
                lit += b;
                if (lit > n) return VALIDATE_TRUNCATED;
            } while (b == 255);
        }
        if (lit > n - p) return VALIDATE_TRUNCATED;
        if (lit > want - out) return VALIDATE_WRONG_SIZE;
        p += lit;
        out += lit;
        if (p == n) break;  // the last sequence has literals only
        if (p + 2 > n) return VALIDATE_TRUNCATED;
        const u64 offset = (u64)s[p] | ((u64)s[p + 1] << 8);
        p += 2;
        if (offset == 0 || offset > out) return VALIDATE_BAD_OFFSET;
        u64 m = token & 15;
        if (m == 15) {
            u8 b;
            do {
                if (p >= n) return VALIDATE_TRUNCATED;
                b = s[p++];
                m += b;
                if (m > want) return VALIDATE_WRONG_SIZE;
            } while (b == 255);
        }
        m += 4;
        if (m > want - out) return VALIDATE_WRONG_SIZE;
        out += m;
    }
    return out == want ? VALIDATE_OK : VALIDATE_WRONG_SIZE;
}

__device__ inline u32 validate_zstd(const u8* s, u64 n, u64 want) {
    if (n < 6) return VALIDATE_TRUNCATED;
    const u32 magic = (u32)s[0] | ((u32)s[1] << 8) | ((u32)s[2] << 16) | ((u32)s[3] << 24);
    if (magic != 0xFD2FB528u) return VALIDATE_BAD_HEADER;
    const u8 fhd = s[4];
    const u32 fcs_flag = fhd >> 6, single = (fhd >> 5) & 1, dict_flag = fhd & 3;
    if ((fhd >> 3) & 1) return VALIDATE_BAD_HEADER;  // reserved bit
    u64 p = 5 + (single ? 0 : 1);
    const u32 dict_bytes = dict_flag == 0 ? 0 : (dict_flag == 1 ? 1 : (dict_flag == 2 ? 2 : 4));
    p += dict_bytes;
    const u32 fcs_bytes = fcs_flag == 0 ? (single ? 1 : 0) : (fcs_flag == 1 ? 2 : (fcs_flag == 2 ? 4 : 8));
    if (p + fcs_bytes > n) return VALIDATE_TRUNCATED;
    // No content size in the header: nothing proves the output fits (nvCOMP's zstd decoder was seen
    // writing past a too-small output), so the host decompresses it.
    if (fcs_bytes == 0) return VALIDATE_WRONG_SIZE;
    u64 fcs = 0;
    for (u32 i = 0; i < fcs_bytes; i++) fcs |= (u64)s[p + i] << (8 * i);
    if (fcs_bytes == 2) fcs += 256;
    return fcs == want ? VALIDATE_OK : VALIDATE_WRONG_SIZE;
}

__device__ inline u32 validate_gzip(const u8* s, u64 n, u64 want) {
    if (n < 18) return VALIDATE_TRUNCATED;
    if (s[0] != 0x1f || s[1] != 0x8b || s[2] != 8) return VALIDATE_BAD_HEADER;
    const u32 isize = (u32)s[n - 4] | ((u32)s[n - 3] << 8) | ((u32)s[n - 2] << 16) | ((u32)s[n - 1] << 24);
    return isize == (u32)want ? VALIDATE_OK : VALIDATE_WRONG_SIZE;
}

extern "C" __global__ void gp_validate_compressed(ValidateItem* items, u32 n) {
    const u32 i = blockIdx.x;
    if (i >= n || threadIdx.x != 0) return;
    ValidateItem it = items[i];
    const u8* s = (const u8*)it.src;
    u32 st;
    switch (it.codec) {
    case CODEC_SNAPPY: st = validate_snappy(s, it.src_len, it.dst_len); break;
    case CODEC_LZ4_RAW: st = validate_lz4_block(s, it.src_len, it.dst_len); break;
    case CODEC_ZSTD: st = validate_zstd(s, it.src_len, it.dst_len); break;
    case CODEC_GZIP: st = validate_gzip(s, it.src_len, it.dst_len); break;
    default: st = VALIDATE_BAD_HEADER; break;
    }
    items[i].status = st;
}
