//! `gpu-parquet inspect`: what a Parquet file holds and where, read from its (validated) metadata.
//!
//! Per column chunk: its byte range, codec, encodings, sizes, whether it has a dictionary page, and its
//! pages. Page sizes come from the offset index when the file has one (compressed sizes, page headers
//! included, no I/O); otherwise the chunk's page headers are walked with `parquet`'s
//! `SerializedPageReader`, which decompresses each page, so those sizes are uncompressed page bodies.
//! A chunk whose pages cannot be walked gets an error in its summary instead of failing the whole file.

use std::sync::Arc;

use parquet::basic::{ConvertedType, LogicalType, TimeUnit};
use parquet::column::page::Page;
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::serialized_reader::SerializedPageReader;
use serde::Serialize;

use crate::error::{Error, Location};
use crate::metadata::{ParquetSource, chunk_start};
use crate::panic_guard::contain_panics;

/// Everything `inspect` reports about a file.
#[derive(Debug, Clone, Serialize)]
pub struct FileSummary {
    /// The file.
    pub file: String,
    /// Its size in bytes.
    pub file_len: u64,
    /// The writer, as the file says.
    pub created_by: Option<String>,
    /// Parquet format version in the footer.
    pub version: i32,
    /// Total rows.
    pub num_rows: i64,
    /// The Parquet schema, as `parquet`'s schema printer renders it.
    pub schema: String,
    /// Leaf columns, in schema order.
    pub columns: Vec<LeafSummary>,
    /// Whether the footer references an offset index that was loaded.
    pub page_index: bool,
    /// Row groups, in file order.
    pub row_groups: Vec<RowGroupSummary>,
    /// What had to be corrected to read the file ([`ParquetSource::repairs`]); empty when nothing.
    pub repairs: Vec<String>,
    /// Where each top-level column is decoded when read on the GPU path, as its types decide (a
    /// page's encoding found at read time may still send a column to the host; the read reports it).
    pub decode: Vec<DecodeRoute>,
}

/// Where one top-level column decodes on the GPU path.
#[derive(Debug, Clone, Serialize)]
pub struct DecodeRoute {
    /// Field name.
    pub column: String,
    /// `gpu`, or `host` (arrow-rs on the CPU, the result uploaded).
    pub on: &'static str,
    /// Why on the host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Each top-level column's route (or, where the schema cannot be routed, one entry saying why).
fn decode_routes(source: &ParquetSource) -> Vec<DecodeRoute> {
    use crate::decode::pipeline::{Route, route_columns};
    let leaves: Vec<usize> = (0..source.metadata().file_metadata().schema_descr().num_columns()).collect();
    match route_columns(source, &leaves) {
        Ok((_, routes)) => routes
            .into_iter()
            .map(|r| {
                let reason = match r.route {
                    Route::Host(why) => Some(why),
                    Route::Gpu(_) | Route::GpuNested(_) => None,
                };
                DecodeRoute {
                    column: r.name,
                    on: if reason.is_some() { "host" } else { "gpu" },
                    reason,
                }
            })
            .collect(),
        Err(e) => vec![DecodeRoute {
            column: "(all)".into(),
            on: "host",
            reason: Some(e.to_string()),
        }],
    }
}

/// One leaf column of the schema.
#[derive(Debug, Clone, Serialize)]
pub struct LeafSummary {
    /// Leaf index.
    pub index: usize,
    /// Dotted path.
    pub path: String,
    /// Physical type.
    pub physical_type: String,
    /// Logical type, where there is one, readably (`String`, `Timestamp(MILLIS, utc)`,
    /// `Decimal(precision 10, scale 2)`, `Integer(32 bits, signed)`, `List`...).
    pub logical_type: Option<String>,
    /// The legacy converted type, where there is one (`UTF8`, `TIMESTAMP_MILLIS`,
    /// `DECIMAL(precision 9, scale 2)`, `LIST`...): older writers give only this.
    pub converted_type: Option<String>,
    /// Maximum definition level (0: required all the way down).
    pub max_def_level: i16,
    /// Maximum repetition level (0: not inside a list).
    pub max_rep_level: i16,
}

/// One row group.
#[derive(Debug, Clone, Serialize)]
pub struct RowGroupSummary {
    /// Row group index.
    pub index: usize,
    /// Rows.
    pub num_rows: i64,
    /// Total uncompressed size of its column data, as the footer says.
    pub total_byte_size: i64,
    /// Sum of its column chunks' compressed sizes.
    pub compressed_size: i64,
    /// Its column chunks, in schema order.
    pub chunks: Vec<ChunkSummary>,
}

/// One column chunk.
#[derive(Debug, Clone, Serialize)]
pub struct ChunkSummary {
    /// Leaf column index.
    pub column: usize,
    /// Dotted path.
    pub path: String,
    /// First byte in the file (its dictionary page, when it has one).
    pub start: u64,
    /// One past its last byte.
    pub end: u64,
    /// Compression codec.
    pub codec: String,
    /// Encodings used by its pages.
    pub encodings: Vec<String>,
    /// Values (including nulls and list levels).
    pub num_values: i64,
    /// Compressed size, page headers included.
    pub compressed_size: i64,
    /// Uncompressed size, page headers included.
    pub uncompressed_size: i64,
    /// Whether it starts with a dictionary page.
    pub dictionary_page: bool,
    /// Its pages.
    pub pages: PageSummary,
}

/// Where page sizes came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PageSizeSource {
    /// The offset index: compressed page sizes, headers included (no I/O needed).
    OffsetIndex,
    /// Walking the page headers: uncompressed page body sizes.
    PageHeaders,
    /// Neither worked (see [`PageSummary::error`]).
    Unavailable,
}

/// The pages of a column chunk.
#[derive(Debug, Clone, Serialize)]
pub struct PageSummary {
    /// Where the sizes came from.
    pub source: PageSizeSource,
    /// Data pages.
    pub data_pages: usize,
    /// Dictionary pages (0 or 1).
    pub dictionary_pages: usize,
    /// Size of each data page, in bytes (see [`PageSummary::source`] for what is counted).
    pub data_page_sizes: Vec<u64>,
    /// Why the pages could not be listed, where they could not.
    pub error: Option<String>,
}

/// Summarises `source`: schema, row groups, and every column chunk with its pages.
///
/// Never fails: a chunk whose pages cannot be listed carries the reason in [`PageSummary::error`].
pub fn inspect(source: &ParquetSource) -> FileSummary {
    let md = source.metadata();
    let fm = md.file_metadata();
    let schema_descr = fm.schema_descr();
    let mut schema = Vec::new();
    parquet::schema::printer::print_schema(&mut schema, fm.schema());
    let columns = (0..schema_descr.num_columns())
        .map(|i| {
            let c = schema_descr.column(i);
            LeafSummary {
                index: i,
                path: c.path().string(),
                physical_type: c.physical_type().to_string(),
                logical_type: c.logical_type_ref().map(logical_type_name),
                converted_type: converted_type_name(c.converted_type(), c.type_precision(), c.type_scale()),
                max_def_level: c.max_def_level(),
                max_rep_level: c.max_rep_level(),
            }
        })
        .collect();
    let page_index = md.page_index().is_some_and(|p| p.has_offset_indexes());
    let checked = source.checked_chunks();
    // Pages are walked with the chunks the decoder sees (checked lengths, usable dictionary offsets).
    let walk_meta = crate::decode::host::decode_metadata(source).unwrap_or_else(|_| md.clone());
    let row_groups = md
        .row_groups()
        .iter()
        .enumerate()
        .map(|(g, rg)| RowGroupSummary {
            index: g,
            num_rows: rg.num_rows(),
            total_byte_size: rg.total_byte_size(),
            compressed_size: rg.compressed_size(),
            chunks: rg
                .columns()
                .iter()
                .enumerate()
                .map(|(c, chunk)| {
                    let range = checked[g][c];
                    let walk_chunk = walk_meta
                        .row_groups()
                        .get(g)
                        .and_then(|rg| rg.columns().get(c))
                        .unwrap_or(chunk);
                    let pages = pages(source, g, c, walk_chunk, rg.num_rows());
                    ChunkSummary {
                        column: c,
                        path: chunk.column_path().string(),
                        start: range.offset,
                        end: range.offset + range.len,
                        // The codec's name: `compression()` would add a level (`ZSTD(ZstdLevel(1))`)
                        // that the file does not record.
                        codec: chunk.compression_codec().to_string(),
                        encodings: chunk.encodings().map(|e| e.to_string()).collect(),
                        num_values: chunk.num_values(),
                        compressed_size: chunk.compressed_size(),
                        uncompressed_size: chunk.uncompressed_size(),
                        dictionary_page: pages.dictionary_pages > 0,
                        pages,
                    }
                })
                .collect(),
        })
        .collect();
    FileSummary {
        file: source.path().display().to_string(),
        file_len: source.len(),
        created_by: fm.created_by().map(str::to_string),
        version: fm.version(),
        num_rows: fm.num_rows(),
        schema: String::from_utf8_lossy(&schema).into_owned(),
        columns,
        page_index,
        row_groups,
        repairs: source.repairs().to_vec(),
        decode: decode_routes(source),
    }
}

/// A logical type as people write it: `String`, `Timestamp(MILLIS, utc)`,
/// `Decimal(precision 10, scale 2)`, `Integer(32 bits, signed)`, `List`, `Map`... (`parquet` has no
/// `Display` for it, and its `Debug` form is Rust syntax).
pub(crate) fn logical_type_name(t: &LogicalType) -> String {
    let unit = |u: &TimeUnit| match u {
        TimeUnit::MILLIS => "MILLIS",
        TimeUnit::MICROS => "MICROS",
        TimeUnit::NANOS => "NANOS",
    };
    let utc = |adjusted: bool| if adjusted { "utc" } else { "local" };
    match t {
        LogicalType::String => "String".into(),
        LogicalType::Map => "Map".into(),
        LogicalType::List => "List".into(),
        LogicalType::Enum => "Enum".into(),
        LogicalType::Decimal(d) => format!("Decimal(precision {}, scale {})", d.precision, d.scale),
        LogicalType::Date => "Date".into(),
        LogicalType::Time(t) => format!("Time({}, {})", unit(&t.unit), utc(t.is_adjusted_to_u_t_c)),
        LogicalType::Timestamp(t) => format!("Timestamp({}, {})", unit(&t.unit), utc(t.is_adjusted_to_u_t_c)),
        LogicalType::Integer(i) => format!(
            "Integer({} bits, {})",
            i.bit_width,
            if i.is_signed { "signed" } else { "unsigned" }
        ),
        LogicalType::Unknown => "Null".into(),
        LogicalType::Json => "JSON".into(),
        LogicalType::Bson => "BSON".into(),
        LogicalType::Uuid => "UUID".into(),
        LogicalType::Float16 => "Float16".into(),
        LogicalType::Variant(v) => match v.specification_version {
            Some(version) => format!("Variant(specification version {version})"),
            None => "Variant".into(),
        },
        LogicalType::Geometry(g) => match &g.crs {
            Some(crs) => format!("Geometry(crs {crs})"),
            None => "Geometry".into(),
        },
        LogicalType::Geography(g) => {
            // `algorithm()` gives the spec's default (spherical) when the file sets none.
            let edges = g
                .algorithm()
                .map_or_else(|| "spherical".to_string(), |a| a.to_string().to_lowercase());
            match &g.crs {
                Some(crs) => format!("Geography(crs {crs}, {edges} edges)"),
                None => format!("Geography({edges} edges)"),
            }
        }
        LogicalType::File => "File".into(),
        LogicalType::_Unknown { field_id } => format!("unknown logical type (Thrift field {field_id})"),
    }
}

/// A converted type's name, with precision and scale for `DECIMAL`; `None` for `NONE`.
pub(crate) fn converted_type_name(t: ConvertedType, precision: i32, scale: i32) -> Option<String> {
    match t {
        ConvertedType::NONE => None,
        ConvertedType::DECIMAL => Some(format!("DECIMAL(precision {precision}, scale {scale})")),
        // `Display` gives the spec's name (`UTF8`, `TIMESTAMP_MILLIS`, `MAP_KEY_VALUE`).
        other => Some(other.to_string()),
    }
}

fn pages(source: &ParquetSource, g: usize, c: usize, chunk: &ColumnChunkMetaData, rows: i64) -> PageSummary {
    let dictionary_pages = usize::from(chunk_start(chunk) < chunk.data_page_offset());
    if let Some(oi) = source.metadata().page_index().and_then(|p| p.offset_index(g, c)) {
        let sizes: Vec<u64> = oi
            .page_locations()
            .iter()
            .map(|l| l.compressed_page_size.max(0) as u64)
            .collect();
        return PageSummary {
            source: PageSizeSource::OffsetIndex,
            data_pages: sizes.len(),
            dictionary_pages,
            data_page_sizes: sizes,
            error: None,
        };
    }
    match walk_pages(source, g, chunk, rows) {
        Ok((dict, sizes)) => PageSummary {
            source: PageSizeSource::PageHeaders,
            data_pages: sizes.len(),
            dictionary_pages: dict,
            data_page_sizes: sizes,
            error: None,
        },
        Err(e) => PageSummary {
            source: PageSizeSource::Unavailable,
            data_pages: 0,
            dictionary_pages,
            data_page_sizes: Vec::new(),
            error: Some(e.to_string()),
        },
    }
}

/// Reads a chunk's pages from the file: (dictionary pages, uncompressed size of each data page).
fn walk_pages(
    source: &ParquetSource,
    g: usize,
    chunk: &ColumnChunkMetaData,
    rows: i64,
) -> crate::Result<(usize, Vec<u64>)> {
    let location = Location::chunk(source.path(), chunk.column_path().string(), g);
    let file = source
        .file()
        .try_clone()
        .map_err(|e| Error::io(location.clone(), "cannot duplicate the file handle", e))?;
    // The page reader panics on some malformed headers; contain that.
    contain_panics(&location, || {
        let reader = SerializedPageReader::new(Arc::new(file), chunk, rows.max(0) as usize, None)
            .map_err(|e| Error::parquet(location.clone(), e))?;
        let mut dict = 0;
        let mut sizes = Vec::new();
        for page in reader {
            match page.map_err(|e| Error::parquet(location.clone(), e))? {
                Page::DictionaryPage { .. } => dict += 1,
                p => sizes.push(p.buffer().len() as u64),
            }
        }
        Ok((dict, sizes))
    })
}

/// Formats a byte count compactly (`1.5 MiB`).
fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Lays out `rows` (the first is the header) as left-aligned text columns, two spaces apart.
fn table(rows: &[Vec<String>], indent: &str) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect();
        out.push_str(indent);
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

impl FileSummary {
    /// The summary as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// The summary as text: header, schema, then one table of column chunks per row group.
    pub fn to_table(&self) -> String {
        let mut out = format!(
            "file: {} ({} bytes)\ncreated by: {}\nformat version {}, {} rows, {} row groups, {} leaf columns, page index: {}\n\nschema:\n",
            self.file,
            self.file_len,
            self.created_by.as_deref().unwrap_or("(not recorded)"),
            self.version,
            self.num_rows,
            self.row_groups.len(),
            self.columns.len(),
            if self.page_index { "yes" } else { "no" },
        );
        for line in self.schema.lines() {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
        let host: Vec<&DecodeRoute> = self.decode.iter().filter(|r| r.on == "host").collect();
        if host.is_empty() {
            out.push_str(&format!("\nGPU decode: all {} top-level columns\n", self.decode.len()));
        } else {
            out.push_str(&format!(
                "\nGPU decode: {} of {} top-level columns; on the host:\n",
                self.decode.len() - host.len(),
                self.decode.len()
            ));
            for r in host {
                out.push_str(&format!("  {}: {}\n", r.column, r.reason.as_deref().unwrap_or("")));
            }
        }
        if !self.repairs.is_empty() {
            out.push_str("\ncorrected to read this file:\n");
            for r in &self.repairs {
                out.push_str(&format!("  {r}\n"));
            }
        }
        for rg in &self.row_groups {
            out.push_str(&format!(
                "\nrow group {}: {} rows, {} compressed, {} uncompressed\n",
                rg.index,
                rg.num_rows,
                human(rg.compressed_size.max(0) as u64),
                human(rg.total_byte_size.max(0) as u64)
            ));
            let mut rows = vec![
                [
                    "column",
                    "bytes [start, end)",
                    "codec",
                    "encodings",
                    "dict",
                    "pages",
                    "page size min/mean/max",
                    "compressed",
                    "uncompressed",
                ]
                .map(String::from)
                .to_vec(),
            ];
            for c in &rg.chunks {
                let p = &c.pages;
                let sizes = match (p.data_page_sizes.iter().min(), p.data_page_sizes.iter().max()) {
                    (Some(min), Some(max)) => {
                        let mean = p.data_page_sizes.iter().sum::<u64>() / p.data_page_sizes.len() as u64;
                        let kind = if p.source == PageSizeSource::PageHeaders {
                            " (uncompr.)"
                        } else {
                            ""
                        };
                        format!("{}/{}/{}{kind}", human(*min), human(mean), human(*max))
                    }
                    _ => p.error.clone().map(|e| format!("unavailable: {e}")).unwrap_or_default(),
                };
                rows.push(vec![
                    c.path.clone(),
                    format!("[{}, {})", c.start, c.end),
                    c.codec.clone(),
                    c.encodings.join(","),
                    if c.dictionary_page { "yes" } else { "no" }.into(),
                    p.data_pages.to_string(),
                    sizes,
                    human(c.compressed_size.max(0) as u64),
                    human(c.uncompressed_size.max(0) as u64),
                ]);
            }
            out.push_str(&table(&rows, "  "));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance;

    #[test]
    fn inspect_matches_the_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let files = conformance::write_test_files(dir.path()).unwrap();
        let source = ParquetSource::open(&files.snappy).unwrap();
        let s = inspect(&source);
        let md = source.metadata();
        assert_eq!(s.row_groups.len(), md.num_row_groups());
        assert_eq!(s.columns.len(), 8);
        assert_eq!(s.columns[5].path, "point.x");
        assert_eq!(s.columns[7].max_rep_level, 1);
        for (g, rg) in s.row_groups.iter().enumerate() {
            assert_eq!(rg.num_rows, md.row_group(g).num_rows());
            for (c, chunk) in rg.chunks.iter().enumerate() {
                let m = md.row_group(g).column(c);
                assert_eq!(chunk.end - chunk.start, m.compressed_size() as u64);
                assert_eq!(chunk.codec, "SNAPPY");
                assert!(chunk.pages.data_pages >= 1, "{chunk:?}");
                assert_eq!(chunk.pages.data_pages, chunk.pages.data_page_sizes.len());
                assert!(chunk.pages.error.is_none(), "{chunk:?}");
            }
        }
        // The writer's default offset index gives compressed sizes that, with the dictionary page,
        // add up to at most the chunk.
        assert!(s.page_index);
        let c = &s.row_groups[0].chunks[3];
        assert!(
            c.dictionary_page && c.encodings.iter().any(|e| e.contains("DICTIONARY")),
            "{c:?}"
        );
        assert!(c.pages.data_page_sizes.iter().sum::<u64>() <= c.end - c.start);
        let text = s.to_table();
        assert!(text.contains("row group 2: 1000 rows"), "{text}");
        assert!(text.contains("point.y") && text.contains("message"), "{text}");
        let json: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap();
        assert_eq!(json["row_groups"][1]["chunks"][0]["path"], "id");
    }

    #[test]
    fn walking_page_headers_agrees_with_the_offset_index() {
        let dir = tempfile::tempdir().unwrap();
        let files = conformance::write_test_files(dir.path()).unwrap();
        for path in [&files.mixed, &files.snappy] {
            let source = ParquetSource::open(path).unwrap();
            let md = source.metadata();
            for g in 0..md.num_row_groups() {
                for c in 0..md.row_group(g).num_columns() {
                    let chunk = md.row_group(g).column(c);
                    let (dict, sizes) = walk_pages(&source, g, chunk, md.row_group(g).num_rows()).unwrap();
                    let from_index = pages(&source, g, c, chunk, md.row_group(g).num_rows());
                    assert_eq!(from_index.source, PageSizeSource::OffsetIndex);
                    assert_eq!(sizes.len(), from_index.data_pages, "{path:?} rg {g} col {c}");
                    assert_eq!(dict, from_index.dictionary_pages, "{path:?} rg {g} col {c}");
                }
            }
        }
    }

    #[test]
    fn a_corrupt_chunk_is_reported_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let files = conformance::write_test_files(dir.path()).unwrap();
        let source = ParquetSource::open(&files.snappy).unwrap();
        // Overwrite the first chunk's first page header with garbage, then walk it.
        let start = source.checked_chunks()[0][0].offset;
        let mut bytes = std::fs::read(&files.snappy).unwrap();
        for b in &mut bytes[start as usize..start as usize + 16] {
            *b = 0xff;
        }
        std::fs::write(&files.snappy, &bytes).unwrap();
        let md = source.metadata();
        let r = walk_pages(&source, 0, md.row_group(0).column(0), md.row_group(0).num_rows());
        assert!(r.is_err(), "{r:?}");
        let e = r.unwrap_err().to_string();
        assert!(e.contains("column 'id', row group 0"), "{e}");
    }
}
