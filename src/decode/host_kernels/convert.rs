//! Host reference of `kernels/convert.cu`: per-value conversions to the Arrow type's layout.

use super::Arena;
use crate::decode::layout::Conversion;

/// One value's conversion: `src` holds one source value (of `op`'s source width), the result is the
/// destination's bytes.
pub(crate) fn convert_one(op: Conversion, src: &[u8], dst: &mut [u8]) {
    let i32_at = |b: &[u8]| i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let i64_at = |b: &[u8]| i64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
    match op {
        Conversion::I32ToI8 => dst[0] = (i32_at(src) as i8) as u8,
        Conversion::I32ToI16 => dst.copy_from_slice(&(i32_at(src) as i16).to_le_bytes()),
        Conversion::I32ToI128 => dst.copy_from_slice(&(i32_at(src) as i128).to_le_bytes()),
        Conversion::I64ToI128 => dst.copy_from_slice(&(i64_at(src) as i128).to_le_bytes()),
        Conversion::I32ToI64 => dst.copy_from_slice(&(i32_at(src) as i64).to_le_bytes()),
        Conversion::I32ToI256 => sign_extend_le(&src[..4], dst),
        Conversion::I64ToI256 => sign_extend_le(&src[..8], dst),
        Conversion::Int96ToNanos
        | Conversion::Int96ToSeconds
        | Conversion::Int96ToMillis
        | Conversion::Int96ToMicros => {
            let w0 = u32::from_le_bytes(src[0..4].try_into().expect("4 bytes")) as i64;
            let w1 = u32::from_le_bytes(src[4..8].try_into().expect("4 bytes")) as i64;
            let day = i32_at(&src[8..12]) as i64;
            let nanos = (w1 << 32).wrapping_add(w0);
            // Units a day, and nanoseconds a unit (arrow-rs's `Int96::to_*`).
            let (per_day, nanos_per_unit) = match op {
                Conversion::Int96ToSeconds => (86_400, 1_000_000_000),
                Conversion::Int96ToMillis => (86_400_000, 1_000_000),
                Conversion::Int96ToMicros => (86_400_000_000, 1_000),
                _ => (86_400_000_000_000, 1),
            };
            let v = (day - 2_440_588)
                .wrapping_mul(per_day)
                .wrapping_add(nanos / nanos_per_unit);
            dst.copy_from_slice(&v.to_le_bytes())
        }
        Conversion::DaysToMillis => dst.copy_from_slice(&(i32_at(src) as i64 * 86_400_000).to_le_bytes()),
        Conversion::IntervalToYearMonth => dst.copy_from_slice(&src[0..4]),
        Conversion::IntervalToDayTime => dst.copy_from_slice(&src[4..12]),
        Conversion::BigEndianToI32
        | Conversion::BigEndianToI64
        | Conversion::BigEndianToI128
        | Conversion::BigEndianToI256 => big_endian_to_le(src, dst),
    }
}

/// `src` (little-endian two's complement) sign-extended into all of `dst`.
fn sign_extend_le(src: &[u8], dst: &mut [u8]) {
    let fill = if src.last().is_some_and(|b| b & 0x80 != 0) {
        0xff
    } else {
        0
    };
    dst.fill(fill);
    dst[..src.len()].copy_from_slice(src);
}

/// `src` (big-endian two's complement, at most `dst.len()` bytes; empty reads as 0) into all of `dst`,
/// little-endian and sign-extended: arrow-rs's `sign_extend_be` followed by `from_be_bytes`.
pub(crate) fn big_endian_to_le(src: &[u8], dst: &mut [u8]) {
    let fill = if src.first().is_some_and(|b| b & 0x80 != 0) {
        0xff
    } else {
        0
    };
    dst.fill(fill);
    for (d, s) in dst.iter_mut().zip(src.iter().rev()) {
        *d = *s;
    }
}

/// Converts `n` values at `src` (`src_width` bytes each) into `dst` (both sized by the pipeline; a
/// range outside the arena converts nothing, as the kernel is never launched that way).
pub fn convert(arena: &mut Arena, op: Conversion, src: u64, src_width: u32, n: u64, dst: u64) {
    let (sw, dw) = op.widths(src_width);
    if sw == 0 {
        return;
    }
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

/// The `(start, len)` of string `i` given `n + 1` offsets, or `None` where it lies outside `chars_len`
/// characters or runs backwards (the kernel then writes an empty string).
fn string_at<O: Copy + Into<i64>>(offsets: &[O], i: usize, chars_len: u64) -> Option<(u64, u64)> {
    let (s, e): (i64, i64) = (offsets[i].into(), offsets[i + 1].into());
    (s >= 0 && e >= s && e as u64 <= chars_len).then_some((s as u64, (e - s) as u64))
}

/// Arrow's view of one string: its length, then up to 12 bytes inline, or its first 4 bytes, buffer 0
/// and its offset.
pub fn view_of(bytes: &[u8], offset: u32) -> [u8; 16] {
    view_in(bytes, 0, offset)
}

/// [`view_of`] in data buffer `buffer`.
pub(crate) fn view_in(bytes: &[u8], buffer: u32, offset: u32) -> [u8; 16] {
    let mut v = [0u8; 16];
    v[..4].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
    if bytes.len() <= 12 {
        v[4..4 + bytes.len()].copy_from_slice(bytes);
    } else {
        v[4..8].copy_from_slice(&bytes[..4]);
        v[8..12].copy_from_slice(&buffer.to_le_bytes());
        v[12..16].copy_from_slice(&offset.to_le_bytes());
    }
    v
}

/// Reference of `gp_strings_to_views` ([`Kernel::StringsToViews`](crate::decode::exec::Kernel)):
/// `offsets` is the offsets' address and the segment (0: `i32` offsets, one buffer; else `i64`
/// offsets, a string starting in segment `j` in buffer `j` at its offset from the segment's start).
pub fn strings_to_views(
    arena: &mut Arena,
    offsets: (u64, u64),
    chars: u64,
    chars_len: u64,
    n: u64,
    views: u64,
    max_len: u64,
) {
    let (offsets, segment) = offsets;
    let Some(offs) = super::core::read_offsets(arena, offsets, segment != 0, n as usize + 1) else {
        return;
    };
    let Some(text) = arena.get(chars, chars_len).map(<[u8]>::to_vec) else {
        return;
    };
    let mut longest = arena
        .read::<u32>(max_len, 1)
        .and_then(|v| v.first().copied())
        .unwrap_or(0);
    let mut out = Vec::with_capacity(n as usize * 16);
    for i in 0..n as usize {
        let (start, len) = string_at(&offs, i, chars_len).unwrap_or((0, 0));
        longest = longest.max(len as u32);
        let (buffer, offset) = match segment {
            0 => (0, start),
            s => (start / s, start % s),
        };
        out.extend_from_slice(&view_in(
            &text[start as usize..(start + len) as usize],
            buffer as u32,
            offset as u32,
        ));
    }
    arena.write(views, &out);
    arena.write(max_len, &[longest]);
}

/// Reference of `gp_strings_to_decimal` ([`Kernel::StringsToDecimal`](crate::decode::exec::Kernel)).
#[allow(clippy::too_many_arguments)]
pub(crate) fn strings_to_decimal(
    arena: &mut Arena,
    offsets: u64,
    chars: u64,
    chars_len: u64,
    n: u64,
    width: u32,
    dst: u64,
    too_long: u64,
) {
    let Some(offs) = arena.read::<i32>(offsets, n as usize + 1) else {
        return;
    };
    let Some(text) = arena.get(chars, chars_len).map(<[u8]>::to_vec) else {
        return;
    };
    let w = width as usize;
    let mut first_bad = arena
        .read::<u64>(too_long, 1)
        .and_then(|v| v.first().copied())
        .unwrap_or(u64::MAX);
    let mut out = vec![0u8; n as usize * w];
    for (i, d) in out.chunks_exact_mut(w).enumerate() {
        let (start, len) = string_at(&offs, i, chars_len).unwrap_or((0, 0));
        if len as usize > w {
            first_bad = first_bad.min(i as u64);
            continue;
        }
        big_endian_to_le(&text[start as usize..(start + len) as usize], d);
    }
    arena.write(dst, &out);
    arena.write(too_long, &[first_bad]);
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
            type Reference = fn(&parquet::data_type::Int96) -> i64;
            let units: [(Conversion, Reference); 4] = [
                (Conversion::Int96ToNanos, |v| v.to_nanos()),
                (Conversion::Int96ToMicros, |v| v.to_micros()),
                (Conversion::Int96ToMillis, |v| v.to_millis()),
                (Conversion::Int96ToSeconds, |v| v.to_seconds()),
            ];
            for (op, want) in units {
                let mut dst = [0u8; 8];
                convert_one(op, &src, &mut dst);
                assert_eq!(i64::from_le_bytes(dst), want(&v), "{op:?} {nanos} {day}");
            }
        }
    }

    /// Dates as arrow-rs widens them, and both interval units from Parquet's 12 bytes.
    #[test]
    fn dates_and_intervals_match_arrow_rs() {
        for days in [0i32, 1, -1, 19_000, i32::MAX, i32::MIN] {
            let mut dst = [0u8; 8];
            convert_one(Conversion::DaysToMillis, &days.to_le_bytes(), &mut dst);
            assert_eq!(i64::from_le_bytes(dst), days as i64 * 86_400_000);
        }
        let interval: Vec<u8> = [7u32, 30, 86_399_999].iter().flat_map(|w| w.to_le_bytes()).collect();
        let mut months = [0u8; 4];
        convert_one(Conversion::IntervalToYearMonth, &interval, &mut months);
        assert_eq!(i32::from_le_bytes(months), 7);
        let mut day_time = [0u8; 8];
        convert_one(Conversion::IntervalToDayTime, &interval, &mut day_time);
        // Arrow's IntervalDayTime: days, then milliseconds, each an i32.
        let want = arrow::datatypes::IntervalDayTime::new(30, 86_399_999);
        let got = (
            i32::from_le_bytes(day_time[..4].try_into().unwrap()),
            i32::from_le_bytes(day_time[4..].try_into().unwrap()),
        );
        assert_eq!(got, (want.days, want.milliseconds));
    }

    /// Views equal arrow's own (`make_view`) for every length around the inline limit.
    #[test]
    fn views_equal_arrows() {
        let text: Vec<u8> = (0..40u8).map(|b| b.wrapping_mul(37)).collect();
        for len in 0..=40usize {
            for offset in [0u32, 7, 1 << 30] {
                let got = u128::from_le_bytes(view_of(&text[..len], offset));
                assert_eq!(
                    got,
                    arrow::array::builder::make_view(&text[..len], 0, offset),
                    "len {len}"
                );
            }
        }
    }

    proptest::proptest! {
        /// Big-endian decimals of any width up to the destination's equal arrow's `from_be_bytes` of the
        /// sign-extended bytes (what arrow-rs's readers do).
        #[test]
        fn big_endian_decimals_equal_arrows(bytes in proptest::collection::vec(proptest::num::u8::ANY, 1..=32)) {
            let mut d = [0u8; 32];
            big_endian_to_le(&bytes, &mut d);
            let mut be = if bytes[0] & 0x80 != 0 { [0xffu8; 32] } else { [0u8; 32] };
            be[32 - bytes.len()..].copy_from_slice(&bytes);
            proptest::prop_assert_eq!(arrow::datatypes::i256::from_le_bytes(d), arrow::datatypes::i256::from_be_bytes(be));
            if bytes.len() <= 16 {
                let mut d16 = [0u8; 16];
                big_endian_to_le(&bytes, &mut d16);
                proptest::prop_assert_eq!(i128::from_le_bytes(d16), i128::from_be_bytes(be[16..].try_into().unwrap()));
            }
        }

        /// Views and decimals of random strings: a view's length and bytes give back its string; a string
        /// longer than the decimal's width is named, the first such row.
        #[test]
        fn strings_reshape_like_their_definition(lens in proptest::collection::vec(0usize..40, 0..60)) {
            let mut arena = super::Arena::default();
            let mut offsets = vec![0i32];
            let mut chars = Vec::new();
            for (i, &l) in lens.iter().enumerate() {
                chars.extend((0..l).map(|k| (i * 31 + k) as u8));
                offsets.push(chars.len() as i32);
            }
            let n = lens.len() as u64;
            let o = arena.alloc(offsets.len() * 4);
            arena.write(o, &offsets);
            let c = arena.alloc(chars.len().max(1));
            arena.write(c, &chars);
            let v = arena.alloc(lens.len() * 16 + 16);
            let m = arena.alloc(8);
            strings_to_views(&mut arena, (o, 0), c, chars.len() as u64, n, v, m);
            let views: Vec<u128> = arena.read(v, lens.len()).unwrap();
            for (i, view) in views.iter().enumerate() {
                let s = &chars[offsets[i] as usize..offsets[i + 1] as usize];
                proptest::prop_assert_eq!(*view, arrow::array::builder::make_view(s, 0, offsets[i] as u32));
            }
            let longest: Vec<u32> = arena.read(m, 1).unwrap();
            proptest::prop_assert_eq!(longest[0] as usize, lens.iter().copied().max().unwrap_or(0));
            let d = arena.alloc(lens.len() * 16 + 16);
            let bad = arena.alloc(8);
            arena.write(bad, &[u64::MAX]);
            strings_to_decimal(&mut arena, o, c, chars.len() as u64, n, 16, d, bad);
            let first_bad: Vec<u64> = arena.read(bad, 1).unwrap();
            let want = lens.iter().position(|&l| l > 16).map_or(u64::MAX, |p| p as u64);
            proptest::prop_assert_eq!(first_bad[0], want);
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
