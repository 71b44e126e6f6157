//! `race = "POINTER"` on a `[[subscribe]]` entry or a `[poll.NAME]`: the
//! head race across targets, checked before anything is sent.

use toml::Spanned;

use super::RawScenario;
use crate::plan::{Pointer, Race};
use crate::scenario::error::{Locator, ScenarioError};

impl RawScenario {
    /// The scenario's one race, if it asks for one: its pointer must reach
    /// one value (no `*`), and a second `race` key is refused, naming the
    /// first (one race a run keeps every figure of the output one race's).
    pub(super) fn race(&self, at: &Locator) -> Result<Option<Race>, ScenarioError> {
        let subscribed = (self.subscribe.iter().enumerate())
            .filter_map(|(i, s)| s.race.as_ref().map(|r| (format!("subscribe[{i}]"), r, None)));
        let mut polled = Vec::new();
        for (name, poll) in &self.poll {
            if let Some(race) = &poll.race {
                polled.push((format!("poll.{name}"), race, Some(poll.every(at)?)));
            }
        }
        let mut race: Option<Race> = None;
        for (source, text, every) in subscribed.chain(polled) {
            let key = format!("{source}.race");
            if let Some(first) = &race {
                let message = format!(
                    "one race a run: `{}.race` is set already; drop one of them",
                    first.source
                );
                return Err(at.error(Some(text.span()), Some(&key), message));
            }
            race = Some(Race {
                pointer: pointer(at, text, &key)?,
                source,
                every,
                board: Default::default(),
                lane: 0,
            });
        }
        Ok(race)
    }
}

/// The race's pointer, read as a JSON pointer reaching one value.
fn pointer(at: &Locator, text: &Spanned<String>, key: &str) -> Result<Pointer, ScenarioError> {
    let fails = |message: String| at.error(Some(text.span()), Some(key), message);
    let pointer = Pointer::parse(text.get_ref()).map_err(fails)?;
    if pointer.has_any() {
        return Err(fails(format!(
            "`{}`: a race matches one value in each notification, and `*` reaches many: name one (e.g. /hash)",
            text.get_ref()
        )));
    }
    Ok(pointer)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::scenario::{Scenario, ScenarioError};

    const TARGETS: &str = r#"targets = [{ name = "a", url = "ws://127.0.0.1:1" }, { name = "b", url = "ws://127.0.0.1:2" }]
[[calls]]
method = "eth_chainId"
"#;

    fn parse(tail: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse(&format!("{TARGETS}{tail}"), "race.toml", "race", &|_| None)
    }

    /// The error's place and key, and its message.
    fn refused(tail: &str) -> (String, String) {
        match parse(tail) {
            Err(ScenarioError::Invalid(located)) => (
                format!("{}:{}:{}", located.file, located.line, located.key),
                located.message,
            ),
            other => panic!("expected a located error, got {other:?}"),
        }
    }

    #[test]
    fn a_subscription_or_a_poll_names_the_race_and_its_source() {
        let subscribed =
            parse("[[subscribe]]\nmethod = \"eth_subscribe\"\nparams = [\"newHeads\"]\nrace = \"/hash\"\n")
                .unwrap();
        let race = subscribed.race.unwrap();
        assert_eq!(
            (race.pointer.as_str(), race.source.as_str(), race.every),
            ("/hash", "subscribe[0]", None)
        );
        assert!(subscribed.setup[0].race && subscribed.setup[0].subscribe);
        let polled =
            parse("[poll.head]\nmethod = \"eth_blockNumber\"\nevery = \"100ms\"\nrace = \"\"\n").unwrap();
        let race = polled.race.unwrap();
        assert_eq!(
            (race.source.as_str(), race.every),
            ("poll.head", Some(Duration::from_millis(100)))
        );
        assert!(polled.polls[0].race);
        // No race key, no race.
        assert_eq!(parse("").unwrap().race, None);
    }

    #[test]
    fn a_bad_pointer_is_refused_with_its_file_line_and_key() {
        let sub = "[[subscribe]]\nmethod = \"eth_subscribe\"\n";
        let (at, message) = refused(&format!("{sub}race = \"hash\"\n"));
        assert_eq!(at, "race.toml:6:subscribe[0].race");
        assert!(message.contains("`hash` is not a JSON pointer"), "{message}");
        let (at, message) = refused(&format!("{sub}race = \"/txs/*\"\n"));
        assert_eq!(at, "race.toml:6:subscribe[0].race");
        assert!(message.contains("`*` reaches many"), "{message}");
        let (at, message) = refused("[poll.head]\nmethod = \"eth_blockNumber\"\nrace = \"/a~2\"\n");
        assert_eq!(at, "race.toml:6:poll.head.race");
        assert!(message.contains("`~` must be followed by 0"), "{message}");
    }

    #[test]
    fn a_second_race_is_refused_naming_the_first() {
        let (at, message) = refused(
            "[[subscribe]]\nmethod = \"eth_subscribe\"\nrace = \"/hash\"\n[poll.head]\nmethod = \"eth_blockNumber\"\nrace = \"\"\n",
        );
        assert_eq!(at, "race.toml:9:poll.head.race");
        assert!(
            message.contains("`subscribe[0].race` is set already"),
            "{message}"
        );
    }
}
