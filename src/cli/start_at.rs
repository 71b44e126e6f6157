//! `--start-at`: when a shard's run begins, read strictly, so that a typo
//! is an error before anything is sent.

use std::time::Duration;

/// `--start-at`: RFC 3339 (`Z` or an offset), or seconds since the Unix
/// epoch; within a day before now and a week after, so that a typo is an
/// error, not a run that starts at once or never.
pub fn parse_start_at(text: &str) -> Result<std::time::SystemTime, String> {
    let text = text.trim();
    let at = match text.parse::<f64>() {
        Ok(seconds) if (0.0..1e11).contains(&seconds) => {
            std::time::UNIX_EPOCH + Duration::from_secs_f64(seconds)
        }
        Ok(_) => return Err(format!("'{text}' is not a time: unix seconds from 0 to 10^11")),
        Err(_) => rfc3339(text)?,
    };
    let now = std::time::SystemTime::now();
    if now
        .duration_since(at)
        .is_ok_and(|ago| ago > Duration::from_secs(86_400))
    {
        return Err(format!(
            "'{text}' is more than a day ago: give the time the shards start together"
        ));
    }
    if at
        .duration_since(now)
        .is_ok_and(|ahead| ahead > Duration::from_secs(7 * 86_400))
    {
        return Err(format!("'{text}' is more than a week ahead"));
    }
    Ok(at)
}

/// RFC 3339 with `Z` or a `+HH:MM`/`-HH:MM` offset (humantime reads UTC only).
fn rfc3339(text: &str) -> Result<std::time::SystemTime, String> {
    let bad = |e: &dyn std::fmt::Display| {
        format!("'{text}' is not a time ({e}): give RFC 3339 (2026-12-01T12:00:00Z, or with +01:00) or unix seconds")
    };
    let offset = text.len().checked_sub(6).filter(|&at| {
        let tail = text.as_bytes();
        tail.len() > 19
            && matches!(tail[at], b'+' | b'-')
            && tail[at + 3] == b':'
            && text[at + 1..].bytes().filter(u8::is_ascii_digit).count() == 4
    });
    let Some(at) = offset else {
        return humantime::parse_rfc3339_weak(text).map_err(|e| bad(&e));
    };
    let local = humantime::parse_rfc3339_weak(&text[..at]).map_err(|e| bad(&e))?;
    let minutes = |s: &str| s.parse::<u64>().map_err(|e| bad(&e));
    let shift = Duration::from_secs(60 * (60 * minutes(&text[at + 1..at + 3])? + minutes(&text[at + 4..])?));
    // 12:00+01:00 is 11:00 UTC.
    Ok(if text.as_bytes()[at] == b'+' {
        local - shift
    } else {
        local + shift
    })
}

#[cfg(test)]
mod tests {
    use super::parse_start_at;
    use std::time::{Duration, SystemTime};

    #[test]
    fn a_start_time_is_rfc3339_with_any_offset_or_unix_seconds() {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let at =
            humantime::format_rfc3339_seconds(SystemTime::UNIX_EPOCH + Duration::from_secs(now)).to_string();
        let utc = parse_start_at(&at).unwrap();
        assert_eq!(parse_start_at(&now.to_string()).unwrap(), utc);
        // The same instant an hour ahead, written with its offset.
        let ahead =
            humantime::format_rfc3339_seconds(SystemTime::UNIX_EPOCH + Duration::from_secs(now + 3600));
        let shifted = format!("{}+01:00", ahead.to_string().trim_end_matches('Z'));
        assert_eq!(parse_start_at(&shifted).unwrap(), utc, "{shifted}");
        let behind =
            humantime::format_rfc3339_seconds(SystemTime::UNIX_EPOCH + Duration::from_secs(now - 1800));
        let shifted = format!("{}-00:30", behind.to_string().trim_end_matches('Z'));
        assert_eq!(parse_start_at(&shifted).unwrap(), utc, "{shifted}");
        for bad in [
            "0",
            "garbage",
            "2026-13-01T00:00:00Z",
            &(now + 30 * 86_400).to_string(),
        ] {
            assert!(parse_start_at(bad).is_err(), "{bad}");
        }
    }
}
