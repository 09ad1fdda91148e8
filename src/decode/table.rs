//! Decoded columns in Arrow layout, in device memory (or, for the host reference decoder, host
//! memory): the output of the GPU decoder.

use arrow::array::{ArrayData, ArrayRef, make_array};
use arrow::buffer::Buffer;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use serde::Serialize;

use crate::decode::exec::OwnedBuffer;
use crate::error::{Error, Location, Result};

/// One Arrow array whose buffers live in device memory, laid out exactly as Arrow's (validity bitmap,
/// then the type's buffers: values; or offsets and values), children for nested types. Offset 0.
#[derive(Debug)]
pub struct DeviceArray<B: OwnedBuffer = crate::gpu::DeviceBuffer<u8>> {
    /// The Arrow type.
    pub data_type: DataType,
    /// Elements.
    pub len: usize,
    /// Nulls.
    pub null_count: usize,
    /// LSB-first validity bitmap (at least `ceil(len / 8)` bytes, a multiple of [`BITMAP_PADDING`]);
    /// `None` when there is no null.
    pub validity: Option<B>,
    /// The type's buffers, in Arrow's order.
    pub buffers: Vec<B>,
    /// Children (struct fields, list items, ...).
    pub children: Vec<DeviceArray<B>>,
}

impl<B: OwnedBuffer> DeviceArray<B> {
    /// A host copy, as arrow-rs's array (validated).
    pub fn to_host(&self) -> Result<ArrayRef> {
        Ok(make_array(self.to_host_data()?))
    }

    fn to_host_data(&self) -> Result<ArrayData> {
        let fail = |e: arrow::error::ArrowError| Error::device("copying decoded columns to the host", e);
        let mut b = ArrayData::builder(self.data_type.clone()).len(self.len);
        if let Some(v) = &self.validity {
            b = b
                .null_bit_buffer(Some(Buffer::from_vec(v.to_host()?)))
                .null_count(self.null_count);
        }
        let layout = arrow::array::layout(&self.data_type);
        for (i, buf) in self.buffers.iter().enumerate() {
            let mut bytes = buf.to_host()?;
            // A device buffer may hold more than its values (an empty allocation holds one byte;
            // some are sized before the values are known): a fixed-width buffer's copy is cut to
            // whole values, as arrow's typed view of it requires.
            if let Some(arrow::array::BufferSpec::FixedWidth { byte_width, .. }) = layout.buffers.get(i)
                && *byte_width > 1
            {
                bytes.truncate(bytes.len() - bytes.len() % byte_width);
            }
            b = b.add_buffer(Buffer::from_vec(bytes));
        }
        for c in &self.children {
            b = b.add_child_data(c.to_host_data()?);
        }
        // Host copies are byte vectors: let arrow copy any whose start is misaligned for the type.
        b.align_buffers(true).build().map_err(fail)
    }

    /// Bytes of device memory held (all buffers, children included).
    pub(crate) fn memory_size(&self) -> usize {
        self.validity.as_ref().map_or(0, OwnedBuffer::len)
            + self.buffers.iter().map(OwnedBuffer::len).sum::<usize>()
            + self.children.iter().map(DeviceArray::memory_size).sum::<usize>()
    }
}

/// Where a column's steps ran, for the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum DecodedWhere {
    /// Pages decoded by the GPU kernels.
    Gpu,
    /// Decoded by arrow-rs on the host and uploaded, with the reason.
    Host(String),
}

/// One decoded column of a [`DeviceBatch`].
#[derive(Debug)]
pub struct DeviceColumn<B: OwnedBuffer = crate::gpu::DeviceBuffer<u8>> {
    /// Top-level field name.
    pub name: String,
    /// The array.
    pub array: DeviceArray<B>,
    /// Where it was decoded.
    pub decoded: DecodedWhere,
}

/// Decoded columns of a group of row groups: one column per top-level field of [`Self::schema`].
#[derive(Debug)]
pub struct DeviceBatch<B: OwnedBuffer = crate::gpu::DeviceBuffer<u8>> {
    /// The Arrow schema (arrow-rs's for this projection).
    pub schema: SchemaRef,
    /// Rows.
    pub num_rows: usize,
    /// Columns, in schema order.
    pub columns: Vec<DeviceColumn<B>>,
    /// The row groups decoded into this batch, in order.
    pub row_groups: Vec<usize>,
    /// The file, for errors.
    pub location: Location,
}

impl<B: OwnedBuffer> DeviceBatch<B> {
    /// A host copy as one record batch.
    pub fn to_host(&self) -> Result<RecordBatch> {
        let arrays = self
            .columns
            .iter()
            .map(|c| c.array.to_host())
            .collect::<Result<Vec<_>>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(self.num_rows));
        RecordBatch::try_new_with_options(self.schema.clone(), arrays, &options)
            .map_err(|e| Error::parquet(self.location.clone(), e))
    }

    /// Bytes of memory the columns hold.
    pub(crate) fn memory_size(&self) -> usize {
        self.columns.iter().map(|c| c.array.memory_size()).sum()
    }
}

/// Decoded columns of a whole read: batches in row-group order.
#[derive(Debug)]
pub struct DeviceTable<B: OwnedBuffer = crate::gpu::DeviceBuffer<u8>> {
    /// The Arrow schema.
    pub schema: SchemaRef,
    /// Batches, one per decode step.
    pub batches: Vec<DeviceBatch<B>>,
}

impl<B: OwnedBuffer> DeviceTable<B> {
    /// Rows over all batches.
    pub fn num_rows(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows).sum()
    }

    /// A host copy of all batches as one record batch.
    pub fn to_host(&self) -> Result<RecordBatch> {
        let batches = self
            .batches
            .iter()
            .map(DeviceBatch::to_host)
            .collect::<Result<Vec<_>>>()?;
        arrow::compute::concat_batches(&self.schema, &batches).map_err(|e| Error::device("joining decoded batches", e))
    }

    /// Host copies, one record batch per decode step.
    pub fn to_host_batches(&self) -> Result<Vec<RecordBatch>> {
        self.batches.iter().map(DeviceBatch::to_host).collect()
    }

    /// Bytes of memory the columns hold.
    pub fn memory_size(&self) -> usize {
        self.batches.iter().map(DeviceBatch::memory_size).sum()
    }
}

/// Bitmaps (validity, boolean values) are allocated to a multiple of this many bytes, zeroed past their
/// last bit, as Arrow recommends: consumers read them in whole words, and cuDF's import copies a
/// validity bitmap rounded up to 64 bytes.
pub(crate) const BITMAP_PADDING: usize = 64;

/// `bytes` followed by zeros up to a non-zero multiple of [`BITMAP_PADDING`].
fn padded_bitmap(bytes: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; bytes.len().next_multiple_of(BITMAP_PADDING).max(BITMAP_PADDING)];
    v[..bytes.len()].copy_from_slice(bytes);
    v
}

/// A boolean mask of `len` rows (no nulls) over the LSB-first `bits`, uploaded by `upload` (padded
/// to [`BITMAP_PADDING`] first, unless they already are): the mask a compaction takes.
pub(crate) fn mask_array<B: OwnedBuffer>(
    bits: &[u8],
    len: usize,
    upload: &mut dyn FnMut(&[u8]) -> Result<B>,
) -> Result<DeviceArray<B>> {
    let padded = bits.len() >= len.div_ceil(8) && !bits.is_empty() && bits.len().is_multiple_of(BITMAP_PADDING);
    let buffer = if padded {
        upload(bits)?
    } else {
        upload(&padded_bitmap(bits))?
    };
    Ok(DeviceArray {
        data_type: DataType::Boolean,
        len,
        null_count: 0,
        validity: None,
        buffers: vec![buffer],
        children: Vec::new(),
    })
}

/// A batch of no row of `schema`, its empty columns uploaded by `upload` (a step of a two-pass read
/// whose filter accepted no row has nothing of its other columns to decode).
pub(crate) fn empty_batch<B: OwnedBuffer>(
    schema: &SchemaRef,
    location: Location,
    upload: &mut dyn FnMut(&[u8]) -> Result<B>,
) -> Result<DeviceBatch<B>> {
    let columns = schema
        .fields()
        .iter()
        .map(|f| {
            let data = arrow::array::new_empty_array(f.data_type()).to_data();
            Ok(DeviceColumn {
                name: f.name().clone(),
                array: upload_array(&data, upload)?,
                decoded: DecodedWhere::Gpu,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(DeviceBatch {
        schema: schema.clone(),
        num_rows: 0,
        columns,
        row_groups: Vec::new(),
        location,
    })
}

/// Uploads a host array (decoded by arrow-rs) into `alloc`'s buffers, keeping its layout.
pub fn upload_array<B: OwnedBuffer>(
    array: &ArrayData,
    upload: &mut dyn FnMut(&[u8]) -> Result<B>,
) -> Result<DeviceArray<B>> {
    // Arrays from the host decoder start at offset 0 except after slicing; normalise so the device
    // layout is plain Arrow at offset 0.
    let owned;
    let data = if array.offset() != 0 {
        let a = make_array(array.clone());
        owned = arrow::compute::concat(&[a.as_ref()])
            .map_err(|e| Error::device("uploading a host-decoded column", e))?
            .to_data();
        &owned
    } else {
        array
    };
    let validity = match data.nulls() {
        Some(n) if n.null_count() > 0 => Some(upload(&padded_bitmap(n.buffer().as_slice()))?),
        _ => None,
    };
    let is_boolean = data.data_type() == &DataType::Boolean;
    let buffers = data
        .buffers()
        .iter()
        .map(|b| {
            if is_boolean {
                upload(&padded_bitmap(b.as_slice()))
            } else {
                upload(b.as_slice())
            }
        })
        .collect::<Result<Vec<_>>>()?;
    let children = data
        .child_data()
        .iter()
        .map(|c| upload_array(c, upload))
        .collect::<Result<Vec<_>>>()?;
    Ok(DeviceArray {
        data_type: data.data_type().clone(),
        len: data.len(),
        null_count: data.null_count(),
        validity,
        buffers,
        children,
    })
}

#[cfg(test)]
mod host_copy_tests {
    use super::*;

    /// A device buffer may be longer than its values (an empty allocation holds one byte; others
    /// are sized before the values are known): the host copy is cut to whole values, where arrow's
    /// typed view of a fixed-width buffer otherwise panics ("prefix.is_empty() && suffix.is_empty()",
    /// as two GPU filter tests did on the H200).
    #[test]
    fn buffers_longer_than_their_values_copy_back() {
        for (data_type, buffers) in [
            (DataType::Int32, vec![vec![0u8]]),
            (DataType::Decimal128(38, 2), vec![vec![0u8]]),
            (DataType::Utf8, vec![vec![0u8; 4], vec![0u8]]),
        ] {
            let a = DeviceArray::<Vec<u8>> {
                data_type: data_type.clone(),
                len: 0,
                null_count: 0,
                validity: None,
                buffers,
                children: Vec::new(),
            };
            let got = a.to_host().expect("host copy");
            assert_eq!(got.len(), 0);
            assert_eq!(got.data_type(), &data_type);
        }
        // Two strings, "ab" and "c", their offsets with a byte past the last (a padded allocation).
        let a = DeviceArray::<Vec<u8>> {
            data_type: DataType::Utf8,
            len: 2,
            null_count: 0,
            validity: None,
            buffers: vec![
                [0i32, 2, 3].iter().flat_map(|o| o.to_le_bytes()).chain([0]).collect(),
                b"abc".to_vec(),
            ],
            children: Vec::new(),
        };
        let got = a.to_host().expect("host copy");
        assert_eq!(
            got.as_any()
                .downcast_ref::<arrow::array::StringArray>()
                .expect("utf8")
                .value(1),
            "c"
        );
    }
}
