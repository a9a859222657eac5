//! `lqos top`: a full-screen view of the busiest circuits (or nodes),
//! refreshed every second (ratatui on crossterm: plain terminal escapes,
//! so it works over ssh).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use lqos_apply::live::NetlinkLive;
use lqos_apply::stats::{Stats, StatsPoll};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row, Table};
use ratatui::Frame;

use super::apply::TargetArgs;
use super::stats::{
    clean, delay, last_plan, mbit, retransmits, rtt, select, select_nodes, tcp_source, Filter,
    SortKey,
};
use super::{Done, Outcome};

/// Arguments of `lqos top`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Namespace and state directory (the plan is the last one applied).
    #[command(flatten)]
    pub target: TargetArgs,
    /// Seconds between refreshes.
    #[arg(long, value_name = "SECS", default_value_t = 1.0)]
    pub interval: f64,
    /// Sort circuits by this at start (`s` changes it).
    #[arg(long, value_enum, default_value_t = SortKey::Rate)]
    pub sort: SortKey,
    /// Show only circuits and nodes whose ID, name or parent contains this
    /// (`/` changes it).
    #[arg(long, value_name = "TEXT")]
    pub filter: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum View {
    Circuits,
    Nodes,
}

struct App {
    view: View,
    sort: SortKey,
    filter: Option<String>,
    /// Text being typed after `/`.
    editing: Option<String>,
    scroll: usize,
    stats: Option<Stats>,
    error: Option<String>,
}

/// Runs `lqos top`.
pub fn run(args: Args) -> Outcome {
    super::privilege::require("`lqos top`", false, args.target.netns.is_some())?;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        anyhow::bail!(
            "lqos top needs a terminal; use `lqos stats` (or `lqos stats --json`) for scripts"
        );
    }
    if !(args.interval.is_finite() && (0.1..=3600.0).contains(&args.interval)) {
        anyhow::bail!("--interval {}: give 0.1 to 3600 seconds", args.interval);
    }
    let plan = last_plan(&args.target)?;
    let live = NetlinkLive::new(args.target.netns.clone());
    let mut poll = StatsPoll::new(&plan).with_tcp(tcp_source(&args.target));
    let start = Instant::now();
    let every = Duration::from_secs_f64(args.interval);
    let mut app = App {
        view: View::Circuits,
        sort: args.sort,
        filter: args.filter,
        editing: None,
        scroll: 0,
        stats: None,
        error: None,
    };
    let mut terminal = ratatui::init();
    let result = (|| -> anyhow::Result<()> {
        let mut next = Instant::now();
        loop {
            if Instant::now() >= next {
                match poll.poll(&live, true, start.elapsed()) {
                    Ok(snapshot) => {
                        app.stats = Some(snapshot.stats);
                        app.error = None;
                    }
                    Err(e) => app.error = Some(e.to_string()),
                }
                next = Instant::now() + every;
            }
            terminal.draw(|f| draw(f, &app))?;
            let wait = next.saturating_duration_since(Instant::now());
            if event::poll(wait)? {
                if let Event::Key(k) = event::read()? {
                    if k.kind != KeyEventKind::Press {
                        continue;
                    }
                    if handle_key(&mut app, k.code, k.modifiers) {
                        return Ok(());
                    }
                }
            }
        }
    })();
    ratatui::restore();
    result?;
    Ok(Done::Ok)
}

/// Applies one key; `true` to quit.
fn handle_key(app: &mut App, code: KeyCode, mods: KeyModifiers) -> bool {
    if let Some(text) = &mut app.editing {
        match code {
            KeyCode::Enter => {
                let t = std::mem::take(text);
                app.filter = (!t.is_empty()).then_some(t);
                app.editing = None;
                app.scroll = 0;
            }
            KeyCode::Esc => app.editing = None,
            KeyCode::Backspace => {
                text.pop();
            }
            KeyCode::Char(c) if !c.is_control() && text.len() < 64 => text.push(c),
            _ => {}
        }
        return false;
    }
    match code {
        KeyCode::Char('q') | KeyCode::Esc => return true,
        KeyCode::Char('c') if mods.contains(KeyModifiers::CONTROL) => return true,
        KeyCode::Char('s') => app.sort = app.sort.next(),
        KeyCode::Char('v') | KeyCode::Tab => {
            app.view = match app.view {
                View::Circuits => View::Nodes,
                View::Nodes => View::Circuits,
            };
            app.scroll = 0;
        }
        KeyCode::Char('/') => app.editing = Some(String::new()),
        KeyCode::Char('c') => {
            app.filter = None;
            app.scroll = 0;
        }
        KeyCode::Down | KeyCode::Char('j') => app.scroll += 1,
        KeyCode::Up | KeyCode::Char('k') => app.scroll = app.scroll.saturating_sub(1),
        KeyCode::PageDown => app.scroll += 20,
        KeyCode::PageUp => app.scroll = app.scroll.saturating_sub(20),
        _ => {}
    }
    false
}

fn pct(rate: f64, ceil: u64) -> String {
    if ceil == 0 {
        "-".into()
    } else {
        format!("{:.0}%", 100.0 * rate / ceil as f64)
    }
}

fn draw(f: &mut Frame, app: &App) {
    let [head, body, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(f.area());
    let filter = app
        .filter
        .as_deref()
        .map(|t| format!(" filter {:?}", clean(t, 32)))
        .unwrap_or_default();
    let title = match &app.stats {
        Some(s) => format!(
            "lqos top: {} circuits, {} nodes, sorted by {}{}{}",
            s.circuits.len(),
            s.nodes.len(),
            app.sort.name(),
            filter,
            if s.interval_secs.is_none() {
                " (rates after the next refresh)"
            } else {
                ""
            }
        ),
        None => "lqos top: reading the kernel...".into(),
    };
    f.render_widget(
        Paragraph::new(title).style(Style::new().add_modifier(Modifier::BOLD)),
        head,
    );
    let keys = match (&app.editing, &app.error, &app.stats) {
        (Some(t), _, _) => format!("filter: {}_  (Enter apply, Esc cancel)", clean(t, 64)),
        (None, Some(e), _) => format!("error: {}", clean(e, 200)),
        (None, None, s) => format!(
            "q quit  s sort  v circuits/nodes  / filter  c clear filter  ↑↓ scroll{}",
            s.as_ref()
                .map(|s| format!(
                    "  |  unclassified Mb/s: down {} up {}",
                    mbit(s.unclassified.download.rate_bps),
                    mbit(s.unclassified.upload.rate_bps)
                ))
                .unwrap_or_default()
        ),
    };
    f.render_widget(Paragraph::new(keys), foot);
    let Some(stats) = &app.stats else { return };
    let sel = Filter {
        text: app.filter.clone(),
        ..Filter::default()
    };
    let bold = Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED);
    let rows_fit = usize::from(body.height.saturating_sub(1));
    // The name column takes the width the fixed ones leave (one space
    // between columns), and names are cut to exactly that width.
    let rest = |fixed: &[u16]| -> u16 {
        let used: u16 = fixed.iter().sum::<u16>() + fixed.len() as u16;
        body.width.saturating_sub(used).max(10)
    };
    match app.view {
        View::Circuits => {
            let fixed = [16, 16, 10, 7, 10, 7, 8, 7, 9, 15, 7];
            let name_w = rest(&fixed);
            let all = select(stats, &sel, app.sort, None);
            let start = app.scroll.min(all.len().saturating_sub(1));
            let rows: Vec<Row> = all
                .iter()
                .skip(start)
                .take(rows_fit)
                .map(|c| {
                    Row::new(vec![
                        Cell::from(clean(&c.id, 16)),
                        Cell::from(clean(&c.name, usize::from(name_w))),
                        Cell::from(clean(&c.parent, 16)),
                        Cell::from(Line::from(mbit(c.download.rate_bps)).right_aligned()),
                        Cell::from(
                            Line::from(pct(c.download.rate_bps, c.download.ceil_bps))
                                .right_aligned(),
                        ),
                        Cell::from(Line::from(mbit(c.upload.rate_bps)).right_aligned()),
                        Cell::from(
                            Line::from(pct(c.upload.rate_bps, c.upload.ceil_bps)).right_aligned(),
                        ),
                        Cell::from(
                            Line::from(format!("{:.1}", c.download.drop_rate + c.upload.drop_rate))
                                .right_aligned(),
                        ),
                        Cell::from(
                            Line::from(format!("{:.1}", c.download.ecn_rate + c.upload.ecn_rate))
                                .right_aligned(),
                        ),
                        Cell::from(Line::from(delay(c)).right_aligned()),
                        Cell::from(Line::from(rtt(c.tcp.as_deref())).right_aligned()),
                        Cell::from(Line::from(retransmits(c.tcp.as_deref())).right_aligned()),
                    ])
                })
                .collect();
            let header = Row::new([
                "CIRCUIT",
                "NAME",
                "PARENT",
                "DOWN Mb/s",
                "of ceil",
                "UP Mb/s",
                "of ceil",
                "DROPS/s",
                "ECN/s",
                "DELAY ms",
                "p95 ms sub/inet",
                "RETX/s",
            ])
            .style(bold);
            let widths = [
                Constraint::Length(fixed[0]),
                Constraint::Length(name_w),
                Constraint::Length(fixed[1]),
                Constraint::Length(fixed[2]),
                Constraint::Length(fixed[3]),
                Constraint::Length(fixed[4]),
                Constraint::Length(fixed[5]),
                Constraint::Length(fixed[6]),
                Constraint::Length(fixed[7]),
                Constraint::Length(fixed[8]),
                Constraint::Length(fixed[9]),
                Constraint::Length(fixed[10]),
            ];
            f.render_widget(Table::new(rows, widths).header(header), body);
        }
        View::Nodes => {
            let fixed = [24, 10, 7, 10, 7, 8, 15, 7];
            let name_w = rest(&fixed);
            let all = select_nodes(stats, &sel);
            let start = app.scroll.min(all.len().saturating_sub(1));
            let rows: Vec<Row> = all
                .iter()
                .skip(start)
                .take(rows_fit)
                .map(|n| {
                    Row::new(vec![
                        Cell::from(clean(&n.name, usize::from(name_w))),
                        Cell::from(clean(n.parent.as_deref().unwrap_or("-"), 24)),
                        Cell::from(Line::from(mbit(n.download.rate_bps)).right_aligned()),
                        Cell::from(
                            Line::from(pct(n.download.rate_bps, n.download.ceil_bps))
                                .right_aligned(),
                        ),
                        Cell::from(Line::from(mbit(n.upload.rate_bps)).right_aligned()),
                        Cell::from(
                            Line::from(pct(n.upload.rate_bps, n.upload.ceil_bps)).right_aligned(),
                        ),
                        Cell::from(
                            Line::from(format!("{:.1}", n.download.drop_rate + n.upload.drop_rate))
                                .right_aligned(),
                        ),
                        Cell::from(Line::from(rtt(n.tcp.as_deref())).right_aligned()),
                        Cell::from(Line::from(retransmits(n.tcp.as_deref())).right_aligned()),
                    ])
                })
                .collect();
            let header = Row::new([
                "NODE",
                "PARENT",
                "DOWN Mb/s",
                "of ceil",
                "UP Mb/s",
                "of ceil",
                "DROPS/s",
                "p95 ms sub/inet",
                "RETX/s",
            ])
            .style(bold);
            let widths = [
                Constraint::Length(name_w),
                Constraint::Length(fixed[0]),
                Constraint::Length(fixed[1]),
                Constraint::Length(fixed[2]),
                Constraint::Length(fixed[3]),
                Constraint::Length(fixed[4]),
                Constraint::Length(fixed[5]),
                Constraint::Length(fixed[6]),
                Constraint::Length(fixed[7]),
            ];
            f.render_widget(Table::new(rows, widths).header(header), body);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lqos_apply::stats::{CircuitStats, DirStats, Unclassified};
    use ratatui::backend::TestBackend;

    fn screen(app: &App, width: u16) -> Vec<String> {
        let mut t = ratatui::Terminal::new(TestBackend::new(width, 8)).unwrap();
        t.draw(|f| draw(f, app)).unwrap();
        let buf = t.backend().buffer().clone();
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect()
            })
            .collect()
    }

    /// Regression: the NAME column was 62 wide on a 150-column terminal
    /// but names were cut at 24 characters. A name is cut to the width its
    /// column has; the default classes' traffic is on the last line.
    #[test]
    fn names_fill_their_column_and_unclassified_traffic_is_shown() {
        let name = "4710 Maple Avenue, Jamestown, New York, apartment 12B";
        let c = {
            let mut p = CircuitStats::default();
            p.id = "10001".into();
            p.name = name.into();
            p.parent = "AP_1".into();
            p.download = DirStats::default();
            p.upload = DirStats::default();
            p
        };
        let mut unclassified = Unclassified::default();
        unclassified.download.rate_bps = 12.3e6;
        let app = App {
            view: View::Circuits,
            sort: SortKey::Rate,
            filter: None,
            editing: None,
            scroll: 0,
            stats: Some({
                let mut p = Stats::default();
                p.interval_secs = Some(1.0);
                p.circuits = vec![c];
                p.nodes = Vec::new();
                p.unclassified = unclassified;
                p
            }),
            error: None,
        };
        let wide = screen(&app, 180);
        assert!(wide[2].contains(name), "{wide:#?}");
        // Narrow: cut where the column ends, the next column intact.
        let narrow = screen(&app, 134);
        let row = &narrow[2];
        let kept = name.chars().take(134 - 123).collect::<String>();
        assert!(row.contains(&format!("{kept} AP_1")), "{narrow:#?}");
        assert!(
            narrow[7].contains("unclassified Mb/s: down 12.3 up 0.0"),
            "{narrow:#?}"
        );
    }
}
