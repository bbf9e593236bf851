//! ConfigMap keys for a skill's files.
//!
//! A ConfigMap key may hold only `[-._a-zA-Z0-9]`, so `scripts/check.py` cannot be a key. Each
//! path is encoded into a key that decodes back to exactly that path (the pod's volume lists
//! `items[].path` from it, restoring the folders): letters, digits, `-` and `.` stay, `_` becomes
//! `__`, `/` becomes `_-`, and every other byte becomes `_xHH`.

/// The ConfigMap key of a skill file's relative path.
pub fn encode(path: &str) -> String {
    let mut key = String::with_capacity(path.len());
    for byte in path.bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' => key.push(char::from(byte)),
            b'_' => key.push_str("__"),
            b'/' => key.push_str("_-"),
            other => key.push_str(&format!("_x{other:02X}")),
        }
    }
    key
}

/// The relative path a key encodes, or `None` for a key [`encode`] never produces.
pub fn decode(key: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(key.len());
    let mut rest = key.as_bytes();
    while let Some((&first, tail)) = rest.split_first() {
        if first != b'_' {
            if !(first.is_ascii_alphanumeric() || first == b'-' || first == b'.') {
                return None;
            }
            bytes.push(first);
            rest = tail;
            continue;
        }
        match tail {
            [b'_', more @ ..] => {
                bytes.push(b'_');
                rest = more;
            }
            [b'-', more @ ..] => {
                bytes.push(b'/');
                rest = more;
            }
            [b'x', hi, lo, more @ ..] => {
                let hex = [*hi, *lo];
                let text = std::str::from_utf8(&hex).ok()?;
                if text.bytes().any(|b| b.is_ascii_lowercase()) {
                    return None;
                }
                let byte = u8::from_str_radix(text, 16).ok()?;
                if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'/') {
                    return None;
                }
                bytes.push(byte);
                rest = more;
            }
            _ => return None,
        }
    }
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn examples() {
        assert_eq!(encode("scripts/check.py"), "scripts_-check.py");
        assert_eq!(encode("a_b c"), "a__b_x20c");
        assert_eq!(encode("ü"), "_xC3_xBC");
        assert_eq!(
            decode("scripts_-check.py").as_deref(),
            Some("scripts/check.py")
        );
    }

    #[test]
    fn refuses_keys_encode_never_writes() {
        for key in ["a_", "a_y", "_x4", "_x41", "_x2f", "a b", "_xZZ", "_xFF"] {
            assert_eq!(decode(key), None, "{key}");
        }
    }

    fn is_valid_key(key: &str) -> bool {
        !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    }

    proptest! {
        #[test]
        fn round_trips_into_valid_keys(path in "\\PC{1,40}") {
            let key = encode(&path);
            prop_assert!(is_valid_key(&key), "{key}");
            prop_assert_eq!(decode(&key), Some(path));
        }

        #[test]
        fn decode_never_panics_and_is_injective(key in "[-._a-zA-Z0-9]{0,30}") {
            if let Some(path) = decode(&key) {
                prop_assert_eq!(encode(&path), key);
            }
        }
    }
}
