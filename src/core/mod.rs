//! Leaf helpers that every stage may use and that use nothing of the crate:
//! byte and percentage formatting ([`units`]; [`style`] carries an
//! invocation's `--bytes` and color choices), a serializer for streamed
//! sequences ([`serial`]), text and hashing helpers ([`text`], [`hash`]),
//! tables of distinct values held once and a set of addresses ([`table`]),
//! a stable sort of large items by their indexes ([`order`]),
//! the process's memory allocator ([`alloc`]) and read-only file mappings
//! (`mapped`, on Linux).

pub mod alloc;
pub mod hash;
#[cfg(target_os = "linux")]
pub mod mapped;
pub mod order;
pub mod serial;
pub mod style;
pub mod table;
pub mod text;
pub mod units;
