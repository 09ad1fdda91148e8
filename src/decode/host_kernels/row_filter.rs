//! Host reference of `kernels/row_filter.cu`: a predicate leaf evaluated into a tri-state byte per row,
//! Kleene logic over those bytes, the scan that turns a mask into selected row indices (or lengths into
//! offsets), and the gathers that compact a column to the selected rows.
//!
//! Tri-state bytes: [`FALSE`], [`TRUE`], [`UNKNOWN`] (SQL null). Every bounds failure of the data (an
//! offset past the characters, a view past its buffer, a dictionary key past the dictionary, a gather
//! index past the rows) min's the row it concerns into the `u64` error word it is given, which starts at
//! `u64::MAX`, and the row reads as unknown (or copies nothing). A range the descriptors give that lies
//! outside the arena does nothing: the orchestration never launches one.

use super::Arena;
use crate::decode::layout::row_filter::{
    LEAF_BOOL, LEAF_BYTES, LEAF_DICT_SIGNED, LEAF_DICT_UNSIGNED, LEAF_FIXED_BYTES, LEAF_FLOAT, LEAF_FLOAT_IEEE,
    LEAF_SIGNED, LEAF_UNSIGNED, LEAF_VIEW, OP_EQ, OP_GE, OP_GT, OP_IN, OP_IS_NOT_NULL, OP_IS_NULL, OP_LE, OP_LT, OP_NE,
    RowLeafDesc, RowLogicOp, RowScan, SCAN_TILE,
};

/// The row is not selected: the predicate is false.
pub(crate) const FALSE: u8 = 0;
/// The predicate is true.
pub(crate) const TRUE: u8 = 1;
/// The predicate is unknown (null): not selected either.
pub(crate) const UNKNOWN: u8 = 2;

fn min_into(arena: &mut Arena, error: u64, row: u64) {
    if let Some(old) = arena.read::<u64>(error, 1).and_then(|v| v.first().copied())
        && row < old
    {
        arena.write(error, &[row]);
    }
}

/// `len` bytes at `addr`, copied (none for an empty range, wherever it points).
fn bytes_at(arena: &Arena, addr: u64, len: u64) -> Option<Vec<u8>> {
    if len == 0 {
        return Some(Vec::new());
    }
    arena.get(addr, len).map(<[u8]>::to_vec)
}

fn bit(bytes: &[u8], i: u64) -> Option<bool> {
    bytes.get((i / 8) as usize).map(|b| b >> (i % 8) & 1 == 1)
}

/// The little-endian value of `v` (1, 2, 4 or 8 bytes) as a signed, unsigned or total-order float key.
fn key64(kind: u32, v: &[u8]) -> i128 {
    let mut b = [0u8; 8];
    b[..v.len()].copy_from_slice(v);
    let u = u64::from_le_bytes(b);
    let bits = v.len() as u32 * 8;
    match kind {
        LEAF_UNSIGNED => u as i128,
        LEAF_SIGNED | LEAF_DICT_SIGNED => {
            let shift = 64 - bits;
            (((u << shift) as i64) >> shift) as i128
        }
        // f16/f32/f64 in IEEE total order (arrow-rs's `total_cmp`): flip the magnitude bits of negatives.
        LEAF_FLOAT => {
            let shift = 64 - bits;
            let s = ((u << shift) as i64) >> shift;
            (s ^ (((s >> 63) as u64) >> (shift + 1)) as i64) as i128
        }
        _ => u as i128,
    }
}

/// `a` against `b`, both `width` little-endian bytes of the leaf's kind.
fn compare_fixed(kind: u32, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    if a.len() <= 8 {
        return key64(kind, a).cmp(&key64(kind, b));
    }
    // 16 or 32 bytes: two's complement, most significant word signed, the rest unsigned.
    let word = |x: &[u8], k: usize| u64::from_le_bytes(x[8 * k..8 * k + 8].try_into().expect("8 bytes"));
    let top = a.len() / 8 - 1;
    let ord = (word(a, top) as i64).cmp(&(word(b, top) as i64));
    if ord.is_ne() {
        return ord;
    }
    (0..top)
        .rev()
        .map(|k| word(a, k).cmp(&word(b, k)))
        .find(|o| o.is_ne())
        .unwrap_or(std::cmp::Ordering::Equal)
}

/// IEEE 754 floats of 2, 4 or 8 little-endian bytes as C and pyarrow compare them: `None` (unordered)
/// where either is NaN, -0 equal to +0; elsewhere the total-order keys order them the same.
fn compare_ieee(a: &[u8], b: &[u8]) -> Option<std::cmp::Ordering> {
    let w = a.len();
    let inf: u64 = match w {
        2 => 0x7C00,
        4 => 0x7F80_0000,
        8 => 0x7FF0_0000_0000_0000,
        _ => return None,
    };
    let magnitude = |x: &[u8]| {
        let mut b = [0u8; 8];
        b[..w].copy_from_slice(x);
        u64::from_le_bytes(b) & ((1u64 << (8 * w - 1)) - 1)
    };
    let (ma, mb) = (magnitude(a), magnitude(b));
    if ma > inf || mb > inf {
        return None;
    }
    if ma == 0 && mb == 0 {
        return Some(std::cmp::Ordering::Equal);
    }
    Some(compare_fixed(LEAF_FLOAT, a, b))
}

/// `op` over the comparisons with the literals (`None`: unordered, which only `!=` accepts).
fn decide(op: u32, ords: impl Iterator<Item = Option<std::cmp::Ordering>>) -> u8 {
    let mut ords = ords;
    let r = match op {
        OP_IN => ords.any(|o| o.is_some_and(|o| o.is_eq())),
        _ => {
            let Some(o) = ords.next() else { return UNKNOWN };
            let test: fn(std::cmp::Ordering) -> bool = match op {
                OP_EQ => |o| o.is_eq(),
                OP_NE => |o| o.is_ne(),
                OP_LT => |o| o.is_lt(),
                OP_LE => |o| o.is_le(),
                OP_GT => |o| o.is_gt(),
                OP_GE => |o| o.is_ge(),
                _ => return UNKNOWN,
            };
            o.map_or(op == OP_NE, test)
        }
    };
    if r { TRUE } else { FALSE }
}

/// The literals of a byte leaf: `nlits` strings, `lit_offsets` (`u64[nlits + 1]`) into `lits`.
fn byte_literals(arena: &Arena, d: &RowLeafDesc) -> Option<Vec<Vec<u8>>> {
    let offs: Vec<u64> = arena.read(d.lit_offsets, d.nlits as usize + 1)?;
    let all = bytes_at(arena, d.lits, d.lits_len)?;
    offs.windows(2)
        .map(|w| all.get(w[0] as usize..w[1] as usize).map(<[u8]>::to_vec))
        .collect()
}

/// `gp_rf_leaf`: the leaf `desc` (at `leaf`) over `n` rows into `out` (`u8[n]`).
pub(crate) fn leaf(arena: &mut Arena, leaf: u64, n: u64, out: u64) {
    let Some(d) = arena.read::<RowLeafDesc>(leaf, 1).and_then(|v| v.first().copied()) else {
        return;
    };
    let (Some(validity), Some(values)) = (
        bytes_at(arena, d.validity, d.validity_len),
        bytes_at(arena, d.values, d.values_len),
    ) else {
        return;
    };
    let w = d.width as u64;
    let fixed_lits = bytes_at(arena, d.lits, d.lits_len).unwrap_or_default();
    let byte_lits = if matches!(d.kind, LEAF_BYTES | LEAF_VIEW | LEAF_FIXED_BYTES) {
        byte_literals(arena, &d).unwrap_or_default()
    } else {
        Vec::new()
    };
    let offsets = bytes_at(arena, d.offsets, d.offsets_len).unwrap_or_default();
    let aux = bytes_at(arena, d.aux, d.aux_len).unwrap_or_default();
    let mut result = vec![UNKNOWN; n as usize];
    let mut first_bad = u64::MAX;
    for i in 0..n {
        let valid = if d.validity == 0 {
            Some(true)
        } else {
            bit(&validity, d.validity_offset + i)
        };
        let Some(valid) = valid else {
            first_bad = first_bad.min(i);
            continue;
        };
        if !valid {
            result[i as usize] = match d.op {
                OP_IS_NULL => TRUE,
                OP_IS_NOT_NULL => FALSE,
                _ => UNKNOWN,
            };
            continue;
        }
        let is_dict = matches!(d.kind, LEAF_DICT_SIGNED | LEAF_DICT_UNSIGNED);
        if !is_dict && matches!(d.op, OP_IS_NULL | OP_IS_NOT_NULL) {
            result[i as usize] = if d.op == OP_IS_NOT_NULL { TRUE } else { FALSE };
            continue;
        }
        let row = d.offset + i;
        let value: Option<u8> = match d.kind {
            LEAF_SIGNED | LEAF_UNSIGNED | LEAF_FLOAT => {
                values.get((row * w) as usize..((row + 1) * w) as usize).map(|v| {
                    decide(
                        d.op,
                        fixed_lits
                            .chunks_exact(w as usize)
                            .map(|l| Some(compare_fixed(d.kind, v, l))),
                    )
                })
            }
            LEAF_FLOAT_IEEE if matches!(w, 2 | 4 | 8) => values
                .get((row * w) as usize..((row + 1) * w) as usize)
                .map(|v| decide(d.op, fixed_lits.chunks_exact(w as usize).map(|l| compare_ieee(v, l)))),
            LEAF_BOOL => bit(&values, row).map(|b| decide(d.op, fixed_lits.iter().map(|&l| Some((b as u8).cmp(&l))))),
            LEAF_FIXED_BYTES => values
                .get((row * w) as usize..((row + 1) * w) as usize)
                .map(|v| decide(d.op, byte_lits.iter().map(|l| Some(v.cmp(l))))),
            LEAF_BYTES => string_range(&offsets, w, row, d.values_len).map(|(s, e)| {
                decide(
                    d.op,
                    byte_lits.iter().map(|l| Some(values[s as usize..e as usize].cmp(l))),
                )
            }),
            LEAF_VIEW => view_bytes(arena, &values, &offsets, &aux, row)
                .map(|v| decide(d.op, byte_lits.iter().map(|l| Some(v.as_slice().cmp(l))))),
            LEAF_DICT_SIGNED | LEAF_DICT_UNSIGNED => {
                values.get((row * w) as usize..((row + 1) * w) as usize).and_then(|k| {
                    let key = key64(
                        if d.kind == LEAF_DICT_SIGNED {
                            LEAF_SIGNED
                        } else {
                            LEAF_UNSIGNED
                        },
                        k,
                    );
                    (0..d.nlits as i128)
                        .contains(&key)
                        .then(|| fixed_lits.get(key as usize).copied())?
                })
            }
            _ => None,
        };
        match value {
            Some(v) => result[i as usize] = v,
            None => first_bad = first_bad.min(i),
        }
    }
    if first_bad != u64::MAX {
        min_into(arena, d.error, first_bad);
    }
    arena.write(out, &result);
}

/// Row `row`'s `(start, end)` in the characters, from `w`-byte offsets (4 or 8), or `None` where the
/// offsets are missing, negative, backwards or past `chars_len`.
pub(crate) fn string_range(offsets: &[u8], w: u64, row: u64, chars_len: u64) -> Option<(u64, u64)> {
    let at = |k: u64| -> Option<i64> {
        let b = offsets.get((k * w) as usize..((k + 1) * w) as usize)?;
        Some(if w == 4 {
            i32::from_le_bytes(b.try_into().ok()?) as i64
        } else {
            i64::from_le_bytes(b.try_into().ok()?)
        })
    };
    let (s, e) = (at(row)?, at(row + 1)?);
    (0 <= s && s <= e && e as u64 <= chars_len).then_some((s as u64, e as u64))
}

/// The bytes of view `row`: inline, or in data buffer `index` (addresses `bufs`, lengths `lens`,
/// `u64` each), or `None` where the view points outside them.
fn view_bytes(arena: &Arena, views: &[u8], bufs: &[u8], lens: &[u8], row: u64) -> Option<Vec<u8>> {
    let v = views.get((row * 16) as usize..(row * 16 + 16) as usize)?;
    let word = |k: usize| u32::from_le_bytes(v[4 * k..4 * k + 4].try_into().expect("4 bytes"));
    let len = word(0) as u64;
    if len <= 12 {
        return Some(v[4..4 + len as usize].to_vec());
    }
    let (index, offset) = (word(2) as usize, word(3) as u64);
    let u64_at =
        |b: &[u8], k: usize| -> Option<u64> { Some(u64::from_le_bytes(b.get(8 * k..8 * k + 8)?.try_into().ok()?)) };
    let (addr, buf_len) = (u64_at(bufs, index)?, u64_at(lens, index)?);
    (offset + len <= buf_len).then(|| arena.get(addr + offset, len).map(<[u8]>::to_vec))?
}

/// `gp_rf_logic`: Kleene `a and b`, `a or b`, or `not a`, over `n` bytes into `out`.
pub(crate) fn logic(arena: &mut Arena, op: RowLogicOp, a: u64, b: u64, n: u64, out: u64) {
    let Some(x) = bytes_at(arena, a, n) else {
        return;
    };
    let y = if op == RowLogicOp::Not {
        vec![FALSE; n as usize]
    } else {
        let Some(y) = bytes_at(arena, b, n) else {
            return;
        };
        y
    };
    let r: Vec<u8> = x.iter().zip(&y).map(|(&p, &q)| kleene(op, p, q)).collect();
    arena.write(out, &r);
}

/// One Kleene operation on tri-state bytes (anything but [`FALSE`] and [`TRUE`] is unknown).
pub(crate) fn kleene(op: RowLogicOp, p: u8, q: u8) -> u8 {
    match op {
        RowLogicOp::And if p == FALSE || q == FALSE => FALSE,
        RowLogicOp::And if p == TRUE && q == TRUE => TRUE,
        RowLogicOp::Or if p == TRUE || q == TRUE => TRUE,
        RowLogicOp::Or if p == FALSE && q == FALSE => FALSE,
        RowLogicOp::Not if p == TRUE => FALSE,
        RowLogicOp::Not if p == FALSE => TRUE,
        _ => UNKNOWN,
    }
}

/// The items of a scan's input: a mask's rows ([`TRUE`] counts 1) or `u64` lengths.
fn scan_items(arena: &Arena, kind: RowScan, src: u64, n: u64) -> Option<Vec<u64>> {
    match kind {
        RowScan::Mask => Some(bytes_at(arena, src, n)?.iter().map(|&m| (m == TRUE) as u64).collect()),
        RowScan::Lengths32 | RowScan::Lengths64 => arena.read::<u64>(src, n as usize),
    }
}

/// `gp_rf_tile_sums`: each tile's ([`SCAN_TILE`] items) sum into `sums` (`u64[ceil(n / SCAN_TILE)]`).
pub(crate) fn tile_sums(arena: &mut Arena, kind: RowScan, src: u64, n: u64, sums: u64) {
    let Some(items) = scan_items(arena, kind, src, n) else {
        return;
    };
    let s: Vec<u64> = items.chunks(SCAN_TILE as usize).map(|c| c.iter().sum()).collect();
    arena.write(sums, &s);
}

/// `gp_rf_tile_bases`: `sums[0..ntiles)` become their exclusive prefix sums; the whole sum goes to the
/// `u64` at `total`.
pub(crate) fn tile_bases(arena: &mut Arena, sums: u64, ntiles: u64, total: u64) {
    let Some(mut s) = arena.read::<u64>(sums, ntiles as usize) else {
        return;
    };
    let mut run = 0u64;
    for v in &mut s {
        let x = *v;
        *v = run;
        run = run.wrapping_add(x);
    }
    arena.write(sums, &s);
    arena.write(total, &[run]);
}

/// `gp_rf_tile_scan`: for a mask, the selected rows' indices (`u32`, in order, `out_cap` at most) into
/// `out`; for lengths, their exclusive prefix sums as `n + 1` offsets (`i32` or `i64`, the last the
/// `total`; `out_cap` is `n + 1`).
#[allow(clippy::too_many_arguments)]
pub fn tile_scan(arena: &mut Arena, kind: RowScan, src: u64, n: u64, bases: u64, total: u64, out: u64, out_cap: u64) {
    let Some(items) = scan_items(arena, kind, src, n) else {
        return;
    };
    let ntiles = n.div_ceil(SCAN_TILE);
    let Some(bases) = arena.read::<u64>(bases, ntiles as usize) else {
        return;
    };
    let Some(total) = arena.read::<u64>(total, 1).map(|v| v[0]) else {
        return;
    };
    let mut run = 0u64;
    let mut positions = Vec::with_capacity(n as usize + 1);
    for (i, v) in items.iter().enumerate() {
        if (i as u64).is_multiple_of(SCAN_TILE) {
            run = bases[i / SCAN_TILE as usize];
        }
        positions.push(run);
        run = run.wrapping_add(*v);
    }
    match kind {
        RowScan::Mask => {
            for (i, (&v, &p)) in items.iter().zip(&positions).enumerate() {
                if v == 1 && p < out_cap {
                    arena.write(out + 4 * p, &[i as u32]);
                }
            }
        }
        RowScan::Lengths32 | RowScan::Lengths64 if n < out_cap => {
            let all = positions.iter().chain([&total]);
            if kind == RowScan::Lengths32 {
                arena.write(out, &all.map(|&p| p as i32).collect::<Vec<_>>());
            } else {
                arena.write(out, &all.map(|&p| p as i64).collect::<Vec<_>>());
            }
        }
        RowScan::Lengths32 | RowScan::Lengths64 => {}
    }
}

/// `gp_rf_mask_bits`: bit `i` of `words` (`u32[ceil(n / 32)]`, LSB first) set where `mask[i]` is
/// [`TRUE`]; the set bits added to the `u64` at `count`.
pub(crate) fn mask_bits(arena: &mut Arena, mask: u64, n: u64, words: u64, count: u64) {
    let Some(m) = bytes_at(arena, mask, n) else {
        return;
    };
    let mut w = vec![0u32; n.div_ceil(32) as usize];
    let mut set = 0u64;
    for (i, &b) in m.iter().enumerate() {
        if b == TRUE {
            w[i / 32] |= 1 << (i % 32);
            set += 1;
        }
    }
    arena.write(words, &w);
    add_into(arena, count, set);
}

fn add_into(arena: &mut Arena, addr: u64, v: u64) {
    if let Some(old) = arena.read::<u64>(addr, 1).and_then(|x| x.first().copied()) {
        arena.write(addr, &[old.wrapping_add(v)]);
    }
}

/// The gather indices, each checked against `rows`: the first that is not is min'ed into `error` (as
/// the output row) and `None` stands in for it.
fn indices(arena: &mut Arena, indices: u64, count: u64, rows: u64, error: u64) -> Option<Vec<Option<u64>>> {
    let idx: Vec<u32> = arena.read(indices, count as usize)?;
    let out: Vec<Option<u64>> = idx.iter().map(|&i| (u64::from(i) < rows).then_some(i as u64)).collect();
    if let Some(j) = out.iter().position(Option::is_none) {
        min_into(arena, error, j as u64);
    }
    Some(out)
}

/// `gp_rf_gather_fixed`: `dst[j] = src[offset + indices[j]]`, `width` bytes each, for `count` rows; a
/// value outside `src_len` bytes or an index past `rows` is an error (and zeros).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gather_fixed(
    arena: &mut Arena,
    src: u64,
    src_len: u64,
    width: u32,
    offset: u64,
    rows: u64,
    idx: u64,
    count: u64,
    dst: u64,
    error: u64,
) {
    let Some(ix) = indices(arena, idx, count, rows, error) else {
        return;
    };
    let Some(s) = bytes_at(arena, src, src_len) else {
        return;
    };
    let w = width as u64;
    let mut out = vec![0u8; (count * w) as usize];
    let mut bad = u64::MAX;
    for (j, i) in ix.iter().enumerate() {
        let Some(i) = i else { continue };
        match s.get(((offset + i) * w) as usize..((offset + i + 1) * w) as usize) {
            Some(v) => out[j * w as usize..(j + 1) * w as usize].copy_from_slice(v),
            None => bad = bad.min(j as u64),
        }
    }
    if bad != u64::MAX {
        min_into(arena, error, bad);
    }
    arena.write(dst, &out);
}

/// `gp_rf_gather_bits`: bit `j` of `dst` (`u32[ceil(count / 32)]`) = bit `bit_offset + indices[j]` of
/// `src` (`src_len` bytes); the set bits added to the `u64` at `set`. A bit outside `src` reads 0 and is
/// an error.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gather_bits(
    arena: &mut Arena,
    src: u64,
    src_len: u64,
    bit_offset: u64,
    rows: u64,
    idx: u64,
    count: u64,
    dst: u64,
    set: u64,
    error: u64,
) {
    let Some(ix) = indices(arena, idx, count, rows, error) else {
        return;
    };
    let Some(s) = bytes_at(arena, src, src_len) else {
        return;
    };
    let mut w = vec![0u32; count.div_ceil(32) as usize];
    let mut n = 0u64;
    let mut bad = u64::MAX;
    for (j, i) in ix.iter().enumerate() {
        let Some(i) = i else { continue };
        match bit(&s, bit_offset + i) {
            Some(true) => {
                w[j / 32] |= 1 << (j % 32);
                n += 1;
            }
            Some(false) => {}
            None => bad = bad.min(j as u64),
        }
    }
    if bad != u64::MAX {
        min_into(arena, error, bad);
    }
    arena.write(dst, &w);
    add_into(arena, set, n);
}

/// `gp_rf_gather_lengths`: the length of each selected row's range (`u64[count]` at `lens`) from
/// `wide` (8-byte, else 4-byte) offsets at `offset + indices[j]` (`offsets_len` bytes); a range that is
/// negative, backwards or past `chars_len` is an error and length 0.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gather_lengths(
    arena: &mut Arena,
    offsets: u64,
    offsets_len: u64,
    wide: bool,
    offset: u64,
    rows: u64,
    chars_len: u64,
    idx: u64,
    count: u64,
    lens: u64,
    error: u64,
) {
    let Some(ix) = indices(arena, idx, count, rows, error) else {
        return;
    };
    let Some(o) = bytes_at(arena, offsets, offsets_len) else {
        return;
    };
    let w = if wide { 8 } else { 4 };
    let mut bad = u64::MAX;
    let l: Vec<u64> = ix
        .iter()
        .enumerate()
        .map(
            |(j, i)| match i.and_then(|i| string_range(&o, w, offset + i, chars_len)) {
                Some((s, e)) => e - s,
                None => {
                    bad = bad.min(j as u64);
                    0
                }
            },
        )
        .collect();
    if bad != u64::MAX {
        min_into(arena, error, bad);
    }
    arena.write(lens, &l);
}

/// `gp_rf_gather_chars`: each selected row's characters copied to `dst` at its new offset
/// (`dst_offsets`, `count + 1` of `dst_wide` width): what [`gather_lengths`] measured. A source range
/// failing its checks, or a destination range outside `dst_len`, copies nothing (and is an error).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gather_chars(
    arena: &mut Arena,
    offsets: u64,
    offsets_len: u64,
    wide: bool,
    offset: u64,
    rows: u64,
    chars: u64,
    chars_len: u64,
    idx: u64,
    count: u64,
    dst_offsets: u64,
    dst_wide: bool,
    dst: u64,
    dst_len: u64,
    error: u64,
) {
    let Some(ix) = indices(arena, idx, count, rows, error) else {
        return;
    };
    let Some(o) = bytes_at(arena, offsets, offsets_len) else {
        return;
    };
    let dw = if dst_wide { 8 } else { 4 };
    let Some(d) = bytes_at(arena, dst_offsets, (count + 1) * dw) else {
        return;
    };
    let Some(c) = bytes_at(arena, chars, chars_len) else {
        return;
    };
    let w = if wide { 8 } else { 4 };
    let mut bad = u64::MAX;
    for (j, i) in ix.iter().enumerate() {
        let src = i.and_then(|i| string_range(&o, w, offset + i, chars_len));
        let at = string_range(&d, dw, j as u64, dst_len);
        match (src, at) {
            (Some((s, e)), Some((ds, de))) if e - s == de - ds => {
                arena.write(dst + ds, &c[s as usize..e as usize]);
            }
            _ => bad = bad.min(j as u64),
        }
    }
    if bad != u64::MAX {
        min_into(arena, error, bad);
    }
}

/// `gp_rf_expand_ranges`: a list's selected rows' item indices: for row `j`, the items `start..end` of
/// its source range (indices into the child array, whose own offset the child's gather adds) written as
/// `u32` at `child_indices[dst_offsets[j]..]`. A range past `child_rows`, or a destination past
/// `child_count`, writes nothing and is an error.
#[allow(clippy::too_many_arguments)]
pub(crate) fn expand_ranges(
    arena: &mut Arena,
    offsets: u64,
    offsets_len: u64,
    wide: bool,
    offset: u64,
    rows: u64,
    child_rows: u64,
    idx: u64,
    count: u64,
    dst_offsets: u64,
    dst_wide: bool,
    child_indices: u64,
    child_count: u64,
    error: u64,
) {
    let Some(ix) = indices(arena, idx, count, rows, error) else {
        return;
    };
    let Some(o) = bytes_at(arena, offsets, offsets_len) else {
        return;
    };
    let dw = if dst_wide { 8 } else { 4 };
    let Some(d) = bytes_at(arena, dst_offsets, (count + 1) * dw) else {
        return;
    };
    let w = if wide { 8 } else { 4 };
    let mut bad = u64::MAX;
    for (j, i) in ix.iter().enumerate() {
        let src = i.and_then(|i| string_range(&o, w, offset + i, child_rows));
        let at = string_range(&d, dw, j as u64, child_count);
        match (src, at) {
            (Some((s, e)), Some((ds, de))) if e - s == de - ds => {
                let items: Vec<u32> = (s..e).map(|k| k as u32).collect();
                arena.write(child_indices + 4 * ds, &items);
            }
            _ => bad = bad.min(j as u64),
        }
    }
    if bad != u64::MAX {
        min_into(arena, error, bad);
    }
}
