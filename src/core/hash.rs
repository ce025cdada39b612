//! Hashing for keys that come from one input file (strings, small tuples,
//! addresses): no DoS resistance needed, several times cheaper than SipHash.

use std::hash::{BuildHasherDefault, Hasher};

/// FxHash: strings and small tuples from one file need no DoS-resistant
/// hashing, and this is several times cheaper than SipHash on short keys.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);
pub const FX: u64 = 0x51_7c_c1_b7_27_22_0a_95;
impl Hasher for FxHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(FX);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(FX);
        }
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(FX);
    }
    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64)
    }
    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64)
    }
}
pub type FxBuild = BuildHasherDefault<FxHasher>;
