//! The mount points listed in `/proc/self/mountinfo` (proc(5)): the fifth field of each
//! line, with the kernel's octal escapes (`\040` for a space...) undone.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// The mount points, in the order the kernel lists them (parents before children).
pub(super) fn mount_points(mountinfo: &str) -> Vec<PathBuf> {
    mountinfo
        // Not `lines()`: it would also strip a `\r` that ends a path.
        .split('\n')
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(OsString::from_vec(unescape(field))))
        .collect()
}

/// Undoes `\ooo` escapes; anything else is kept as it is.
fn unescape(field: &str) -> Vec<u8> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && let Some(code) = bytes.get(i + 1..i + 4).and_then(octal)
        {
            out.push(code);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

fn octal(digits: &[u8]) -> Option<u8> {
    digits.iter().try_fold(0u8, |value, &digit| {
        if !(b'0'..=b'7').contains(&digit) {
            return None;
        }
        value.checked_mul(8)?.checked_add(digit - b'0')
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStrExt;

    use proptest::prelude::*;

    use super::*;

    /// How the kernel writes a path into mountinfo (`show_mountinfo` escapes these four).
    fn escape(path: &[u8]) -> String {
        path.iter()
            .map(|&b| match b {
                b' ' | b'\t' | b'\n' | b'\\' => format!("\\{b:03o}"),
                other => char::from(other).to_string(),
            })
            .collect()
    }

    #[test]
    fn real_lines_give_their_mount_points() {
        let info = "22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\
                    36 22 0:32 / /proc rw,nosuid,nodev,noexec,relatime shared:5 - proc proc rw\n\
                    40 22 0:35 /data /mnt/my\\040disk rw - ext4 /dev/vdb rw\n\
                    41 22 0:36 / /odd\\134name\\011tab ro - tmpfs none rw\n";
        assert_eq!(
            mount_points(info),
            vec![
                PathBuf::from("/"),
                PathBuf::from("/proc"),
                PathBuf::from("/mnt/my disk"),
                PathBuf::from("/odd\\name\ttab"),
            ]
        );
    }

    #[test]
    fn malformed_escapes_and_short_lines_are_kept_or_skipped() {
        assert_eq!(
            mount_points("1 2 3 4 /a\\9x\\0\n\nshort line\n"),
            vec![PathBuf::from("/a\\9x\\0")]
        );
        assert_eq!(unescape("\\777"), b"\\777".to_vec());
    }

    proptest! {
        #[test]
        fn escaped_paths_round_trip(path in proptest::collection::vec(1u8..=127, 1..64)) {
            let line = format!("36 35 98:0 / {} rw - ext4 /dev/x rw", escape(&path));
            let points = mount_points(&line);
            prop_assert_eq!(points.len(), 1);
            prop_assert_eq!(points[0].as_os_str().as_bytes(), &path[..]);
        }

        #[test]
        fn any_text_parses_without_panicking(text in ".{0,300}") {
            let _ = mount_points(&text);
        }
    }
}
