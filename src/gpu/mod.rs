//! GPU context and CUDA/cuFile wrappers (presence-checked, panic-free) (to be written).
