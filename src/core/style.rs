//! How an invocation wants its figures written: exact byte counts or binary
//! units (`--bytes`), ANSI colors or none (`--color`, NO_COLOR). Built once by
//! the command line and handed to every renderer and to every finding that
//! writes prose with sizes, so that two runs in one process never share it.

use super::units::fmt_binary;

/// The presentation choices of one invocation. The default is what a pipe
/// gets: binary units, no color.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Style {
    /// `--bytes`: exact byte counts instead of binary units.
    pub exact_bytes: bool,
    /// Tables and painted text carry ANSI colors.
    pub color: bool,
}

impl Style {
    /// `1.50 GiB`, `20.00 MiB`, `512 B` (or the exact count under `--bytes`).
    pub fn bytes(&self, n: u64) -> String {
        if self.exact_bytes {
            return n.to_string();
        }
        fmt_binary(n)
    }

    /// Two sizes printed side by side (before and after, with and without):
    /// as [`Style::bytes`] prints them, unless that prints different sizes
    /// the same; then with as many more decimals as tell them apart (up to
    /// six), and exact byte counts past that.
    pub fn bytes_pair(&self, a: u64, b: u64) -> (String, String) {
        let (fa, fb) = (self.bytes(a), self.bytes(b));
        if a == b || fa != fb {
            return (fa, fb);
        }
        let larger = a.max(b);
        let (div, unit) = match larger {
            n if n < 1 << 10 => return (fa, fb),
            n if n < 1 << 20 => (1u64 << 10, "KiB"),
            n if n < 1 << 30 => (1 << 20, "MiB"),
            n if n < 1 << 40 => (1 << 30, "GiB"),
            _ => (1 << 40, "TiB"),
        };
        for decimals in 3..=6 {
            let f = |n: u64| format!("{:.*} {unit}", decimals, n as f64 / div as f64);
            let (x, y) = (f(a), f(b));
            if x != y {
                return (x, y);
            }
        }
        (format!("{a} B"), format!("{b} B"))
    }

    /// Whether two sizes print the same although they differ: the change
    /// between them is below display precision (never under `--bytes`).
    pub fn below_display_precision(&self, a: u64, b: u64) -> bool {
        a != b && self.bytes(a) == self.bytes(b)
    }

    /// Signed difference, `+1.00 GiB` / `-20.00 MiB`.
    pub fn delta(&self, d: i128) -> String {
        let mag = d.unsigned_abs().min(u64::MAX as u128) as u64;
        match d.signum() {
            -1 => format!("-{}", self.bytes(mag)),
            1 => format!("+{}", self.bytes(mag)),
            _ => "±0".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_bytes_is_per_style() {
        let exact = Style {
            exact_bytes: true,
            ..Style::default()
        };
        assert_eq!(Style::default().bytes(20 << 20), "20.00 MiB");
        assert_eq!(exact.bytes(20 << 20), "20971520");
        assert_eq!(exact.delta(-(1 << 20)), "-1048576");
        assert_eq!(Style::default().delta(0), "±0");
    }

    #[test]
    fn pairs_tell_close_sizes_apart() {
        let st = Style::default();
        // 1.99 MiB both at two decimals.
        assert_eq!(
            st.bytes_pair(2_088_960, 2_085_376),
            ("1.992 MiB".to_string(), "1.989 MiB".to_string())
        );
        assert!(st.below_display_precision(2_088_960, 2_085_376));
        // Sizes that already print apart, or are equal, print as usual.
        assert_eq!(
            st.bytes_pair(2 << 20, 3 << 20),
            ("2.00 MiB".to_string(), "3.00 MiB".to_string())
        );
        assert_eq!(
            st.bytes_pair(5 << 30, 5 << 30),
            ("5.00 GiB".to_string(), "5.00 GiB".to_string())
        );
        // One byte apart in gibibytes: six decimals are not enough.
        assert_eq!(
            st.bytes_pair((5 << 30) + 1, 5 << 30),
            ("5368709121 B".to_string(), "5368709120 B".to_string())
        );
    }
}
