//! Host reference of `kernels/convert.cu`: per-value conversions to the Arrow type's layout.

use super::Arena;
use crate::decode::exec::Conversion;

/// Bytes per value of `op`'s (source, destination).
pub fn widths(op: Conversion) -> (usize, usize) {
    match op {
        Conversion::I32ToI8 => (4, 1),
        Conversion::I32ToI16 => (4, 2),
        Conversion::I32ToI128 => (4, 16),
        Conversion::I64ToI128 => (8, 16),
        Conversion::Int96ToNanos => (12, 8),
    }
}

/// One value's conversion: `src` holds one source value, the result is the destination's bytes.
pub fn convert_one(op: Conversion, src: &[u8], dst: &mut [u8]) {
    let i32_at = |b: &[u8]| i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    match op {
        Conversion::I32ToI8 => dst[0] = (i32_at(src) as i8) as u8,
        Conversion::I32ToI16 => dst.copy_from_slice(&(i32_at(src) as i16).to_le_bytes()),
        Conversion::I32ToI128 => dst.copy_from_slice(&(i32_at(src) as i128).to_le_bytes()),
        Conversion::I64ToI128 => {
            let v = i64::from_le_bytes(src[..8].try_into().expect("8 bytes"));
            dst.copy_from_slice(&(v as i128).to_le_bytes())
        }
        Conversion::Int96ToNanos => {
            let w0 = u32::from_le_bytes(src[0..4].try_into().expect("4 bytes")) as i64;
            let w1 = u32::from_le_bytes(src[4..8].try_into().expect("4 bytes")) as i64;
            let day = i32_at(&src[8..12]) as i64;
            let nanos = (w1 << 32) + w0;
            let v = (day - 2_440_588).wrapping_mul(86_400_000_000_000).wrapping_add(nanos);
            dst.copy_from_slice(&v.to_le_bytes())
        }
    }
}

/// Converts `n` values at `src` into `dst` (both sized by the pipeline; a range outside the arena
/// converts nothing, as the kernel is never launched that way).
pub fn convert(arena: &mut Arena, op: Conversion, src: u64, n: u64, dst: u64) {
    let (sw, dw) = widths(op);
    let Some(input) = arena.get(src, n * sw as u64).map(<[u8]>::to_vec) else {
        return;
    };
    let Some(out) = arena.get_mut(dst, n * dw as u64) else {
        return;
    };
    for (s, d) in input.chunks_exact(sw).zip(out.chunks_exact_mut(dw)) {
        convert_one(op, s, d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int96_matches_parquet() {
        for (nanos, day) in [
            (0u64, 2_440_588i32),
            (123_456_789, 2_451_545),
            (u64::MAX, i32::MAX),
            (1 << 40, -5),
        ] {
            let v = parquet::data_type::Int96::from(vec![nanos as u32, (nanos >> 32) as u32, day as u32]);
            let mut src = Vec::new();
            for w in v.data() {
                src.extend_from_slice(&w.to_le_bytes());
            }
            let mut dst = [0u8; 8];
            convert_one(Conversion::Int96ToNanos, &src, &mut dst);
            assert_eq!(i64::from_le_bytes(dst), v.to_nanos(), "{nanos} {day}");
        }
    }

    #[test]
    fn widening_and_narrowing() {
        let mut d = [0u8; 16];
        convert_one(Conversion::I32ToI128, &(-7i32).to_le_bytes(), &mut d);
        assert_eq!(i128::from_le_bytes(d), -7);
        convert_one(Conversion::I64ToI128, &i64::MIN.to_le_bytes(), &mut d);
        assert_eq!(i128::from_le_bytes(d), i64::MIN as i128);
        let mut d1 = [0u8; 1];
        convert_one(Conversion::I32ToI8, &300i32.to_le_bytes(), &mut d1);
        assert_eq!(d1[0] as i8, 300i32 as i8);
        let mut d2 = [0u8; 2];
        convert_one(Conversion::I32ToI16, &(-70000i32).to_le_bytes(), &mut d2);
        assert_eq!(i16::from_le_bytes(d2), -70000i32 as i16);
    }
}
