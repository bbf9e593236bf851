//! I/O failures worded for the model: by virtual path, never naming a host path. The tools,
//! the framework's file requests and the inputs' copy all say them the same way.

use std::io;

/// An I/O failure on `virtual_path`, worded for the model (never naming host paths).
pub(crate) fn io_error(virtual_path: &str, error: &io::Error) -> String {
    match error.kind() {
        io::ErrorKind::NotFound => format!("Error: {virtual_path} does not exist"),
        io::ErrorKind::PermissionDenied => format!("Error: permission denied: {virtual_path}"),
        io::ErrorKind::IsADirectory => format!("Error: {virtual_path} is a directory"),
        io::ErrorKind::NotADirectory => {
            format!("Error: a parent of {virtual_path} is a file, not a directory")
        }
        io::ErrorKind::ReadOnlyFilesystem => format!("Error: {virtual_path} is read-only"),
        io::ErrorKind::StorageFull => format!("Error: no space left for {virtual_path}"),
        _ => format!("Error: {virtual_path}: {error}"),
    }
}
