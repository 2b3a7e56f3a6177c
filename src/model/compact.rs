//! Compact encodings of per-object identifiers: a uid as 16 bytes, a resourceVersion as an
//! integer. Both are opaque to the API; each falls back to the original text when it is not in
//! the canonical form that the compact form renders back byte for byte, so nothing is ever
//! rewritten.

/// A canonical lowercase UUID (`8-4-4-4-12` hex digits), as 16 bytes; `None` for any other
/// text (including uppercase UUIDs: rendering them back would change them).
pub(crate) fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 36 {
        return None;
    }
    let mut out = [0u8; 16];
    let mut nibbles = 0usize;
    for (i, &c) in b.iter().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) {
            if c != b'-' {
                return None;
            }
            continue;
        }
        let v = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => return None,
        };
        out[nibbles / 2] |= if nibbles % 2 == 0 { v << 4 } else { v };
        nibbles += 1;
    }
    Some(out)
}

/// The canonical text of a UUID stored by [`parse_uuid`].
pub(crate) fn render_uuid(bytes: &[u8; 16]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(36);
    for (i, byte) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(HEX[usize::from(byte >> 4)] as char);
        s.push(HEX[usize::from(byte & 0xf)] as char);
    }
    s
}

/// A resourceVersion that is a canonical decimal integer (no sign, no leading zero) below
/// `u64::MAX`; `None` otherwise. etcd-backed API servers always answer these.
pub(crate) fn parse_resource_version(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || (s.len() > 1 && s.starts_with('0')) {
        return None;
    }
    if !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse::<u64>().ok().filter(|v| *v != u64::MAX)
}

/// Whether an object at resourceVersion `incoming` is older than the one held at `held`.
/// The API calls resourceVersions opaque, but within one etcd history they grow: an older one
/// is a delayed watch event (or a list served from a lagging cache) that must not replace a
/// newer object, such as the one our own write returned. Anything that does not parse as an
/// integer is never called older.
pub(crate) fn is_older(incoming: &str, held: &str) -> bool {
    match (
        parse_resource_version(incoming),
        parse_resource_version(held),
    ) {
        (Some(a), Some(b)) => a < b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_round_trips_only_in_canonical_form() {
        let u = "0f6bd7b6-2a33-4c55-9d1e-7a6b3f0c9e12";
        let bytes = parse_uuid(u).unwrap();
        assert_eq!(render_uuid(&bytes), u);
        assert_eq!(parse_uuid("0F6BD7B6-2A33-4C55-9D1E-7A6B3F0C9E12"), None);
        assert_eq!(parse_uuid("uid-victim"), None);
        assert_eq!(parse_uuid("0f6bd7b6x2a33-4c55-9d1e-7a6b3f0c9e12"), None);
        assert_eq!(parse_uuid(""), None);
    }

    #[test]
    fn resource_versions_parse_only_when_they_render_back() {
        assert_eq!(parse_resource_version("123456"), Some(123_456));
        assert_eq!(parse_resource_version("0"), Some(0));
        assert_eq!(parse_resource_version("007"), None);
        assert_eq!(parse_resource_version("-1"), None);
        assert_eq!(parse_resource_version("abc"), None);
        assert_eq!(parse_resource_version(""), None);
        assert_eq!(parse_resource_version("99999999999999999999999"), None);
    }

    #[test]
    fn older_only_when_both_are_integers() {
        assert!(is_older("9", "10"));
        assert!(!is_older("10", "9"));
        assert!(!is_older("10", "10"));
        assert!(!is_older("a", "10"));
        assert!(!is_older("9", "b"));
    }
}
