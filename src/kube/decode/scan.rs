//! A JSON scanner that walks an object's members and jumps over the values we do not read.
//!
//! A Node status heartbeat is a whole ~6 KB Node, most of it `managedFields` and `images`;
//! serde's `IgnoredAny` validates every token of those. Here a skipped value is crossed by
//! scanning for quotes, backslashes and brackets only: strings (with escapes) and nesting are
//! followed exactly, so the value's end is always right, but the scalars inside a skipped value
//! are not validated (a value we do not read cannot change what we decode). The values we do read
//! are handed to serde_json as exact slices, so they are validated as before.

use std::borrow::Cow;
use std::fmt;

/// Deeper than this is refused (serde_json refuses past 128 too).
const MAX_DEPTH: usize = 128;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanError {
    pub at: usize,
    pub what: &'static str,
}

impl fmt::Display for ScanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.what, self.at)
    }
}

pub struct Scanner<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// The state of one object being walked: whether a member was read yet.
pub struct Members {
    first: bool,
}

impl<'a> Scanner<'a> {
    pub fn new(buf: &'a [u8]) -> Scanner<'a> {
        Scanner { buf, pos: 0 }
    }

    fn error(&self, what: &'static str) -> ScanError {
        ScanError { at: self.pos, what }
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.buf.get(self.pos) {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.buf.get(self.pos).copied()
    }

    /// Only whitespace is left.
    pub fn end(&mut self) -> Result<(), ScanError> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.error("trailing characters")),
        }
    }

    /// The next value is `null` (consumed if so).
    pub fn null(&mut self) -> bool {
        if self.peek() == Some(b'n') && self.buf[self.pos..].starts_with(b"null") {
            self.pos += 4;
            return true;
        }
        false
    }

    /// Enters an object: `{`.
    pub fn object(&mut self) -> Result<Members, ScanError> {
        match self.peek() {
            Some(b'{') => {
                self.pos += 1;
                Ok(Members { first: true })
            }
            Some(_) => Err(self.error("expected an object")),
            None => Err(self.error("unexpected end of input")),
        }
    }

    /// The next member's key, the scanner then at its value; `None` after the closing `}`.
    pub fn next_key(&mut self, members: &mut Members) -> Result<Option<Cow<'a, str>>, ScanError> {
        match self.peek() {
            Some(b'}') => {
                self.pos += 1;
                return Ok(None);
            }
            Some(b',') if !members.first => {
                self.pos += 1;
                self.ws();
            }
            Some(b'"') if members.first => {}
            Some(_) => return Err(self.error("expected `,` or `}`")),
            None => return Err(self.error("unexpected end of input")),
        }
        members.first = false;
        if self.buf.get(self.pos) != Some(&b'"') {
            return Err(self.error("expected a key"));
        }
        let key = self.string()?;
        match self.peek() {
            Some(b':') => {
                self.pos += 1;
                Ok(Some(key))
            }
            _ => Err(self.error("expected `:`")),
        }
    }

    /// A string value: borrowed unless it holds escapes (then serde_json unescapes it).
    pub fn string(&mut self) -> Result<Cow<'a, str>, ScanError> {
        if self.peek() != Some(b'"') {
            return Err(self.error("expected a string"));
        }
        let start = self.pos;
        let escaped = self.skip_string()?;
        let inner = &self.buf[start + 1..self.pos - 1];
        if inner.iter().any(|&b| b < 0x20) {
            // As serde_json: control characters must be escaped in JSON strings.
            return Err(ScanError {
                at: start,
                what: "control character in a string",
            });
        }
        if !escaped {
            return std::str::from_utf8(inner)
                .map(Cow::Borrowed)
                .map_err(|_| ScanError {
                    at: start,
                    what: "invalid UTF-8 in a string",
                });
        }
        serde_json::from_slice::<String>(&self.buf[start..self.pos])
            .map(Cow::Owned)
            .map_err(|_| ScanError {
                at: start,
                what: "invalid escape in a string",
            })
    }

    /// Crosses a string from its opening quote; says whether it held a backslash.
    fn skip_string(&mut self) -> Result<bool, ScanError> {
        let buf = self.buf;
        let mut i = self.pos + 1;
        let mut escaped = false;
        loop {
            // Eight bytes at a time while none of them is a quote or a backslash.
            while let Some(chunk) = buf.get(i..i + 8) {
                let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
                if has_byte(word, b'"') || has_byte(word, b'\\') {
                    break;
                }
                i += 8;
            }
            match buf.get(i) {
                Some(b'"') => {
                    self.pos = i + 1;
                    return Ok(escaped);
                }
                Some(b'\\') => {
                    escaped = true;
                    i += 2; // the escaped byte cannot end the string
                }
                Some(_) => i += 1,
                None => {
                    self.pos = buf.len();
                    return Err(self.error("unterminated string"));
                }
            }
        }
    }

    /// Jumps over the next value.
    pub fn skip_value(&mut self) -> Result<(), ScanError> {
        match self.peek() {
            None => Err(self.error("unexpected end of input")),
            Some(b'"') => self.skip_string().map(drop),
            Some(b'{' | b'[') => self.skip_nested(),
            Some(b'}' | b']' | b',' | b':') => Err(self.error("expected a value")),
            Some(_) => {
                // A number, true, false or null: up to the next delimiter.
                let start = self.pos;
                while let Some(&b) = self.buf.get(self.pos) {
                    if matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                        break;
                    }
                    self.pos += 1;
                }
                if self.pos == start {
                    return Err(self.error("expected a value"));
                }
                Ok(())
            }
        }
    }

    /// Crosses an object or array, following strings and checking that brackets match.
    fn skip_nested(&mut self) -> Result<(), ScanError> {
        // One bit per open level: 1 for `{`, 0 for `[`.
        let mut open: u128 = 0;
        let mut depth = 0usize;
        let buf = self.buf;
        while let Some(&b) = buf.get(self.pos) {
            match b {
                b'"' => {
                    self.skip_string()?;
                    continue;
                }
                b'{' | b'[' => {
                    if depth == MAX_DEPTH {
                        return Err(self.error("nested too deep"));
                    }
                    open = (open << 1) | u128::from(b == b'{');
                    depth += 1;
                }
                b'}' | b']' => {
                    if depth == 0 || (open & 1 == 1) != (b == b'}') {
                        return Err(self.error("mismatched bracket"));
                    }
                    open >>= 1;
                    depth -= 1;
                    if depth == 0 {
                        self.pos += 1;
                        return Ok(());
                    }
                }
                _ => {}
            }
            self.pos += 1;
        }
        Err(self.error("unexpected end of input"))
    }

    /// The next value's exact bytes (for serde_json to decode), the scanner after it.
    pub fn value(&mut self) -> Result<&'a [u8], ScanError> {
        self.ws();
        let start = self.pos;
        self.skip_value()?;
        Ok(&self.buf[start..self.pos])
    }
}

/// Whether any byte of `word` equals `b` (the classic SWAR zero-byte test).
fn has_byte(word: u64, b: u8) -> bool {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let x = word ^ (LO * u64::from(b));
    x.wrapping_sub(LO) & !x & HI != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skipped(json: &str) -> Result<usize, ScanError> {
        let mut s = Scanner::new(json.as_bytes());
        s.skip_value()?;
        Ok(s.pos)
    }

    #[test]
    fn a_skipped_value_ends_exactly_where_the_json_value_ends() {
        for value in [
            r#""plain""#,
            r#""with \"escaped\" quotes and ] } brackets""#,
            r#""a trailing backslash \\""#,
            r#""\\\"""#,
            r#"{"a":[1,{"b":"}"},[[]]],"c":{"d":"[{"}}"#,
            r#"[[[["deep"]]],{"x":"y\\"}]"#,
            "12.5e-3",
            "true",
            "null",
            r#"{"managedFields":[{"fieldsV1":{"f:status":{"k:{\"type\":\"Ready\"}":{}}}}]}"#,
        ] {
            let json = format!("{value} ,rest");
            assert_eq!(skipped(&json), Ok(value.len()), "{value}");
            let v: serde_json::Value = serde_json::from_str(value).unwrap();
            drop(v); // each case is valid JSON: the end found is the real one
        }
    }

    #[test]
    fn truncated_and_mismatched_values_are_errors_naming_the_byte() {
        for (bad, what) in [
            (r#""no end"#, "unterminated string"),
            (r#""escaped end\""#, "unterminated string"),
            (r#"{"a":[1,2}"#, "mismatched bracket"),
            (r#"[{"a":1]}"#, "mismatched bracket"),
            (r#"{"a":{"b":1}"#, "unexpected end of input"),
            ("", "unexpected end of input"),
            ("]", "expected a value"),
        ] {
            let e = skipped(bad).unwrap_err();
            assert_eq!(e.what, what, "{bad}");
        }
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert_eq!(skipped(&deep).unwrap_err().what, "nested too deep");
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert_eq!(skipped(&ok), Ok(ok.len()));
    }

    #[test]
    fn members_are_walked_in_order_with_keys_unescaped() {
        let json = br#" { "a" : 1 , "k\"q" :{"x":[]}, "s":"v" } "#;
        let mut s = Scanner::new(json);
        let mut m = s.object().unwrap();
        let mut seen = Vec::new();
        while let Some(key) = s.next_key(&mut m).unwrap() {
            let v = s.value().unwrap();
            seen.push((key.into_owned(), String::from_utf8(v.to_vec()).unwrap()));
        }
        s.end().unwrap();
        assert_eq!(
            seen,
            [
                ("a".to_string(), "1".to_string()),
                ("k\"q".to_string(), r#"{"x":[]}"#.to_string()),
                ("s".to_string(), r#""v""#.to_string()),
            ]
        );
        for bad in [
            r#"{"a" 1}"#,
            r#"{"a":1 "b":2}"#,
            r#"{,"a":1}"#,
            r#"{"a":1"#,
            "{1:2}",
        ] {
            let mut s = Scanner::new(bad.as_bytes());
            let mut m = s.object().unwrap();
            let walk = (|| {
                while s.next_key(&mut m)?.is_some() {
                    s.skip_value()?;
                }
                Ok::<(), ScanError>(())
            })();
            assert!(walk.is_err(), "{bad}");
        }
    }

    #[test]
    fn the_eight_byte_search_finds_quotes_and_backslashes_at_every_offset() {
        for at in 0..20 {
            let body = "x".repeat(at);
            assert_eq!(skipped(&format!("\"{body}\"")), Ok(at + 2));
            let escaped = format!("\"{body}\\\"y\"");
            let mut s = Scanner::new(escaped.as_bytes());
            assert_eq!(s.string().unwrap(), format!("{body}\"y"));
        }
    }
}
