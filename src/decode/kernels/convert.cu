// Per-value conversions from the decoder's physical values to the Arrow type's layout. One thread per
// value (grid-stride); `src` holds n values of the source width, `dst` n of the destination width.
// Twins: reference/convert.rs. Op numbers: Conversion in exec.rs.

#define CONV_I32_TO_I8 1u
#define CONV_I32_TO_I16 2u
#define CONV_I32_TO_I128 3u
#define CONV_I64_TO_I128 4u
#define CONV_INT96_TO_NANOS 5u

extern "C" __global__ void gp_convert(u32 op, const u8* src, u64 n, u8* dst) {
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
        default:
            return;
        }
    }
}
