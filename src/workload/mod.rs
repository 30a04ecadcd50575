//! What the client sends and when: length distributions and the client's arrival process.

pub mod client;
pub mod dist;
