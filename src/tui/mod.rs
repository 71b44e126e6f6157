//! The live dashboard. It reads the engine's snapshots and steers the run
//! through its `Control`; the engine never waits for the screen.

mod input;
mod state;
mod view;

pub use input::{action, Action};
pub use state::Dashboard;
pub use view::draw;

use std::io::{self, Stdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event};
use ratatui::crossterm::terminal::{self, EnterAlternateScreen, LeaveAlternateScreen};
use ratatui::crossterm::{cursor, execute};
use ratatui::Terminal;
use tokio_util::sync::CancellationToken;

use crate::engine::Control;
use crate::stats::Snapshot;

/// The dashboard on the terminal, with a thread reading keys. Dropping it
/// (on the way out, on an error or in a panic) gives the terminal back.
pub struct Tui {
    terminal: Terminal<CrosstermBackend<Stdout>>,
    dashboard: Dashboard,
    cumulative: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    /// Ctrl-C was pressed (not `q`).
    interrupted: Arc<AtomicBool>,
    keys: Option<JoinHandle<()>>,
}

impl Tui {
    pub fn start(dashboard: Dashboard, control: Arc<Control>, cancel: CancellationToken) -> io::Result<Tui> {
        install_panic_restore();
        terminal::enable_raw_mode()?;
        let mut stdout = io::stdout();
        if let Err(e) = execute!(stdout, EnterAlternateScreen, cursor::Hide) {
            restore();
            return Err(e);
        }
        let terminal = Terminal::new(CrosstermBackend::new(stdout))?;
        let cumulative = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let interrupted = Arc::new(AtomicBool::new(false));
        let keys = {
            let (cumulative, done, interrupted) = (cumulative.clone(), done.clone(), interrupted.clone());
            std::thread::Builder::new()
                .name("volley-keys".into())
                .spawn(move || {
                    while !done.load(Ordering::Relaxed) {
                        if !event::poll(Duration::from_millis(100)).unwrap_or(false) {
                            continue;
                        }
                        let Ok(Event::Key(key)) = event::read() else {
                            continue;
                        };
                        match action(key) {
                            Some(Action::Quit) => cancel.cancel(),
                            Some(Action::Interrupt) => {
                                interrupted.store(true, Ordering::Relaxed);
                                cancel.cancel();
                            }
                            Some(Action::TogglePause) => control.toggle_pause(),
                            Some(Action::Raise) => control.step(true),
                            Some(Action::Lower) => control.step(false),
                            Some(Action::ToggleView) => {
                                cumulative.fetch_xor(true, Ordering::Relaxed);
                            }
                            None => {}
                        }
                    }
                })?
        };
        Ok(Tui {
            terminal,
            dashboard,
            cumulative,
            done,
            interrupted,
            keys: Some(keys),
        })
    }

    /// Whether the run was stopped with Ctrl-C, which exits 130 as the
    /// signal would have; `q` exits 0.
    pub fn interrupted(&self) -> bool {
        self.interrupted.load(Ordering::Relaxed)
    }

    /// Takes a snapshot and redraws.
    pub fn show(&mut self, snapshot: &Snapshot) {
        self.dashboard.update(snapshot);
        self.dashboard.cumulative = self.cumulative.load(Ordering::Relaxed);
        let dashboard = &self.dashboard;
        let _ = self.terminal.draw(|frame| draw(frame, dashboard));
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(keys) = self.keys.take() {
            let _ = keys.join();
        }
        restore();
    }
}

/// Leaves raw mode and the alternate screen; harmless when not in them.
fn restore() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(io::stdout(), LeaveAlternateScreen, cursor::Show);
}

fn install_panic_restore() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

#[cfg(test)]
mod tests;
