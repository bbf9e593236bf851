//! Where a child Run's presented files go in its parent's sandbox, and what the parent's model
//! reads about them: `outputs/<child>/<path below the child's outputs>`, at most
//! [`MAX_CHILD_FILES_BYTES`] per child (files past it are not fetched and listed as skipped).
//! Names and paths come from the network: anything that could leave `outputs/<child>/` is
//! refused for that file alone.

use herd_crds::report::Artifact;
use herd_sandbox::{OUTPUTS, below_outputs};
use percent_encoding::percent_decode_str;

/// Most bytes of one child's files copied into its parent's sandbox.
pub const MAX_CHILD_FILES_BYTES: u64 = 10 * 1024 * 1024;
/// Longest child Run name accepted as a folder (a Kubernetes object name).
const MAX_NAME_CHARS: usize = 253;

/// The folder under `outputs/` for the child Run `name`: a Kubernetes object name (lower-case
/// letters, digits, `-` and `.`, starting and ending with a letter or digit), so one plain
/// path segment.
pub fn child_folder(name: &str) -> Result<&str, String> {
    let edge = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let inner = |c: char| edge(c) || c == '-' || c == '.';
    let valid = !name.is_empty()
        && name.len() <= MAX_NAME_CHARS
        && name.starts_with(edge)
        && name.ends_with(edge)
        && name.chars().all(inner);
    if valid {
        Ok(name)
    } else {
        Err(format!(
            "the child Run's name {:?} is not an object name, so not a folder",
            herd_sandbox::truncation::truncate_chars(name, 80)
        ))
    }
}

/// Where a child's file goes, relative to the parent's `outputs/`: `<folder>/<path below the
/// child's outputs>`, from the percent-encoded `header` (the file's virtual path in the child).
pub fn destination(folder: &str, header: &str) -> Result<String, String> {
    let mut decoded = Vec::new();
    for raw in header.trim().split('/') {
        let segment = percent_decode_str(raw)
            .decode_utf8()
            .map_err(|_| format!("the file path {header:?} is not UTF-8 once decoded"))?;
        if segment.contains('/') || segment.chars().any(char::is_control) {
            return Err(format!(
                "the file path {header:?} holds an encoded '/' or a control character"
            ));
        }
        decoded.push(segment.into_owned());
    }
    let path = decoded.join("/");
    let below = below_outputs(&path).map_err(|error| {
        format!(
            "the file path {path:?} is refused: {error}; only files under {OUTPUTS}/ are copied"
        )
    })?;
    Ok(format!("{folder}/{}", below.join("/")))
}

/// What to do with one presented file, decided from the sizes the child declared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Planned {
    /// Fetch file `n`, reading at most `max_bytes` of it (what is left of the cap).
    Fetch { n: usize, max_bytes: u64 },
    /// Not fetched: the cap would be passed.
    Skip { n: usize },
}

/// Which files to fetch: in order, each that still fits under the cap beside those fetched
/// before it. The cap counts the bytes really fetched, which may differ from those declared.
#[derive(Debug, Default)]
pub struct FileBudget {
    used: u64,
}

impl FileBudget {
    /// Whether file `n` of `size` declared bytes is fetched.
    pub fn plan(&self, n: usize, size: u64) -> Planned {
        let left = MAX_CHILD_FILES_BYTES.saturating_sub(self.used);
        if size <= left {
            Planned::Fetch { n, max_bytes: left }
        } else {
            Planned::Skip { n }
        }
    }

    /// Counts a fetched file's bytes.
    pub fn fetched(&mut self, bytes: u64) {
        self.used = self.used.saturating_add(bytes);
    }
}

/// What became of one presented file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placed {
    /// Written at this virtual path of the parent, with this many bytes.
    Copied { path: String, size: u64 },
    /// Not fetched: over the cap.
    Skipped { artifact: Artifact },
    /// Fetching or writing failed: why.
    Failed { artifact: Artifact, why: String },
}

/// The lines the parent's model reads after the child's result: where each file went, which
/// were skipped and why others failed.
pub fn files_note(folder: &str, placed: &[Placed]) -> String {
    let mut copied = Vec::new();
    let mut skipped = Vec::new();
    let mut failed = Vec::new();
    for place in placed {
        match place {
            Placed::Copied { path, size } => copied.push(format!("- {path} ({size} bytes)")),
            Placed::Skipped { artifact } => {
                skipped.push(format!("- {} ({} bytes)", artifact.path, artifact.size))
            }
            Placed::Failed { artifact, why } => failed.push(format!("- {}: {why}", artifact.path)),
        }
    }
    let mut sections = Vec::new();
    if !copied.is_empty() {
        sections.push(format!(
            "The subagent's files were copied into {OUTPUTS}/{folder}/:\n{}",
            copied.join("\n")
        ));
    }
    if !skipped.is_empty() {
        sections.push(format!(
            "Not copied, over the {} MiB per subagent (the subagent's paths):\n{}",
            MAX_CHILD_FILES_BYTES / (1024 * 1024),
            skipped.join("\n")
        ));
    }
    if !failed.is_empty() {
        sections.push(format!(
            "Could not be copied (the subagent's paths):\n{}",
            failed.join("\n")
        ));
    }
    sections.join("\n\n")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_childs_name_is_its_folder_when_it_is_an_object_name() {
        assert_eq!(
            child_folder("market-map-1a2b3c4d"),
            Ok("market-map-1a2b3c4d")
        );
        assert_eq!(child_folder("a.b-c"), Ok("a.b-c"));
        for bad in [
            "",
            "..",
            ".",
            "-a",
            "a-",
            "A",
            "a/b",
            "a b",
            "a\0",
            &"a".repeat(254),
        ] {
            assert!(child_folder(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_files_path_below_the_childs_outputs_goes_below_its_folder() {
        assert_eq!(
            destination("kid", "/mnt/user-data/outputs/report.md"),
            Ok("kid/report.md".to_owned())
        );
        assert_eq!(
            destination(
                "kid",
                "/mnt/user-data/outputs/charts/Q1%20sales%20%C3%A9t%C3%A9.png"
            ),
            Ok("kid/charts/Q1 sales été.png".to_owned())
        );
    }

    #[test]
    fn hostile_paths_are_refused_with_a_reason() {
        let cases = [
            ("/mnt/user-data/outputs/../workspace/x", "'..'"),
            ("/mnt/user-data/outputs/%2E%2E/%2E%2E/etc/passwd", "'..'"),
            ("/mnt/user-data/outputs/a%2F..%2F..%2Fx", "encoded '/'"),
            ("/mnt/user-data/outputs/a%00b", "control character"),
            ("/mnt/user-data/outputs/a%0Ab", "control character"),
            ("/mnt/user-data/outputs/%FF", "not UTF-8"),
            ("/etc/passwd", "only files under"),
            ("outputs/x", "only files under"),
            ("/mnt/user-data/workspace/x", "only files under"),
            ("/mnt/user-data/outputs/", "only files under"),
            ("", "only files under"),
        ];
        for (header, expected) in cases {
            let error = destination("kid", header).unwrap_err();
            assert!(error.contains(expected), "{header}: {error}");
        }
    }

    #[test]
    fn files_are_fetched_in_order_while_they_fit_under_the_cap() {
        let mut budget = FileBudget::default();
        let mib = 1024 * 1024;
        // Each file's declared size and the room left when it is fetched (`None`: skipped);
        // a fetched file counts at its declared size before the next is planned.
        let files = [
            (6 * mib, Some(10 * mib)),
            (5 * mib, None),
            (4 * mib, Some(4 * mib)),
            (1, None),
            (0, Some(0)),
        ];
        for (n, (size, room)) in files.into_iter().enumerate() {
            let expected = match room {
                Some(max_bytes) => Planned::Fetch { n, max_bytes },
                None => Planned::Skip { n },
            };
            assert_eq!(budget.plan(n, size), expected, "file {n}");
            if room.is_some() {
                budget.fetched(size);
            }
        }
    }

    #[test]
    fn the_note_names_where_files_went_and_what_was_left_behind() {
        let artifact = |path: &str, size| Artifact {
            path: path.into(),
            size,
        };
        let note = files_note(
            "kid",
            &[
                Placed::Copied {
                    path: "/mnt/user-data/outputs/kid/report.md".into(),
                    size: 12,
                },
                Placed::Skipped {
                    artifact: artifact("/mnt/user-data/outputs/big.bin", 11 * 1024 * 1024),
                },
                Placed::Failed {
                    artifact: artifact("/mnt/user-data/outputs/x", 1),
                    why: "refused".into(),
                },
            ],
        );
        assert_eq!(
            note,
            "The subagent's files were copied into /mnt/user-data/outputs/kid/:\n\
             - /mnt/user-data/outputs/kid/report.md (12 bytes)\n\n\
             Not copied, over the 10 MiB per subagent (the subagent's paths):\n\
             - /mnt/user-data/outputs/big.bin (11534336 bytes)\n\n\
             Could not be copied (the subagent's paths):\n\
             - /mnt/user-data/outputs/x: refused"
        );
        assert_eq!(files_note("kid", &[]), "");
    }

    proptest! {
        #[test]
        fn no_header_leads_out_of_the_childs_folder(header in "[/a-z.%0-9A-F]{0,40}") {
            if let Ok(path) = destination("kid", &header) {
                let rest = path.strip_prefix("kid/");
                prop_assert!(rest.is_some(), "{path}");
                for segment in rest.unwrap_or_default().split('/') {
                    prop_assert!(!segment.is_empty() && segment != "." && segment != "..", "{path}");
                }
            }
        }
    }
}
