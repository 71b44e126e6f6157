//! A flow's variables: what its `vars` made at its start and what its
//! steps captured, each in a slot the scenario's compiler numbered, read
//! by `${name}` in the later steps' params and checks.

/// One flow's values, by slot. Each is JSON text as it came (a captured
/// member's raw text, or a made value's).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Vars {
    values: Vec<Var>,
}

#[derive(Debug, Default, Clone, PartialEq)]
enum Var {
    /// Not made or captured yet: `${name}` reads `null` (the scenario's
    /// compiler refuses a name no earlier step captures, so only a step
    /// that failed leaves one unset, and then nothing later is sent).
    #[default]
    Unset,
    One(Box<str>),
    /// `pick = "all"`: every value, and the JSON array of them, which
    /// `${name}` reads outside a `for_each`.
    All {
        items: Vec<Box<str>>,
        whole: Box<str>,
    },
}

impl Vars {
    /// No values: what a call outside any flow reads.
    pub const NONE: Vars = Vars { values: Vec::new() };

    pub fn with_slots(slots: usize) -> Self {
        Vars {
            values: vec![Var::Unset; slots],
        }
    }

    /// The JSON text in `slot`; `null` when it holds none.
    pub fn text(&self, slot: usize) -> &str {
        match self.values.get(slot) {
            Some(Var::One(text)) => text,
            Some(Var::All { whole, .. }) => whole,
            _ => "null",
        }
    }

    pub fn set(&mut self, slot: usize, text: &str) {
        if let Some(var) = self.values.get_mut(slot) {
            *var = Var::One(text.into());
        }
    }

    pub fn set_all(&mut self, slot: usize, items: &[&str]) {
        if let Some(var) = self.values.get_mut(slot) {
            let whole = format!("[{}]", items.join(","));
            *var = Var::All {
                items: items.iter().map(|i| Box::from(*i)).collect(),
                whole: whole.into(),
            };
        }
    }

    /// Takes `slot`'s value out while a `for_each` goes through it (each
    /// pass sets the slot to one item), to be put back after.
    pub fn take(&mut self, slot: usize) -> Taken {
        Taken(self.values.get_mut(slot).map(std::mem::take).unwrap_or_default())
    }

    pub fn put_back(&mut self, slot: usize, taken: Taken) {
        if let Some(var) = self.values.get_mut(slot) {
            *var = taken.0;
        }
    }
}

/// A slot's value taken out of its flow's [`Vars`].
#[derive(Debug)]
pub struct Taken(Var);

impl Taken {
    /// The values a `for_each` goes through: each of `all`'s, or the one.
    pub fn items(&self) -> &[Box<str>] {
        match &self.0 {
            Var::One(text) => std::slice::from_ref(text),
            Var::All { items, .. } => items,
            Var::Unset => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_hold_one_value_or_all_of_them() {
        let mut vars = Vars::with_slots(2);
        assert_eq!(vars.text(0), "null");
        assert_eq!(vars.text(9), "null");
        vars.set(0, r#""0xa""#);
        vars.set_all(1, &[r#""0xb""#, "3"]);
        assert_eq!(vars.text(0), r#""0xa""#);
        assert_eq!(vars.text(1), r#"["0xb",3]"#);
        let all = vars.take(1);
        assert_eq!(all.items().len(), 2);
        assert_eq!(vars.text(1), "null", "taken out");
        vars.put_back(1, all);
        assert_eq!(vars.text(1), r#"["0xb",3]"#);
        assert_eq!(vars.take(0).items(), [Box::from(r#""0xa""#)]);
        assert!(vars.take(9).items().is_empty());
    }
}
