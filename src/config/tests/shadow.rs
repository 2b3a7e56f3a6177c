//! `shadow` and `shadow_file`: read, printed, and the combinations that would make shadow mode
//! write refused.

use super::*;

#[test]
fn shadow_is_off_by_default_and_means_writing_nothing() {
    let c = parse("").unwrap();
    assert!(!c.shadow);
    assert!(!c.writes_nothing());
    assert_eq!(
        c.shadow_file.as_deref(),
        Some(Path::new(DEFAULT_SHADOW_FILE))
    );
    let c = parse("shadow = true\nshadow_file = \"\"\n").unwrap();
    assert!(c.shadow && c.writes_nothing());
    assert_eq!(c.shadow_file, None);
    assert!(c.to_toml().contains("shadow = true"), "{}", c.to_toml());
    assert_eq!(
        error("shadow_file = \"shadow.json\"\n"),
        "conf/test.toml:1: shadow_file: must be an absolute path to a file (or \"\" for none), got \"shadow.json\""
    );
}

#[test]
fn shadow_mode_is_refused_with_fencing_or_on_the_incumbents_lease() {
    assert_eq!(
        error("shadow = true\n[fencing]\nenabled = true\ncommand = [\"/bin/true\"]\n"),
        "conf/test.toml:3: fencing.enabled: shadow = true cannot run with fencing.enabled = true: \
         shadow mode writes nothing and a fence is a write; disable fencing while shadowing"
    );
    let line = error("shadow = true\n[leader_election]\nname = \"kube-controller-manager\"\n");
    assert!(
        line.starts_with("conf/test.toml:3: leader_election.name: shadow = true cannot elect"),
        "{line}"
    );
    // Its own Lease, or none, is fine.
    assert!(parse("shadow = true\n[leader_election]\nenabled = false\n").is_ok());
    assert!(parse("shadow = true\n").is_ok());
}
