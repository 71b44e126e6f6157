//! Data files that parameters are picked from: plain lines, a CSV column,
//! or JSON values one per line.

use std::path::Path;

use super::expr::Generated;

#[derive(Debug)]
pub struct DataFile {
    entries: Vec<Box<str>>,
    /// Entries are JSON text (JSONL) rather than plain text.
    json: bool,
}

impl DataFile {
    /// Reads `path`: `.csv` takes `column` (or the first one), `.jsonl` and
    /// `.ndjson` take one JSON value a line, anything else one string a line.
    pub fn load(path: &Path, column: Option<&str>) -> Result<DataFile, String> {
        let shown = path.display();
        let text = std::fs::read_to_string(path).map_err(|e| format!("data file {shown}: {e}"))?;
        let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        let (entries, json) = match extension {
            "csv" => (
                csv_column(&text, column).map_err(|e| format!("data file {shown}: {e}"))?,
                false,
            ),
            "jsonl" | "ndjson" => {
                let mut values = Vec::new();
                for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
                    let value: Box<serde_json::value::RawValue> = serde_json::from_str(line.trim())
                        .map_err(|e| format!("data file {shown}:{}: not JSON: {e}", n + 1))?;
                    values.push(value.get().into());
                }
                (values, true)
            }
            _ => (
                text.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(Into::into)
                    .collect(),
                false,
            ),
        };
        if column.is_some() && extension != "csv" {
            return Err(format!("data file {shown}: `column` applies to .csv files only"));
        }
        if entries.is_empty() {
            return Err(format!("data file {shown} is empty"));
        }
        Ok(DataFile { entries, json })
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn get(&self, index: usize) -> Generated<'_> {
        let entry = &self.entries[index];
        if self.json {
            Generated::Json(entry)
        } else {
            Generated::Text(entry)
        }
    }
}

fn csv_column(text: &str, column: Option<&str>) -> Result<Vec<Box<str>>, String> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader.headers().map_err(|e| e.to_string())?.clone();
    let index = match column {
        Some(name) => headers.iter().position(|h| h.trim() == name).ok_or_else(|| {
            let known: Vec<&str> = headers.iter().collect();
            format!("no column `{name}` (columns: {})", known.join(", "))
        })?,
        None => 0,
    };
    let mut values = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| e.to_string())?;
        if let Some(value) = record.get(index).map(str::trim).filter(|v| !v.is_empty()) {
            values.push(value.into());
        }
    }
    Ok(values)
}
