//! What a sandbox says about its isolation (the `hello` answer, then the Run's
//! `status.report.sandbox` or a progress line of `herd-runner run`): one [`SandboxLayer`] per
//! layer, active or not, with what it enforces or why it is off. Pure, from what the setup
//! did and what `/proc/self/status` shows.

use herd_crds::report::SandboxLayer;

use super::Confinement;
use super::landlock_rules::Enforced;

/// Landlock's layer name.
pub(crate) const LANDLOCK: &str = "landlock";
/// The private user and mount namespaces' layer name.
pub(crate) const USER_NAMESPACES: &str = "userNamespaces";

/// The Landlock layer: what it enforces, or why it is off.
pub(crate) fn landlock(result: &Result<Enforced, String>, spec: &Confinement) -> SandboxLayer {
    match result {
        Ok(enforced) => {
            let writable: Vec<String> = spec
                .writable_paths()
                .iter()
                .map(|path| path.display().to_string())
                .collect();
            let how = if enforced.fully {
                "enforced"
            } else {
                "partly enforced (an older kernel enforces the rights it knows)"
            };
            let reads = if spec.hidden.is_empty() {
                "reads everywhere".to_owned()
            } else {
                "no reads of the home folders".to_owned()
            };
            SandboxLayer::new(
                LANDLOCK,
                true,
                format!(
                    "ABI {}, {how}: writes only to {}; {reads}; no signals to or ptrace of \
                     processes outside the sandbox",
                    enforced.abi,
                    writable.join(", ")
                ),
            )
        }
        Err(why) => SandboxLayer::new(LANDLOCK, false, format!("unavailable: {why}")),
    }
}

/// The namespaces layer of a local confinement: on with `--sandbox strict` (or `auto` where
/// it works), off with Landlock alone.
pub(crate) fn namespaces(spec: &Confinement) -> SandboxLayer {
    if spec.namespaces {
        SandboxLayer::new(
            USER_NAMESPACES,
            true,
            "private user and mount namespaces: the host read-only, home folders hidden, a \
             private /tmp",
        )
    } else {
        SandboxLayer::new(
            USER_NAMESPACES,
            false,
            "not used (Landlock alone): no private mounts, the home folder stays readable",
        )
    }
}

/// The namespaces layer of a Pod's sandbox, which never tries them.
pub(crate) fn namespaces_in_a_pod() -> SandboxLayer {
    SandboxLayer::new(
        USER_NAMESPACES,
        false,
        "not used in a Pod: a restricted Pod's RuntimeDefault seccomp refuses unshare; the \
         container's own namespaces hold the tools",
    )
}

/// What the kernel says about this process (`/proc/self/status`, read before Landlock sets
/// no_new_privs itself): seccomp, no_new_privs and the effective capabilities.
pub(crate) fn process(status: &str) -> Vec<SandboxLayer> {
    let field = |name: &str| {
        status.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key == name).then(|| value.trim().to_owned())
        })
    };
    let seccomp = match field("Seccomp").as_deref() {
        Some("2") => SandboxLayer::new("seccomp", true, "a filter (the Pod's seccompProfile)"),
        Some("1") => SandboxLayer::new("seccomp", true, "strict mode"),
        Some("0") => SandboxLayer::new("seccomp", false, "no filter"),
        _ => SandboxLayer::new("seccomp", false, "unknown (not in /proc/self/status)"),
    };
    let no_new_privs = match field("NoNewPrivs").as_deref() {
        Some("1") => SandboxLayer::new(
            "noNewPrivileges",
            true,
            "set: programs cannot gain privileges (setuid)",
        ),
        Some(_) => SandboxLayer::new("noNewPrivileges", false, "not set"),
        None => SandboxLayer::new("noNewPrivileges", false, "unknown"),
    };
    let capabilities = match field("CapEff") {
        Some(mask) if mask.trim_start_matches('0').is_empty() => {
            SandboxLayer::new("capabilities", true, "none held")
        }
        Some(mask) => SandboxLayer::new("capabilities", false, format!("effective set {mask}")),
        None => SandboxLayer::new("capabilities", false, "unknown"),
    };
    vec![seccomp, no_new_privs, capabilities]
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn landlock_says_what_it_enforces_or_why_not() {
        let spec = Confinement::landlock_only(vec!["/mnt/user-data".into(), "/tmp".into()]);
        assert!(spec.writable_paths().contains(&Path::new("/tmp")));
        let on = landlock(
            &Ok(Enforced {
                abi: 6,
                fully: true,
            }),
            &spec,
        );
        assert!(on.active);
        assert_eq!(on.name, "landlock");
        assert!(
            on.detail.starts_with(
                "ABI 6, enforced: writes only to /mnt/user-data, /tmp; reads everywhere"
            ),
            "{}",
            on.detail
        );
        let partly = landlock(
            &Ok(Enforced {
                abi: 3,
                fully: false,
            }),
            &spec,
        );
        assert!(partly.detail.starts_with("ABI 3, partly enforced"));
        let off = landlock(&Err("this kernel has no Landlock".into()), &spec);
        assert!(!off.active);
        assert_eq!(off.detail, "unavailable: this kernel has no Landlock");
    }

    #[test]
    fn a_restricted_containers_status_shows_seccomp_no_new_privs_and_no_capabilities() {
        let status = "Name:\therd-runner\nNoNewPrivs:\t1\nSeccomp:\t2\nCapEff:\t0000000000000000\n";
        let layers = process(status);
        let summary: Vec<(&str, bool)> = layers
            .iter()
            .map(|layer| (layer.name.as_str(), layer.active))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("seccomp", true),
                ("noNewPrivileges", true),
                ("capabilities", true)
            ]
        );
        let root = process("NoNewPrivs:\t0\nSeccomp:\t0\nCapEff:\t000001ffffffffff\n");
        assert!(root.iter().all(|layer| !layer.active));
        assert_eq!(root[2].detail, "effective set 000001ffffffffff");
        assert!(process("").iter().all(|layer| !layer.active));
    }

    #[test]
    fn the_namespaces_layer_follows_the_view() {
        let full = Confinement::sandbox_container(Path::new("/w/u"), Path::new("/w/s"));
        assert!(namespaces(&full).active);
        let alone = Confinement::landlock_only(vec!["/w/u".into()]);
        let layer = namespaces(&alone);
        assert!(!layer.active);
        assert!(layer.detail.contains("home folder stays readable"));
        assert!(!namespaces_in_a_pod().active);
    }
}
