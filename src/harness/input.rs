//! Input errors: a file, a position in it, and what is wrong. [`Origin`] is the text an error
//! points into, handed to every validator so that each can name a line and column without
//! knowing what kind of file it checks.

use std::fmt;
use std::ops::Range;

use toml::Spanned;

/// An input error: a file, a position in it, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub file: String,
    /// 1-based line and column, when known.
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "{}:{l}:{c}: {}", self.file, self.message),
            (Some(l), None) => write!(f, "{}:{l}: {}", self.file, self.message),
            _ => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for InputError {}

impl InputError {
    /// An error at byte `offset` of `source` (the whole file when `None`).
    pub fn at(file: &str, source: &str, offset: Option<usize>, message: impl Into<String>) -> Self {
        let (line, column) = match offset {
            Some(o) => {
                let before = &source[..o.min(source.len())];
                let line = before.matches('\n').count() + 1;
                let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
                (Some(line), Some(col))
            }
            None => (None, None),
        };
        InputError {
            file: file.to_string(),
            line,
            column,
            message: message.into(),
        }
    }
}

/// The text being checked: its name in messages and its content.
#[derive(Debug, Clone)]
pub struct Origin<'a> {
    pub file: String,
    pub source: &'a str,
}

impl<'a> Origin<'a> {
    pub fn new(file: impl Into<String>, source: &'a str) -> Self {
        Origin {
            file: file.into(),
            source,
        }
    }

    /// An error at a span of the text. An empty span at 0 is a value nobody wrote (a default or
    /// one the harness set), so the error names the file only.
    pub fn at(&self, span: Range<usize>, message: impl Into<String>) -> InputError {
        InputError::at(
            &self.file,
            self.source,
            (span.end > 0).then_some(span.start),
            message,
        )
    }

    /// An error about the file as a whole.
    pub fn whole(&self, message: impl Into<String>) -> InputError {
        InputError::at(&self.file, self.source, None, message)
    }

    /// An error at the value of the key at `path` (`["network", "tick_ms"]`), or about the
    /// whole file when the key is not written (a default).
    pub fn at_key(&self, path: &[&str], message: impl Into<String>) -> InputError {
        match self.key(path) {
            Some(span) => self.at(span, message),
            None => self.whole(message),
        }
    }

    /// Where the value of the key at `path` is written, if it is.
    pub fn key(&self, path: &[&str]) -> Option<Range<usize>> {
        let root = toml::de::DeTable::parse(self.source).ok()?;
        let mut table = root.get_ref();
        let mut span = None;
        for (i, name) in path.iter().enumerate() {
            let (_, value) = table.iter().find(|(k, _)| k.get_ref().as_ref() == *name)?;
            span = Some(value.span());
            if i + 1 < path.len() {
                match value.get_ref() {
                    toml::de::DeValue::Table(t) => table = t,
                    _ => return None,
                }
            }
        }
        span
    }

    /// Where the top-level table `name` is written, if it is (serde fills an absent section
    /// with its defaults, so presence is read from the text).
    pub fn section(&self, name: &str) -> Option<Range<usize>> {
        let tables: std::collections::BTreeMap<String, Spanned<toml::Value>> =
            toml::from_str(self.source).unwrap_or_default();
        tables.get(name).map(Spanned::span)
    }
}

/// Reads a `[min, max]` pair, refusing an array of any other length (a plain `[u64; 2]` would
/// drop a third element without a word).
pub fn min_max_pair<'de, D: serde::Deserializer<'de>>(d: D) -> Result<[u64; 2], D::Error> {
    let v = <Vec<u64> as serde::Deserialize>::deserialize(d)?;
    match v[..] {
        [min, max] => Ok([min, max]),
        _ => Err(serde::de::Error::custom(format!(
            "expected [min, max] (two numbers), found {} elements",
            v.len()
        ))),
    }
}
