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

    /// The values a `for_each` over `slot` goes through: each of `all`'s,
    /// or the one value.
    pub fn items(&self, slot: usize) -> Vec<Box<str>> {
        match self.values.get(slot) {
            Some(Var::One(text)) => vec![text.clone()],
            Some(Var::All { items, .. }) => items.clone(),
            _ => Vec::new(),
        }
    }

    /// Puts back `slot` as `from` holds it.
    pub fn restore(&mut self, slot: usize, from: &Vars) {
        if let (Some(var), Some(value)) = (self.values.get_mut(slot), from.values.get(slot)) {
            *var = value.clone();
        }
    }

    pub fn clear(&mut self) {
        self.values.iter_mut().for_each(|v| *v = Var::Unset);
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
        assert_eq!(vars.items(1).len(), 2);
        assert_eq!(vars.items(0), vec![Box::from(r#""0xa""#)]);
        vars.clear();
        assert!(vars.items(0).is_empty());
    }
}
