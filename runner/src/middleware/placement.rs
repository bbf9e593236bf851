//! Places custom middlewares relative to named ones (DeerFlow's `@Next`/`@Prev`).

use std::sync::Arc;

use crate::agent::Middleware;

/// Where a custom middleware goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Anchor {
    /// Just before the end of the chain (before Clarification, which always stays last).
    Default,
    /// Right before the middleware with this name (outer of it for wrap hooks).
    Before(String),
    /// Right after the middleware with this name (inner of it for wrap hooks).
    After(String),
}

/// A middleware the user adds to the chain.
pub struct CustomMiddleware {
    pub middleware: Arc<dyn Middleware>,
    pub anchor: Anchor,
}

/// Custom middlewares could not be placed.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error(
        "middlewares '{first}' and '{second}' both go {direction} '{anchor}'; anchor one on the other instead"
    )]
    Conflict {
        first: String,
        second: String,
        direction: &'static str,
        anchor: String,
    },
    #[error("middleware '{name}' is anchored on '{anchor}', which is not in the chain{cycle}")]
    Unresolved {
        name: String,
        anchor: String,
        cycle: String,
    },
    #[error("a middleware named '{0}' is already in the chain")]
    Duplicate(String),
}

/// The name of the middleware that always stays last.
pub const LAST: &str = "Clarification";

/// Inserts `extras` into `base`. Anchored extras may anchor on other extras; they are placed
/// in rounds until none is left, so the order of `extras` does not matter.
pub fn place(
    mut chain: Vec<Arc<dyn Middleware>>,
    extras: Vec<CustomMiddleware>,
) -> Result<Vec<Arc<dyn Middleware>>, PlacementError> {
    check_conflicts(&extras)?;
    let mut pending = Vec::new();
    for extra in extras {
        let name = extra.middleware.name();
        if chain.iter().any(|m| m.name() == name) {
            return Err(PlacementError::Duplicate(name.to_owned()));
        }
        match extra.anchor {
            Anchor::Default => {
                let at = chain
                    .iter()
                    .position(|m| m.name() == LAST)
                    .unwrap_or(chain.len());
                chain.insert(at, extra.middleware);
            }
            _ => pending.push(extra),
        }
    }
    while !pending.is_empty() {
        let before = pending.len();
        let mut unplaced = Vec::new();
        for extra in pending {
            let (anchor, offset) = match &extra.anchor {
                Anchor::Before(anchor) => (anchor, 0),
                Anchor::After(anchor) => (anchor, 1),
                Anchor::Default => (&String::new(), 0),
            };
            match chain.iter().position(|m| m.name() == anchor) {
                Some(at) => chain.insert(at + offset, extra.middleware),
                None => unplaced.push(extra),
            }
        }
        if unplaced.len() == before {
            return Err(unresolved(&unplaced));
        }
        pending = unplaced;
    }
    // Clarification ends the run from wrap_tool_call; anything inside it would never run.
    if let Some(at) = chain.iter().position(|m| m.name() == LAST) {
        let last = chain.remove(at);
        chain.push(last);
    }
    Ok(chain)
}

fn check_conflicts(extras: &[CustomMiddleware]) -> Result<(), PlacementError> {
    for (index, first) in extras.iter().enumerate() {
        for second in &extras[index + 1..] {
            let conflict = match (&first.anchor, &second.anchor) {
                (Anchor::Before(a), Anchor::Before(b)) if a == b => Some(("before", a)),
                (Anchor::After(a), Anchor::After(b)) if a == b => Some(("after", a)),
                _ => None,
            };
            if let Some((direction, anchor)) = conflict {
                return Err(PlacementError::Conflict {
                    first: first.middleware.name().to_owned(),
                    second: second.middleware.name().to_owned(),
                    direction,
                    anchor: anchor.clone(),
                });
            }
        }
    }
    Ok(())
}

fn unresolved(unplaced: &[CustomMiddleware]) -> PlacementError {
    let names: Vec<&str> = unplaced.iter().map(|e| e.middleware.name()).collect();
    let anchor_of = |extra: &CustomMiddleware| match &extra.anchor {
        Anchor::Before(a) | Anchor::After(a) => a.clone(),
        Anchor::Default => String::new(),
    };
    let first = &unplaced[0];
    let anchors_on_pending = unplaced
        .iter()
        .all(|extra| names.contains(&anchor_of(extra).as_str()));
    let cycle = if anchors_on_pending {
        format!(" (circular: {})", names.join(" -> "))
    } else {
        String::new()
    };
    PlacementError::Unresolved {
        name: first.middleware.name().to_owned(),
        anchor: anchor_of(first),
        cycle,
    }
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;

    use super::*;

    struct Named(&'static str);

    #[async_trait]
    impl Middleware for Named {
        fn name(&self) -> &'static str {
            self.0
        }
    }

    fn chain(names: &[&'static str]) -> Vec<Arc<dyn Middleware>> {
        names
            .iter()
            .map(|n| Arc::new(Named(n)) as Arc<dyn Middleware>)
            .collect()
    }

    fn extra(name: &'static str, anchor: Anchor) -> CustomMiddleware {
        CustomMiddleware {
            middleware: Arc::new(Named(name)),
            anchor,
        }
    }

    fn names(chain: &[Arc<dyn Middleware>]) -> Vec<&'static str> {
        chain.iter().map(|m| m.name()).collect()
    }

    #[test]
    fn default_extras_go_before_clarification() {
        let placed = place(chain(&["A", "B", LAST]), vec![extra("X", Anchor::Default)]).unwrap();
        assert_eq!(names(&placed), vec!["A", "B", "X", LAST]);
    }

    #[test]
    fn extras_anchor_on_base_and_on_each_other_in_any_order() {
        let extras = vec![
            extra("Y", Anchor::After("X".into())),
            extra("X", Anchor::Before("B".into())),
            extra("Z", Anchor::After(LAST.into())),
        ];
        let placed = place(chain(&["A", "B", LAST]), extras).unwrap();
        assert_eq!(names(&placed), vec!["A", "X", "Y", "B", "Z", LAST]);
    }

    #[test]
    fn two_extras_on_the_same_anchor_conflict() {
        let extras = vec![
            extra("X", Anchor::Before("B".into())),
            extra("Y", Anchor::Before("B".into())),
        ];
        let error = place(chain(&["A", "B"]), extras).err().unwrap();
        assert!(matches!(error, PlacementError::Conflict { .. }));
        assert!(error.to_string().contains("anchor one on the other"));
    }

    #[test]
    fn cycles_and_missing_anchors_are_errors() {
        let cycle = vec![
            extra("X", Anchor::After("Y".into())),
            extra("Y", Anchor::After("X".into())),
        ];
        let error = place(chain(&["A"]), cycle).err().unwrap();
        assert!(error.to_string().contains("circular: X -> Y"), "{error}");
        let missing = vec![extra("X", Anchor::Before("Nope".into()))];
        let error = place(chain(&["A"]), missing).err().unwrap();
        assert!(
            error
                .to_string()
                .contains("'Nope', which is not in the chain")
        );
    }

    #[test]
    fn duplicate_names_are_refused() {
        let error = place(chain(&["A"]), vec![extra("A", Anchor::Default)])
            .err()
            .unwrap();
        assert_eq!(error, PlacementError::Duplicate("A".into()));
    }
}
