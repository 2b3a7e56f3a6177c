//! Short text held inline: a Lease's resourceVersion ([`Version`]) and its name
//! ([`LeaseName`]).
//!
//! Every Lease renewal brings a new resourceVersion. On the heap it would be an allocation in
//! the decode and a free when the store replaced the Lease it held: two calls into malloc per
//! renewal and the cache lines of a heap block (`examples/lease_event_floor.rs` counts them).
//! etcd-backed API servers write a decimal integer (at most 20 digits), which fits in the value
//! itself; anything longer (the API calls the text opaque) goes to the heap. Either way the text is kept byte for byte: nothing is parsed or rewritten.
//!
//! The name is not interned: that would be a lookup by name at every renewal (three cache lines,
//! cold) before the store's own lookup by the same name. Copied inline, it costs neither that
//! lookup nor a heap block (a read's renewals are all decoded before any is fed, so heap copies
//! would outrun malloc's per-size cache); the store finds the Lease by the text and keeps it
//! under the node's interned name. A node name
//! longer than the inline room (rare: cloud providers' names are 20 to 45 bytes) goes to the heap.

use std::rc::Rc;

/// A resourceVersion: a `u64` in decimal is at most 20 bytes; 22 fit in three words.
pub type Version = InlineText<22>;

/// A Lease's name, its node's: 46 bytes fit in six words.
pub type LeaseName = InlineText<46>;

/// Text of up to `N` bytes kept in the value, longer on the heap: derefs to `str`, compares,
/// hashes and prints as its text does.
#[derive(Clone)]
pub struct InlineText<const N: usize>(Repr<N>);

#[derive(Clone)]
enum Repr<const N: usize> {
    /// `len` bytes of `bytes`, always a whole UTF-8 string (copied from a `&str`).
    Inline {
        len: u8,
        bytes: [u8; N],
    },
    Heap(Rc<str>),
}

impl<const N: usize> InlineText<N> {
    pub fn new(text: &str) -> InlineText<N> {
        match u8::try_from(text.len()) {
            Ok(len) if text.len() <= N => {
                let mut bytes = [0u8; N];
                bytes[..text.len()].copy_from_slice(text.as_bytes());
                InlineText(Repr::Inline { len, bytes })
            }
            _ => InlineText(Repr::Heap(Rc::from(text))),
        }
    }

    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Inline { len, bytes } => {
                let text = bytes.get(..usize::from(*len)).unwrap_or_default();
                // SAFETY: `new` is the only constructor of `Inline` (the fields are private
                // and never changed after): `bytes[..len]` is a whole `&str` copied, so UTF-8.
                // Unchecked: this is read twice a renewal, and the check would prove again
                // what `new` already holds.
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

impl<const N: usize> Default for InlineText<N> {
    fn default() -> InlineText<N> {
        InlineText::new("")
    }
}

impl<const N: usize> std::ops::Deref for InlineText<N> {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl<const N: usize> AsRef<str> for InlineText<N> {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl<const N: usize> std::borrow::Borrow<str> for InlineText<N> {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl<const N: usize> PartialEq for InlineText<N> {
    fn eq(&self, other: &InlineText<N>) -> bool {
        match (&self.0, &other.0) {
            // The bytes past `len` are zero (`new`), so equal texts are equal arrays.
            (Repr::Inline { len: a, bytes: x }, Repr::Inline { len: b, bytes: y }) => {
                a == b && x == y
            }
            _ => self.as_str() == other.as_str(),
        }
    }
}

impl<const N: usize> Eq for InlineText<N> {}

impl<const N: usize> PartialEq<str> for InlineText<N> {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl<const N: usize> PartialEq<&str> for InlineText<N> {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl<const N: usize> std::hash::Hash for InlineText<N> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl<const N: usize> PartialOrd for InlineText<N> {
    fn partial_cmp(&self, other: &InlineText<N>) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<const N: usize> Ord for InlineText<N> {
    fn cmp(&self, other: &InlineText<N>) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl<const N: usize> std::fmt::Debug for InlineText<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl<const N: usize> std::fmt::Display for InlineText<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<const N: usize> From<&str> for InlineText<N> {
    fn from(text: &str) -> InlineText<N> {
        InlineText::new(text)
    }
}

impl<const N: usize> From<String> for InlineText<N> {
    fn from(text: String) -> InlineText<N> {
        InlineText::new(&text)
    }
}

impl<const N: usize> From<&String> for InlineText<N> {
    fn from(text: &String) -> InlineText<N> {
        InlineText::new(text)
    }
}

impl<const N: usize> From<Rc<str>> for InlineText<N> {
    fn from(text: Rc<str>) -> InlineText<N> {
        InlineText::new(&text)
    }
}

impl<const N: usize> From<&Rc<str>> for InlineText<N> {
    fn from(text: &Rc<str>) -> InlineText<N> {
        InlineText::new(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_every_text_byte_for_byte_inline_or_not() {
        const INLINE: usize = 22;
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

    /// A Lease's name: six words, and a node name of a cloud provider's length inline.
    #[test]
    fn a_lease_name_is_six_words_and_a_cloud_node_name_fits_inline() {
        assert_eq!(std::mem::size_of::<LeaseName>(), 48);
        let name = "ip-10-0-123-45.us-west-2.compute.internal";
        assert_eq!(LeaseName::new(name).heap_bytes(), 0);
        assert_eq!(&*LeaseName::new(name), name);
        let long = "n".repeat(47);
        assert!(LeaseName::new(&long).heap_bytes() > 0);
        assert_eq!(&*LeaseName::new(&long), long);
    }
}
