//! Office Open XML packages (DOCX, XLSX, PPTX) read defensively: a zip whose entry count,
//! per-entry and total inflated sizes are capped while reading (declared sizes can lie, so
//! each entry is read through `Read::take`), and XML walked as a stream with a depth cap.

use std::borrow::Cow;
use std::io::{Cursor, Read};

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};
use zip::ZipArchive;

use super::limits::{InflateBudget, MAX_PART_BYTES, MAX_XML_DEPTH, MAX_ZIP_ENTRIES, mib};

/// An opened package: its archive and the inflation spent reading it.
pub(super) struct Package<'a> {
    archive: ZipArchive<Cursor<&'a [u8]>>,
    budget: InflateBudget,
}

impl std::fmt::Debug for Package<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Package")
            .field("entries", &self.archive.len())
            .finish()
    }
}

impl<'a> Package<'a> {
    /// Opens `bytes` as a zip, refusing archives with too many entries.
    pub(super) fn open(bytes: &'a [u8], kind: &str) -> Result<Self, String> {
        if !bytes.starts_with(b"PK\x03\x04") {
            return Err(format!("not a {kind} file (no zip header)"));
        }
        let archive = ZipArchive::new(Cursor::new(bytes))
            .map_err(|error| format!("not a readable {kind} file: {error}"))?;
        if archive.len() > MAX_ZIP_ENTRIES {
            return Err(format!(
                "the archive has {} entries, over the limit of {MAX_ZIP_ENTRIES}",
                archive.len()
            ));
        }
        Ok(Package {
            archive,
            budget: InflateBudget::default(),
        })
    }

    /// The entry names, in archive order.
    pub(super) fn names(&self) -> Vec<String> {
        self.archive
            .file_names()
            .filter_map(Result::ok)
            .map(Cow::into_owned)
            .collect()
    }

    /// Whether the archive has an entry called `name`.
    pub(super) fn has(&self, name: &str) -> bool {
        self.archive.index_for_name(name).is_some()
    }

    /// The entry `name` inflated, at most [`MAX_PART_BYTES`], as UTF-8 text.
    pub(super) fn read_text(&mut self, name: &str) -> Result<String, String> {
        let index = self
            .archive
            .index_for_name(name)
            .ok_or_else(|| format!("the package has no {name}"))?;
        let bytes = self.read_index(index)?;
        String::from_utf8(bytes).map_err(|_| format!("{name} is not UTF-8 XML"))
    }

    /// Inflates every entry (into nothing) so a parser reading the package afterwards, such
    /// as calamine, can only meet entries within the caps.
    pub(super) fn check_all(&mut self) -> Result<(), String> {
        for index in 0..self.archive.len() {
            let mut entry = self
                .archive
                .by_index(index)
                .map_err(|error| format!("entry {index} is unreadable: {error}"))?;
            let name = String::from_utf8_lossy(entry.name_raw()).into_owned();
            let read = std::io::copy(
                &mut (&mut entry).take(MAX_PART_BYTES + 1),
                &mut std::io::sink(),
            )
            .map_err(|error| format!("{name} is unreadable: {error}"))?;
            Self::check_part(&name, read)?;
            self.budget.spend(read)?;
        }
        Ok(())
    }

    fn read_index(&mut self, index: usize) -> Result<Vec<u8>, String> {
        let mut entry = self
            .archive
            .by_index(index)
            .map_err(|error| format!("entry {index} is unreadable: {error}"))?;
        let name = String::from_utf8_lossy(entry.name_raw()).into_owned();
        if entry.size() > MAX_PART_BYTES {
            return Err(format!(
                "{name} declares {} uncompressed, over the {} limit (a zip bomb?)",
                mib(entry.size()),
                mib(MAX_PART_BYTES)
            ));
        }
        let mut bytes = Vec::new();
        (&mut entry)
            .take(MAX_PART_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|error| format!("{name} is unreadable: {error}"))?;
        Self::check_part(&name, bytes.len() as u64)?;
        self.budget.spend(bytes.len() as u64)?;
        Ok(bytes)
    }

    fn check_part(name: &str, read: u64) -> Result<(), String> {
        if read > MAX_PART_BYTES {
            return Err(format!(
                "{name} inflates past {} (a zip bomb?)",
                mib(MAX_PART_BYTES)
            ));
        }
        Ok(())
    }
}

/// One step of an XML walk, names without their namespace prefix.
#[derive(Debug)]
pub(super) enum Node<'e> {
    Open(&'e BytesStart<'e>),
    /// An element with no content (`<w:tab/>`): opened and closed at once.
    Empty(&'e BytesStart<'e>),
    Close(&'e str),
    Text(Cow<'e, str>),
}

/// Walks `xml`, calling `visit` for each node until it returns `false` or the document
/// ends; refuses malformed XML and nesting deeper than [`MAX_XML_DEPTH`]. Streaming, so
/// memory stays at the part's size however the elements nest.
pub(super) fn walk(xml: &str, mut visit: impl FnMut(Node<'_>) -> bool) -> Result<(), String> {
    let mut reader = Reader::from_str(xml);
    let mut depth = 0usize;
    loop {
        let event = reader
            .read_event()
            .map_err(|error| format!("malformed XML: {error}"))?;
        let keep_going = match &event {
            Event::Start(start) => {
                depth += 1;
                if depth > MAX_XML_DEPTH {
                    return Err(format!(
                        "its XML nests deeper than {MAX_XML_DEPTH} elements"
                    ));
                }
                visit(Node::Open(start))
            }
            Event::Empty(start) => visit(Node::Empty(start)),
            Event::End(end) => {
                depth = depth.saturating_sub(1);
                let name = end.local_name();
                visit(Node::Close(name.as_ref()))
            }
            Event::Text(text) => visit(Node::Text(text.xml10_content())),
            Event::CData(data) => visit(Node::Text(Cow::Owned(data.xml10_content().into_owned()))),
            Event::GeneralRef(reference) => {
                let resolved = match reference.resolve_char_ref() {
                    Ok(Some(character)) => Some(character.to_string()),
                    _ => quick_xml::escape::resolve_predefined_entity(&reference.xml10_content())
                        .map(str::to_owned),
                };
                match resolved {
                    Some(text) => visit(Node::Text(Cow::Owned(text))),
                    None => true,
                }
            }
            Event::Eof => return Ok(()),
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => true,
        };
        if !keep_going {
            return Ok(());
        }
    }
}

/// The local name of an element (`p` for `<w:p>`).
pub(super) fn local_name<'s>(start: &'s BytesStart<'_>) -> Cow<'s, str> {
    let name = start.local_name();
    Cow::Owned(name.as_ref().to_owned())
}

/// The value of the attribute whose local name is `name` (`val` for `w:val`).
pub(super) fn attribute(start: &BytesStart<'_>, name: &str) -> Option<String> {
    start
        .attributes()
        .filter_map(Result::ok)
        .find(|attribute| attribute.key.local_name().as_ref() == name)
        .map(|attribute| attribute.value.into_owned())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io::Write;

    use super::*;

    /// A zip of `entries` (name, content), deflated: the fixture builder for DOCX and PPTX.
    pub(crate) fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, content) in entries {
            writer.start_file(*name, options).unwrap();
            writer.write_all(content).unwrap();
        }
        writer.finish().unwrap().into_inner()
    }

    #[test]
    fn walk_caps_depth_without_recursion() {
        let depth = 100_000;
        let xml = format!("{}{}", "<a>".repeat(depth), "</a>".repeat(depth));
        let error = walk(&xml, |_| true).unwrap_err();
        assert!(error.contains("nests deeper than 256"), "{error}");
    }

    #[test]
    fn walk_decodes_entities_and_stops_on_request() {
        let mut texts = Vec::new();
        walk(
            "<r><t>a &amp; b &#233;</t><t>stop</t><t>never</t></r>",
            |node| {
                if let Node::Text(text) = node {
                    texts.push(text.into_owned());
                    return !texts.concat().contains("stop");
                }
                true
            },
        )
        .unwrap();
        assert_eq!(texts.concat(), "a & b éstop");
    }

    #[test]
    fn a_bomb_entry_is_refused_while_inflating() {
        let zeros = vec![0u8; (MAX_PART_BYTES + 1024) as usize];
        let bytes = zip_of(&[("word/document.xml", &zeros)]);
        assert!(
            bytes.len() < 1024 * 1024,
            "a bomb is small: {}",
            bytes.len()
        );
        let mut package = Package::open(&bytes, "DOCX").unwrap();
        let error = package.read_text("word/document.xml").unwrap_err();
        assert!(error.contains("zip bomb"), "{error}");
        let mut package = Package::open(&bytes, "XLSX").unwrap();
        let error = package.check_all().unwrap_err();
        assert!(error.contains("inflates past 32.0 MiB"), "{error}");
    }

    #[test]
    fn too_many_entries_and_non_zips_are_refused() {
        let names: Vec<String> = (0..=MAX_ZIP_ENTRIES).map(|i| format!("{i}")).collect();
        let entries: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b""[..])).collect();
        let bytes = zip_of(&entries);
        let error = Package::open(&bytes, "DOCX").unwrap_err();
        assert!(error.contains("over the limit of 10000"), "{error}");
        let error = Package::open(b"%PDF-1.4", "DOCX").unwrap_err();
        assert_eq!(error, "not a DOCX file (no zip header)");
    }
}
