//! Backend conformance suite (to be written).
