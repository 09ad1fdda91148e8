//! Host decode (to be written).
