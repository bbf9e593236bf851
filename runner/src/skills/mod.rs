//! Skills: SKILL.md parsing with DeerFlow's rules and the per-run skill catalog.
//!
//! The prompt lists only each skill's name, description and location; the model reads the
//! SKILL.md (and the resources it names) with `read_file` when a task matches: progressive
//! loading keeps the system prompt small however many skills are installed.

pub(crate) mod catalog;

pub use catalog::{Skill, SkillCatalog, SkillCategory};
// The SKILL.md rules are shared with the operator's Skill controller.
pub use herd_crds::skill_md::{RequiredSecret, parse_skill_md};
