//! Byte sizes for people: binary units (KiB, MiB, GiB) in every output, and
//! the size syntax accepted on the command line and in config files.

use std::sync::atomic::{AtomicBool, Ordering};

static EXACT: AtomicBool = AtomicBool::new(false);

/// `--bytes`: print exact byte counts instead of binary units.
pub fn set_exact_bytes(on: bool) {
    EXACT.store(on, Ordering::Relaxed);
}

/// `1.50 GiB`, `20.00 MiB`, `512 B` (or the exact count under `--bytes`).
pub fn fmt_bytes(n: u64) -> String {
    if EXACT.load(Ordering::Relaxed) {
        return n.to_string();
    }
    fmt_binary(n)
}

/// Always in binary units, whatever `--bytes` says (for chart labels).
pub fn fmt_binary(n: u64) -> String {
    const K: f64 = 1024.0;
    let f = n as f64;
    if n < 1024 {
        format!("{n} B")
    } else if f < K * K {
        format!("{:.2} KiB", f / K)
    } else if f < K * K * K {
        format!("{:.2} MiB", f / (K * K))
    } else if f < K * K * K * K {
        format!("{:.2} GiB", f / (K * K * K))
    } else {
        format!("{:.2} TiB", f / (K * K * K * K))
    }
}

/// Two sizes printed side by side (before and after, with and without):
/// as [`fmt_bytes`] prints them, unless that prints different sizes the
/// same; then with as many more decimals as tell them apart (up to six),
/// and exact byte counts past that.
pub fn fmt_bytes_pair(a: u64, b: u64) -> (String, String) {
    let (fa, fb) = (fmt_bytes(a), fmt_bytes(b));
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
pub fn below_display_precision(a: u64, b: u64) -> bool {
    a != b && fmt_bytes(a) == fmt_bytes(b)
}

/// Whether a change of a fraction (0.0042 = 0.42 points, or a relative
/// change of 0.42 %) prints as zero at the one decimal every percentage is
/// printed with: such a change is "unchanged" in every output.
pub fn pct_rounds_to_zero(x: f64) -> bool {
    (x * 100.0).abs() < 0.05
}

/// Signed difference, `+1.00 GiB` / `-20.00 MiB`.
pub fn fmt_delta(d: i128) -> String {
    let mag = d.unsigned_abs().min(u64::MAX as u128) as u64;
    match d.signum() {
        -1 => format!("-{}", fmt_bytes(mag)),
        1 => format!("+{}", fmt_bytes(mag)),
        _ => "±0".to_string(),
    }
}

pub fn fmt_pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// Parses `80GiB`, `512MiB`, `1.5 GB`, `4096`, `20M` (binary multiples: the
/// allocator and every PyTorch message use them; `GB` is read as GiB too).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num: String = num.chars().filter(|c| *c != '_').collect();
    if num.is_empty() {
        return Err(format!(
            "malformed size {s:?} (expected e.g. 80GiB, 512MiB or a byte count)"
        ));
    }
    let v: f64 = num.parse().map_err(|_| {
        format!("malformed size {s:?} (expected e.g. 80GiB, 512MiB or a byte count)")
    })?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" | "bytes" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => return Err(format!("malformed size {s:?}: unknown unit {other:?}")),
    };
    let bytes = v * mult as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(format!("size {s:?} is out of range"));
    }
    Ok(bytes.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn formats() {
        assert_eq!(fmt_binary(512), "512 B");
        assert_eq!(fmt_binary(20 << 20), "20.00 MiB");
        assert_eq!(fmt_binary(3 << 29), "1.50 GiB");
    }
    #[test]
    fn parses() {
        assert_eq!(parse_size("80GiB").unwrap(), 80 << 30);
        assert_eq!(parse_size("512 MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("1.5g").unwrap(), 3 << 29);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("GiB").is_err());
    }
    #[test]
    fn pairs_tell_close_sizes_apart() {
        // 1.99 MiB both at two decimals.
        assert_eq!(
            fmt_bytes_pair(2_088_960, 2_085_376),
            ("1.992 MiB".to_string(), "1.989 MiB".to_string())
        );
        assert!(below_display_precision(2_088_960, 2_085_376));
        // Sizes that already print apart, or are equal, print as usual.
        assert_eq!(
            fmt_bytes_pair(2 << 20, 3 << 20),
            ("2.00 MiB".to_string(), "3.00 MiB".to_string())
        );
        assert_eq!(
            fmt_bytes_pair(5 << 30, 5 << 30),
            ("5.00 GiB".to_string(), "5.00 GiB".to_string())
        );
        // One byte apart in gibibytes: six decimals are not enough.
        assert_eq!(
            fmt_bytes_pair((5 << 30) + 1, 5 << 30),
            ("5368709121 B".to_string(), "5368709120 B".to_string())
        );
        assert!(pct_rounds_to_zero(-0.0004));
        assert!(!pct_rounds_to_zero(0.0005));
    }
}
