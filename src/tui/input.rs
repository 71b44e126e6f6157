//! Keys and what they do. The keys that steer a run steer every target
//! running, together.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::feed::{Feed, Steer};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Stop the run; the results are still written.
    Quit,
    /// Ctrl-C: stop as `q` does, but exit as a Ctrl-C outside the dashboard
    /// would (130), since raw mode turns the signal into a key.
    Interrupt,
    TogglePause,
    Raise,
    Lower,
    /// Switch the latency figures between the last second and the whole run.
    ToggleView,
    /// Show or hide the per-method table (several targets at once).
    ToggleMethods,
}

pub fn action(key: KeyEvent) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    match key.code {
        KeyCode::Char('q') | KeyCode::Esc => Some(Action::Quit),
        KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => Some(Action::Interrupt),
        KeyCode::Char('p') | KeyCode::Char(' ') => Some(Action::TogglePause),
        KeyCode::Char('+') | KeyCode::Char('=') | KeyCode::Up => Some(Action::Raise),
        KeyCode::Char('-') | KeyCode::Down => Some(Action::Lower),
        KeyCode::Char('v') | KeyCode::Tab => Some(Action::ToggleView),
        KeyCode::Char('m') => Some(Action::ToggleMethods),
        _ => None,
    }
}

/// Steers every target running now, through the feed (see `Steer`): a
/// pause pauses them all, or resumes them all; `+` and `-` move each
/// one's target by its own 10%. Other actions steer nothing.
pub fn steer(feed: &Feed, action: Action) {
    let steer = match action {
        Action::TogglePause => Steer::TogglePause,
        Action::Raise => Steer::Raise,
        Action::Lower => Steer::Lower,
        _ => return,
    };
    feed.steer(steer);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_actions() {
        let key = |code| KeyEvent::new(code, KeyModifiers::NONE);
        assert_eq!(action(key(KeyCode::Char('q'))), Some(Action::Quit));
        assert_eq!(
            action(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Some(Action::Interrupt)
        );
        assert_eq!(action(key(KeyCode::Char('c'))), None);
        assert_eq!(action(key(KeyCode::Char('+'))), Some(Action::Raise));
        assert_eq!(action(key(KeyCode::Char('-'))), Some(Action::Lower));
        assert_eq!(action(key(KeyCode::Char('p'))), Some(Action::TogglePause));
        assert_eq!(action(key(KeyCode::Char('v'))), Some(Action::ToggleView));
        assert_eq!(action(key(KeyCode::Char('m'))), Some(Action::ToggleMethods));
    }
}
