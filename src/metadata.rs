//! Loading a file's Parquet metadata and checking it against the file before anything trusts it.
//!
//! `parquet`'s own accessors assume well-formed metadata (`ColumnChunkMetaData::byte_range` asserts on
//! negative offsets), so [`validate_column_chunks`] checks every column chunk's offsets and lengths
//! against the file's size first and returns the checked ranges; planning only ever uses those.
//!
//! Two writer bugs are corrected, each only once the file's own bytes confirm it, and each reported in
//! [`ParquetSource::repairs`]:
//! - a footer that `parquet` cannot decode because an optional field has another Thrift type than
//!   parquet.thrift gives its id (a writer's private field under an id the format later assigned) is
//!   decoded without that field, as Thrift's generated readers (parquet-cpp, parquet-mr) skip it; a
//!   *required* field of the wrong type is an error naming it;
//! - parquet-mr before 1.2.9 left the dictionary page header out of `total_compressed_size`
//!   (PARQUET-816): where walking the chunk's page headers ends exactly that header's length past the
//!   footer's size, with all the chunk's values, the checked range is the real one.

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
    repairs: Arc<Vec<String>>,
    /// Size and modification time when opened, to notice a file rewritten while it is read.
    opened_as: Option<(u64, std::time::SystemTime)>,
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
        // above. Once fstat says it is a regular file the flag is cleared again: reads of regular files
        // never block anyway, but cuFile refuses to register a descriptor that carries it
        // (CU_FILE_INVALID_FILE_OPEN_FLAG, seen on the H200 machine).
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .map_err(|e| Error::io(Location::file(&path), "cannot open", e))?;
        let stat = file
            .metadata()
            .map_err(|e| Error::io(Location::file(&path), "cannot stat", e))?;
        refuse_non_regular(&path, &stat)?;
        clear_nonblocking(&file).map_err(|e| Error::io(Location::file(&path), "cannot clear O_NONBLOCK", e))?;
        let len = stat.len();
        let location = Location::file(&path);
        refuse_unframed(&path, &file, len)?;
        refuse_unwalkable_footer(&path, &file, len)?;
        let (metadata, repairs) = contain_panics(&location, || {
            match ParquetMetaDataReader::new()
                .with_page_index_policy(PageIndexPolicy::Optional)
                .parse_and_finish(&file)
            {
                Ok(metadata) => Ok((metadata, Vec::new())),
                Err(e) => {
                    // With its `encryption` feature, `parquet` recognises both kinds of encrypted file
                    // (encrypted footer, or plaintext footer with encrypted columns) and says it cannot
                    // decrypt; say plainly what that means for the user.
                    let message = e.to_string();
                    if message.contains("decrypt") {
                        return Err(Error::parquet(
                            location.clone(),
                            format!(
                                "the file is encrypted (Parquet modular encryption) and gpu-parquet takes no decryption keys: {message}"
                            ),
                        ));
                    }
                    // A footer field of the wrong type derails `parquet`'s decoder; Thrift's own
                    // readers skip such a field (see the function).
                    match reread_footer_without_mistyped_fields(&path, &file, len)? {
                        Some(found) => Ok(found),
                        None => Err(Error::parquet(location.clone(), e)),
                    }
                }
            }
        })?;
        Self::build(path, file, len, Arc::new(metadata), repairs)
    }

    /// Builds a source from already loaded metadata (validated here against `len`).
    pub fn from_parts(path: PathBuf, file: File, len: u64, metadata: Arc<ParquetMetaData>) -> Result<Self> {
        Self::build(path, file, len, metadata, Vec::new())
    }

    /// Validates the chunks, lengthening those an old parquet-mr wrote too short (see
    /// [`ParquetSource::repairs`]); `repairs` says what was already corrected in the footer.
    fn build(
        path: PathBuf,
        file: File,
        len: u64,
        metadata: Arc<ParquetMetaData>,
        mut repairs: Vec<String>,
    ) -> Result<Self> {
        let mut chunks = validate_column_chunks(&path, len, &metadata)?;
        if writer_may_omit_dictionary_header(metadata.file_metadata().created_by()) {
            let data_end = len.saturating_sub(8);
            for (g, (rg, row)) in metadata.row_groups().iter().zip(chunks.iter_mut()).enumerate() {
                for (meta, chunk) in rg.columns().iter().zip(row.iter_mut()) {
                    if chunk.len == 0 {
                        continue;
                    }
                    if let Some(h) =
                        dictionary_header_left_out(&file, chunk.offset, chunk.len, data_end, meta.num_values())
                    {
                        repairs.push(format!(
                            "row group {g}, column '{}': total_compressed_size {} leaves out the {h}-byte dictionary page header (parquet-mr before 1.2.9, PARQUET-816); the page headers, walked, end {h} bytes later and hold the chunk's {} values, so the chunk is read as {} bytes",
                            meta.column_path().string(),
                            chunk.len,
                            meta.num_values(),
                            chunk.len + h
                        ));
                        chunk.len += h;
                    }
                }
            }
            check_overlaps(&path, &metadata, &chunks)?;
        }
        // Taken after the footer was read: a change from here on is caught by `check_unchanged`.
        let opened_as = file.metadata().ok().and_then(|m| Some((m.len(), m.modified().ok()?)));
        Ok(Self {
            path,
            file: Arc::new(file),
            len,
            metadata,
            chunks: Arc::new(chunks),
            repairs: Arc::new(repairs),
            opened_as,
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
    /// What had to be corrected to read this file, one line each, empty for a well-formed file: footer
    /// fields of the wrong Thrift type that were skipped (the metadata is decoded without them), and
    /// column chunks longer than their footer says because an old parquet-mr left the dictionary page
    /// header out of `total_compressed_size` (their checked length is the real one; the metadata keeps
    /// the footer's).
    pub fn repairs(&self) -> &[String] {
        &self.repairs
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

    /// Fails if the open file's size or modification time differ from when it was opened: bytes read
    /// from a file rewritten in place may mix two versions, and nothing else would notice (page
    /// checksums are optional). A file replaced by a rename is not a change: the open descriptor still
    /// reads the old one. Readers call it after every fetch.
    pub(crate) fn check_unchanged(&self) -> Result<()> {
        let Some((len, modified)) = self.opened_as else {
            return Ok(());
        };
        let now = self
            .file
            .metadata()
            .map_err(|e| Error::io(self.location(), "cannot stat", e))?;
        let what = if now.len() != len {
            format!("its size went from {len} to {} bytes", now.len())
        } else if now.modified().ok() != Some(modified) {
            "it was modified".to_string()
        } else {
            return Ok(());
        };
        Err(Error::FileChanged {
            location: self.location(),
            message: format!("the file changed while it was being read ({what}); read it again"),
        })
    }
}

/// Refuses, in plain words, a file that cannot hold a Parquet footer: shorter than the leading magic,
/// footer length and trailing magic; not ending in `PAR1` (or `PARE`, an encrypted footer); or with
/// a footer length past its start. (`parquet` says "Corrupt footer", or "need 827474264" for a file
/// of `PAR1PAR1`, reading the magic as a length.)
fn refuse_unframed(path: &Path, file: &File, len: u64) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let location = Location::file(path);
    if len < 12 {
        return Err(Error::invalid_metadata(
            location,
            format!("too short to be a Parquet file ({len} bytes)"),
        ));
    }
    let mut tail = [0u8; 8];
    file.read_exact_at(&mut tail, len - 8)
        .map_err(|e| Error::io(location.clone(), "cannot read the footer", e))?;
    if &tail[4..] != b"PAR1" && &tail[4..] != b"PARE" {
        return Err(Error::invalid_metadata(
            location,
            "not a Parquet file (no PAR1 magic at its end)",
        ));
    }
    let footer_len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if footer_len > len - 12 {
        return Err(Error::invalid_metadata(
            location,
            format!("footer length {footer_len} exceeds the file ({len} bytes)"),
        ));
    }
    Ok(())
}

/// The Thrift bytes of a plaintext footer (the file ends in its length and `PAR1`), or `None` for a
/// file too short to hold one, an encrypted footer (`PARE`) or a length past the file.
fn read_plain_footer(path: &Path, file: &File, len: u64) -> Result<Option<Vec<u8>>> {
    use std::os::unix::fs::FileExt;
    let read = |buf: &mut [u8], at: u64| {
        file.read_exact_at(buf, at)
            .map_err(|e| Error::io(Location::file(path), "cannot read the footer", e))
    };
    if len < 12 {
        return Ok(None);
    }
    let mut tail = [0u8; 8];
    read(&mut tail, len - 8)?;
    let meta_len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if &tail[4..] != b"PAR1" || meta_len > len - 12 {
        return Ok(None);
    }
    let mut footer = vec![0u8; meta_len as usize];
    read(&mut footer, len - 8 - meta_len)?;
    Ok(Some(footer))
}

/// Walks a plaintext footer's Thrift once, in time linear in its length, before `parquet` decodes
/// it: `parquet` 60 skips a list or map of booleans as if its elements took no bytes, so a 1 KiB
/// footer claiming lists of 2^31 booleans made it loop for seconds (found by the `footer_plan` fuzz
/// target: 0.8 s for 1,340 bytes; more such lists, minutes). A footer no Thrift writer produces is
/// refused here, saying why; an encrypted footer, or a file too short to hold one, is left to `parquet`.
fn refuse_unwalkable_footer(path: &Path, file: &File, len: u64) -> Result<()> {
    let location = Location::file(path);
    let Some(footer) = read_plain_footer(path, file, len)? else {
        return Ok(());
    };
    let meta_len = footer.len();
    match compact::Reader::new(&footer, 0).fields(0) {
        Ok(_) => Ok(()),
        Err(compact::WalkError::Eof) => Err(Error::invalid_metadata(
            location,
            format!("the footer ({meta_len} bytes) ends inside a Thrift value"),
        )),
        Err(compact::WalkError::Malformed(m)) => Err(Error::invalid_metadata(
            location,
            format!("the footer is not valid Thrift: {m}"),
        )),
    }
}

/// Clears `O_NONBLOCK` on `file`'s descriptor.
fn clear_nonblocking(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fd is open for as long as `file` is borrowed; F_GETFL only reads the descriptor's flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above; F_SETFL changes only this open file description's status flags.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
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
pub(crate) fn chunk_start(chunk: &ColumnChunkMetaData) -> i64 {
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
    for (g, rg) in metadata.row_groups().iter().enumerate() {
        let mut row = Vec::with_capacity(rg.num_columns());
        for chunk in rg.columns() {
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
            row.push(CheckedChunk {
                offset: start,
                len: size,
            });
        }
        all.push(row);
    }
    check_overlaps(path, metadata, &all)?;
    Ok(all)
}

/// Errors if two non-empty chunks of `chunks` (`[row_group][column]` of `metadata`) overlap.
fn check_overlaps(path: &Path, metadata: &ParquetMetaData, chunks: &[Vec<CheckedChunk>]) -> Result<()> {
    let mut spans: Vec<(u64, u64, usize, usize)> = Vec::new();
    for (g, row) in chunks.iter().enumerate() {
        for (c, k) in row.iter().enumerate() {
            if k.len > 0 {
                spans.push((k.offset, k.offset.saturating_add(k.len), g, c));
            }
        }
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
    Ok(())
}

/// Just enough of the Thrift compact protocol to walk Parquet's footer and page headers without
/// trusting them: every read is bounds-checked and nesting is limited, so malformed bytes give an
/// error, never a panic or a runaway allocation.
mod compact {
    use std::ops::Range;

    pub(crate) const BOOL_TRUE: u8 = 1;
    pub(crate) const BOOL_FALSE: u8 = 2;
    pub(crate) const I8: u8 = 3;
    pub(crate) const I16: u8 = 4;
    pub(crate) const I32: u8 = 5;
    pub(crate) const I64: u8 = 6;
    pub const DOUBLE: u8 = 7;
    pub(crate) const BINARY: u8 = 8;
    pub(crate) const LIST: u8 = 9;
    pub(crate) const SET: u8 = 10;
    pub(crate) const MAP: u8 = 11;
    pub(crate) const STRUCT: u8 = 12;

    /// Deepest nesting accepted (Parquet's own structures nest a handful of levels).
    const MAX_DEPTH: usize = 64;

    /// Why bytes could not be walked.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) enum WalkError {
        /// The bytes ended inside a value.
        Eof,
        /// Something no Thrift writer produces.
        Malformed(String),
    }

    pub type Result<T> = std::result::Result<T, WalkError>;

    /// The Thrift name of a compact type code.
    pub(crate) fn type_name(t: u8) -> &'static str {
        match t {
            BOOL_TRUE | BOOL_FALSE => "bool",
            I8 => "i8",
            I16 => "i16",
            I32 => "i32",
            I64 => "i64",
            DOUBLE => "double",
            BINARY => "binary",
            LIST => "list",
            SET => "set",
            MAP => "map",
            STRUCT => "struct",
            _ => "unknown type",
        }
    }

    /// Whether two field type codes are the same Thrift type (booleans carry their value in the code).
    pub(crate) fn same_type(a: u8, b: u8) -> bool {
        a == b || (matches!(a, BOOL_TRUE | BOOL_FALSE) && matches!(b, BOOL_TRUE | BOOL_FALSE))
    }

    /// A struct field: its id, type code and the bytes of its value.
    #[derive(Debug, Clone)]
    pub(crate) struct Field {
        pub id: i16,
        pub ty: u8,
        pub value: Range<usize>,
    }

    /// A cursor over compact-protocol bytes.
    pub struct Reader<'a> {
        pub buf: &'a [u8],
        pub pos: usize,
    }

    impl<'a> Reader<'a> {
        pub fn new(buf: &'a [u8], pos: usize) -> Self {
            Self { buf, pos }
        }

        fn byte(&mut self) -> Result<u8> {
            let b = *self.buf.get(self.pos).ok_or(WalkError::Eof)?;
            self.pos += 1;
            Ok(b)
        }

        fn varint(&mut self) -> Result<u64> {
            let mut v = 0u64;
            for shift in (0..70).step_by(7) {
                let b = self.byte()?;
                v |= u64::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
                if b & 0x80 == 0 {
                    return Ok(v);
                }
            }
            Err(WalkError::Malformed("a varint longer than 10 bytes".into()))
        }

        pub(crate) fn zigzag(&mut self) -> Result<i64> {
            let v = self.varint()?;
            Ok((v >> 1) as i64 ^ -((v & 1) as i64))
        }

        fn advance(&mut self, n: usize) -> Result<()> {
            let end = self
                .pos
                .checked_add(n)
                .filter(|&e| e <= self.buf.len())
                .ok_or(WalkError::Eof)?;
            self.pos = end;
            Ok(())
        }

        /// The next field's id and type, or `None` at the struct's end.
        pub(crate) fn field_header(&mut self, last_id: i16) -> Result<Option<(i16, u8)>> {
            let b = self.byte()?;
            if b == 0 {
                return Ok(None);
            }
            let (delta, ty) = (b >> 4, b & 0x0f);
            let id = if delta == 0 {
                i16::try_from(self.zigzag()?).map_err(|_| WalkError::Malformed("a field id out of range".into()))?
            } else {
                last_id
                    .checked_add(i16::from(delta))
                    .ok_or_else(|| WalkError::Malformed("a field id overflows".into()))?
            };
            Ok(Some((id, ty)))
        }

        /// A list or set header: element type and count.
        pub(crate) fn list_header(&mut self) -> Result<(u8, usize)> {
            let b = self.byte()?;
            let n = match b >> 4 {
                15 => self.varint()?,
                short => u64::from(short),
            };
            // Every element takes at least one byte, except booleans, which take exactly one.
            let n = usize::try_from(n)
                .ok()
                .filter(|&n| n <= self.buf.len().saturating_sub(self.pos))
                .ok_or_else(|| WalkError::Malformed(format!("a list of {n} elements in fewer bytes")))?;
            Ok((b & 0x0f, n))
        }

        /// Skips one value of type `ty`: a field's value when `in_list` is false (a boolean field has
        /// none, its value is in its type code), an element's otherwise.
        pub(crate) fn skip(&mut self, ty: u8, in_list: bool, depth: usize) -> Result<()> {
            if depth > MAX_DEPTH {
                return Err(WalkError::Malformed(format!("nesting deeper than {MAX_DEPTH}")));
            }
            match ty {
                BOOL_TRUE | BOOL_FALSE => {
                    if in_list {
                        self.byte()?;
                    }
                }
                I8 => {
                    self.byte()?;
                }
                I16 | I32 | I64 => {
                    self.varint()?;
                }
                DOUBLE => self.advance(8)?,
                BINARY => {
                    let n = usize::try_from(self.varint()?).map_err(|_| WalkError::Eof)?;
                    self.advance(n)?;
                }
                LIST | SET => {
                    let (et, n) = self.list_header()?;
                    for _ in 0..n {
                        self.skip(et, true, depth + 1)?;
                    }
                }
                MAP => {
                    let n = self.varint()?;
                    // Every entry takes at least two bytes (a key and a value).
                    if n > (self.buf.len().saturating_sub(self.pos) / 2) as u64 {
                        return Err(WalkError::Malformed(format!("a map of {n} entries in fewer bytes")));
                    }
                    if n > 0 {
                        let kv = self.byte()?;
                        for _ in 0..n {
                            self.skip(kv >> 4, true, depth + 1)?;
                            self.skip(kv & 0x0f, true, depth + 1)?;
                        }
                    }
                }
                STRUCT => {
                    self.fields(depth + 1)?;
                }
                other => return Err(WalkError::Malformed(format!("unknown Thrift type code {other}"))),
            }
            Ok(())
        }

        /// Reads a struct's fields (the cursor ends past its stop byte).
        pub(crate) fn fields(&mut self, depth: usize) -> Result<Vec<Field>> {
            let mut out = Vec::new();
            let mut last = 0i16;
            while let Some((id, ty)) = self.field_header(last)? {
                let start = self.pos;
                self.skip(ty, false, depth)?;
                out.push(Field {
                    id,
                    ty,
                    value: start..self.pos,
                });
                last = id;
            }
            Ok(out)
        }

        /// Reads a binary value.
        pub(crate) fn binary(&mut self) -> Result<&'a [u8]> {
            let n = usize::try_from(self.varint()?).map_err(|_| WalkError::Eof)?;
            let start = self.pos;
            self.advance(n)?;
            Ok(&self.buf[start..self.pos])
        }
    }

    /// Appends a field header for `id` of type `ty`, after a field with id `last`.
    pub(crate) fn write_field_header(out: &mut Vec<u8>, last: i16, id: i16, ty: u8) {
        match id.checked_sub(last) {
            Some(delta @ 1..=15) => out.push(((delta as u8) << 4) | ty),
            _ => {
                out.push(ty);
                let mut v = ((i32::from(id) << 1) ^ (i32::from(id) >> 31)) as u32;
                loop {
                    if v < 0x80 {
                        out.push(v as u8);
                        break;
                    }
                    out.push((v as u8 & 0x7f) | 0x80);
                    v >>= 7;
                }
            }
        }
    }
}

// ---- Footer fields of the wrong Thrift type ----------------------------------------------------------

/// The footer structures whose fields are checked against parquet.thrift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FooterStruct {
    FileMetaData,
    RowGroup,
    ColumnChunk,
    ColumnMetaData,
}

impl FooterStruct {
    fn name(self) -> &'static str {
        match self {
            FooterStruct::FileMetaData => "FileMetaData",
            FooterStruct::RowGroup => "RowGroup",
            FooterStruct::ColumnChunk => "ColumnChunk",
            FooterStruct::ColumnMetaData => "ColumnMetaData",
        }
    }

    /// Field `id` as parquet.thrift defines it: (type code, required, name); `None` for ids it leaves
    /// undefined (skipped by every reader, so never a problem).
    fn field(self, id: i16) -> Option<(u8, bool, &'static str)> {
        use compact::*;
        Some(match (self, id) {
            (FooterStruct::FileMetaData, 1) => (I32, true, "version"),
            (FooterStruct::FileMetaData, 2) => (LIST, true, "schema"),
            (FooterStruct::FileMetaData, 3) => (I64, true, "num_rows"),
            (FooterStruct::FileMetaData, 4) => (LIST, true, "row_groups"),
            (FooterStruct::FileMetaData, 5) => (LIST, false, "key_value_metadata"),
            (FooterStruct::FileMetaData, 6) => (BINARY, false, "created_by"),
            (FooterStruct::FileMetaData, 7) => (LIST, false, "column_orders"),
            (FooterStruct::FileMetaData, 8) => (STRUCT, false, "encryption_algorithm"),
            (FooterStruct::FileMetaData, 9) => (BINARY, false, "footer_signing_key_metadata"),
            (FooterStruct::RowGroup, 1) => (LIST, true, "columns"),
            (FooterStruct::RowGroup, 2) => (I64, true, "total_byte_size"),
            (FooterStruct::RowGroup, 3) => (I64, true, "num_rows"),
            (FooterStruct::RowGroup, 4) => (LIST, false, "sorting_columns"),
            (FooterStruct::RowGroup, 5) => (I64, false, "file_offset"),
            (FooterStruct::RowGroup, 6) => (I64, false, "total_compressed_size"),
            (FooterStruct::RowGroup, 7) => (I16, false, "ordinal"),
            (FooterStruct::ColumnChunk, 1) => (BINARY, false, "file_path"),
            (FooterStruct::ColumnChunk, 2) => (I64, true, "file_offset"),
            (FooterStruct::ColumnChunk, 3) => (STRUCT, false, "meta_data"),
            (FooterStruct::ColumnChunk, 4) => (I64, false, "offset_index_offset"),
            (FooterStruct::ColumnChunk, 5) => (I32, false, "offset_index_length"),
            (FooterStruct::ColumnChunk, 6) => (I64, false, "column_index_offset"),
            (FooterStruct::ColumnChunk, 7) => (I32, false, "column_index_length"),
            (FooterStruct::ColumnChunk, 8) => (STRUCT, false, "crypto_metadata"),
            (FooterStruct::ColumnChunk, 9) => (BINARY, false, "encrypted_column_metadata"),
            (FooterStruct::ColumnMetaData, 1) => (I32, true, "type"),
            (FooterStruct::ColumnMetaData, 2) => (LIST, true, "encodings"),
            (FooterStruct::ColumnMetaData, 3) => (LIST, true, "path_in_schema"),
            (FooterStruct::ColumnMetaData, 4) => (I32, true, "codec"),
            (FooterStruct::ColumnMetaData, 5) => (I64, true, "num_values"),
            (FooterStruct::ColumnMetaData, 6) => (I64, true, "total_uncompressed_size"),
            (FooterStruct::ColumnMetaData, 7) => (I64, true, "total_compressed_size"),
            (FooterStruct::ColumnMetaData, 8) => (LIST, false, "key_value_metadata"),
            (FooterStruct::ColumnMetaData, 9) => (I64, true, "data_page_offset"),
            (FooterStruct::ColumnMetaData, 10) => (I64, false, "index_page_offset"),
            (FooterStruct::ColumnMetaData, 11) => (I64, false, "dictionary_page_offset"),
            (FooterStruct::ColumnMetaData, 12) => (STRUCT, false, "statistics"),
            (FooterStruct::ColumnMetaData, 13) => (LIST, false, "encoding_stats"),
            (FooterStruct::ColumnMetaData, 14) => (I64, false, "bloom_filter_offset"),
            (FooterStruct::ColumnMetaData, 15) => (I32, false, "bloom_filter_length"),
            (FooterStruct::ColumnMetaData, 16) => (STRUCT, false, "size_statistics"),
            (FooterStruct::ColumnMetaData, 17) => (STRUCT, false, "geospatial_statistics"),
            _ => return None,
        })
    }

    /// The checked structure field `id` holds (`true`: a list of them).
    fn child(self, id: i16) -> Option<(FooterStruct, bool)> {
        match (self, id) {
            (FooterStruct::FileMetaData, 4) => Some((FooterStruct::RowGroup, true)),
            (FooterStruct::RowGroup, 1) => Some((FooterStruct::ColumnChunk, true)),
            (FooterStruct::ColumnChunk, 3) => Some((FooterStruct::ColumnMetaData, false)),
            _ => None,
        }
    }
}

/// Where in the footer a field is.
#[derive(Debug, Clone, Default)]
struct FooterPlace {
    row_group: Option<usize>,
    column: Option<usize>,
    /// The column's `path_in_schema`, dotted, once seen.
    path: Option<String>,
}

/// A footer field whose Thrift type is not the one parquet.thrift gives its id.
#[derive(Debug, Clone)]
struct MistypedField {
    place: FooterPlace,
    structure: FooterStruct,
    id: i16,
    name: &'static str,
    expected: u8,
    found: u8,
}

impl MistypedField {
    /// What is wrong, and where (row group and column) when `with_place`.
    fn describe(&self, with_place: bool) -> String {
        let mut at = Vec::new();
        if let Some(g) = self.place.row_group {
            at.push(format!("row group {g}"));
        }
        match (&self.place.path, self.place.column) {
            (Some(p), _) => at.push(format!("column '{p}'")),
            (None, Some(c)) => at.push(format!("column {c}")),
            (None, None) => {}
        }
        let at = if at.is_empty() || !with_place {
            String::new()
        } else {
            format!("{}: ", at.join(", "))
        };
        let article = |t: u8| {
            let name = compact::type_name(t);
            if name.starts_with('i') || name.starts_with('u') {
                format!("an {name}")
            } else {
                format!("a {name}")
            }
        };
        format!(
            "{at}footer field {}.{} ({}) is {} in the file, but parquet.thrift makes it {}",
            self.structure.name(),
            self.id,
            self.name,
            article(self.found),
            article(self.expected)
        )
    }
}

/// Why a footer could not be re-encoded.
enum FooterFault {
    /// Not walkable Thrift: leave the footer decoder's own error standing.
    Walk,
    /// A required field has the wrong type: the file cannot be read.
    Required(MistypedField),
}

impl From<compact::WalkError> for FooterFault {
    fn from(_: compact::WalkError) -> Self {
        FooterFault::Walk
    }
}

/// The dotted `path_in_schema` among a ColumnMetaData's fields, where it is a list of strings.
fn path_in_schema(buf: &[u8], fields: &[compact::Field]) -> Option<String> {
    let f = fields.iter().find(|f| f.id == 3 && f.ty == compact::LIST)?;
    let mut r = compact::Reader::new(buf, f.value.start);
    let (et, n) = r.list_header().ok()?;
    if et != compact::BINARY {
        return None;
    }
    let parts = (0..n)
        .map(|_| r.binary().map(|b| String::from_utf8_lossy(b).into_owned()))
        .collect::<compact::Result<Vec<_>>>()
        .ok()?;
    Some(parts.join("."))
}

/// Re-encodes the struct `s` at `buf[pos..]` into `out` without its optional fields of the wrong type
/// (recording them in `dropped`), descending into row groups, column chunks and their metadata.
/// Returns where the struct ended.
fn rewrite_footer_struct(
    buf: &[u8],
    pos: usize,
    s: FooterStruct,
    place: &FooterPlace,
    out: &mut Vec<u8>,
    dropped: &mut Vec<MistypedField>,
) -> std::result::Result<usize, FooterFault> {
    let mut r = compact::Reader::new(buf, pos);
    let fields = r.fields(1)?;
    let end = r.pos;
    let mut place = place.clone();
    if s == FooterStruct::ColumnMetaData {
        place.path = path_in_schema(buf, &fields).or(place.path);
    }
    let mut last = 0i16;
    for f in &fields {
        if let Some((expected, required, name)) = s.field(f.id)
            && !compact::same_type(f.ty, expected)
        {
            let m = MistypedField {
                place: place.clone(),
                structure: s,
                id: f.id,
                name,
                expected,
                found: f.ty,
            };
            if required {
                return Err(FooterFault::Required(m));
            }
            dropped.push(m);
            continue;
        }
        compact::write_field_header(out, last, f.id, f.ty);
        last = f.id;
        match s.child(f.id) {
            Some((child, false)) => {
                rewrite_footer_struct(buf, f.value.start, child, &place, out, dropped)?;
            }
            Some((child, true)) => {
                let mut lr = compact::Reader::new(buf, f.value.start);
                let (et, n) = lr.list_header()?;
                out.extend_from_slice(&buf[f.value.start..lr.pos]);
                if et != compact::STRUCT {
                    // Not a list of structs: nothing to descend into; the decoder will say what it thinks.
                    out.extend_from_slice(&buf[lr.pos..f.value.end]);
                    continue;
                }
                let mut p = lr.pos;
                for i in 0..n {
                    let mut at = place.clone();
                    match s {
                        FooterStruct::FileMetaData => at.row_group = Some(i),
                        _ => at.column = Some(i),
                    }
                    p = rewrite_footer_struct(buf, p, child, &at, out, dropped)?;
                }
            }
            None => out.extend_from_slice(&buf[f.value.clone()]),
        }
    }
    out.push(0);
    Ok(end)
}

/// Reads `file`'s footer again when `parquet` could not decode it, and decodes it without the optional
/// fields whose Thrift type contradicts parquet.thrift, as Thrift's generated readers (parquet-cpp,
/// parquet-mr) skip them; arrow-rs instead decodes such a field as the type it expects and loses its
/// place. Dremio 3.2, for one, writes a list under ColumnMetaData field 15, which parquet.thrift has
/// since given to `bloom_filter_length` (an i32): dict-page-offset-zero.parquet.
///
/// `Ok(None)`: nothing of the kind was found (or the footer is not walkable), so the decoder's error
/// stands. `Err`: a *required* field has the wrong type, so the file cannot be read; the error says
/// which. `Ok(Some)`: the metadata, and one line per dropped field.
fn reread_footer_without_mistyped_fields(
    path: &Path,
    file: &File,
    len: u64,
) -> Result<Option<(ParquetMetaData, Vec<String>)>> {
    let location = Location::file(path);
    let Some(footer) = read_plain_footer(path, file, len)? else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(footer.len());
    let mut dropped = Vec::new();
    match rewrite_footer_struct(
        &footer,
        0,
        FooterStruct::FileMetaData,
        &FooterPlace::default(),
        &mut out,
        &mut dropped,
    ) {
        Ok(_) => {}
        Err(FooterFault::Walk) => return Ok(None),
        Err(FooterFault::Required(m)) => {
            // The location names the column chunk where the footer does; the message then needn't.
            let (location, what) = match (&m.place.path, m.place.row_group) {
                (Some(p), Some(g)) => (Location::chunk(path, p.clone(), g), m.describe(false)),
                _ => (location, m.describe(true)),
            };
            return Err(Error::invalid_metadata(
                location,
                format!("{what}; a required field cannot be skipped, so the file cannot be read"),
            ));
        }
    }
    if dropped.is_empty() {
        return Ok(None);
    }
    let Ok(metadata) = ParquetMetaDataReader::decode_metadata(&out) else {
        return Ok(None);
    };
    let mut reader =
        ParquetMetaDataReader::new_with_metadata(metadata).with_page_index_policy(PageIndexPolicy::Optional);
    let metadata = reader
        .read_page_indexes(file)
        .and_then(|()| reader.finish())
        .map_err(|e| Error::parquet(location.clone(), e))?;
    let notes = dropped
        .iter()
        .map(|m| {
            format!(
                "{}: skipped, as Thrift readers skip a field of an unexpected type (the writer's own field)",
                m.describe(true)
            )
        })
        .collect();
    Ok(Some((metadata, notes)))
}

// ---- Chunk lengths without the dictionary page header (PARQUET-816) ----------------------------------

/// Whether `created_by` names a parquet-mr before 1.2.9, whose chunks' `total_compressed_size` left
/// out the dictionary page header (PARQUET-816, IMPALA-694). Like parquet-cpp, a parquet-mr that gives
/// no version counts as old.
fn writer_may_omit_dictionary_header(created_by: Option<&str>) -> bool {
    let Some(created_by) = created_by else { return false };
    let mut words = created_by.split_whitespace();
    if words.next() != Some("parquet-mr") {
        return false;
    }
    match (words.next(), words.next()) {
        (Some("version"), Some(v)) => {
            let mut parts = v
                .split(|c: char| !c.is_ascii_digit())
                .map(|p| p.parse::<u64>().unwrap_or(0));
            let version = (
                parts.next().unwrap_or(0),
                parts.next().unwrap_or(0),
                parts.next().unwrap_or(0),
            );
            version < (1, 2, 9)
        }
        _ => true,
    }
}

/// What a page header says: page type, its own length, the page body's length, and (data pages) values.
#[derive(Debug, Clone, Copy)]
struct PageHead {
    page_type: i64,
    header_len: u64,
    body_len: u64,
    values: i64,
}

const DATA_PAGE: i64 = 0;
const DICTIONARY_PAGE: i64 = 2;
const DATA_PAGE_V2: i64 = 3;

/// Reads the page header at `pos` (not past `limit`); `None` if it is not a well-formed one.
fn read_page_head(file: &File, pos: u64, limit: u64) -> Option<PageHead> {
    use std::os::unix::fs::FileExt;
    let avail = limit.checked_sub(pos)?;
    let mut want = avail.min(256);
    loop {
        let mut buf = vec![0u8; want as usize];
        file.read_exact_at(&mut buf, pos).ok()?;
        let mut r = compact::Reader::new(&buf, 0);
        match r.fields(1) {
            Ok(fields) => return page_head(&buf, &fields, r.pos as u64),
            // A header with large statistics: read more, up to 1 MiB.
            Err(compact::WalkError::Eof) if want < avail && want < 1 << 20 => want = (want * 16).min(avail),
            Err(_) => return None,
        }
    }
}

fn page_head(buf: &[u8], fields: &[compact::Field], header_len: u64) -> Option<PageHead> {
    let int = |f: &compact::Field| compact::Reader::new(buf, f.value.start).zigzag().ok();
    let get = |id: i16| fields.iter().find(|f| f.id == id && f.ty == compact::I32);
    let page_type = int(get(1)?)?;
    let body_len = u64::try_from(int(get(3)?)?).ok()?;
    let mut values = 0;
    if let Some(h) = fields
        .iter()
        .find(|f| (f.id == 5 || f.id == 8) && f.ty == compact::STRUCT)
    {
        let mut r = compact::Reader::new(buf, h.value.start);
        let inner = r.fields(2).ok()?;
        let n = inner.iter().find(|f| f.id == 1 && f.ty == compact::I32)?;
        values = int(n)?;
    }
    Some(PageHead {
        page_type,
        header_len,
        body_len,
        values,
    })
}

/// Walks the page headers of one column chunk's bytes with the linear Thrift walker, before
/// `parquet`'s page reader sees them: `parquet` 60 skips lists and maps of booleans in a header as if
/// their elements took no bytes, so an 11 KB file whose page header declares such a list took 5.7 s
/// to refuse in a release build (found by the `whole_file` fuzz target). `Err((offset, why))` for a
/// header no Thrift writer produces, at `offset` in `chunk`; anything else (a truncated header, a
/// size the walk cannot follow) ends the walk and is left to `parquet`, which reports it. `Ok` holds
/// the data pages walked past, for the checks that read their bodies.
pub(crate) fn check_page_headers(chunk: &[u8]) -> std::result::Result<Vec<DataPageHead>, (usize, String)> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < chunk.len() {
        let mut r = compact::Reader::new(chunk, pos);
        let fields = match r.fields(0) {
            Ok(f) => f,
            Err(compact::WalkError::Malformed(m)) => return Err((pos, m)),
            Err(compact::WalkError::Eof) => return Ok(out),
        };
        let int = |f: &compact::Field| compact::Reader::new(chunk, f.value.start).zigzag().ok();
        let get = |fields: &[compact::Field], id: i16| {
            fields.iter().find(|f| f.id == id && f.ty == compact::I32).and_then(int)
        };
        let Some(body) = get(&fields, 3).and_then(|v| usize::try_from(v).ok()) else {
            return Ok(out);
        };
        let body_start = r.pos;
        let inner = |id: i16| {
            fields
                .iter()
                .find(|f| f.id == id && f.ty == compact::STRUCT)
                .and_then(|h| compact::Reader::new(chunk, h.value.start).fields(1).ok())
        };
        let unc = get(&fields, 2).and_then(|v| usize::try_from(v).ok());
        let page = |num_values, encoding, v2, v1_levels_rle| {
            Some(DataPageHead {
                header_start: pos,
                body_start,
                body_len: body,
                uncompressed_len: unc?,
                num_values,
                encoding,
                v2,
                v1_levels_rle,
            })
        };
        let head = match get(&fields, 1) {
            // Level encodings: RLE is 3; a missing field reads as RLE, as parquet does.
            Some(DATA_PAGE) => inner(5).and_then(|h| {
                let rle = get(&h, 3).is_none_or(|e| e == 3) && get(&h, 4).is_none_or(|e| e == 3);
                page(get(&h, 1)?, get(&h, 2)?, None, rle)
            }),
            Some(DATA_PAGE_V2) => inner(8).and_then(|h| {
                let compressed = !h.iter().any(|f| f.id == 7 && f.ty == compact::BOOL_FALSE);
                let def = usize::try_from(get(&h, 5)?).ok()?;
                let rep = usize::try_from(get(&h, 6)?).ok()?;
                page(get(&h, 1)?, get(&h, 4)?, Some((def, rep, compressed)), true)
            }),
            _ => None,
        };
        out.extend(head);
        match body_start.checked_add(body) {
            Some(next) if next > pos => pos = next,
            _ => return Ok(out),
        }
    }
    Ok(out)
}

/// A data page of a chunk, as far as its header says (from [`check_page_headers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DataPageHead {
    /// Where its header starts in the chunk.
    pub header_start: usize,
    /// Where its body starts in the chunk.
    pub body_start: usize,
    /// The body's length in the chunk (`compressed_page_size`).
    pub body_len: usize,
    /// `uncompressed_page_size`.
    pub uncompressed_len: usize,
    /// `num_values` (nulls included).
    pub num_values: i64,
    /// The values' encoding (Thrift enum value).
    pub encoding: i64,
    /// Data page v2: the level sections' lengths (before the values, never compressed) and whether the
    /// values are compressed. `None` for v1 pages, whose whole body is compressed.
    pub v2: Option<(usize, usize, bool)>,
    /// Data page v1: whether both level encodings are RLE (each level section then starts with its
    /// 4-byte length); false for the deprecated BIT_PACKED levels.
    pub v1_levels_rle: bool,
}

/// For a chunk at `[start, start + len)` whose first page is a dictionary page: that page header's
/// length, when the chunk's pages, walked header by header, end exactly that many bytes past `len`
/// (and not at `len`) and their data pages hold the chunk's `num_values`. `None` otherwise, or when
/// anything cannot be read.
fn dictionary_header_left_out(file: &File, start: u64, len: u64, data_end: u64, num_values: i64) -> Option<u64> {
    let first = read_page_head(file, start, data_end)?;
    if first.page_type != DICTIONARY_PAGE {
        return None;
    }
    let claimed_end = start.checked_add(len)?;
    let real_end = claimed_end.checked_add(first.header_len)?;
    if real_end > data_end {
        return None;
    }
    let (mut pos, mut values, mut head) = (start, 0i64, first);
    loop {
        if matches!(head.page_type, DATA_PAGE | DATA_PAGE_V2) {
            values = values.checked_add(head.values)?;
        }
        pos = pos.checked_add(head.header_len)?.checked_add(head.body_len)?;
        if pos == claimed_end || pos >= real_end {
            break;
        }
        head = read_page_head(file, pos, real_end)?;
    }
    (pos == real_end && values == num_values).then_some(first.header_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_parquet_mr_versions_are_the_ones_checked_for_short_chunks() {
        for (created_by, old) in [
            (Some("parquet-mr"), true),
            (Some("parquet-mr version 1.2.8 (build abc)"), true),
            (Some("parquet-mr version 1.2.8-SNAPSHOT"), true),
            (Some("parquet-mr version 1.2.9 (build abc)"), false),
            (
                Some("parquet-mr version 1.12.0-201812210311360288-a86293f (build x)"),
                false,
            ),
            (Some("parquet-cpp version 1.0.0"), false),
            (Some("parquet-rs version 0.3.0"), false),
            (None, false),
        ] {
            assert_eq!(writer_may_omit_dictionary_header(created_by), old, "{created_by:?}");
        }
    }

    #[test]
    fn field_headers_round_trip_short_and_long() {
        for (last, id) in [(0i16, 1i16), (3, 18), (20, 4), (0, -5), (100, 32000)] {
            let mut out = Vec::new();
            compact::write_field_header(&mut out, last, id, compact::I64);
            let mut r = compact::Reader::new(&out, 0);
            assert_eq!(r.field_header(last), Ok(Some((id, compact::I64))), "{last} -> {id}");
            assert_eq!(r.pos, out.len());
        }
    }

    /// A struct with fields 1 (i32 7), 15 (a list of one i32, where ColumnMetaData wants an i32) and
    /// 16 (a struct with field 1, i64 -2).
    fn column_metadata_with_a_list_at_15() -> Vec<u8> {
        vec![0x15, 0x0e, 0xe9, 0x15, 0x02, 0x1c, 0x16, 0x03, 0x00, 0x00]
    }

    #[test]
    fn a_mistyped_optional_field_is_dropped_and_the_next_field_id_kept() {
        let buf = column_metadata_with_a_list_at_15();
        let (mut out, mut dropped) = (Vec::new(), Vec::new());
        let end = rewrite_footer_struct(
            &buf,
            0,
            FooterStruct::ColumnMetaData,
            &FooterPlace::default(),
            &mut out,
            &mut dropped,
        )
        .ok()
        .expect("walkable");
        assert_eq!(end, buf.len());
        assert_eq!(dropped.len(), 1);
        assert_eq!((dropped[0].id, dropped[0].found), (15, compact::LIST));
        // Field 1 as before; field 16 now follows field 1 (long form header), its value unchanged.
        let mut r = compact::Reader::new(&out, 0);
        let fields = r.fields(0).expect("re-encoded bytes walk");
        let ids: Vec<(i16, u8)> = fields.iter().map(|f| (f.id, f.ty)).collect();
        assert_eq!(ids, vec![(1, compact::I32), (16, compact::STRUCT)]);
        assert_eq!(&out[fields[1].value.clone()], &buf[6..9]);
        assert_eq!(r.pos, out.len());
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_walkers() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for len in 0..400usize {
            let buf: Vec<u8> = (0..len % 97)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            let (mut out, mut dropped) = (Vec::new(), Vec::new());
            let _ = rewrite_footer_struct(
                &buf,
                0,
                FooterStruct::FileMetaData,
                &FooterPlace::default(),
                &mut out,
                &mut dropped,
            );
            let mut r = compact::Reader::new(&buf, 0);
            if let Ok(fields) = r.fields(0) {
                let _ = page_head(&buf, &fields, r.pos as u64);
            }
        }
    }
}
