//! Live tensor bytes by memory-profiler category over time, stacked (the
//! picture `export_memory_timeline(...html)` draws, with PyTorch's colours),
//! the peak marked with its total.

use super::*;
use crate::core::units::fmt_binary;
use crate::model::memtimeline::Category;
use crate::model::memtimeline::CategorySample;

/// Samples in time order; `time_us == None` = before profiling (drawn at 0).
pub type CategoriesChart<'a> = Chart<'a, CategorySample>;

/// Height of the plot, the legend apart.
const HEIGHT: u32 = 440;
const CHART: &str = "live bytes by category";

/// PyTorch's colour names as RGB.
pub fn category_color(c: Category) -> RGBColor {
    match c {
        Category::Parameter => RGBColor(0, 100, 0),
        Category::OptimizerState => RGBColor(218, 165, 32),
        Category::Input => RGBColor(0, 0, 0),
        Category::Temporary => RGBColor(147, 112, 219),
        Category::Activation => RGBColor(255, 0, 0),
        Category::Gradient => RGBColor(0, 0, 205),
        Category::AutogradDetail => RGBColor(65, 105, 225),
        Category::Unknown => RGBColor(128, 128, 128),
    }
}

pub fn categories_svg(c: &CategoriesChart) -> Result<Svg, ChartError> {
    let origin = c.items.iter().filter_map(|s| s.time_us).min();
    let x = |s: &CategorySample| match (s.time_us, origin) {
        (Some(t), Some(o)) => (t - o) as f64 / 1e6,
        _ => 0.0,
    };
    let xmax = c.items.iter().map(x).fold(0.0, f64::max);
    let xmax = if xmax > 0.0 { xmax * 1.015 } else { 1.0 };
    let peak = c
        .items
        .iter()
        .fold(None, |b: Option<&CategorySample>, s| match b {
            Some(b) if b.total() >= s.total() => Some(b),
            _ => Some(s),
        });
    let top = peak.map_or(0, |p| p.total()).max(1);
    let unit = byte_unit(top);
    let ymax = top as f64 / unit.div * 1.12;
    let present: Vec<Category> = Category::ALL
        .into_iter()
        .filter(|&k| c.items.iter().any(|s| s.get(k) > 0))
        .collect();
    let mut legend: Vec<LegendEntry> = present
        .iter()
        .map(|&k| LegendEntry::new(k.as_str(), category_color(k), Swatch::Fill))
        .collect();
    if let Some(p) = peak {
        legend.push(LegendEntry::new(
            format!(
                "peak {} at {}",
                fmt_binary(p.total()),
                match p.time_us {
                    Some(_) => format!("t={:.3} s", x(p)),
                    None => "the start".into(),
                }
            ),
            TEXT,
            Swatch::Dot,
        ));
    }
    let e = err(CHART);
    panel(CHART, c.width, HEIGHT, &legend, |upper| {
        let mut chart = frame(upper, c.title, 64)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)
            .map_err(|x| e(&x))?;
        let fmt = |v: &f64| tick(*v);
        house_style(&mut chart.configure_mesh())
            .x_desc("seconds since the first profiled event")
            .y_desc(unit.name)
            .x_label_formatter(&fmt)
            .y_label_formatter(&fmt)
            .x_labels(10)
            .y_labels(8)
            .draw()
            .map_err(|x| e(&x))?;
        // Each band is the area under the running sum up to its category;
        // drawn top band first so the lower ones paint over it.
        for (k, &cat) in present.iter().enumerate().rev() {
            let upto = &present[..=k];
            let pts: Vec<(f64, f64)> = c
                .items
                .iter()
                .map(|s| {
                    let sum: u64 = upto.iter().map(|&q| s.get(q)).sum();
                    (x(s), sum as f64 / unit.div)
                })
                .collect();
            let color = category_color(cat);
            chart
                .draw_series(AreaSeries::new(pts, 0.0, color.mix(0.85)).border_style(color))
                .map_err(|x| e(&x))?;
        }
        if let Some(p) = peak {
            let v = p.total() as f64 / unit.div;
            chart
                .draw_series(std::iter::once(Circle::new((x(p), v), 6, TEXT.filled())))
                .map_err(|x| e(&x))?;
            chart
                .draw_series(std::iter::once(Circle::new(
                    (x(p), v),
                    6,
                    WHITE.stroke_width(1),
                )))
                .map_err(|x| e(&x))?;
        }
        if c.items.is_empty() {
            let plot = chart.plotting_area().get_pixel_range();
            centered_note(upper, &plot, "the memory timeline is empty", CHART)?;
        }
        Ok(())
    })
}
