//! Byte sizes for people: binary units (KiB, MiB, GiB) in every output, and
//! the size syntax accepted on the command line and in config files.

/// `1.50 GiB`, `20.00 MiB`, `512 B`: always in binary units, whatever
/// `--bytes` says (chart labels; [`super::style::Style::bytes`] for the rest).
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

/// Whether a change of a fraction (0.0042 = 0.42 points, or a relative
/// change of 0.42 %) prints as zero at the one decimal every percentage is
/// printed with: such a change is "unchanged" in every output.
pub fn pct_rounds_to_zero(x: f64) -> bool {
    (x * 100.0).abs() < 0.05
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
    fn percentages_round_to_zero() {
        assert!(pct_rounds_to_zero(-0.0004));
        assert!(!pct_rounds_to_zero(0.0005));
    }
}
