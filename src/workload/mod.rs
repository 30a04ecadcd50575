//! What the client sends and when: length distributions, traces of requests read from files,
//! and the client's arrival process.

pub mod client;
pub mod datafile;
pub mod dist;
pub mod trace;
