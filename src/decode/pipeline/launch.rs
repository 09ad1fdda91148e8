//! Phase 5 of a step: the decode kernels, in order (levels, dictionaries, values, strings), their
//! error flags read once; then what only they read is freed.

use arrow::datatypes::DataType;

use super::decompress::{Decompressed, views_in_copy};
use super::descriptors::Descriptors;
use super::{
    GpuLeaf, NestedLevels, PageOrigin, StepColumns, StepInput, StringOutput, check_utf8, decode_rep_levels,
    keep_nested_levels, kernel_error, last_offset,
};
use crate::decode::exec::{Executor, Kernel, PageKernel, PageShape};
use crate::decode::layout::{
    ColumnDesc, DictDesc, ErrorCode, PageDesc, dictionary_in_own_pages, encoding, physical, view_flags,
};
use crate::error::{Error, Location, Result};
use crate::metadata::ParquetSource;

/// Runs the kernels over the step's descriptors and its decompressed bodies. Returns the nested
/// columns' levels.
pub(super) fn run_kernels<E: Executor>(
    exec: &mut E,
    input: &StepInput<'_>,
    step: &StepColumns,
    descriptors: &mut Descriptors,
    decompressed: &Decompressed,
) -> Result<NestedLevels> {
    let source = input.source;
    let routes = input.routes;
    let gpu = &step.gpu;
    let dec_base = decompressed.base;
    let mut fixed_base = decompressed.fixed;
    let Descriptors {
        kept,
        cols,
        rep_jobs,
        pages,
        origins,
        dicts,
        dict_origins,
        identities,
        dict_entries,
        ..
    } = descriptors;
    // Kernels, in order.
    let levels = keep_nested_levels(exec, routes, gpu, kept, cols)?;
    let n = pages.len() as u32;
    let ncols = cols.len() as u32;
    // View columns written by gp_copy_strings, before the offsets, which count only what it copies;
    // a column's own pages are its first data buffer.
    let mut own_used = Vec::new();
    for (k, c) in cols.iter_mut().enumerate() {
        if !views_in_copy(step, kept[k]) {
            continue;
        }
        c.view_flags = view_flags::IN_COPY;
        if gpu[kept[k]].1.data_type == DataType::Utf8View {
            c.view_flags |= view_flags::CHECK_UTF8;
        }
        if let Some(&(addr, len)) = decompressed.own.get(&kept[k]) {
            (c.view_pages, c.view_pages_len, c.view_buffer) = (addr, len, 1);
            own_used.push(kept[k]);
            if dictionary_views(pages, k, c) {
                c.view_flags |= view_flags::DICT_VIEWS;
            }
        }
    }
    let pages_addr = if pages.is_empty() { 0 } else { exec.upload(pages)? };
    let cols_addr = if cols.is_empty() { 0 } else { exec.upload(cols)? };
    let has = |f: &dyn Fn(&PageDesc) -> bool| pages.iter().any(f);
    let is_dict = |p: &PageDesc| encoding::is_dictionary(p.encoding);
    let is_ba = |p: &PageDesc| p.physical == physical::BYTE_ARRAY;
    let largest_strings = PageShape::of(pages.iter().filter(|p| is_ba(p)));
    let run = |exec: &mut E, kind: PageKernel| {
        exec.launch(Kernel::Pages {
            kind,
            pages: pages_addr,
            n,
            cols: cols_addr,
            ncols,
            largest_strings,
        })
    };
    if n > 0 {
        run(exec, PageKernel::Setup)?;
        run(exec, PageKernel::Levels)?;
        decode_rep_levels(exec, rep_jobs, origins, source, gpu)?;
        if !dicts.is_empty() {
            let d = exec.upload(dicts)?;
            exec.launch(Kernel::DictByteArrayIndex {
                dicts: d,
                n: dicts.len() as u32,
                largest: dicts.iter().map(|e| e.data_len).max().unwrap_or(0),
            })?;
            let back: Vec<DictDesc> = exec.read(d, dicts.len())?;
            if let Some((i, e)) = back.iter().enumerate().find(|(_, e)| e.error != 0) {
                let o = &dict_origins[i];
                return Err(kernel_error(source, gpu, o, e.error, e.error_detail));
            }
            exec.free(d);
        }
        if has(&|p| is_dict(p) || (p.physical == physical::BOOLEAN && p.encoding == encoding::RLE)) {
            run(exec, PageKernel::DictIndices)?;
        }
        if has(&|p| p.encoding == encoding::DELTA_BINARY_PACKED) {
            run(exec, PageKernel::DeltaBinaryPacked)?;
        }
        if has(&|p| p.encoding == encoding::BYTE_STREAM_SPLIT) {
            run(exec, PageKernel::ByteStreamSplit)?;
        }
        if has(&|p| p.physical == physical::FIXED_LEN_BYTE_ARRAY && p.encoding == encoding::DELTA_BYTE_ARRAY) {
            run(exec, PageKernel::DeltaByteArrayFixed)?;
        }
        if has(&|p| !is_ba(p)) {
            run(exec, PageKernel::GatherFixed)?;
        }
        // The fixed-width columns' decompressed pages are read by now (levels, indices, gathers), but
        // where one has a DELTA_BYTE_ARRAY or DELTA_LENGTH_BYTE_ARRAY page: the strings' delta kernels
        // below read every such page's bytes before they look at its type.
        let read_by_string_kernels = |p: &PageDesc| {
            p.physical != physical::BYTE_ARRAY
                && (p.encoding == encoding::DELTA_BYTE_ARRAY || p.encoding == encoding::DELTA_LENGTH_BYTE_ARRAY)
        };
        if fixed_base != 0 && !pages.iter().any(read_by_string_kernels) {
            exec.free(fixed_base);
            fixed_base = 0;
        }
        // ... and their dense values; the strings' buffers take their place.
        free_dense(exec, cols, |_, c| c.physical != physical::BYTE_ARRAY);
        string_buffers(exec, cols, cols_addr)?;
        if has(&is_ba) {
            run(exec, PageKernel::ByteArrayValues)?;
            if has(&|p| p.encoding == encoding::DELTA_LENGTH_BYTE_ARRAY) {
                run(exec, PageKernel::DeltaLengthByteArray)?;
            }
            if has(&|p| p.encoding == encoding::DELTA_BYTE_ARRAY) {
                run(exec, PageKernel::DeltaByteArrayLengths)?;
            }
            run(exec, PageKernel::StringOffsets)?;
            if widen_overflowing_views(exec, cols_addr, cols, kept, gpu)? {
                run(exec, PageKernel::StringOffsets)?;
            }
        }
        check_pages(exec, pages_addr, n, cols_addr, ncols, origins, kept, source, gpu)?;
        if has(&is_ba) {
            // The strings' dense values are read by now (gp_byte_array_values ran), but DELTA_BYTE_ARRAY
            // strings' prefix lengths, which gp_delta_byte_array_copy reads: freed before the
            // characters and views are allocated, they are not in the step's peak.
            let mut prefixes_in_dense = vec![false; cols.len()];
            for p in pages
                .iter()
                .filter(|p| p.physical == physical::BYTE_ARRAY && p.encoding == encoding::DELTA_BYTE_ARRAY)
            {
                if let Some(keep) = prefixes_in_dense.get_mut(p.column as usize) {
                    *keep = true;
                }
            }
            // A dictionary-views column's indices are read by gp_copy_strings, its views from them.
            free_dense(exec, cols, |k, c| {
                !prefixes_in_dense[k] && c.view_flags & view_flags::DICT_VIEWS == 0
            });
            let mut updated: Vec<ColumnDesc> = exec.read(cols_addr, cols.len())?;
            // The device's copies still name the dense values freed (no kernel reads them again).
            for (u, c) in updated.iter_mut().zip(cols.iter()) {
                u.dense = c.dense;
            }
            for c in updated.iter_mut().filter(|c| c.physical == physical::BYTE_ARRAY) {
                let chars = last_offset(exec, c)?;
                c.chars_capacity = chars;
                // gp_copy_strings writes every character up to the last offset.
                c.out_values = exec.alloc_uninit(chars as usize)?;
                if c.error == 0 && c.view_flags & view_flags::IN_COPY != 0 {
                    // ... and every row's view.
                    c.out_views = exec.alloc_uninit((c.num_rows as usize * 16).max(16))?;
                    c.view_segment = view_segment(exec, c);
                    c.view_longest = exec.alloc(8)?;
                }
            }
            exec.write(cols_addr, &updated)?;
            *cols = updated;
            run(exec, PageKernel::CopyStrings)?;
            if has(&|p| p.encoding == encoding::DELTA_BYTE_ARRAY) {
                run(exec, PageKernel::DeltaByteArrayCopy)?;
            }
            check_pages(exec, pages_addr, n, cols_addr, ncols, origins, kept, source, gpu)?;
            check_utf8(exec, cols, kept, pages, origins, source, gpu)?;
        }
    }
    // What only the kernels above read, freed now (stream-ordered) rather than with the step: the
    // decompressed pages, dictionary entry tables and per-value scratch. The layouts below allocate
    // (views are 16 bytes a row), so a step's peak then holds one or the other, not both.
    for &at in identities.iter() {
        exec.free(at);
    }
    for base in [dec_base, fixed_base] {
        if base != 0 {
            exec.free(base);
        }
    }
    for (column, &(addr, _)) in &decompressed.own {
        if !own_used.contains(column) {
            exec.free(addr);
        }
    }
    if *dict_entries != 0 {
        exec.free(*dict_entries);
    }
    for c in cols.iter() {
        for scratch in [c.dense, c.str_src, c.str_len, c.vidx] {
            if scratch != 0 {
                exec.free(scratch);
            }
        }
    }

    if n == 0 {
        // No pages (a step of no rows): the levels are empty, no kernel to run.
        string_buffers(exec, cols, cols_addr)?;
    }

    Ok(levels)
}

/// Frees the dense values of the columns `done` picks (every kernel that reads them has run), and
/// forgets them here so that they are not freed again with the step's other scratch.
fn free_dense<E: Executor>(exec: &mut E, cols: &mut [ColumnDesc], done: impl Fn(usize, &ColumnDesc) -> bool) {
    for (k, c) in cols.iter_mut().enumerate() {
        if c.dense != 0 && done(k, c) {
            exec.free(c.dense);
            c.dense = 0;
        }
    }
}

/// Each BYTE_ARRAY column's offsets (in its type's width), string sources and lengths, allocated
/// once the fixed-width columns' kernels have run and their dense values and pages are freed, so that
/// a step never holds both; written into the descriptors on the device (`cols_addr`, where uploaded)
/// field by field, leaving what the kernels wrote there.
fn string_buffers<E: Executor>(exec: &mut E, cols: &mut [ColumnDesc], cols_addr: u64) -> Result<()> {
    const FIELDS: usize = std::mem::offset_of!(ColumnDesc, out_offsets);
    // out_offsets, str_src and str_len follow each other (as in kernels/common.cuh).
    const _: () = assert!(
        std::mem::offset_of!(ColumnDesc, str_src) == FIELDS + 8
            && std::mem::offset_of!(ColumnDesc, str_len) == FIELDS + 16
    );
    for (k, c) in cols.iter_mut().enumerate() {
        if c.physical != physical::BYTE_ARRAY || c.out_offsets != 0 {
            continue;
        }
        let n = c.num_rows as usize;
        let width = c.out_width as usize;
        // offsets[0] is written by the column's first page; a step of no rows has none.
        c.out_offsets = if n == 0 {
            exec.alloc(width)?
        } else {
            exec.alloc_uninit((n + 1) * width)?
        };
        if c.view_flags & view_flags::DICT_VIEWS == 0 {
            c.str_src = exec.alloc_uninit(n * 8)?;
            c.str_len = exec.alloc_uninit(n * 4)?;
        }
        if cols_addr != 0 {
            let at = cols_addr + (k * std::mem::size_of::<ColumnDesc>() + FIELDS) as u64;
            exec.write(at, &[c.out_offsets, c.str_src, c.str_len])?;
        }
    }
    Ok(())
}

/// Whether view column `k` (`col`, its own pages set) takes its rows' views from their dictionary
/// entries ([`view_flags::DICT_VIEWS`]): it has pages in the step, each as the flag asks
/// ([`dictionary_in_own_pages`]). Its rows then cost an index and a view each, where each row's
/// source and length were written, read by the offsets and read again with its bytes by
/// `gp_copy_strings` (TPC-H lineitem's four short string columns).
fn dictionary_views(pages: &[PageDesc], k: usize, col: &ColumnDesc) -> bool {
    let mut of_column = pages.iter().filter(|p| p.column as usize == k).peekable();
    of_column.peek().is_some() && of_column.all(|p| dictionary_in_own_pages(p, col))
}

/// The segment of a view column's characters (see [`Kernel::StringsToViews`]): 0 for a column of 32-bit
/// offsets (one data buffer); for one whose characters passed the 32-bit offsets' limit (64-bit, see
/// [`widen_overflowing_views`]), half that limit, so that a buffer of two segments keeps every view's
/// offset (an `i32`) and end within it.
pub(super) fn view_segment<E: Executor>(exec: &E, c: &ColumnDesc) -> u64 {
    if c.out_width == 8 {
        exec.string_offset_limit().div_ceil(2)
    } else {
        0
    }
}

/// The data buffers of a view column cut into segments: buffer `j` holds its characters from segment
/// `j` on, two segments long (a copy each; the characters are then freed), so every string starting in
/// segment `j` and no longer than a segment lies in buffer `j`.
pub(super) fn view_data_buffers<E: Executor>(exec: &mut E, c: &ColumnDesc) -> Result<Vec<E::Buffer>> {
    let segment = view_segment(exec, c);
    let chars = c.chars_capacity;
    let mut buffers = Vec::new();
    let mut start = 0;
    while start < chars {
        let len = (chars - start).min(2 * segment);
        let dst = exec.alloc_uninit(len as usize)?;
        exec.launch(Kernel::CopyBytes {
            src: c.out_values + start,
            dst,
            n: len,
        })?;
        buffers.push(exec.take(dst)?);
        start += segment;
    }
    exec.free(c.out_values);
    Ok(buffers)
}

/// An error of a whole column's step (no page to blame): the step asks more of a layout than it holds.
pub(super) fn step_error(source: &ParquetSource, gpu: &[(usize, GpuLeaf)], gi: usize, message: String) -> Error {
    Error::InvalidRequest {
        location: Location {
            column: Some(source.column_path(gpu[gi].1.leaf)),
            ..source.location()
        },
        message,
    }
}

/// Columns decoded into views whose characters passed the 32-bit offsets' limit in this step
/// (`OffsetOverflow` after `gp_string_page_bases`) get 64-bit offsets instead, error cleared:
/// `true` when there is one, and the offsets are then to be computed again. Views index their
/// characters in segments ([`view_segment`]), so such a column still decodes into one array. Reads
/// the column descriptors only where a view column is in the step.
fn widen_overflowing_views<E: Executor>(
    exec: &mut E,
    cols_addr: u64,
    cols: &mut [ColumnDesc],
    kept: &[usize],
    gpu: &[(usize, GpuLeaf)],
) -> Result<bool> {
    let is_view = |k: usize| {
        let leaf = &gpu[kept[k]].1;
        leaf.physical == physical::BYTE_ARRAY && leaf.strings == StringOutput::Views
    };
    if !(0..cols.len()).any(is_view) {
        return Ok(false);
    }
    let mut now: Vec<ColumnDesc> = exec.read(cols_addr, cols.len())?;
    let mut widened = false;
    for (k, c) in now.iter_mut().enumerate() {
        if is_view(k) && c.error == ErrorCode::OffsetOverflow as u32 && c.out_width != 8 {
            exec.free(c.out_offsets);
            c.out_offsets = exec.alloc_uninit((c.num_rows as usize + 1) * 8)?;
            c.out_width = 8;
            c.error = 0;
            widened = true;
        }
    }
    if widened {
        exec.write(cols_addr, &now)?;
        cols.copy_from_slice(&now);
    }
    Ok(widened)
}

/// Reads the step's page and column error flags once; the first page error (in page order) wins.
#[allow(clippy::too_many_arguments)]
fn check_pages<E: Executor>(
    exec: &mut E,
    pages_addr: u64,
    n: u32,
    cols_addr: u64,
    ncols: u32,
    origins: &[PageOrigin],
    kept: &[usize],
    source: &ParquetSource,
    gpu: &[(usize, GpuLeaf)],
) -> Result<()> {
    let pages: Vec<PageDesc> = exec.read(pages_addr, n as usize)?;
    if let Some((i, p)) = pages.iter().enumerate().find(|(_, p)| p.error != 0) {
        return Err(kernel_error(source, gpu, &origins[i], p.error, p.error_detail));
    }
    let cols: Vec<ColumnDesc> = exec.read(cols_addr, ncols as usize)?;
    if let Some((k, c)) = cols.iter().enumerate().find(|(_, c)| c.error != 0) {
        let gi = kept[k];
        if c.error == ErrorCode::OffsetOverflow as u32 {
            // Not a damaged page: the step holds more characters than the Arrow type's 32-bit offsets.
            let message = format!(
                "more than {} bytes of strings in one step, more than {}'s 32-bit offsets hold: read fewer \
                 row groups a step (more decode steps), or as LargeUtf8, LargeBinary or views",
                exec.string_offset_limit(),
                gpu[gi].1.data_type
            );
            return Err(step_error(source, gpu, gi, message));
        }
        let what = ErrorCode::from_u32(c.error)
            .map(ErrorCode::describe)
            .unwrap_or("an unknown decoder error");
        return Err(Error::CorruptPage {
            location: Location {
                column: Some(source.column_path(gpu[gi].1.leaf)),
                ..source.location()
            },
            page: None,
            message: what.to_string(),
        });
    }
    Ok(())
}
