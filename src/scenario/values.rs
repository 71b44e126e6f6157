//! The text of a value a key or a flag gives: a size, a duration, and a
//! string's `${VAR}` references.

use std::time::Duration;

/// `8MiB`, `512KB`, `1048576`: a size in bytes.
pub fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let number: usize = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size (e.g. 8MiB)"))?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1024,
        "m" | "mb" | "mib" => 1024 * 1024,
        "g" | "gb" | "gib" => 1024 * 1024 * 1024,
        other => return Err(format!("`{text}`: unknown unit `{other}` (use KiB, MiB or GiB)")),
    };
    number
        .checked_mul(scale)
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("`{text}` is not a usable size"))
}

pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text.trim())
        .map_err(|e| format!("`{text}` is not a duration ({e}); write e.g. \"30s\", \"500ms\" or \"2m\""))?;
    // Far past any run, and far from where a clock reading plus it overflows.
    if duration > MAX_DURATION {
        return Err(format!(
            "`{text}` is longer than any run volley makes: at most 365 days"
        ));
    }
    Ok(duration)
}

/// The longest duration a scenario or a flag may give.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Replaces every `${NAME}` with the variable's value; `$${` stays a literal `${`.
pub fn interpolate(value: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    for part in crate::plan::split(value)? {
        match part {
            crate::plan::Part::Text(text) => out.push_str(&text),
            crate::plan::Part::Expr(name) => {
                out.push_str(&env(name).ok_or_else(|| format!("environment variable `{name}` is not set"))?)
            }
        }
    }
    Ok(out)
}
