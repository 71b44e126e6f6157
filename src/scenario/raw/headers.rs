//! `[headers]`: sent with every request, `${VAR}`s filled in.

use super::RawScenario;
use crate::scenario::error::{Locator, ScenarioError};
use crate::scenario::interpolate;

impl RawScenario {
    /// The headers, `${VAR}`s filled in from `env`.
    pub(super) fn headers(
        &self,
        at: &Locator,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Vec<(String, String)>, ScenarioError> {
        let mut headers = Vec::new();
        for (name, value) in &self.headers {
            let key = format!("headers.{name}");
            let resolved = interpolate(value.get_ref(), env)
                .and_then(|resolved| crate::transport::check_header(name, &resolved).map(|()| resolved))
                .map_err(|m| at.error(Some(value.span()), Some(&key), m))?;
            headers.push((name.clone(), resolved));
        }
        Ok(headers)
    }
}
