//! Compact encodings of per-object identifiers: a uid as 16 bytes, a resourceVersion as an
//! integer. Both are opaque to the API; each falls back to the original text when it is not in
//! the canonical form that the compact form renders back byte for byte, so nothing is ever
//! rewritten.

/// Each byte's value as a lowercase hex digit; `NOT_HEX` for every other byte (uppercase
/// included: see [`parse_uuid`]).
const NOT_HEX: u8 = 0xff;
const HEX_VALUE: [u8; 256] = {
    let mut t = [NOT_HEX; 256];
    let mut c = 0;
    while c < 10 {
        t[b'0' as usize + c] = c as u8;
        c += 1;
    }
    let mut c = 0;
    while c < 6 {
        t[b'a' as usize + c] = 10 + c as u8;
        c += 1;
    }
    t
};

/// Where each of the 16 bytes' two digits start in the text: the groups of `8-4-4-4-12`.
const PAIR_AT: [usize; 16] = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];

/// A canonical lowercase UUID (`8-4-4-4-12` hex digits), as 16 bytes; `None` for any other
/// text (including uppercase UUIDs: rendering them back would change them).
///
/// Every pod's uid goes through here on every upsert, so it is a table lookup per digit with
/// the errors ORed together and tested once, not a branch per character.
pub(crate) fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let b: &[u8; 36] = s.as_bytes().try_into().ok()?;
    if b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return None;
    }
    let mut out = [0u8; 16];
    // A digit's value is below 16, `NOT_HEX` has the high bit: one test for all 32.
    let mut bad = 0u8;
    for (byte, &at) in out.iter_mut().zip(PAIR_AT.iter()) {
        let (hi, lo) = (
            HEX_VALUE[usize::from(b[at])],
            HEX_VALUE[usize::from(b[at + 1])],
        );
        bad |= hi | lo;
        *byte = (hi << 4) | (lo & 0xf);
    }
    (bad & 0xf0 == 0).then_some(out)
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
///
/// One pass (every pod's upsert parses its version): a digit test and an overflow-checked
/// step per byte.
pub(crate) fn parse_resource_version(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > 20 || (b.len() > 1 && b[0] == b'0') {
        return None;
    }
    let mut v = 0u64;
    for &c in b {
        let digit = c.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(digit))?;
    }
    (v != u64::MAX).then_some(v)
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

    /// The byte-at-a-time parser [`parse_uuid`] replaced: the reference it must agree with.
    fn parse_uuid_reference(s: &str) -> Option<[u8; 16]> {
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

    fn agrees(bytes: &[u8]) {
        // Only valid UTF-8 reaches the parser (it takes a `str`).
        if let Ok(s) = std::str::from_utf8(bytes) {
            assert_eq!(parse_uuid(s), parse_uuid_reference(s), "{s:?}");
        }
    }

    #[test]
    fn uuid_parser_agrees_with_the_reference_on_every_single_byte_corruption() {
        let uuids = [
            "0f6bd7b6-2a33-4c55-9d1e-7a6b3f0c9e12",
            "00000000-0000-0000-0000-000000000000",
            "ffffffff-ffff-ffff-ffff-ffffffffffff",
            "01234567-89ab-cdef-0123-456789abcdef",
            "6f1c2a4e-0000-4000-8000-000000029999",
        ];
        for u in uuids {
            assert!(parse_uuid(u).is_some());
            let base = u.as_bytes();
            for at in 0..base.len() {
                for c in 0..=255u8 {
                    let mut b = base.to_vec();
                    b[at] = c;
                    agrees(&b);
                }
                // One byte fewer, and one more at each position.
                let mut shorter = base.to_vec();
                shorter.remove(at);
                agrees(&shorter);
                for c in [b'0', b'a', b'-', b'F'] {
                    let mut longer = base.to_vec();
                    longer.insert(at, c);
                    agrees(&longer);
                }
            }
            agrees(u.to_uppercase().as_bytes());
        }
    }

    #[test]
    fn uuid_parser_agrees_with_the_reference_on_random_strings() {
        // xorshift64: reproducible, no crate.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let alphabets: [&[u8]; 3] = [b"0123456789abcdef-", b"0123456789abcdefABCDEFgx-", &[]];
        for _ in 0..200_000 {
            let alphabet = alphabets[(next() % 3) as usize];
            let len = if next() % 4 == 0 {
                (next() % 40) as usize
            } else {
                36
            };
            let mut b: Vec<u8> = (0..len)
                .map(|_| match alphabet {
                    [] => next() as u8,
                    a => a[(next() % a.len() as u64) as usize],
                })
                .collect();
            // Mostly with the dashes in place, so that the digits are what is tested.
            if len == 36 && next() % 2 == 0 {
                for at in [8, 13, 18, 23] {
                    b[at] = b'-';
                }
            }
            agrees(&b);
        }
    }

    /// The two-pass parser [`parse_resource_version`] replaced: the reference it must agree with.
    fn parse_resource_version_reference(s: &str) -> Option<u64> {
        if s.is_empty() || s.len() > 20 || (s.len() > 1 && s.starts_with('0')) {
            return None;
        }
        if !s.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        s.parse::<u64>().ok().filter(|v| *v != u64::MAX)
    }

    #[test]
    fn resource_version_parser_agrees_with_the_reference() {
        let mut cases: Vec<String> = [
            "0",
            "1",
            "10",
            "007",
            "-1",
            "+1",
            "1a",
            " 1",
            "1 ",
            "",
            "18446744073709551614",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999",
            "100000000000000000000",
            "12345678901234567890",
            "١٢٣",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let text = match x % 3 {
                0 => (x >> 2).to_string(),
                1 => ((x >> 2) % 100_000).to_string(),
                _ => format!("{}{}", x >> 40, ["", "0", "x", "/", ":"][(x % 5) as usize]),
            };
            cases.push(text);
        }
        for s in cases {
            assert_eq!(
                parse_resource_version(&s),
                parse_resource_version_reference(&s),
                "{s:?}"
            );
        }
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
