//! Flamegraph SVG of memory by allocation stack (`fragscope flamegraph`),
//! drawn by the inferno crate from collapsed stack lines.
//!
//! Owns turning analyses into collapsed lines (`frame;frame;frame BYTES`,
//! outermost frame first, frames filtered like PyTorch's viewer) and handing
//! them to inferno with fixed options, so the same input always yields the
//! same SVG. Returns bytes; never writes files.

use crate::analysis::culprits::Analysis;
use crate::analysis::frames::{FrameFacts, frame_label};
use crate::model::{BlockState, Snapshot};
use std::collections::BTreeMap;

/// What a frame's width measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weight {
    /// Rounded bytes of live (`active_allocated`) blocks.
    Live,
    /// Free bytes stranded by each active block (the culprits' score).
    Stranded,
}

/// Inferno splits stacks on `;` and reads the count after the last space, so
/// a frame must not contain a `;` or a line break.
fn clean(label: &str) -> String {
    label.replace(';', ",").replace(['\n', '\r'], " ")
}

/// Collapsed stack lines, merged and sorted. With several analyses (devices)
/// each stack starts with a `cuda:N` frame.
///
/// Deep stacks share most of their frames: whether the viewer shows a frame
/// ([`FrameFacts`]) and its cleaned label are worked out once a frame, and
/// each block's line is written into one buffer.
pub fn collapsed(snap: &Snapshot, analyses: &[Analysis], weight: Weight) -> Vec<String> {
    let facts = FrameFacts::new(snap);
    let mut labels: Vec<Option<Box<str>>> = vec![None; snap.frames.len()];
    let mut acc: BTreeMap<String, u64> = BTreeMap::new();
    let mut line = String::new();
    let by_device = analyses.len() > 1;
    for a in analyses {
        for b in &a.blocks {
            let (w, leaf) = match weight {
                Weight::Live if b.state == BlockState::ActiveAllocated => (b.size, None),
                Weight::Live => continue,
                Weight::Stranded if b.state == BlockState::ActivePendingFree => {
                    (b.stranded, Some("[pending free]"))
                }
                Weight::Stranded => (b.stranded, None),
            };
            if w == 0 {
                continue;
            }
            line.clear();
            // Frames joined by `;`: a separator before every frame but the first.
            let mut first = true;
            let mut push = |line: &mut String, frame: &str| {
                if !std::mem::take(&mut first) {
                    line.push(';');
                }
                line.push_str(frame);
            };
            if by_device {
                push(&mut line, &format!("cuda:{}", a.device));
            }
            let kept = facts.filtered(b.stack);
            if kept.is_empty() {
                push(&mut line, "<no stack recorded>");
            }
            for &f in kept.iter().rev() {
                let label = labels[f.0 as usize]
                    .get_or_insert_with(|| clean(&frame_label(snap, f, false)).into());
                push(&mut line, label);
            }
            if let Some(l) = leaf {
                push(&mut line, l);
            }
            match acc.get_mut(line.as_str()) {
                Some(v) => *v += w,
                None => {
                    acc.insert(line.clone(), w);
                }
            }
        }
    }
    acc.into_iter().map(|(k, v)| format!("{k} {v}")).collect()
}

#[derive(Debug, thiserror::Error)]
pub enum FlamegraphError {
    #[error("nothing to draw: no block has a non-zero weight at this moment")]
    Empty,
    #[error("flamegraph rendering failed: {0}")]
    Render(#[from] std::io::Error),
}

/// Renders collapsed lines as an SVG with inferno.
pub fn svg(lines: &[String], title: &str, subtitle: &str) -> Result<Vec<u8>, FlamegraphError> {
    if lines.is_empty() {
        return Err(FlamegraphError::Empty);
    }
    let mut opt = inferno::flamegraph::Options::default();
    opt.title = title.to_string();
    opt.subtitle = Some(subtitle.to_string());
    opt.count_name = "bytes".into();
    opt.name_type = "Frame:".into();
    // Colours from a hash of the frame name rather than a random generator,
    // so the same input renders byte-for-byte the same SVG.
    opt.deterministic = true;
    opt.colors = inferno::flamegraph::Palette::Basic(inferno::flamegraph::color::BasicPalette::Mem);
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut opt, lines.iter().map(|s| s.as_str()), &mut out)?;
    Ok(out)
}
