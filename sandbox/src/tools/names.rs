//! The sandbox tools' names, as the model calls them.

pub const BASH: &str = "bash";
pub const LS: &str = "ls";
pub const READ_FILE: &str = "read_file";
pub const WRITE_FILE: &str = "write_file";
pub const STR_REPLACE: &str = "str_replace";
pub const GLOB: &str = "glob";
pub const GREP: &str = "grep";
