//! File summary for gpu-parquet inspect (to be written).
