//! `lqos top`: a full-screen view of the busiest circuits (or nodes),
//! refreshed every second (ratatui on crossterm: plain terminal escapes,
//! so it works over ssh).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use lqos_apply::stats::{Stats, StatsIndex, StatsTracker};
use lqos_apply::NetlinkLive;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row, Table};
use ratatui::Frame;

use super::apply::TargetArgs;
use super::stats::{clean, delay, last_plan, mbit, select, select_nodes, Filter, SortKey};
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
    let index = StatsIndex::new(&plan);
    let mut tracker = StatsTracker::new(&index);
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
                match live.poll_stats(&index, true) {
                    Ok(raw) => {
                        app.stats = Some(tracker.observe(&index, &raw, start.elapsed()));
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
    let keys = match (&app.editing, &app.error) {
        (Some(t), _) => format!("filter: {}_  (Enter apply, Esc cancel)", clean(t, 64)),
        (None, Some(e)) => format!("error: {}", clean(e, 200)),
        (None, None) => {
            "q quit  s sort  v circuits/nodes  / filter  c clear filter  ↑↓ scroll".into()
        }
    };
    f.render_widget(Paragraph::new(keys), foot);
    let Some(stats) = &app.stats else { return };
    let sel = Filter {
        text: app.filter.clone(),
        ..Filter::default()
    };
    let bold = Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED);
    let rows_fit = usize::from(body.height.saturating_sub(1));
    match app.view {
        View::Circuits => {
            let all = select(stats, &sel, app.sort, None);
            let start = app.scroll.min(all.len().saturating_sub(1));
            let rows: Vec<Row> = all
                .iter()
                .skip(start)
                .take(rows_fit)
                .map(|c| {
                    Row::new(vec![
                        Cell::from(clean(&c.id, 16)),
                        Cell::from(clean(&c.name, 24)),
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
            ])
            .style(bold);
            let widths = [
                Constraint::Length(16),
                Constraint::Min(10),
                Constraint::Length(16),
                Constraint::Length(10),
                Constraint::Length(7),
                Constraint::Length(10),
                Constraint::Length(7),
                Constraint::Length(8),
                Constraint::Length(7),
                Constraint::Length(9),
            ];
            f.render_widget(Table::new(rows, widths).header(header), body);
        }
        View::Nodes => {
            let all = select_nodes(stats, &sel);
            let start = app.scroll.min(all.len().saturating_sub(1));
            let rows: Vec<Row> = all
                .iter()
                .skip(start)
                .take(rows_fit)
                .map(|n| {
                    Row::new(vec![
                        Cell::from(clean(&n.name, 24)),
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
            ])
            .style(bold);
            let widths = [
                Constraint::Min(16),
                Constraint::Length(24),
                Constraint::Length(10),
                Constraint::Length(7),
                Constraint::Length(10),
                Constraint::Length(7),
                Constraint::Length(8),
            ];
            f.render_widget(Table::new(rows, widths).header(header), body);
        }
    }
}
