//! gpu-parquet check: what this machine and directory can do (to be written).
