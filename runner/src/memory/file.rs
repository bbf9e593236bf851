//! Local memory: a JSON file, updated under an exclusive file lock with an atomic rename, so
//! runs that end together lose nothing.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use herd_crds::memory::{ApplyContext, apply_operations};
use herd_crds::wire::{MemoryDocument, MemoryOperation};

/// A memory document stored in a local file.
#[derive(Clone, Debug)]
pub struct MemoryFile {
    path: PathBuf,
    source: String,
    max_facts: usize,
}

impl MemoryFile {
    /// Memory at `path`; operations are stamped with `source` and capped at `max_facts`.
    pub fn new(path: impl Into<PathBuf>, source: impl Into<String>, max_facts: usize) -> Self {
        MemoryFile {
            path: path.into(),
            source: source.into(),
            max_facts,
        }
    }

    /// Where the document lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The current document (empty when there is none yet).
    pub fn read(&self) -> io::Result<MemoryDocument> {
        match fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|error| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} is not a memory file: {error}", self.path.display()),
                )
            }),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(MemoryDocument::default()),
            Err(error) => Err(error),
        }
    }

    /// Applies operations: lock, read, apply, write a temp file, rename, unlock.
    pub fn apply(&self, operations: &[MemoryOperation]) -> io::Result<()> {
        if let Some(parent) = self.path.parent() {
            fs::create_dir_all(parent)?;
        }
        let lock = self.lock()?;
        let mut document = self.read()?;
        let ctx = ApplyContext {
            now: jiff::Timestamp::now().to_string(),
            source: self.source.clone(),
            max_facts: self.max_facts,
        };
        apply_operations(&mut document, operations, &ctx);
        let json = serde_json::to_vec_pretty(&document).map_err(io::Error::other)?;
        let temp = self
            .path
            .with_extension(format!("tmp-{}", std::process::id()));
        fs::write(&temp, json)?;
        fs::rename(&temp, &self.path)?;
        lock.unlock()
    }

    fn lock(&self) -> io::Result<File> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.path.with_extension("lock"))?;
        file.lock()?;
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use herd_crds::wire::FactCategory;

    use super::*;

    #[test]
    fn concurrent_updates_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory").join("agent.json");
        let writers: Vec<_> = (0..8)
            .map(|writer| {
                let file = MemoryFile::new(&path, format!("run-{writer}"), 100);
                std::thread::spawn(move || {
                    for fact in 0..5 {
                        let op = MemoryOperation::Add {
                            content: format!("fact {writer}-{fact}"),
                            category: FactCategory::Context,
                            confidence: 0.9,
                        };
                        file.apply(&[op]).unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        let document = MemoryFile::new(&path, "reader", 100).read().unwrap();
        assert_eq!(document.facts.len(), 40);
        assert_eq!(document.revision, 40);
    }

    #[test]
    fn a_missing_file_reads_as_empty_and_garbage_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = MemoryFile::new(dir.path().join("m.json"), "r", 10);
        assert_eq!(file.read().unwrap(), MemoryDocument::default());
        fs::write(file.path(), "not json").unwrap();
        assert!(file.read().is_err());
    }
}
