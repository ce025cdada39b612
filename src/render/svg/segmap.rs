//! The segment map at one moment: every segment as a horizontal bar drawn
//! to one common scale, its blocks colored by state (allocated, rounding
//! waste, free, pending free), culprit blocks outlined and labeled.
//!
//! Legibility for thousands of segments: segments are sorted by size
//! (largest first) and packed left to right into rows of a fixed byte width,
//! a segment longer than a row wrapping onto the next; the scale is chosen so
//! everything fits in at most `max_rows` rows. Segments that would be
//! narrower than [`MIN_SEGMENT_PX`] at that scale are not drawn one by one
//! but summed into a single bar at their own scale, with their count and
//! total, so a file of 1,457 mostly tiny segments still reads as a picture.
//! Within a segment each pixel column takes the color of the state that owns
//! most of its bytes; equal neighbouring columns are merged into one
//! rectangle, which bounds the SVG's size by the pixel area, not the block
//! count.

use super::*;
use crate::core::units::fmt_binary;
use crate::model::{BlockState, Segment};
use std::collections::HashMap;

/// Segments narrower than this at the chosen scale are aggregated.
pub const MIN_SEGMENT_PX: f64 = 6.0;
const GAP_PX: i32 = 3;
const ROW_H: i32 = 16;
const MARGIN: i32 = 20;
/// Rows drawn at most for the failed request.
const REQUEST_ROWS: i32 = 4;

/// A block to outline: a culprit's live block.
#[derive(Debug, Clone, PartialEq)]
pub struct Highlight {
    pub address: u64,
    /// Short label drawn above it, e.g. `#1`.
    pub label: String,
}

pub struct SegmentMapChart<'a> {
    pub title: &'a str,
    /// One line under the title (the moment, the figures).
    pub subtitle: String,
    pub segments: &'a [Segment],
    pub highlights: &'a [Highlight],
    /// The request that failed at this moment, drawn to scale.
    pub request: Option<u64>,
    pub width: u32,
    pub max_rows: usize,
}

impl<'a> SegmentMapChart<'a> {
    pub fn new(title: &'a str, segments: &'a [Segment]) -> Self {
        SegmentMapChart {
            title,
            subtitle: String::new(),
            segments,
            highlights: &[],
            request: None,
            width: WIDTH,
            max_rows: 36,
        }
    }
}

/// Part of one segment drawn on one row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Piece {
    /// Index into the chart's `segments`.
    pub segment: usize,
    pub row: usize,
    /// Pixels from the row's left edge.
    pub x: i32,
    pub w: i32,
    /// Byte offsets within the segment this piece covers.
    pub lo: u64,
    pub hi: u64,
}

/// Bytes by block state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateBytes {
    pub allocated: u64,
    pub waste: u64,
    pub free: u64,
    pub pending: u64,
}

impl StateBytes {
    pub fn total(&self) -> u64 {
        self.allocated + self.waste + self.free + self.pending
    }
    fn add_segment(&mut self, s: &Segment) {
        for b in &s.blocks {
            match b.state {
                BlockState::ActiveAllocated => {
                    let r = b.requested_or_size().min(b.size);
                    self.allocated += r;
                    self.waste += b.size - r;
                }
                BlockState::ActivePendingFree => self.pending += b.size,
                BlockState::Inactive => self.free += b.size,
            }
        }
    }
}

/// Where everything goes.
#[derive(Debug, Clone, PartialEq)]
pub struct MapLayout {
    pub bytes_per_px: f64,
    pub rows: usize,
    pub row_width: i32,
    pub pieces: Vec<Piece>,
    /// Segments drawn one by one.
    pub drawn: Vec<usize>,
    /// Segments summed into the aggregate bar.
    pub aggregated: Vec<usize>,
    pub aggregated_bytes: StateBytes,
}

fn order(segs: &[Segment]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..segs.len()).collect();
    idx.sort_by(|&a, &b| {
        segs[b]
            .total_size
            .cmp(&segs[a].total_size)
            .then(segs[a].device.cmp(&segs[b].device))
            .then(segs[a].address.cmp(&segs[b].address))
    });
    idx
}

fn pack(segs: &[Segment], ord: &[usize], s: f64, row_width: i32) -> MapLayout {
    let (drawn, aggregated): (Vec<usize>, Vec<usize>) = ord
        .iter()
        .partition(|&&i| segs[i].total_size as f64 / s >= MIN_SEGMENT_PX);
    let mut pieces = Vec::new();
    let (mut row, mut x) = (0usize, 0i32);
    for &i in &drawn {
        let size = segs[i].total_size;
        let w = ((size as f64 / s).round() as i32).max(1);
        let room = row_width - x;
        // Short segments move to a new row whole; long ones wrap.
        if w > room && (w <= row_width / 3 || room < 40) && x > 0 {
            row += 1;
            x = 0;
        }
        let mut done = 0i32;
        while done < w {
            let room = row_width - x;
            let take = (w - done).min(room);
            let lo = (done as u128 * size as u128 / w as u128) as u64;
            let hi = ((done + take) as u128 * size as u128 / w as u128) as u64;
            pieces.push(Piece {
                segment: i,
                row,
                x,
                w: take,
                lo,
                hi,
            });
            done += take;
            x += take;
            if done < w {
                row += 1;
                x = 0;
            }
        }
        x += GAP_PX;
        if x >= row_width {
            row += 1;
            x = 0;
        }
    }
    let rows = pieces.iter().map(|p| p.row + 1).max().unwrap_or(0);
    let mut agg = StateBytes::default();
    for &i in &aggregated {
        agg.add_segment(&segs[i]);
    }
    MapLayout {
        bytes_per_px: s,
        rows,
        row_width,
        pieces,
        drawn,
        aggregated,
        aggregated_bytes: agg,
    }
}

/// Chooses the scale and packs: the finest scale at which the drawn
/// segments fit in `max_rows` rows of `row_width` pixels.
pub fn layout(segs: &[Segment], row_width: i32, max_rows: usize) -> MapLayout {
    let ord = order(segs);
    let total: u64 = segs.iter().map(|s| s.total_size).sum();
    let max_rows = max_rows.max(1);
    if total == 0 {
        return pack(segs, &ord, 1.0, row_width);
    }
    // Few segments get few rows: a handful of bars should not be stretched
    // over the whole height.
    let target = max_rows.min(segs.len().max(3));
    let mut s = total as f64 / (row_width as f64 * target as f64 * 0.92);
    let mut l = pack(segs, &ord, s, row_width);
    let mut guard = 0;
    while l.rows > max_rows && guard < 200 {
        s *= 1.08;
        l = pack(segs, &ord, s, row_width);
        guard += 1;
    }
    l
}

/// Pixel columns of a piece colored by the dominant state, merged into runs
/// `(x_from, x_to, color)`.
fn runs(seg: &Segment, p: &Piece) -> Vec<(i32, i32, RGBColor)> {
    let w = p.w.max(1) as usize;
    let span = (p.hi - p.lo).max(1) as f64;
    let mut cols = vec![[0f64; 4]; w];
    let mut put = |a: u64, b: u64, k: usize| {
        let a = a.max(p.lo);
        let b = b.min(p.hi);
        if b <= a {
            return;
        }
        let fa = (a - p.lo) as f64 / span * w as f64;
        let fb = (b - p.lo) as f64 / span * w as f64;
        let mut j = fa.floor() as usize;
        while j < w && (j as f64) < fb {
            let lo = fa.max(j as f64);
            let hi = fb.min(j as f64 + 1.0);
            cols[j][k] += hi - lo;
            j += 1;
        }
    };
    for b in &seg.blocks {
        let off = b.address.saturating_sub(seg.address);
        let end = off.saturating_add(b.size);
        if end <= p.lo || off >= p.hi {
            continue;
        }
        match b.state {
            BlockState::ActiveAllocated => {
                let r = b.requested_or_size().min(b.size);
                put(off, off + r, 0);
                put(off + r, end, 1);
            }
            BlockState::Inactive => put(off, end, 2),
            BlockState::ActivePendingFree => put(off, end, 3),
        }
    }
    const COLORS: [RGBColor; 4] = [ALLOCATED, WASTE, FREE_BLOCK, PENDING];
    let mut out: Vec<(i32, i32, RGBColor)> = Vec::new();
    for (j, c) in cols.iter().enumerate() {
        // Ties go to the earlier state: allocated over waste over free.
        let mut k = 2;
        let mut best = -1.0;
        for (i, v) in c.iter().enumerate() {
            if *v > best {
                best = *v;
                k = i;
            }
        }
        if best <= 0.0 {
            k = 2;
        }
        let color = COLORS[k];
        let x = p.x + j as i32;
        match out.last_mut() {
            Some(last) if last.2 == color && last.1 == x => last.1 = x + 1,
            _ => out.push((x, x + 1, color)),
        }
    }
    out
}

/// An outline around highlighted blocks on one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span<'a> {
    pub row: usize,
    pub x0: i32,
    pub x1: i32,
    pub label: &'a str,
}

/// Outlines of the highlighted blocks, neighbouring blocks of the same
/// culprit merged into one (a run of parameters is one outline, not fifty),
/// at least 4 px wide so a small block stays visible.
pub fn culprit_spans<'a>(
    segs: &[Segment],
    l: &MapLayout,
    labels: &HashMap<u64, &'a str>,
) -> Vec<Span<'a>> {
    let mut out: Vec<Span<'a>> = Vec::new();
    for p in &l.pieces {
        let seg = &segs[p.segment];
        let span = (p.hi - p.lo).max(1) as f64;
        let fx =
            |v: u64| p.x + ((v.clamp(p.lo, p.hi) - p.lo) as f64 / span * p.w as f64).round() as i32;
        let first = out.len();
        for b in &seg.blocks {
            let Some(label) = labels.get(&b.address) else {
                continue;
            };
            let off = b.address.saturating_sub(seg.address);
            let end = off.saturating_add(b.size);
            if end <= p.lo || off >= p.hi {
                continue;
            }
            let (mut x0, mut x1) = (fx(off), fx(end));
            if x1 - x0 < 4 {
                let mid = (x0 + x1) / 2;
                x0 = mid - 2;
                x1 = mid + 2;
            }
            let in_piece = out.len() > first;
            match out.last_mut() {
                Some(last) if in_piece && last.label == *label && x0 <= last.x1 + 1 => {
                    last.x1 = last.x1.max(x1);
                }
                _ => out.push(Span {
                    row: p.row,
                    x0,
                    x1,
                    label,
                }),
            }
        }
    }
    out
}

const CHART: &str = "segment map";

/// Where the map's parts go, worked out before drawing so the SVG's height
/// is known: the rows of segments from `top`, then the aggregate bar, then
/// the failed request.
struct Geometry {
    /// Room above each row (for culprit labels when there are culprits).
    row_gap: i32,
    top: i32,
    rows_h: i32,
    agg_h: i32,
    /// Everything but the legend.
    body_h: i32,
}

impl Geometry {
    fn new(c: &SegmentMapChart, l: &MapLayout, row_width: i32) -> Geometry {
        let row_gap = if c.highlights.is_empty() { 8 } else { 20 };
        let top = 78;
        let rows_h = l.rows as i32 * (ROW_H + row_gap);
        let agg_h = if l.aggregated.is_empty() { 0 } else { 52 };
        let req_h = match c.request {
            Some(r) => {
                let w = (r as f64 / l.bytes_per_px).round() as i32;
                let req_rows = (w.max(1) as f64 / row_width as f64).ceil() as i32;
                30 + req_rows.min(REQUEST_ROWS) * (ROW_H + 4) + 8
            }
            None => 0,
        };
        Geometry {
            row_gap,
            top,
            rows_h,
            agg_h,
            body_h: top + rows_h.max(30) + agg_h + req_h + 16,
        }
    }

    /// The top of row `r`.
    fn row_y(&self, r: usize) -> i32 {
        self.top + r as i32 * (ROW_H + self.row_gap) + self.row_gap - 4
    }
}

/// The block states, and the culprit outline when there are culprits.
fn legend(c: &SegmentMapChart) -> Vec<LegendEntry> {
    let mut legend = vec![
        LegendEntry::new("allocated (requested bytes)", ALLOCATED, Swatch::Fill),
        LegendEntry::new("rounding waste", WASTE, Swatch::Fill),
        LegendEntry::new("free (cached)", FREE_BLOCK, Swatch::Fill),
        LegendEntry::new("pending free", PENDING, Swatch::Fill),
    ];
    if !c.highlights.is_empty() {
        legend.push(LegendEntry::new(
            "culprit blocks (#N = rank in the call-site table)",
            CULPRIT,
            Swatch::Outline,
        ));
    }
    legend
}

pub fn segmap_svg(c: &SegmentMapChart) -> Result<Svg, ChartError> {
    let row_width = c.width as i32 - 2 * MARGIN;
    let l = layout(c.segments, row_width, c.max_rows);
    let g = Geometry::new(c, &l, row_width);
    panel(CHART, c.width, g.body_h as u32, &legend(c), |area| {
        draw_heading(area, c, &l)?;
        draw_segments(area, c, &l, &g)?;
        let labels: HashMap<u64, &str> = (c.highlights.iter())
            .map(|h| (h.address, h.label.as_str()))
            .collect();
        draw_culprits(area, c, &labels, (&l, &g))?;
        let mut y = g.top + g.rows_h.max(30) + 8;
        if c.segments.is_empty() {
            area.draw(&Text::new(
                "no segments at this moment",
                (c.width as i32 / 2, g.top + 10),
                anchored(text_style(LABEL_SIZE, &MUTED), HPos::Center, VPos::Top),
            ))
            .map_err(|x| err(CHART)(&x))?;
        }
        if !l.aggregated.is_empty() {
            draw_aggregate(area, c, &l, row_width, y)?;
            y += g.agg_h;
        }
        if let Some(r) = c.request {
            draw_request(area, r, &l, row_width, y)?;
        }
        Ok(())
    })
}

/// The title, then the subtitle and the scale line.
fn draw_heading(
    area: &DrawingArea<SVGBackend, Shift>,
    c: &SegmentMapChart,
    l: &MapLayout,
) -> Result<(), ChartError> {
    let e = err(CHART);
    area.draw(&Text::new(
        c.title.to_string(),
        (c.width as i32 / 2, 10),
        anchored(text_style(TITLE_SIZE, &TEXT), HPos::Center, VPos::Top),
    ))
    .map_err(|x| e(&x))?;
    let total: u64 = c.segments.iter().map(|s| s.total_size).sum();
    let scale = format!(
        "{} segments, {} reserved; 1 px = {}; largest first, wrapped across rows",
        c.segments.len(),
        fmt_binary(total),
        fmt_binary(l.bytes_per_px.round() as u64)
    );
    for (k, line) in [c.subtitle.as_str(), scale.as_str()]
        .iter()
        .filter(|s| !s.is_empty())
        .enumerate()
    {
        area.draw(&Text::new(
            line.to_string(),
            (MARGIN, 40 + k as i32 * 18),
            anchored(text_style(SMALL_SIZE, &MUTED), HPos::Left, VPos::Top),
        ))
        .map_err(|x| e(&x))?;
    }
    Ok(())
}

/// Every drawn piece of a segment: its columns by state, then its outline.
fn draw_segments(
    area: &DrawingArea<SVGBackend, Shift>,
    c: &SegmentMapChart,
    l: &MapLayout,
    g: &Geometry,
) -> Result<(), ChartError> {
    let e = err(CHART);
    for p in &l.pieces {
        let seg = &c.segments[p.segment];
        let y = g.row_y(p.row);
        for (a, b, color) in runs(seg, p) {
            area.draw(&Rectangle::new(
                [(MARGIN + a, y), (MARGIN + b, y + ROW_H)],
                color.filled(),
            ))
            .map_err(|x| e(&x))?;
        }
        area.draw(&Rectangle::new(
            [(MARGIN + p.x, y), (MARGIN + p.x + p.w, y + ROW_H)],
            OUTLINE.stroke_width(1),
        ))
        .map_err(|x| e(&x))?;
    }
    Ok(())
}

/// Culprit outlines, then one label per culprit and row where it does not
/// collide with the previous label; `labels`: each culprit's by address.
fn draw_culprits(
    area: &DrawingArea<SVGBackend, Shift>,
    c: &SegmentMapChart,
    labels: &HashMap<u64, &str>,
    (l, g): (&MapLayout, &Geometry),
) -> Result<(), ChartError> {
    let e = err(CHART);
    let mut label_end: HashMap<usize, i32> = HashMap::new();
    let mut labelled: std::collections::HashSet<(usize, &str)> = Default::default();
    for sp in culprit_spans(c.segments, l, labels) {
        let y = g.row_y(sp.row);
        area.draw(&Rectangle::new(
            [
                (MARGIN + sp.x0 - 1, y - 2),
                (MARGIN + sp.x1 + 1, y + ROW_H + 2),
            ],
            CULPRIT.stroke_width(2),
        ))
        .map_err(|x| e(&x))?;
        let tw = text_width(sp.label, SMALL_SIZE);
        let free_from = label_end.get(&sp.row).copied().unwrap_or(i32::MIN);
        let lx = MARGIN + sp.x0;
        if !labelled.contains(&(sp.row, sp.label))
            && lx >= free_from
            && lx + tw <= c.width as i32 - 4
        {
            area.draw(&Text::new(
                sp.label.to_string(),
                (lx, y - 3),
                anchored(text_style(SMALL_SIZE, &CULPRIT), HPos::Left, VPos::Bottom),
            ))
            .map_err(|x| e(&x))?;
            label_end.insert(sp.row, lx + tw + 10);
            labelled.insert((sp.row, sp.label));
        }
    }
    Ok(())
}

/// The segments too small to draw one by one: what they are, and one bar
/// (not to scale) of their bytes by state, at `y`.
fn draw_aggregate(
    area: &DrawingArea<SVGBackend, Shift>,
    c: &SegmentMapChart,
    l: &MapLayout,
    row_width: i32,
    y: i32,
) -> Result<(), ChartError> {
    let e = err(CHART);
    let a = &l.aggregated_bytes;
    let largest = l
        .aggregated
        .iter()
        .map(|&i| c.segments[i].total_size)
        .max()
        .unwrap_or(0);
    area.draw(&Text::new(
        if l.aggregated.len() == 1 {
            format!(
                "1 segment of {}, too small to draw at this scale, by state (bar not to scale):",
                fmt_binary(largest)
            )
        } else {
            format!(
                "{} segments of at most {} each ({} in all), too small to draw one by one, summed by state (bar not to scale):",
                l.aggregated.len(),
                fmt_binary(largest),
                fmt_binary(a.total())
            )
        },
        (MARGIN, y),
        anchored(text_style(SMALL_SIZE, &TEXT), HPos::Left, VPos::Top),
    ))
    .map_err(|x| e(&x))?;
    let by = y + 22;
    let tot = a.total().max(1) as f64;
    let mut x = 0f64;
    for (v, color) in [
        (a.allocated, ALLOCATED),
        (a.waste, WASTE),
        (a.free, FREE_BLOCK),
        (a.pending, PENDING),
    ] {
        let w = v as f64 / tot * row_width as f64;
        let (x0, x1) = (x.round() as i32, (x + w).round() as i32);
        if x1 > x0 {
            area.draw(&Rectangle::new(
                [(MARGIN + x0, by), (MARGIN + x1, by + ROW_H)],
                color.filled(),
            ))
            .map_err(|x| e(&x))?;
        }
        x += w;
    }
    area.draw(&Rectangle::new(
        [(MARGIN, by), (MARGIN + row_width, by + ROW_H)],
        OUTLINE.stroke_width(1),
    ))
    .map_err(|x| e(&x))
}

/// The failed request of `request` bytes at the map's scale, wrapped like a
/// segment (at most [`REQUEST_ROWS`] rows) so it compares with the gaps
/// above, at `y`.
fn draw_request(
    area: &DrawingArea<SVGBackend, Shift>,
    request: u64,
    l: &MapLayout,
    row_width: i32,
    y: i32,
) -> Result<(), ChartError> {
    let e = err(CHART);
    let w = (request as f64 / l.bytes_per_px).round() as i32;
    let rows = (w as f64 / row_width as f64).ceil() as i32;
    let note = if rows > REQUEST_ROWS {
        format!(" ({rows} rows at this scale, first {REQUEST_ROWS} drawn)")
    } else {
        String::new()
    };
    area.draw(&Text::new(
        format!(
            "the failed request, {} at the same scale{note}:",
            fmt_binary(request)
        ),
        (MARGIN, y),
        anchored(text_style(SMALL_SIZE, &OOM), HPos::Left, VPos::Top),
    ))
    .map_err(|x| e(&x))?;
    let mut left = w.max(2);
    let mut by = y + 22;
    for _ in 0..REQUEST_ROWS {
        if left <= 0 {
            break;
        }
        let take = left.min(row_width);
        area.draw(&Rectangle::new(
            [(MARGIN, by), (MARGIN + take, by + ROW_H)],
            OOM.mix(0.85).filled(),
        ))
        .map_err(|x| e(&x))?;
        left -= take;
        by += ROW_H + 4;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_support::laid_out as seg;

    const MIB: u64 = 1 << 20;

    #[test]
    fn every_byte_is_drawn_or_aggregated() {
        let mut segs = vec![seg(
            1 << 40,
            &[(6 << 30, Some(6 << 30), BlockState::ActiveAllocated)],
        )];
        for i in 0..2000u64 {
            segs.push(seg(
                (1 << 32) + i * 2 * MIB,
                &[
                    (MIB, Some(MIB - 100), BlockState::ActiveAllocated),
                    (MIB, None, BlockState::Inactive),
                ],
            ));
        }
        let l = layout(&segs, 960, 20);
        assert!(l.rows <= 20, "{} rows", l.rows);
        assert_eq!(l.drawn.len() + l.aggregated.len(), segs.len());
        assert!(!l.aggregated.is_empty());
        let drawn: u64 = l.pieces.iter().map(|p| p.hi - p.lo).sum();
        let agg = l.aggregated_bytes.total();
        let total: u64 = segs.iter().map(|s| s.total_size).sum();
        assert_eq!(drawn + agg, total);
        // Pieces stay inside their row and never overlap within it.
        let mut by_row: HashMap<usize, Vec<(i32, i32)>> = HashMap::new();
        for p in &l.pieces {
            assert!(p.x >= 0 && p.x + p.w <= 960);
            by_row.entry(p.row).or_default().push((p.x, p.x + p.w));
        }
        for v in by_row.values_mut() {
            v.sort();
            for w in v.windows(2) {
                assert!(w[0].1 <= w[1].0);
            }
        }
    }

    #[test]
    fn neighbouring_culprit_blocks_share_one_outline() {
        let s = seg(
            0,
            &[
                (10 * MIB, Some(10 * MIB), BlockState::ActiveAllocated),
                (10 * MIB, Some(10 * MIB), BlockState::ActiveAllocated),
                (10 * MIB, None, BlockState::Inactive),
                (10 * MIB, Some(10 * MIB), BlockState::ActiveAllocated),
                (10 * MIB, Some(10 * MIB), BlockState::ActiveAllocated),
            ],
        );
        let segs = vec![s];
        let l = layout(&segs, 500, 1);
        assert_eq!(l.rows, 1);
        let a = &segs[0].blocks;
        let labels: HashMap<u64, &str> = [
            (a[0].address, "#1"),
            (a[1].address, "#1"),
            (a[3].address, "#1"),
            (a[4].address, "#2"),
        ]
        .into_iter()
        .collect();
        let spans = culprit_spans(&segs, &l, &labels);
        assert_eq!(spans.len(), 3, "{spans:?}");
        assert_eq!(spans[0].label, "#1");
        assert_eq!(spans[1].label, "#1");
        assert_eq!(spans[2].label, "#2");
        assert!(spans[0].x1 < spans[1].x0, "the free block separates them");
        assert!(spans.iter().all(|s| s.x1 - s.x0 >= 4));
    }

    #[test]
    fn columns_take_the_dominant_state() {
        let s = seg(
            0,
            &[
                (30 * MIB, Some(20 * MIB), BlockState::ActiveAllocated),
                (60 * MIB, None, BlockState::Inactive),
                (10 * MIB, None, BlockState::ActivePendingFree),
            ],
        );
        let p = Piece {
            segment: 0,
            row: 0,
            x: 0,
            w: 10,
            lo: 0,
            hi: 100 * MIB,
        };
        let r = runs(&s, &p);
        assert_eq!(
            r,
            vec![
                (0, 2, ALLOCATED),
                (2, 3, WASTE),
                (3, 9, FREE_BLOCK),
                (9, 10, PENDING)
            ]
        );
    }
}
