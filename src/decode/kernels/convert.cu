// Per-value conversions from the decoder's physical values to the Arrow type's layout. One thread per
// value (grid-stride); `src` holds n values of the source width, `dst` n of the destination width.
// Twins: host_kernels/convert.rs. Op numbers: Conversion in exec.rs.

#define CONV_I32_TO_I8 1u
#define CONV_I32_TO_I16 2u
#define CONV_I32_TO_I128 3u
#define CONV_I64_TO_I128 4u
#define CONV_INT96_TO_NANOS 5u
#define CONV_I32_TO_I64 6u
#define CONV_I32_TO_I256 7u
#define CONV_I64_TO_I256 8u
#define CONV_BE_TO_I32 9u
#define CONV_BE_TO_I64 10u
#define CONV_BE_TO_I128 11u
#define CONV_BE_TO_I256 12u
#define CONV_INT96_TO_SECONDS 13u
#define CONV_INT96_TO_MILLIS 14u
#define CONV_INT96_TO_MICROS 15u
#define CONV_DAYS_TO_MILLIS 16u
#define CONV_INTERVAL_TO_YEAR_MONTH 17u
#define CONV_INTERVAL_TO_DAY_TIME 18u

// `len` big-endian two's complement bytes at `src` (empty: 0) into `width` little-endian bytes at
// `dst`, sign-extended: arrow-rs's sign_extend_be then from_be_bytes. len <= width.
__device__ __forceinline__ void gp_big_endian_to_le(const u8* src, u32 len, u8* dst, u32 width) {
    u8 fill = (len > 0 && (src[0] & 0x80)) ? 0xff : 0;
    for (u32 k = 0; k < width; k++) {
        dst[k] = k < len ? src[len - 1 - k] : fill;
    }
}

// Little-endian `i64` v sign-extended into `words` 64-bit words at dst.
__device__ __forceinline__ void gp_sign_extend_words(i64 v, i64* dst, u32 words) {
    dst[0] = v;
    for (u32 k = 1; k < words; k++) {
        dst[k] = v < 0 ? -1 : 0;
    }
}

extern "C" __global__ void gp_convert(u32 op, const u8* src, u32 src_width, u64 n, u8* dst) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        switch (op) {
        case CONV_I32_TO_I8: {
            i32 v = ((const i32*)src)[i];
            ((signed char*)dst)[i] = (signed char)v;
            break;
        }
        case CONV_I32_TO_I16: {
            i32 v = ((const i32*)src)[i];
            ((short*)dst)[i] = (short)v;
            break;
        }
        case CONV_I32_TO_I128: {
            i64 v = (i64)((const i32*)src)[i];
            ((i64*)dst)[2 * i] = v;
            ((i64*)dst)[2 * i + 1] = v < 0 ? -1 : 0;
            break;
        }
        case CONV_I64_TO_I128: {
            i64 v = ((const i64*)src)[i];
            ((i64*)dst)[2 * i] = v;
            ((i64*)dst)[2 * i + 1] = v < 0 ? -1 : 0;
            break;
        }
        case CONV_INT96_TO_SECONDS:
        case CONV_INT96_TO_MILLIS:
        case CONV_INT96_TO_MICROS: {
            // As CONV_INT96_TO_NANOS in the unit: whole days, then the nanoseconds of the day divided
            // toward zero (arrow-rs's Int96::to_seconds, to_millis, to_micros), wrapping.
            const u8* p = src + 12 * i;
            u32 w0 = p[0] | (p[1] << 8) | (p[2] << 16) | ((u32)p[3] << 24);
            u32 w1 = p[4] | (p[5] << 8) | (p[6] << 16) | ((u32)p[7] << 24);
            u32 w2 = p[8] | (p[9] << 8) | (p[10] << 16) | ((u32)p[11] << 24);
            i64 nanos = (i64)(((u64)w1 << 32) + (u64)w0);
            i64 days = (i64)(i32)w2 - 2440588LL;
            const u64 per_day = op == CONV_INT96_TO_SECONDS ? 86400ull
                                : op == CONV_INT96_TO_MILLIS ? 86400000ull
                                                             : 86400000000ull;
            const i64 nanos_per_unit = op == CONV_INT96_TO_SECONDS ? 1000000000LL
                                       : op == CONV_INT96_TO_MILLIS ? 1000000LL
                                                                    : 1000LL;
            u64 r = (u64)days * per_day + (u64)(nanos / nanos_per_unit);
            ((i64*)dst)[i] = (i64)r;
            break;
        }
        case CONV_DAYS_TO_MILLIS:
            ((i64*)dst)[i] = (i64)((const i32*)src)[i] * 86400000LL;
            break;
        case CONV_INTERVAL_TO_YEAR_MONTH:
        case CONV_INTERVAL_TO_DAY_TIME: {
            // Months (bytes 0..4), or days and milliseconds (bytes 4..12), of the 12-byte interval.
            const u8* p = src + 12 * i;
            const u32 from = op == CONV_INTERVAL_TO_YEAR_MONTH ? 0 : 4, width = op == CONV_INTERVAL_TO_YEAR_MONTH ? 4 : 8;
            for (u32 k = 0; k < width; k++) dst[(u64)width * i + k] = p[from + k];
            break;
        }
        case CONV_INT96_TO_NANOS: {
            // 12 bytes: nanoseconds of the day (u64 LE as two u32), then the Julian day (i32).
            const u8* p = src + 12 * i;
            u32 w0 = p[0] | (p[1] << 8) | (p[2] << 16) | ((u32)p[3] << 24);
            u32 w1 = p[4] | (p[5] << 8) | (p[6] << 16) | ((u32)p[7] << 24);
            u32 w2 = p[8] | (p[9] << 8) | (p[10] << 16) | ((u32)p[11] << 24);
            i64 nanos = (i64)(((u64)w1 << 32) + (u64)w0);
            i64 days = (i64)(i32)w2 - 2440588LL;
            // Wrapping, as arrow-rs's Int96::to_nanos (unsigned arithmetic wraps in C++).
            u64 r = (u64)days * (u64)86400000000000LL + (u64)nanos;
            ((i64*)dst)[i] = (i64)r;
            break;
        }
        case CONV_I32_TO_I64:
            ((i64*)dst)[i] = (i64)((const i32*)src)[i];
            break;
        case CONV_I32_TO_I256:
            gp_sign_extend_words((i64)((const i32*)src)[i], (i64*)dst + 4 * i, 4);
            break;
        case CONV_I64_TO_I256:
            gp_sign_extend_words(((const i64*)src)[i], (i64*)dst + 4 * i, 4);
            break;
        case CONV_BE_TO_I32:
        case CONV_BE_TO_I64:
        case CONV_BE_TO_I128:
        case CONV_BE_TO_I256: {
            // 4, 8, 16 or 32 bytes, as the op numbers run.
            const u32 width = 4u << (op - CONV_BE_TO_I32);
            gp_big_endian_to_le(src + (u64)src_width * i, src_width, dst + (u64)width * i, width);
            break;
        }
        default:
            return;
        }
    }
}

// String i of n given 32-bit offsets: its start and length, or an empty string where it lies outside
// chars_len characters or runs backwards (our own offset kernels never produce one; this keeps any
// offsets from reading out of bounds).
__device__ __forceinline__ void gp_string_at(const i32* offsets, u64 i, u64 chars_len, u64* start, u32* len) {
    i32 s = offsets[i], e = offsets[i + 1];
    if (s >= 0 && e >= s && (u64)e <= chars_len) {
        *start = (u64)s;
        *len = (u32)(e - s);
    } else {
        *start = 0;
        *len = 0;
    }
}

// The same over 64-bit offsets.
__device__ __forceinline__ void gp_string_at64(const i64* offsets, u64 i, u64 chars_len, u64* start, u32* len) {
    i64 s = offsets[i], e = offsets[i + 1];
    if (s >= 0 && e >= s && (u64)e <= chars_len && e - s <= 0xffffffffll) {
        *start = (u64)s;
        *len = (u32)(e - s);
    } else {
        *start = 0;
        *len = 0;
    }
}

// Arrow's 16-byte views of n strings (Utf8View, BinaryView): length, then up to 12 bytes inline, or the
// first 4 bytes, the buffer and the offset. segment 0: i32 offsets, buffer 0, offset = the string's
// start. Else i64 offsets, and a string starting at s gets buffer s / segment, offset s % segment
// (the host gives buffer j the characters from j * segment on, two segments long). The longest length
// is max'ed into *max_len. One thread per string, grid-stride. Twin: host_kernels/convert.rs
// strings_to_views.
extern "C" __global__ void gp_strings_to_views(const void* offsets, u64 segment, const u8* chars, u64 chars_len, u64 n,
                                               u8* views, u32* max_len) {
    u32 longest = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        u64 start;
        u32 len;
        if (segment == 0) {
            gp_string_at((const i32*)offsets, i, chars_len, &start, &len);
        } else {
            gp_string_at64((const i64*)offsets, i, chars_len, &start, &len);
        }
        longest = len > longest ? len : longest;
        // 16-byte aligned: the views buffer is a fresh allocation.
        ((uint4*)views)[i] = view_of(chars + start, len, start, segment);
    }
    // One atomic per warp.
    for (int d = 16; d > 0; d /= 2) {
        u32 other = __shfl_down_sync(0xffffffffu, longest, d);
        longest = other > longest ? other : longest;
    }
    if ((threadIdx.x & 31) == 0 && longest > 0) {
        atomicMax(max_len, longest);
    }
}

// Decimals of `width` bytes (16 or 32) from n big-endian byte strings (BYTE_ARRAY decimals; empty: 0,
// as arrow-rs reads a null slot). A string longer than width (where arrow-rs would panic) leaves its
// value 0 and min's its row into *too_long. Twin: host_kernels/convert.rs strings_to_decimal.
extern "C" __global__ void gp_strings_to_decimal(const i32* offsets, const u8* chars, u64 chars_len, u64 n, u32 width,
                                                 u8* dst, unsigned long long* too_long) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        u64 start;
        u32 len;
        gp_string_at(offsets, i, chars_len, &start, &len);
        u8* d = dst + (u64)width * i;
        if (len > width) {
            for (u32 k = 0; k < width; k++) {
                d[k] = 0;
            }
            atomicMin(too_long, (unsigned long long)i);
            continue;
        }
        gp_big_endian_to_le(chars + start, len, d, width);
    }
}
