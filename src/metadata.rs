//! Loading a file's Parquet metadata and checking it against the file before anything trusts it.
//!
//! `parquet`'s own accessors assume well-formed metadata (`ColumnChunkMetaData::byte_range` asserts on
//! negative offsets), so [`validate_column_chunks`] checks every column chunk's offsets and lengths
//! against the file's size first and returns the checked ranges; planning only ever uses those.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::file::metadata::{ColumnChunkMetaData, PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};

use crate::error::{Error, Location, Result};
use crate::panic_guard::contain_panics;

/// A Parquet file opened for reading: its path, handle, size and validated metadata.
#[derive(Debug, Clone)]
pub struct ParquetSource {
    path: PathBuf,
    file: Arc<File>,
    len: u64,
    metadata: Arc<ParquetMetaData>,
    chunks: Arc<Vec<Vec<CheckedChunk>>>,
}

/// A column chunk whose byte range was checked against the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckedChunk {
    /// First byte: the dictionary page offset where the chunk has a usable one, else the first data page.
    pub offset: u64,
    /// Total compressed size of the chunk, page headers included.
    pub len: u64,
}

impl ParquetSource {
    /// Opens `path`, reads its footer (and page index, when present) and validates every column chunk.
    ///
    /// Anything but a regular file (a directory, FIFO, device or socket) is refused with an error that
    /// says what it is, without blocking: the type is checked before opening, and the open itself is
    /// non-blocking (opening a FIFO for reading would otherwise wait for a writer).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = path.as_ref().to_path_buf();
        let stat = std::fs::metadata(&path).map_err(|e| Error::io(Location::file(&path), "cannot stat", e))?;
        refuse_non_regular(&path, &stat)?;
        // O_NONBLOCK keeps the open from waiting should the path have become a FIFO since the check
        // above; on a regular file it changes nothing (reads of regular files never block on it), so it
        // stays set.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .map_err(|e| Error::io(Location::file(&path), "cannot open", e))?;
        let stat = file
            .metadata()
            .map_err(|e| Error::io(Location::file(&path), "cannot stat", e))?;
        refuse_non_regular(&path, &stat)?;
        let len = stat.len();
        let location = Location::file(&path);
        let metadata = contain_panics(&location, || {
            ParquetMetaDataReader::new()
                .with_page_index_policy(PageIndexPolicy::Optional)
                .parse_and_finish(&file)
                .map_err(|e| {
                    // With its `encryption` feature, `parquet` recognises both kinds of encrypted file
                    // (encrypted footer, or plaintext footer with encrypted columns) and says it cannot
                    // decrypt; say plainly what that means for the user.
                    let message = e.to_string();
                    if message.contains("decrypt") {
                        Error::parquet(
                            location.clone(),
                            format!(
                                "the file is encrypted (Parquet modular encryption) and gpu-parquet takes no decryption keys: {message}"
                            ),
                        )
                    } else {
                        Error::parquet(location.clone(), e)
                    }
                })
        })?;
        Self::from_parts(path, file, len, Arc::new(metadata))
    }

    /// Builds a source from already loaded metadata (validated here against `len`).
    pub fn from_parts(path: PathBuf, file: File, len: u64, metadata: Arc<ParquetMetaData>) -> Result<Self> {
        let chunks = validate_column_chunks(&path, len, &metadata)?;
        Ok(Self {
            path,
            file: Arc::new(file),
            len,
            metadata,
            chunks: Arc::new(chunks),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// The open file (shared; reads use positional I/O, so sharing is safe).
    pub fn file(&self) -> &Arc<File> {
        &self.file
    }
    /// The file's size in bytes when it was opened.
    pub fn len(&self) -> u64 {
        self.len
    }
    /// Whether the file is empty (never true for a file that opened: Parquet needs a footer).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The file's metadata.
    pub fn metadata(&self) -> &Arc<ParquetMetaData> {
        &self.metadata
    }
    /// Checked byte ranges, `[row_group][leaf column]`.
    pub fn checked_chunks(&self) -> &[Vec<CheckedChunk>] {
        &self.chunks
    }
    /// The dotted path of leaf column `column`.
    pub fn column_path(&self, column: usize) -> String {
        self.metadata
            .file_metadata()
            .schema_descr()
            .column(column)
            .path()
            .string()
    }
    /// A location naming this file.
    pub fn location(&self) -> Location {
        Location::file(&self.path)
    }
}

/// An error saying what `path` is, unless `stat` says it is a regular file.
fn refuse_non_regular(path: &Path, stat: &std::fs::Metadata) -> Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let t = stat.file_type();
    let what = if t.is_file() {
        return Ok(());
    } else if t.is_dir() {
        "is a directory"
    } else if t.is_fifo() {
        "is a FIFO (named pipe)"
    } else if t.is_char_device() {
        "is a character device"
    } else if t.is_block_device() {
        "is a block device"
    } else if t.is_socket() {
        "is a socket"
    } else {
        "is not a regular file"
    };
    Err(Error::InvalidRequest {
        location: Location::file(path),
        message: format!("{what}, not a Parquet file"),
    })
}

/// The start of a column chunk: its dictionary page when it has a usable one, else its first data page.
///
/// Some writers store `dictionary_page_offset = 0` for chunks without a dictionary (offset 0 holds the
/// magic `PAR1`, so it can never be a page); like pyarrow and cuDF we ignore such an offset, and any
/// dictionary offset that does not lie before the first data page. Others store `data_page_offset = 0`
/// next to a real dictionary offset (column_chunk_key_value_metadata.parquet); there the dictionary
/// offset is the only usable start, as arrow-rs assumes.
pub fn chunk_start(chunk: &ColumnChunkMetaData) -> i64 {
    let data = chunk.data_page_offset();
    match chunk.dictionary_page_offset() {
        Some(d) if d > 0 && (d < data || data <= 0) => d,
        _ => data,
    }
}

/// Checks every column chunk's range against the file size and against the other chunks of its row
/// group, returning the checked ranges `[row_group][column]`.
///
/// Errors name the file, column and row group: a negative offset or length, a range that overflows,
/// one that starts inside the leading magic or ends inside the footer, or two chunks that overlap.
pub fn validate_column_chunks(
    path: &Path,
    file_len: u64,
    metadata: &ParquetMetaData,
) -> Result<Vec<Vec<CheckedChunk>>> {
    // Column data lies between the leading "PAR1" and the footer (metadata, its length, "PAR1").
    const MAGIC: u64 = 4;
    let footer_len = 8u64;
    let data_end = file_len.saturating_sub(footer_len);
    let mut all = Vec::with_capacity(metadata.num_row_groups());
    let mut spans: Vec<(u64, u64, usize, usize)> = Vec::new();
    for (g, rg) in metadata.row_groups().iter().enumerate() {
        let mut row = Vec::with_capacity(rg.num_columns());
        for (c, chunk) in rg.columns().iter().enumerate() {
            let loc = || Location::chunk(path, chunk.column_path().string(), g);
            let start = chunk_start(chunk);
            let size = chunk.compressed_size();
            if start < 0 {
                return Err(Error::invalid_metadata(
                    loc(),
                    format!("negative column chunk offset {start}"),
                ));
            }
            if size < 0 {
                return Err(Error::invalid_metadata(
                    loc(),
                    format!("negative column chunk length {size}"),
                ));
            }
            let (start, size) = (start as u64, size as u64);
            let end = start.checked_add(size).ok_or_else(|| {
                Error::invalid_metadata(loc(), format!("column chunk range {start} + {size} overflows"))
            })?;
            if start < MAGIC && size > 0 {
                return Err(Error::invalid_metadata(
                    loc(),
                    format!("column chunk starts at offset {start}, inside the file's leading magic"),
                ));
            }
            if end > data_end {
                return Err(Error::invalid_metadata(
                    loc(),
                    format!(
                        "column chunk [{start}, {end}) extends past the column data, which ends at byte {data_end} of a {file_len}-byte file"
                    ),
                ));
            }
            if size > 0 {
                spans.push((start, end, g, c));
            }
            row.push(CheckedChunk {
                offset: start,
                len: size,
            });
        }
        all.push(row);
    }
    spans.sort_unstable();
    for pair in spans.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if b.0 < a.1 {
            let name = |g: usize, c: usize| metadata.row_group(g).column(c).column_path().string();
            return Err(Error::invalid_metadata(
                Location::chunk(path, name(b.2, b.3), b.2),
                format!(
                    "column chunk [{}, {}) overlaps column '{}' of row group {} at [{}, {})",
                    b.0,
                    b.1,
                    name(a.2, a.3),
                    a.2,
                    a.0,
                    a.1
                ),
            ));
        }
    }
    Ok(all)
}
