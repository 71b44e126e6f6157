//! The live dashboard. A thread of its own reads the live feed, draws it
//! and turns keys into `Control` calls on every target running; the engine
//! never waits for the screen.

mod fit;
mod input;
mod side_by_side;
mod state;
mod view;

pub use input::{action, steer, Action};
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

/// How long the thread waits for a key before it looks at the feed again:
/// the feed changes four times a second.
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// The dashboard on the terminal, drawn and steered by a thread of its
/// own. Dropping it (on the way out, on an error or in a panic) gives the
/// terminal back.
pub struct Tui {
    done: Arc<AtomicBool>,
    /// Ctrl-C was pressed (not `q`).
    interrupted: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Tui {
    /// Takes the terminal; `cancel` is what `q` and Ctrl-C stop.
    pub fn start(dashboard: Dashboard, cancel: CancellationToken) -> io::Result<Tui> {
        install_panic_restore();
        terminal::enable_raw_mode()?;
        let mut stdout = io::stdout();
        if let Err(e) = execute!(stdout, EnterAlternateScreen, cursor::Hide) {
            restore();
            return Err(e);
        }
        let terminal = match Terminal::new(CrosstermBackend::new(stdout)) {
            Ok(terminal) => terminal,
            Err(e) => {
                restore();
                return Err(e);
            }
        };
        let done = Arc::new(AtomicBool::new(false));
        let interrupted = Arc::new(AtomicBool::new(false));
        let screen = Screen {
            terminal,
            dashboard,
            cancel,
            done: done.clone(),
            interrupted: interrupted.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("volley-dashboard".into())
            .spawn(move || screen.run());
        match thread {
            Ok(thread) => Ok(Tui {
                done,
                interrupted,
                thread: Some(thread),
            }),
            Err(e) => {
                restore();
                Err(e)
            }
        }
    }

    /// Whether the run was stopped with Ctrl-C, which exits 130 as the
    /// signal would have; `q` exits 0.
    pub fn interrupted(&self) -> bool {
        self.interrupted.load(Ordering::Relaxed)
    }
}

/// What the dashboard's thread owns.
struct Screen {
    terminal: Terminal<CrosstermBackend<Stdout>>,
    dashboard: Dashboard,
    cancel: CancellationToken,
    done: Arc<AtomicBool>,
    interrupted: Arc<AtomicBool>,
}

impl Screen {
    /// Draws whenever the feed changed or a key changed the view, until done.
    fn run(mut self) {
        let mut drawn = None;
        while !self.done.load(Ordering::Relaxed) {
            let mut redraw = false;
            if event::poll(LOOK_EVERY).unwrap_or(false) {
                if let Ok(Event::Key(key)) = event::read() {
                    redraw = action(key).is_some_and(|a| self.act(a));
                }
            }
            let version = self.dashboard.feed.version();
            if redraw || drawn != Some(version) {
                drawn = Some(version);
                self.dashboard.refresh();
                let dashboard = &self.dashboard;
                let _ = self.terminal.draw(|frame| draw(frame, dashboard));
            }
        }
    }

    /// Does what a key asks; returns whether the view changed.
    fn act(&mut self, action: Action) -> bool {
        match action {
            Action::Quit => self.cancel.cancel(),
            Action::Interrupt => {
                self.interrupted.store(true, Ordering::Relaxed);
                self.cancel.cancel();
            }
            Action::ToggleView => {
                self.dashboard.cumulative = !self.dashboard.cumulative;
                return true;
            }
            Action::ToggleMethods => {
                self.dashboard.per_method = !self.dashboard.per_method;
                return true;
            }
            Action::TogglePause | Action::Raise | Action::Lower => steer(&self.dashboard.feed, action),
        }
        false
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
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
