//! The one image whose entrypoint this node knows: the operator's. There are no images here
//! (the host's system folders are every container's "image"), so a container needs a
//! `command`, except one of an image whose repository's last path segment is `herd-operator`
//! (`ghcr.io/herd-dev/herd-operator:0.1.0`): its entrypoint is `/herd-operator`, which this
//! binary plays, so the chart's Deployment runs unchanged.

use super::runtime::played::Played;

/// The operator image's `ENTRYPOINT`.
pub const OPERATOR_ENTRYPOINT: &str = "/herd-operator";

/// The entrypoint of `image`, when this node knows it.
pub fn entrypoint(image: &str) -> Option<Vec<String>> {
    (repository_name(image) == Played::Operator.name())
        .then(|| vec![OPERATOR_ENTRYPOINT.to_owned()])
}

/// The last path segment of an image reference's repository: without the registry and
/// path before it, the `:tag` and the `@digest`.
pub fn repository_name(image: &str) -> &str {
    let without_digest = image.split_once('@').map_or(image, |(name, _)| name);
    let last = without_digest
        .rsplit_once('/')
        .map_or(without_digest, |(_, last)| last);
    last.split_once(':').map_or(last, |(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_name_drops_registry_path_tag_and_digest() {
        for (image, name) in [
            ("ghcr.io/herd-dev/herd-operator:0.1.0", "herd-operator"),
            ("herd-operator", "herd-operator"),
            ("localhost:5000/herd-operator", "herd-operator"),
            (
                "localhost:5000/x/herd-operator:dev@sha256:0123",
                "herd-operator",
            ),
            (
                "ghcr.io/herd-dev/herd-operator@sha256:0123",
                "herd-operator",
            ),
            ("ghcr.io/herd-dev/herd-runner:0.1.0", "herd-runner"),
            ("herd-operator-debug:1", "herd-operator-debug"),
            ("ghcr.io/herd-operator/sandbox:1", "sandbox"),
            ("", ""),
        ] {
            assert_eq!(repository_name(image), name, "{image:?}");
        }
    }

    #[test]
    fn only_the_operator_image_has_a_known_entrypoint() {
        assert_eq!(
            entrypoint("ghcr.io/herd-dev/herd-operator:0.1.0"),
            Some(vec!["/herd-operator".to_owned()])
        );
        assert_eq!(
            Played::of(OPERATOR_ENTRYPOINT),
            Some(Played::Operator),
            "this binary plays the entrypoint"
        );
        for other in [
            "ghcr.io/herd-dev/herd-runner:0.1.0",
            "ghcr.io/herd-operator/sandbox:1",
            "herd-operator-debug:1",
            "busybox",
            "",
        ] {
            assert_eq!(entrypoint(other), None, "{other:?}");
        }
    }
}
