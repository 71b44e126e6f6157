//! A flow: a journey of steps sent in order on one connection, a value
//! taken from one answer feeding the next call (`[[flows]]`).

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use rand::RngExt;

use super::{CallTemplate, Pointer, Template, Vars};
use crate::rpc::Expectation;

/// A flow as the engine runs it.
#[derive(Debug)]
pub struct Flow {
    /// The flow's own row (`flow:NAME`), an index into the mix's rows.
    pub row: u32,
    /// Values made once at the flow's start, each into its slot.
    pub vars: Vec<(usize, Arc<Template>)>,
    pub steps: Vec<Step>,
    /// How many variable slots the flow uses.
    pub slots: usize,
    /// Runs on a connection of its own, opened (with the setup calls) for
    /// it and closed at its end (`session = "per_flow"`).
    pub own_connection: bool,
}

impl Flow {
    /// The flow's variables at its start: its `vars` made, each once,
    /// the same in every step.
    pub fn start<R: RngExt>(&self, rng: &mut R) -> Vars {
        let mut vars = Vars::with_slots(self.slots);
        let mut made = BytesMut::new();
        for (slot, template) in &self.vars {
            made.clear();
            template.write_with(&mut made, rng, &vars);
            vars.set(*slot, std::str::from_utf8(&made).unwrap_or("null"));
        }
        vars
    }
}

#[derive(Debug)]
pub struct Step {
    /// The step's row: its name, else its method.
    pub row: u32,
    pub template: CallTemplate,
    pub notification: bool,
    pub expect: Option<Check>,
    pub captures: Vec<Capture>,
    pub until: Option<Until>,
    /// Sent once per value of this slot (at most `limit` times).
    pub for_each: Option<ForEach>,
    /// Sent even after an earlier step failed (a cleanup: LSP's didClose).
    pub always: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ForEach {
    pub slot: usize,
    pub limit: u32,
}

/// Which of the values a pointer reaches a capture keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    First,
    /// One drawn by the flow's seeded generator.
    Random,
    /// All of them (a `for_each` goes through them).
    All,
}

impl Pick {
    pub fn parse(text: &str) -> Option<Pick> {
        match text {
            "first" => Some(Pick::First),
            "random" => Some(Pick::Random),
            "all" => Some(Pick::All),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Pick::First => "first",
            Pick::Random => "random",
            Pick::All => "all",
        }
    }
}

/// `capture = { NAME = "/pointer" }`: a value of the result kept in a slot.
#[derive(Clone, Debug, PartialEq)]
pub struct Capture {
    pub name: String,
    pub slot: usize,
    pub pointer: Pointer,
    pub pick: Pick,
    /// With `pick = "all"`: nothing found is an empty list (a `for_each`
    /// over it sends nothing), not the step's failure.
    pub optional: bool,
}

impl Capture {
    /// Keeps what the pointer reaches in `result` (raw JSON); `false` when
    /// it reaches nothing. `found` is a reused buffer.
    pub fn take<'a, R: RngExt>(
        &self,
        result: &'a str,
        vars: &mut Vars,
        found: &mut Vec<&'a str>,
        rng: &mut R,
    ) -> bool {
        self.pointer.find(result, found);
        if found.is_empty() {
            if self.optional && self.pick == Pick::All {
                vars.set_all(self.slot, &[]);
                return true;
            }
            return false;
        }
        match self.pick {
            Pick::First => vars.set(self.slot, found[0]),
            Pick::Random => vars.set(self.slot, found[rng.random_range(0..found.len())]),
            Pick::All => vars.set_all(self.slot, found),
        }
        true
    }
}

/// What a step's answer must look like; an `equals` that reads variables
/// is made per flow.
#[derive(Clone, Debug)]
pub struct Check {
    pub expect: Expectation,
    pub equals: Option<Arc<Template>>,
}

impl Check {
    /// The expectation with this flow's values in it.
    pub fn resolve<R: RngExt>(&self, vars: &Vars, rng: &mut R) -> Expectation {
        let (Some(template), Expectation::Result(check)) = (&self.equals, &self.expect) else {
            return self.expect.clone();
        };
        let mut out = BytesMut::new();
        template.write_with(&mut out, rng, vars);
        let mut check = check.clone();
        check.equals = serde_json::from_slice(&out).ok();
        Expectation::Result(check)
    }
}

/// `until = { ..., every, within }`: the step is sent again every `every`
/// until its answer holds, for at most `within`.
#[derive(Clone, Debug)]
pub struct Until {
    pub check: Check,
    pub every: Duration,
    pub within: Duration,
}

/// A `for_each` goes through at most this many values unless told.
pub const FOR_EACH_LIMIT: u32 = 100;

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn captures_pick_first_random_or_all() {
        let result = r#"{"transactions":["0xa","0xb","0xc"]}"#;
        let capture = |pick| Capture {
            name: "tx".into(),
            slot: 0,
            pointer: Pointer::parse("/transactions/*").unwrap(),
            pick,
            optional: false,
        };
        let mut rng = SmallRng::seed_from_u64(1);
        let mut found = Vec::new();
        let mut vars = Vars::with_slots(1);
        assert!(capture(Pick::First).take(result, &mut vars, &mut found, &mut rng));
        assert_eq!(vars.text(0), r#""0xa""#);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..100 {
            capture(Pick::Random).take(result, &mut vars, &mut found, &mut rng);
            seen.insert(vars.text(0).to_string());
        }
        assert_eq!(seen.len(), 3, "{seen:?}");
        capture(Pick::All).take(result, &mut vars, &mut found, &mut rng);
        assert_eq!(vars.take(0).items().len(), 3);
        assert!(!capture(Pick::First).take(r#"{"transactions":[]}"#, &mut vars, &mut found, &mut rng));
        assert!(!capture(Pick::All).take(r#"{"transactions":[]}"#, &mut vars, &mut found, &mut rng));
        let optional = Capture {
            optional: true,
            ..capture(Pick::All)
        };
        assert!(optional.take(r#"{"transactions":[]}"#, &mut vars, &mut found, &mut rng));
        assert_eq!(vars.text(0), "[]");
        assert!(vars.take(0).items().is_empty());
    }
}
