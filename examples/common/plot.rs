//! `--plot FILE.svg`: the seed experiments' figures, drawn with `plotters`'
//! SVG backend (pure Rust, no font library: text is left to the viewer).
//!
//! An example collects its rows into [`Series`] and calls [`save`]: one
//! line chart, one line with markers per series, axes linear or
//! logarithmic, a legend.

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

/// One line of a chart.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    pub(crate) name: String,
    pub(crate) points: Vec<(f64, f64)>,
}

impl Series {
    pub(crate) fn new(name: impl Into<String>) -> Series {
        Series {
            name: name.into(),
            points: Vec::new(),
        }
    }
}

/// An axis: its label and whether it is logarithmic.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Axis<'a> {
    pub(crate) label: &'a str,
    pub(crate) log: bool,
}

impl<'a> Axis<'a> {
    pub(crate) fn linear(label: &'a str) -> Axis<'a> {
        Axis { label, log: false }
    }

    pub(crate) fn log(label: &'a str) -> Axis<'a> {
        Axis { label, log: true }
    }
}

/// The path given with `--plot`, if any; it must end in `.svg`.
pub(crate) fn plot_path() -> Option<String> {
    let path: String = super::arg("--plot")?;
    if !path.ends_with(".svg") {
        eprintln!("--plot {path}: only SVG is drawn (give a FILE.svg)");
        std::process::exit(2);
    }
    Some(path)
}

/// Draws `series` to the SVG file `path`; exits with a message on failure
/// (an example has nothing better to do with it).
pub(crate) fn save(path: &str, title: &str, x: Axis<'_>, y: Axis<'_>, series: &[Series]) {
    if let Err(err) = draw(path, title, x, y, series) {
        eprintln!("--plot {path}: {err}");
        std::process::exit(1);
    }
    eprintln!("plot: wrote {path}");
}

/// The range of the values on one axis, padded a little; a log axis keeps
/// only positive values.
fn extent(values: impl Iterator<Item = f64>, log: bool) -> Result<(f64, f64), String> {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && (!log || *v > 0.0))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if lo > hi {
        return Err("no point to draw".into());
    }
    Ok(if log {
        (lo / 1.5, hi * 1.5)
    } else {
        let pad = ((hi - lo) * 0.05).max(hi.abs() * 0.05).max(1e-9);
        (
            (lo - pad).min(if lo >= 0.0 { 0.0 } else { lo - pad }),
            hi + pad,
        )
    })
}

fn draw(
    path: &str,
    title: &str,
    x: Axis<'_>,
    y: Axis<'_>,
    series: &[Series],
) -> Result<(), String> {
    let xs = extent(
        series.iter().flat_map(|s| s.points.iter().map(|p| p.0)),
        x.log,
    )?;
    let ys = extent(
        series.iter().flat_map(|s| s.points.iter().map(|p| p.1)),
        y.log,
    )?;
    let (xr, yr) = (xs.0..xs.1, ys.0..ys.1);
    match (x.log, y.log) {
        (false, false) => chart(path, title, x, y, series, xr, yr),
        (true, false) => chart(path, title, x, y, series, xr.log_scale(), yr),
        (false, true) => chart(path, title, x, y, series, xr, yr.log_scale()),
        (true, true) => chart(path, title, x, y, series, xr.log_scale(), yr.log_scale()),
    }
}

fn chart<XR, YR>(
    path: &str,
    title: &str,
    x: Axis<'_>,
    y: Axis<'_>,
    series: &[Series],
    xr: XR,
    yr: YR,
) -> Result<(), String>
where
    XR: AsRangedCoord<Value = f64>,
    YR: AsRangedCoord<Value = f64>,
    XR::CoordDescType: ValueFormatter<f64>,
    YR::CoordDescType: ValueFormatter<f64>,
{
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(xr, yr)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc(x.label)
        .y_desc(y.label)
        .x_label_formatter(&|v| short(*v))
        .y_label_formatter(&|v| short(*v))
        .draw()
        .map_err(|e| err(&e))?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let points: Vec<(f64, f64)> = s
            .points
            .iter()
            .copied()
            .filter(|&(px, py)| (!x.log || px > 0.0) && (!y.log || py > 0.0))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(s.name.as_str())
            .legend(move |(lx, ly)| {
                PathElement::new(vec![(lx, ly), (lx + 20, ly)], color.stroke_width(2))
            });
        chart
            .draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 3, color.filled())),
            )
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// A tick label: `1Ki`, `16Mi` (exact multiples of 1024: sizes), `1K`,
/// `2.5M`, `0.25`, without trailing noise.
fn short(v: f64) -> String {
    for (unit, suffix) in [(1u64 << 30, "Gi"), (1 << 20, "Mi"), (1 << 10, "Ki")] {
        let scaled = v / unit as f64;
        if scaled.abs() >= 1.0 && scaled == scaled.round() {
            return format!("{scaled:.0}{suffix}");
        }
    }
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "K")
    } else {
        (v, "")
    };
    let text = if scaled == scaled.round() {
        format!("{scaled:.0}")
    } else if scaled.abs() >= 10.0 {
        format!("{scaled:.1}")
    } else {
        format!("{scaled:.3}")
    };
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    format!("{text}{suffix}")
}
