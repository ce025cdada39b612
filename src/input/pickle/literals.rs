//! Numbers and strings as the opcodes write them: little-endian integers of
//! any length, and the text forms of protocol 0 (decimal integers, Python
//! string literals, raw-unicode-escape).

use super::Val;

/// The low `n` bytes (0..=8) of `w` as a two's-complement integer.
#[inline]
pub(super) fn sign_extend(w: u64, n: usize) -> i64 {
    if n == 0 {
        return 0;
    }
    let shift = 64 - 8 * n as u32;
    ((w << shift) as i64) >> shift
}

/// The integer of opcode `op` (BININT1, BININT2, BININT, or a LONG1 of at
/// most 8 bytes) whose operand starts `b`, and the operand's length;
/// `None` for any other opcode, a longer LONG1 or an operand cut short.
#[inline]
pub(super) fn small_int(op: u8, b: &[u8]) -> Option<(i64, usize)> {
    Some(match op {
        b'K' => (*b.first()? as i64, 1),
        b'M' => (u16::from_le_bytes(b.get(..2)?.try_into().ok()?) as i64, 2),
        b'J' => (i32::from_le_bytes(b.get(..4)?.try_into().ok()?) as i64, 4),
        0x8a => {
            let n = *b.first()? as usize;
            if n > 8 {
                return None;
            }
            let w = super::frames::le_word(b.get(1..1 + n)?);
            (sign_extend(w, n), 1 + n)
        }
        _ => return None,
    })
}

/// Little-endian two's-complement integer of any length (LONG1/LONG4).
pub(super) fn long_from_le(b: &[u8]) -> Val {
    if b.is_empty() {
        return Val::Int(0);
    }
    if b.len() <= 8 {
        let neg = b[b.len() - 1] & 0x80 != 0;
        let mut a = if neg { [0xffu8; 8] } else { [0u8; 8] };
        a[..b.len()].copy_from_slice(b);
        return Val::Int(i64::from_le_bytes(a));
    }
    // Longer encodings still fit when the extra bytes are pure sign extension.
    let neg = b[b.len() - 1] & 0x80 != 0;
    let ext = if neg { 0xff } else { 0 };
    if b[8..].iter().all(|&x| x == ext) && ((b[7] & 0x80 != 0) == neg) {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        return Val::Int(i64::from_le_bytes(a));
    }
    Val::BigInt
}

pub(super) fn parse_int_text(line: &[u8]) -> Option<Val> {
    let s = std::str::from_utf8(line).ok()?.trim();
    if s.is_empty() {
        return None;
    }
    match s.parse::<i64>() {
        Ok(v) => Some(Val::Int(v)),
        Err(_)
            if s.trim_start_matches('-')
                .bytes()
                .all(|c| c.is_ascii_digit()) =>
        {
            Some(Val::BigInt)
        }
        Err(_) => None,
    }
}

pub(super) fn parse_u64_text(line: &[u8]) -> Option<u64> {
    std::str::from_utf8(line).ok()?.trim().parse().ok()
}

/// `raw-unicode-escape`: bytes are latin-1 except `\uXXXX` and `\UXXXXXXXX`.
pub(super) fn decode_raw_unicode_escape(b: &[u8]) -> Option<String> {
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() && (b[i + 1] == b'u' || b[i + 1] == b'U') {
            let n = if b[i + 1] == b'u' { 4 } else { 8 };
            let hex = std::str::from_utf8(b.get(i + 2..i + 2 + n)?).ok()?;
            let cp = u32::from_str_radix(hex, 16).ok()?;
            out.push(char::from_u32(cp).unwrap_or('\u{fffd}'));
            i += 2 + n;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    Some(out)
}

/// Protocol-0 `STRING`: a quoted Python literal with backslash escapes.
pub(super) fn parse_py_string_literal(line: &[u8]) -> Option<String> {
    let q = *line.first()?;
    if (q != b'\'' && q != b'"') || line.len() < 2 || *line.last()? != q {
        return None;
    }
    let body = &line[1..line.len() - 1];
    let mut out = String::new();
    let mut i = 0;
    while i < body.len() {
        let c = body[i];
        if c == b'\\' && i + 1 < body.len() {
            let e = body[i + 1];
            i += 2;
            match e {
                b'n' => out.push('\n'),
                b't' => out.push('\t'),
                b'r' => out.push('\r'),
                b'\\' => out.push('\\'),
                b'\'' => out.push('\''),
                b'"' => out.push('"'),
                b'x' => {
                    let hex = std::str::from_utf8(body.get(i..i + 2)?).ok()?;
                    out.push(u8::from_str_radix(hex, 16).ok()? as char);
                    i += 2;
                }
                _ => {
                    out.push('\\');
                    out.push(e as char);
                }
            }
        } else {
            out.push(c as char);
            i += 1;
        }
    }
    Some(out)
}
