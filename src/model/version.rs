//! A Lease's resourceVersion, held inline when it is short.
//!
//! Every Lease renewal brings a new resourceVersion. As an `Rc<str>` it was an allocation in
//! the decode and a free when the store replaced the Lease it held: two calls into malloc per
//! renewal, ~400 instructions and the cache lines of a heap block (`examples/lease_event_floor.rs`,
//! BENCHMARKS.md, Floor 2). etcd-backed API servers write a decimal integer (at most 20 digits),
//! which fits in the value itself; anything longer (the API calls the text opaque) goes to the
//! heap as before. Either way the text is kept byte for byte: nothing is parsed or rewritten.

use std::rc::Rc;

/// The bytes kept inline: a `u64` in decimal is at most 20.
const INLINE: usize = 22;

/// A resourceVersion's text: derefs to `str`, compares, hashes and prints as its text does.
#[derive(Clone)]
pub struct Version(Repr);

#[derive(Clone)]
enum Repr {
    /// `len` bytes of `bytes`, always a whole UTF-8 string (copied from a `&str`).
    Inline {
        len: u8,
        bytes: [u8; INLINE],
    },
    Heap(Rc<str>),
}

impl Version {
    pub fn new(text: &str) -> Version {
        match u8::try_from(text.len()) {
            Ok(len) if text.len() <= INLINE => {
                let mut bytes = [0u8; INLINE];
                bytes[..text.len()].copy_from_slice(text.as_bytes());
                Version(Repr::Inline { len, bytes })
            }
            _ => Version(Repr::Heap(Rc::from(text))),
        }
    }

    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Inline { len, bytes } => {
                let text = bytes.get(..usize::from(*len)).unwrap_or_default();
                // SAFETY: `new` is the only constructor of `Inline` (the fields are private
                // and never changed after): `bytes[..len]` is a whole `&str` copied, so UTF-8.
                // `from_utf8` here was ~60 instructions a read, two reads a renewal.
                unsafe { std::str::from_utf8_unchecked(text) }
            }
            Repr::Heap(text) => text,
        }
    }

    /// Heap bytes it holds of its own (an inline version none).
    pub(crate) fn heap_bytes(&self) -> usize {
        match &self.0 {
            Repr::Inline { .. } => 0,
            Repr::Heap(text) => super::pod_table::malloc_size(16 + text.len()),
        }
    }
}

impl Default for Version {
    fn default() -> Version {
        Version::new("")
    }
}

impl std::ops::Deref for Version {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Version {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl std::borrow::Borrow<str> for Version {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Version) -> bool {
        match (&self.0, &other.0) {
            // The bytes past `len` are zero (`new`), so equal texts are equal arrays.
            (Repr::Inline { len: a, bytes: x }, Repr::Inline { len: b, bytes: y }) => {
                a == b && x == y
            }
            _ => self.as_str() == other.as_str(),
        }
    }
}

impl Eq for Version {}

impl PartialEq<str> for Version {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Version {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::hash::Hash for Version {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Version) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Version) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::fmt::Debug for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for Version {
    fn from(text: &str) -> Version {
        Version::new(text)
    }
}

impl From<String> for Version {
    fn from(text: String) -> Version {
        Version::new(&text)
    }
}

impl From<&String> for Version {
    fn from(text: &String) -> Version {
        Version::new(text)
    }
}

impl From<Rc<str>> for Version {
    fn from(text: Rc<str>) -> Version {
        Version::new(&text)
    }
}

impl From<&Rc<str>> for Version {
    fn from(text: &Rc<str>) -> Version {
        Version::new(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_every_text_byte_for_byte_inline_or_not() {
        let long = "x".repeat(INLINE + 1);
        for text in [
            "",
            "0",
            "126215",
            "18446744073709551615",
            "0123",
            "opaque-Ü",
            &"9".repeat(INLINE),
            &long,
        ] {
            let v = Version::new(text);
            assert_eq!(v.as_str(), text);
            assert_eq!(&*v, text);
            assert_eq!(format!("{v:?}"), format!("{text:?}"));
            assert_eq!(v.to_string(), text);
            assert_eq!(v, Version::from(Rc::<str>::from(text)));
            assert_eq!(v.heap_bytes() > 0, text.len() > INLINE, "{text:?}");
        }
        assert_ne!(Version::new("12"), Version::new("120"));
        assert!(Version::new("12") < Version::new("120"));
    }

    /// As small as the `Rc<str>` it replaced plus a word: a Lease grows by 8 bytes and loses
    /// a heap block of 32.
    #[test]
    fn is_three_words() {
        assert_eq!(std::mem::size_of::<Version>(), 24);
    }
}
