//! What a `bash` command line runs, read with a real bash parser (brush-parser): every simple
//! command, wherever it sits (pipelines, lists, loops, functions, subshells, `$(...)`,
//! `<(...)`), with its words dequoted the way bash would (`r''m` and `\rm` are `rm`) and its
//! expansions marked as computed unless a literal assignment earlier on the line gives them.

use std::collections::HashMap;
use std::io::Cursor;

use brush_parser::ast::{
    self, Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, IoFileRedirectKind,
    IoFileRedirectTarget, IoRedirect, SimpleCommand,
};
use brush_parser::word::{self, Parameter, ParameterExpr, TildeExpr, WordPiece};
use brush_parser::{Parser, ParserOptions};

/// Nesting deeper than this (`$( $( $( ...`) is refused rather than followed.
const MAX_DEPTH: usize = 16;

/// One word of a command, as far as it can be known before it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Text {
    /// Known exactly: quotes and escapes removed; `~` and `$HOME` kept as `~`.
    Literal(String),
    /// Depends on run time (`$x`, `$(...)`); the raw text.
    Computed(String),
    /// A process substitution `<(...)`, and whether it downloads (curl, wget).
    Process { downloads: bool },
}

impl Text {
    /// The literal text, if known.
    pub fn literal(&self) -> Option<&str> {
        match self {
            Text::Literal(text) => Some(text),
            _ => None,
        }
    }
}

/// One simple command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Simple {
    /// The command word; `None` when the command only assigns or redirects.
    pub name: Option<Text>,
    pub args: Vec<Text>,
    /// Files its output is redirected to.
    pub writes_to: Vec<Text>,
    /// Downloaded data it reads as standard input (`< <(curl ...)`, `curl ... |`).
    pub stdin: Option<Text>,
}

/// The command line does not parse as bash.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unparsable(pub String);

/// Every simple command of `script`, in source order (nested ones after their parent's
/// words are read).
pub fn simple_commands(script: &str) -> Result<Vec<Simple>, Unparsable> {
    let mut walker = Walker::default();
    walker.script(script, 0)?;
    Ok(walker.found)
}

#[derive(Default)]
struct Walker {
    found: Vec<Simple>,
    /// Literal values assigned so far (`x=rm`).
    vars: HashMap<String, String>,
}

impl Walker {
    fn script(&mut self, script: &str, depth: usize) -> Result<(), Unparsable> {
        if depth > MAX_DEPTH {
            return Err(Unparsable("the command nests too deeply".into()));
        }
        let options = ParserOptions::default();
        let program = Parser::new(Cursor::new(script), &options)
            .parse_program()
            .map_err(|error| Unparsable(error.to_string()))?;
        for complete in &program.complete_commands {
            self.list(complete, depth)?;
        }
        Ok(())
    }

    fn list(&mut self, list: &CompoundList, depth: usize) -> Result<(), Unparsable> {
        for item in &list.0 {
            let and_or = &item.0;
            self.pipeline(&and_or.first, depth)?;
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(pipeline) | ast::AndOr::Or(pipeline) => {
                        self.pipeline(pipeline, depth)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline, depth: usize) -> Result<(), Unparsable> {
        let mut downloaded = false;
        for command in &pipeline.seq {
            let before = self.found.len();
            let downloads = self.nested(|walker| walker.command(command, depth))?;
            if downloaded {
                for simple in &mut self.found[before..] {
                    simple
                        .stdin
                        .get_or_insert(Text::Process { downloads: true });
                }
            }
            downloaded |= downloads;
        }
        Ok(())
    }

    fn command(&mut self, command: &Command, depth: usize) -> Result<(), Unparsable> {
        match command {
            Command::Simple(simple) => self.simple(simple, depth),
            Command::Compound(compound, redirects) => {
                if let Some(redirects) = redirects {
                    for redirect in &redirects.0 {
                        self.redirect(redirect, depth)?;
                    }
                }
                self.compound(compound, depth)
            }
            Command::Function(function) => self.compound(&function.body.0, depth),
            Command::ExtendedTest(..) => Ok(()),
        }
    }

    fn compound(&mut self, compound: &CompoundCommand, depth: usize) -> Result<(), Unparsable> {
        match compound {
            CompoundCommand::BraceGroup(group) => self.list(&group.list, depth),
            CompoundCommand::Subshell(subshell) => self.list(&subshell.list, depth),
            CompoundCommand::ForClause(clause) => {
                for value in clause.values.iter().flatten() {
                    self.word(&value.value, depth)?;
                }
                self.list(&clause.body.list, depth)
            }
            CompoundCommand::ArithmeticForClause(clause) => self.list(&clause.body.list, depth),
            CompoundCommand::CaseClause(clause) => {
                self.word(&clause.value.value, depth)?;
                for case in &clause.cases {
                    if let Some(list) = &case.cmd {
                        self.list(list, depth)?;
                    }
                }
                Ok(())
            }
            CompoundCommand::IfClause(clause) => {
                self.list(&clause.condition, depth)?;
                self.list(&clause.then, depth)?;
                for other in clause.elses.iter().flatten() {
                    if let Some(condition) = &other.condition {
                        self.list(condition, depth)?;
                    }
                    self.list(&other.body, depth)?;
                }
                Ok(())
            }
            CompoundCommand::WhileClause(clause) | CompoundCommand::UntilClause(clause) => {
                self.list(&clause.0, depth)?;
                self.list(&clause.1.list, depth)
            }
            CompoundCommand::Coprocess(coprocess) => self.command(&coprocess.body, depth),
            CompoundCommand::Arithmetic(_) => Ok(()),
        }
    }

    fn simple(&mut self, command: &SimpleCommand, depth: usize) -> Result<(), Unparsable> {
        let mut simple = Simple::default();
        let mut assigned = Vec::new();
        for item in command.prefix.iter().flat_map(|prefix| prefix.0.iter()) {
            self.item(item, true, &mut simple, &mut assigned, depth)?;
        }
        if let Some(name) = &command.word_or_name {
            simple.name = Some(self.word(&name.value, depth)?);
        }
        for item in command.suffix.iter().flat_map(|suffix| suffix.0.iter()) {
            self.item(item, false, &mut simple, &mut assigned, depth)?;
        }
        // Assignments alone set shell variables; before a command they only reach its
        // environment, which the line's later words never see.
        if simple.name.is_none() {
            for (name, value) in assigned {
                match value {
                    Text::Literal(value) => self.vars.insert(name, value),
                    _ => self.vars.remove(&name),
                };
            }
        }
        self.found.push(simple);
        Ok(())
    }

    fn item(
        &mut self,
        item: &CommandPrefixOrSuffixItem,
        in_prefix: bool,
        simple: &mut Simple,
        assigned: &mut Vec<(String, Text)>,
        depth: usize,
    ) -> Result<(), Unparsable> {
        match item {
            CommandPrefixOrSuffixItem::Word(word) => {
                let text = self.word(&word.value, depth)?;
                simple.args.push(text);
            }
            CommandPrefixOrSuffixItem::AssignmentWord(assignment, word) => {
                let value = match &assignment.value {
                    ast::AssignmentValue::Scalar(value) => self.word(&value.value, depth)?,
                    ast::AssignmentValue::Array(_) => Text::Computed(word.value.clone()),
                };
                if let ast::AssignmentName::VariableName(name) = &assignment.name {
                    assigned.push((name.clone(), value.clone()));
                }
                if !in_prefix {
                    // `export x=1`, `env x=1 cmd`: an argument of the command, whole.
                    let whole = self.word(&word.value, depth)?;
                    simple.args.push(whole);
                }
            }
            CommandPrefixOrSuffixItem::IoRedirect(redirect) => {
                match self.redirect(redirect, depth)? {
                    Some(input @ Text::Process { .. }) => simple.stdin = Some(input),
                    Some(target) => simple.writes_to.push(target),
                    None => {}
                }
            }
            CommandPrefixOrSuffixItem::ProcessSubstitution(_, subshell) => {
                let downloads = self.nested(|walker| walker.list(&subshell.list, depth + 1))?;
                simple.args.push(Text::Process { downloads });
            }
        }
        Ok(())
    }

    /// An output redirection's target, or a downloading process substitution read as input;
    /// nested commands of any redirection are walked.
    fn redirect(
        &mut self,
        redirect: &IoRedirect,
        depth: usize,
    ) -> Result<Option<Text>, Unparsable> {
        match redirect {
            IoRedirect::File(_, kind, target) => match target {
                IoFileRedirectTarget::Filename(word) => {
                    let text = self.word(&word.value, depth)?;
                    let writes = matches!(
                        kind,
                        IoFileRedirectKind::Write
                            | IoFileRedirectKind::Append
                            | IoFileRedirectKind::Clobber
                            | IoFileRedirectKind::ReadAndWrite
                    );
                    Ok(writes.then_some(text))
                }
                IoFileRedirectTarget::ProcessSubstitution(_, subshell) => {
                    let downloads = self.nested(|walker| walker.list(&subshell.list, depth + 1))?;
                    // `bash < <(curl ...)`: the download is what the command reads.
                    Ok((downloads && matches!(kind, IoFileRedirectKind::Read))
                        .then_some(Text::Process { downloads }))
                }
                IoFileRedirectTarget::Fd(_) | IoFileRedirectTarget::Duplicate(_) => Ok(None),
            },
            IoRedirect::OutputAndError(word, _) => Ok(Some(self.word(&word.value, depth)?)),
            IoRedirect::HereString(_, word) => {
                self.word(&word.value, depth)?;
                Ok(None)
            }
            IoRedirect::HereDocument(..) => Ok(None),
        }
    }

    /// Walks nested commands with `walk`; whether any of them downloads.
    fn nested(
        &mut self,
        walk: impl FnOnce(&mut Walker) -> Result<(), Unparsable>,
    ) -> Result<bool, Unparsable> {
        let before = self.found.len();
        walk(self)?;
        Ok(self.found[before..].iter().any(|simple| {
            simple
                .name
                .as_ref()
                .and_then(Text::literal)
                .is_some_and(|name| DOWNLOADERS.contains(&basename(name)))
        }))
    }

    /// A word as bash would see it; its command substitutions are walked too.
    fn word(&mut self, raw: &str, depth: usize) -> Result<Text, Unparsable> {
        let options = ParserOptions::default();
        let pieces = word::parse(raw, &options).map_err(|error| Unparsable(error.to_string()))?;
        let mut text = String::new();
        let mut computed = false;
        self.pieces(pieces, &mut text, &mut computed, depth)?;
        Ok(if computed {
            Text::Computed(raw.to_owned())
        } else {
            Text::Literal(text)
        })
    }

    fn pieces(
        &mut self,
        pieces: Vec<word::WordPieceWithSource>,
        text: &mut String,
        computed: &mut bool,
        depth: usize,
    ) -> Result<(), Unparsable> {
        for piece in pieces {
            match piece.piece {
                WordPiece::Text(part) | WordPiece::SingleQuotedText(part) => text.push_str(&part),
                WordPiece::AnsiCQuotedText(part) => text.push_str(&part),
                WordPiece::EscapeSequence(part) => {
                    text.push_str(part.strip_prefix('\\').unwrap_or(&part));
                }
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(inner, text, computed, depth)?;
                }
                WordPiece::TildeExpansion(TildeExpr::Home) => text.push('~'),
                WordPiece::ParameterExpansion(ParameterExpr::Parameter {
                    parameter: Parameter::Named(name),
                    indirect: false,
                }) => {
                    if name == "HOME" {
                        text.push('~');
                    } else if let Some(value) = self.vars.get(&name) {
                        text.push_str(value);
                    } else {
                        *computed = true;
                    }
                }
                WordPiece::CommandSubstitution(inner)
                | WordPiece::BackquotedCommandSubstitution(inner) => {
                    self.script(&inner, depth + 1)?;
                    *computed = true;
                }
                _ => *computed = true,
            }
        }
        Ok(())
    }
}

/// Programs that fetch from the network.
pub const DOWNLOADERS: [&str; 2] = ["curl", "wget"];

/// The last path component: `/bin/rm` is `rm`.
pub fn basename(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}
