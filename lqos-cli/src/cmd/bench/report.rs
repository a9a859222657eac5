//! Rendering bench results: the text table, JSON and the SVG sweep plot.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use lqos_bench::Summary;
use serde::Serialize;

/// One row of the result table: a method (or one interface of method 1).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Method number as in docs/benchmarks.md ("1", "3a", ...).
    pub id: String,
    /// What was timed.
    pub name: String,
    /// Circuits in the tree.
    pub circuits: usize,
    /// Timing summary.
    pub summary: Summary,
    /// Median wall time relative to method 2 (combined `tc -b`).
    pub ratio_to_combined: Option<f64>,
}

/// Fills `ratio_to_combined` of every row from the row with id "2" of the
/// same circuit count.
pub fn fill_ratios(rows: &mut [Row]) {
    let baselines: Vec<(usize, Summary)> = rows
        .iter()
        .filter(|r| r.id == "2")
        .map(|r| (r.circuits, r.summary))
        .collect();
    for row in rows.iter_mut() {
        row.ratio_to_combined = baselines
            .iter()
            .find(|(c, _)| *c == row.circuits)
            .and_then(|(_, b)| row.summary.ratio_to(b));
    }
}

fn secs(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

/// Number of table columns.
const COLUMNS: usize = 14;

/// The cells of one row, in column order.
fn cells(r: &Row) -> [String; COLUMNS] {
    let s = &r.summary;
    [
        r.id.clone(),
        r.name.clone(),
        r.circuits.to_string(),
        secs(s.wall.median),
        secs(s.wall.min),
        secs(s.wall.max),
        secs(s.user.median),
        secs(s.user.min),
        secs(s.user.max),
        secs(s.sys.median),
        secs(s.sys.min),
        secs(s.sys.max),
        format!("{:.0}", s.ops_per_sec),
        r.ratio_to_combined
            .map(|x| format!("{x:.3}"))
            .unwrap_or_else(|| "-".into()),
    ]
}

const HEADERS: [&str; COLUMNS] = [
    "#", "method", "circuits", "wall", "w.min", "w.max", "user", "u.min", "u.max", "sys", "s.min",
    "s.max", "ops/s", "vs #2",
];

/// The human-readable table: median, min and max of wall, user and sys
/// seconds per method, and the ratio of median wall time to method 2.
pub fn table(rows: &[Row]) -> String {
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(0).max(6);
    let line = |c: [&str; COLUMNS]| {
        let mut l = format!("{:<3} {:<width$} {:>8}", c[0], c[1], c[2]);
        for (i, cell) in c[3..12].iter().enumerate() {
            let gap = if i % 3 == 0 { "  " } else { " " };
            l += &format!("{gap}{cell:>6}");
        }
        l += &format!("  {:>8} {:>6}\n", c[12], c[13]);
        l
    };
    let mut out = String::from("times in seconds: median, min and max over runs\n");
    out += &line(HEADERS);
    for r in rows {
        let c = cells(r);
        out += &line(c.each_ref().map(String::as_str));
    }
    out
}

/// A markdown table (as in docs/benchmarks.md).
pub fn markdown(rows: &[Row]) -> String {
    let mut out = format!(
        "| # | method | circuits | wall median (s) | min | max | user median (s) | min | max | sys median (s) | min | max | ops/s | vs #2 |\n|---|---|{}\n",
        "---:|".repeat(COLUMNS - 2)
    );
    for r in rows {
        let _ = writeln!(out, "| {} |", cells(r).join(" | "));
    }
    out
}

/// Draws median wall time against circuit count, one line per method.
pub fn plot_svg(rows: &[Row], path: &Path) -> anyhow::Result<()> {
    use plotters::prelude::*;

    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for r in rows {
        let label = format!("{} {}", r.id, r.name);
        let point = (r.circuits as f64, r.summary.wall.median.as_secs_f64());
        match series.iter_mut().find(|(l, _)| *l == label) {
            Some((_, pts)) => pts.push(point),
            None => series.push((label, vec![point])),
        }
    }
    let max_x = rows.iter().map(|r| r.circuits).max().unwrap_or(1) as f64;
    let max_y = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(_, y)| y))
        .fold(0.0f64, f64::max)
        .max(1e-3);
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("drawing {}: {e}", path.display());
    let root = SVGBackend::new(path, (1000, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "tree load time vs circuits (median wall)",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..max_x * 1.05, 0f64..max_y * 1.1)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("circuits")
        .y_desc("seconds")
        .draw()
        .map_err(|e| err(&e))?;
    for (i, (label, mut pts)) in series.into_iter().enumerate() {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lqos_bench::Sample;

    fn row(id: &str, circuits: usize, wall_ms: u64) -> Row {
        let s = Sample {
            wall: Duration::from_millis(wall_ms),
            user: Duration::from_millis(1),
            sys: Duration::from_millis(wall_ms / 2),
            ops: 100,
        };
        Row {
            id: id.into(),
            name: format!("method {id}"),
            circuits,
            summary: Summary::of(&[s]),
            ratio_to_combined: None,
        }
    }

    #[test]
    fn ratios_are_per_circuit_count() {
        let mut rows = vec![
            row("2", 1000, 200),
            row("6", 1000, 100),
            row("2", 2000, 800),
            row("6", 2000, 200),
        ];
        fill_ratios(&mut rows);
        let r: Vec<f64> = rows.iter().map(|r| r.ratio_to_combined.unwrap()).collect();
        assert_eq!(r, vec![1.0, 0.5, 1.0, 0.25]);
        let t = table(&rows);
        assert!(t.lines().nth(3).unwrap().contains("0.500"), "{t}");
        assert!(markdown(&rows).contains("| 6 | method 6 | 1000 | 0.100 | 0.100 | 0.100 | 0.001 |"));
    }

    #[test]
    fn plot_writes_an_svg_with_every_method() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.svg");
        let rows = vec![
            row("2", 1000, 200),
            row("2", 2000, 800),
            row("6", 1000, 100),
        ];
        plot_svg(&rows, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("2 method 2") && svg.contains("6 method 6"));
    }
}
