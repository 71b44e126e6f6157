//! What was sent, as the judge needs it to attribute each answer.

/// One call inside the request being built: what the judge needs to
/// attribute an answer to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Index of the method in the run's method table.
    pub method: u32,
    /// Index of the call in the run's mix (for its expectation).
    pub call: u32,
    /// `None` for a notification.
    pub id: Option<u64>,
}
