//! `simulate` output: the what-if table with the model's fidelity beside it,
//! and an SVG chart of reserved bytes over the trace per configuration.
//! Returns strings; never prints.

use super::table::{align_numbers, kv_table, new_table};
use crate::analysis::what_if::ExpandableAnswer;
use crate::core::style::Style;
use crate::core::units::{fmt_binary, fmt_pct};
use crate::sim::{CapacitySource, SimReport, Summary};
use std::fmt::Write;

fn recorded_oom_cell(s: &Summary) -> String {
    match (s.recorded_ooms, s.recorded_ooms_avoided) {
        (0, _) => "-".into(),
        (n, a) if a == n => "avoided".into(),
        (_, 0) => "not avoided".into(),
        (n, a) => format!("{a} of {n} avoided"),
    }
}

fn ooms_cell(s: &Summary) -> String {
    match s.first_oom_event {
        None => "0".into(),
        Some(e) => format!("{} (first at event {e})", s.ooms),
    }
}

/// The text report: what was replayed and how well the model reproduces
/// it, the table of configurations, then what its figures mean and the
/// answer about the recorded OOM.
pub fn render(st: &Style, file: &str, r: &SimReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "fragscope simulate: {file}, device {}", r.device);
    let _ = writeln!(out, "This is {}.\n", r.model);
    let _ = writeln!(out, "{}\n", kv_table(st, &summary_rows(st, r)));
    let _ = writeln!(out, "{}", results_table(st, r));
    write_footnotes(&mut out, st, r);
    out
}

/// The rows above the table: the trace, its start state, the recorded run,
/// the capacity, the model's fidelity and the perfect-packing floor.
fn summary_rows(st: &Style, r: &SimReport) -> Vec<(String, String)> {
    let f = &r.fidelity;
    let seg_ev = match f.segment_events_matched {
        Some(m) => format!(
            "{}{} of {} recorded segment events reproduced in order ({}{}; the model made {})",
            at_least(f),
            f.matched_segment_events,
            f.recorded_segment_events,
            fmt_pct(m),
            within_windows(f),
            f.simulated_segment_events
        ),
        None => "no segment events recorded or simulated".to_string(),
    };
    let mut oom_fid = String::new();
    if f.recorded_ooms > 0 {
        oom_fid = format!(
            "; recorded OOMs reproduced {} of {}",
            f.recorded_ooms_reproduced, f.recorded_ooms
        );
    }
    vec![
        (
            "trace".to_string(),
            format!("{} events, {} allocations", r.events, r.allocations),
        ),
        ("start state".to_string(), start_state(st, r)),
        ("recorded".to_string(), recorded_run(st, r)),
        ("capacity".to_string(), capacity(st, r)),
        (
            "fidelity".to_string(),
            format!("under the recorded settings: {seg_ev}"),
        ),
        (
            String::new(),
            format!(
                "reserved error max {} / mean {} of the recorded peak; final segments {} of {} matched{oom_fid}",
                fmt_pct(f.max_reserved_error_share),
                fmt_pct(f.mean_reserved_error_share),
                f.final_segments_matched,
                f.final_segments_recorded.max(f.final_segments_simulated),
            ),
        ),
        (
            "floor".to_string(),
            format!(
                "{} peak requested by the program (perfect packing)",
                st.bytes(r.floor_peak_requested)
            ),
        ),
    ]
}

/// How the replay's start state was known, and what it inherited.
fn start_state(st: &Style, r: &SimReport) -> String {
    let start = if r.start_exact {
        "exact (the trace accounts for every block and segment it releases)".to_string()
    } else if r.frees_of_older_blocks > 0 {
        format!(
            "rebuilt by the replay: {} block(s) older than the trace put back with sizes inferred from their requests",
            r.frees_of_older_blocks
        )
    } else {
        "rebuilt by the replay, which met events it could not apply as recorded (see the notes)"
            .to_string()
    };
    if r.recorded_start_reserved > 0 {
        format!(
            "{start}; {} reserved at the start, inherited from before the trace",
            st.bytes(r.recorded_start_reserved)
        )
    } else {
        start
    }
}

/// The recorded settings, peak and OOMs.
fn recorded_run(st: &Style, r: &SimReport) -> String {
    let recorded_ooms = if r.recorded_ooms.is_empty() {
        "no OOM".to_string()
    } else {
        // The first ones: a program that catches its OOMs may record one
        // at most events (the JSON form holds each).
        let shown = crate::analysis::oom::MAX_DIAGNOSED_OOMS;
        let mut idx: Vec<String> = (r.recorded_ooms.events().take(shown))
            .map(|i| i.to_string())
            .collect();
        if r.recorded_ooms.len() > shown {
            idx.push(format!("… ({} more)", r.recorded_ooms.len() - shown));
        }
        format!(
            "{} OOM(s) at event {}",
            r.recorded_ooms.len(),
            idx.join(", ")
        )
    };
    let recorded_peak = match r.recorded_peak_reserved_in_trace {
        Some(p) if r.recorded_start_holds_peak() => format!(
            "peak reserved {} (the inherited start; {} during the trace)",
            st.bytes(r.recorded_peak_reserved),
            st.bytes(p)
        ),
        _ => format!("peak reserved {}", st.bytes(r.recorded_peak_reserved)),
    };
    format!(
        "{}{}; {recorded_peak}; {recorded_ooms}",
        r.recorded_config,
        if r.settings_recorded {
            ""
        } else {
            " (assumed: no settings in the file)"
        },
    )
}

/// The device capacity the model runs out at, and where it comes from.
fn capacity(st: &Style, r: &SimReport) -> String {
    match (r.capacity, r.capacity_source) {
        (Some(c), CapacitySource::Given) => format!("{} (--capacity)", st.bytes(c)),
        (Some(c), CapacitySource::RecordedOom) => format!(
            "{} (reserved at the recorded OOM plus the free memory it reported; a lower bound on the device)",
            st.bytes(c)
        ),
        _ => "unlimited (no OOM recorded; pass --capacity to let the model run out)".to_string(),
    }
}

/// One row per configuration, the recorded one first, then the floor.
fn results_table(st: &Style, r: &SimReport) -> comfy_table::Table {
    // When the inherited start holds a peak, the peak over the whole run
    // is the start's under that setting: the peak during the trace beside
    // it is the figure that compares settings.
    let in_trace = r.start_holds_peak();
    let mut header = vec!["config"];
    if in_trace {
        header.extend(["peak reserved (incl. start)", "peak during the trace"]);
    } else {
        header.push("peak reserved");
    }
    header.extend([
        "reserved at end",
        "worst frag",
        "smallest largest gap",
        "cudaMalloc",
        "cudaFree",
        "OOMs",
        "recorded OOM",
    ]);
    let mut t = new_table(st, &header);
    for (i, s) in r.results.iter().enumerate() {
        let name = if i == 0 {
            format!("recorded: {}", s.config)
        } else {
            s.config.clone()
        };
        let mut row = vec![name, st.bytes(s.peak_reserved)];
        if in_trace {
            row.push(s.peak_reserved_in_trace.map_or("-".into(), |b| st.bytes(b)));
        }
        row.extend([
            st.bytes(s.end_reserved),
            fmt_pct(s.worst_fragmentation),
            st.bytes(s.smallest_largest_gap),
            s.device_allocs.to_string(),
            s.device_frees.to_string(),
            ooms_cell(s),
            recorded_oom_cell(s),
        ]);
        t.add_row(row);
    }
    let mut floor = vec![
        "floor: perfect packing".to_string(),
        st.bytes(r.floor_peak_requested),
    ];
    floor.resize(header.len(), String::new());
    t.add_row(floor);
    align_numbers(&mut t, 1);
    t
}

/// Under the table: what its columns measure, the answer about the
/// recorded OOM, the notes and how far to trust the comparison.
fn write_footnotes(out: &mut String, st: &Style, r: &SimReport) {
    let _ = writeln!(
        out,
        "worst frag and smallest largest gap: over the moments when reserved is at least half its peak. With expandable segments, cudaMalloc/cudaFree count page mappings/unmappings."
    );
    if r.start_holds_peak() {
        let held = r.results.iter().filter(|s| s.start_holds_peak()).count();
        let _ = writeln!(
            out,
            "peak during the trace: the highest reserved after any recorded event, the start state left out. The start ({} reserved, inherited from before the trace; every setting starts from it) holds the peak {}, so compare the settings by their peak during the trace.",
            st.bytes(r.recorded_start_reserved),
            match (held, r.results.len()) {
                (0, _) => "of the recording only".to_string(),
                (h, n) if h == n => format!("under all {n} settings"),
                (h, n) => format!("under {h} of the {n} settings"),
            }
        );
    }
    if let Some(a) = answer(st, r) {
        let _ = writeln!(out, "\n{a}");
    }
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    let f = &r.fidelity;
    if f.segment_events_matched.is_some_and(|m| m < 0.95) || f.max_reserved_error_share > 0.02 {
        let _ = writeln!(
            out,
            "note: the model reproduces this recording only in part (see fidelity); treat the comparison between configurations as indicative"
        );
    }
}

/// The one-paragraph answer to "would another setting have avoided the
/// recorded OOM?" (`None` without a recorded OOM).
pub fn answer(st: &Style, r: &SimReport) -> Option<String> {
    if r.recorded_ooms.is_empty() || r.results.len() < 2 {
        return None;
    }
    let mut clean = Vec::new();
    let mut elsewhere = Vec::new();
    let mut not = Vec::new();
    for s in &r.results[1..] {
        if s.recorded_ooms_avoided < s.recorded_ooms {
            not.push(s.config.clone());
        } else if s.ooms > 0 {
            elsewhere.push(format!(
                "{} (fails at event {})",
                s.config,
                s.first_oom_event.unwrap_or(0)
            ));
        } else {
            clean.push(s.config.clone());
        }
    }
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join("; ")
        }
    };
    let rec = &r.results[0];
    let mut a = format!(
        "Recorded OOM: under the recorded settings the model {} it. Avoided with no other OOM: {}. Avoided, but another allocation fails: {}. Not avoided: {}.",
        if rec.recorded_ooms_avoided < rec.recorded_ooms {
            "reproduces"
        } else {
            "does not reproduce"
        },
        list(&clean),
        list(&elsewhere),
        list(&not)
    );
    if let Some(c) = r.capacity {
        // As many as the OOMs diagnosed elsewhere: a program that catches
        // its OOMs may record one at most events.
        let shown = crate::analysis::oom::MAX_DIAGNOSED_OOMS;
        for d in r.recorded_ooms.demand().iter().take(shown) {
            let need = d.held.saturating_add(d.request);
            let _ = write!(
                a,
                " At event {} the program held {} and asked for {} more: {} in all, ",
                d.event,
                st.bytes(d.held),
                st.bytes(d.request),
                st.bytes(need),
            );
            if need > c {
                let _ = write!(
                    a,
                    "over the {} the allocator can reserve, so no allocator setting can avoid it; only holding less memory can.",
                    st.bytes(c)
                );
            } else {
                let _ = write!(
                    a,
                    "{} below the capacity, so a perfectly packing allocator would have served it.",
                    st.bytes(c - need)
                );
            }
        }
        if r.recorded_ooms.len() > shown {
            let _ = write!(
                a,
                " The other {} recorded OOMs are not listed here (the JSON form holds each).",
                r.recorded_ooms.len() - shown
            );
        }
    }
    if r.capacity_source == CapacitySource::RecordedOom {
        a.push_str(" (Capacity from the recorded OOM: memory held outside the allocator is assumed unchanged.)");
    }
    Some(a)
}

/// One sentence: would `expandable_segments:True` have avoided the
/// recorded OOM, in the model (or what it does to the peak without one).
pub fn expandable_answer(st: &Style, a: &ExpandableAnswer) -> String {
    match *a {
        ExpandableAnswer::AlreadyOn => {
            "The recording already ran with expandable_segments:True.".to_string()
        }
        ExpandableAnswer::AlreadyOnAtOom => "expandable_segments was already on when the OOM was recorded: turning it on cannot have avoided it.".to_string(),
        ExpandableAnswer::NoOom {
            expandable,
            recorded,
            inherited: Some(start),
        } => format!(
            "No OOM was recorded; in the model, expandable_segments:True peaks at {} reserved during the trace, against {} under the recorded settings (both start from the {} inherited from before the trace, which holds the peak over the whole run).",
            st.bytes(expandable),
            st.bytes(recorded),
            st.bytes(start)
        ),
        ExpandableAnswer::NoOom {
            expandable,
            recorded,
            inherited: None,
        } => format!(
            "No OOM was recorded; in the model, expandable_segments:True peaks at {} reserved, against {} under the recorded settings.",
            st.bytes(expandable),
            st.bytes(recorded)
        ),
        ExpandableAnswer::NotAvoided => {
            "In the model, expandable_segments:True would not have avoided the OOM.".to_string()
        }
        ExpandableAnswer::AvoidedButFailsAt { event } => format!(
            "In the model, expandable_segments:True would have avoided the recorded OOM, but another allocation fails at event {event}."
        ),
        ExpandableAnswer::Avoided {
            peak,
            in_trace: Some(e),
        } => format!(
            "In the model, expandable_segments:True would have avoided the OOM (peak reserved during the trace {}; {} with the start inherited from before the trace).",
            st.bytes(e),
            st.bytes(peak)
        ),
        ExpandableAnswer::Avoided {
            peak,
            in_trace: None,
        } => format!(
            "In the model, expandable_segments:True would have avoided the OOM (peak reserved {}).",
            st.bytes(peak)
        ),
    }
}

/// "at least " before a count of reproduced segment events made within
/// windows (a lower bound), else nothing.
fn at_least(f: &crate::sim::fidelity::Fidelity) -> &'static str {
    if f.segment_events_window.is_some() {
        "at least "
    } else {
        ""
    }
}

/// How a count made within windows was made, else nothing.
fn within_windows(f: &crate::sim::fidelity::Fidelity) -> String {
    f.segment_events_window.map_or_else(String::new, |w| {
        format!(", counted within windows of {w} recorded segment events")
    })
}

/// The model's fidelity in one sentence, for every place a what-if figure
/// is shown.
pub fn fidelity_line(r: &SimReport) -> String {
    let f = &r.fidelity;
    let seg = match f.segment_events_matched {
        Some(m) => format!(
            "{}{} of {} recorded segment events reproduced in order ({}{})",
            at_least(f),
            f.matched_segment_events,
            f.recorded_segment_events,
            fmt_pct(m),
            within_windows(f)
        ),
        None => "no segment events recorded or simulated".to_string(),
    };
    format!(
        "Model fidelity under the recorded settings: {seg}; reserved bytes off by at most {} of the recorded peak (mean {}){}.",
        fmt_pct(f.max_reserved_error_share),
        fmt_pct(f.mean_reserved_error_share),
        if r.start_exact {
            ""
        } else {
            "; the start state is approximate (the trace begins mid-run)"
        }
    )
}

const COLORS: &[&str] = &[
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// SVG chart: reserved bytes over the trace (x = event index) for the
/// recording and each configuration, with the capacity and the
/// perfect-packing floor as horizontal lines.
pub fn chart_svg(title: &str, r: &SimReport) -> String {
    // The legend column grows with its longest label (6.5 px a
    // character at 12 px, generously), so a long configuration is not cut.
    let longest = r
        .series
        .iter()
        .map(|s| s.label.chars().count() + "model, recorded settings ()".len())
        .chain(std::iter::once("floor (peak requested)".len()))
        .max()
        .unwrap_or(0) as f64;
    let (ml, mr, mt, mb) = (80.0, (46.0 + 6.5 * longest).max(260.0), 40.0, 40.0);
    let (w, h) = (700.0 + mr, 460.0f64);
    let pw = w - ml - mr;
    let ph = h - mt - mb;
    let xmax = r.events.max(1) as f64;
    let mut ymax = r
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .max()
        .unwrap_or(0)
        .max(r.floor_peak_requested);
    if let Some(c) = r.capacity {
        ymax = ymax.max(c);
    }
    let ymax = (ymax.max(1) as f64) * 1.05;
    let x = |e: f64| ml + pw * e / xmax;
    let y = |v: f64| mt + ph - ph * v / ymax;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{ml}" y="22" font-size="14">{}</text>"#,
        xml_escape(title)
    );
    let _ = writeln!(
        s,
        r##"<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>"##
    );
    for k in 0..=4 {
        let v = ymax / 1.05 * k as f64 / 4.0;
        let yy = y(v);
        let _ = writeln!(
            s,
            r##"<line x1="{ml}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            ml + pw,
            ml - 6.0,
            yy + 4.0,
            fmt_binary(v as u64)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">trace event</text>"#,
        ml + pw / 2.0,
        h - 10.0
    );
    let mut legend = Vec::new();
    let hline = |s: &mut String, v: u64, color: &str, dash: &str| {
        let yy = y(v as f64);
        let _ = writeln!(
            s,
            r#"<line x1="{ml}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="{color}" stroke-dasharray="{dash}"/>"#,
            ml + pw
        );
    };
    if let Some(c) = r.capacity {
        hline(&mut s, c, "#d62728", "6 3");
        legend.push(("capacity".to_string(), "#d62728", "6 3"));
    }
    hline(&mut s, r.floor_peak_requested, "#555", "2 3");
    legend.push(("floor (peak requested)".to_string(), "#555", "2 3"));
    for (i, ser) in r.series.iter().enumerate() {
        let (color, width, dash) = if i == 0 {
            ("#000", 2.5, "")
        } else {
            (COLORS[(i - 1) % COLORS.len()], 1.2, "")
        };
        let pts: Vec<String> = ser
            .points
            .iter()
            .map(|&(e, v)| format!("{:.1},{:.1}", x(e as f64), y(v as f64)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="{width}" points="{}"/>"#,
            pts.join(" ")
        );
        let label = if i == 1 {
            format!("model, recorded settings ({})", ser.label)
        } else if i == 0 {
            "recorded".to_string()
        } else {
            ser.label.clone()
        };
        legend.push((label, color, dash));
    }
    for (k, (label, color, dash)) in legend.iter().enumerate() {
        let ly = mt + 10.0 + 18.0 * k as f64;
        let lx = ml + pw + 14.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 20.0,
            lx + 26.0,
            ly + 4.0,
            xml_escape(label)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
