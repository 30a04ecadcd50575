//! Built-in catalog of GPUs and models (being written).
