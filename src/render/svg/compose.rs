//! Putting finished charts together: panels stacked into one SVG (one per
//! device), and a block of wrapped text (the verdict) as an SVG panel. Each
//! chart is nested as an `<svg>` element at its offset, which every viewer
//! and rasterizer understands.

use super::{Svg, WIDTH};

pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c => o.push(c),
        }
    }
    o
}

/// The chart without its own outer `width`/`height`, positioned at `(x, y)`.
fn nested(svg: &Svg, x: u32, y: u32) -> String {
    let b = svg.body.trim_start();
    let rest = b.strip_prefix("<svg").unwrap_or(b);
    format!("<svg x=\"{x}\" y=\"{y}\"{rest}")
}

/// Panels one under the other, `gap` pixels apart, on a white page.
pub fn stack(panels: &[Svg], gap: u32) -> Svg {
    let width = panels.iter().map(|p| p.width).max().unwrap_or(WIDTH);
    let height =
        panels.iter().map(|p| p.height).sum::<u32>() + gap * panels.len().saturating_sub(1) as u32;
    let mut body = format!(
        "<svg width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" xmlns=\"http://www.w3.org/2000/svg\">\n<rect x=\"0\" y=\"0\" width=\"{width}\" height=\"{height}\" fill=\"#FFFFFF\"/>\n"
    );
    let mut y = 0;
    for p in panels {
        body.push_str(&nested(p, 0, y));
        if !body.ends_with('\n') {
            body.push('\n');
        }
        y += p.height + gap;
    }
    body.push_str("</svg>\n");
    Svg {
        width,
        height,
        body,
    }
}

/// Greedy word wrap at `max` characters.
pub fn wrap(text: &str, max: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for w in text.split_whitespace() {
        if !cur.is_empty() && cur.chars().count() + 1 + w.chars().count() > max {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(w);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

/// One styled paragraph of a text panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Para {
    pub text: String,
    /// Font size in pixels.
    pub size: u32,
    pub bold: bool,
    /// `#rrggbb`
    pub color: &'static str,
}

impl Para {
    pub fn new(text: impl Into<String>, size: u32, bold: bool, color: &'static str) -> Self {
        Para {
            text: text.into(),
            size,
            bold,
            color,
        }
    }
}

/// Paragraphs wrapped to `width` (sans-serif is assumed at most 0.6 em per
/// character on average, which keeps lines inside the panel).
pub fn text_panel(paras: &[Para], width: u32) -> Svg {
    let pad = 20u32;
    let mut y = pad;
    let mut out = String::new();
    for p in paras {
        let max = ((width - 2 * pad) as f64 / (p.size as f64 * 0.6)).floor() as usize;
        let line_h = (p.size as f64 * 1.35).round() as u32;
        for line in wrap(&p.text, max.max(10)) {
            y += line_h;
            out.push_str(&format!(
                "<text x=\"{pad}\" y=\"{}\" font-family=\"sans-serif\" font-size=\"{}\"{} fill=\"{}\">{}</text>\n",
                y - line_h / 4,
                p.size,
                if p.bold { " font-weight=\"bold\"" } else { "" },
                p.color,
                escape(&line)
            ));
        }
        y += p.size / 2;
    }
    let height = y + pad / 2;
    Svg {
        width,
        height,
        body: format!(
            "<svg width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" xmlns=\"http://www.w3.org/2000/svg\">\n<rect x=\"0\" y=\"0\" width=\"{width}\" height=\"{height}\" fill=\"#FFFFFF\"/>\n{out}</svg>\n"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_without_losing_words() {
        let t = "fragmentation: 12.00 GiB was free inside PyTorch's reserved memory, but the largest free gap is only 300.00 MiB";
        let lines = wrap(t, 40);
        assert!(lines.iter().all(|l| l.chars().count() <= 40));
        assert_eq!(lines.join(" "), t);
    }

    #[test]
    fn stacking_offsets_panels() {
        let a = text_panel(&[Para::new("a <b> & c", 16, true, "#000000")], 400);
        let b = text_panel(&[Para::new("second", 16, false, "#000000")], 600);
        let s = stack(&[a.clone(), b.clone()], 10);
        assert_eq!(s.width, 600);
        assert_eq!(s.height, a.height + b.height + 10);
        assert!(
            s.body
                .contains(&format!("<svg x=\"0\" y=\"{}\"", a.height + 10))
        );
        assert!(s.body.contains("a &lt;b&gt; &amp; c"));
    }
}
