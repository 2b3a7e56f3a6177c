//! `[fencing]`: off by default, read, printed and read back, and its errors.

use super::*;

/// `[fencing]` is off by default, its keys are validated like the others (file, line, key) and the
/// program is checked when the config is loaded.
#[test]
fn fencing_is_off_by_default_and_its_keys_are_validated() {
    let c = parse("").unwrap();
    assert!(!c.fencing.enabled);
    assert_eq!(c.fencing.after, Duration::from_secs(300));
    assert_eq!(c.fencing.timeout, Duration::from_secs(120));
    assert_eq!(c.fencing.max_concurrent, 1);
    assert!(c.fencing.remove_out_of_service_on_recovery);

    let cases = [
        (
            "[fencing]\nenabled = true\n",
            "conf/test.toml:2: fencing.command: must be set when fencing.enabled = true",
        ),
        (
            "[fencing]\ncommand = []\n",
            "conf/test.toml:2: fencing.command: must name a program",
        ),
        (
            "[fencing]\ncommand = [\"fence-ipmi\"]\n",
            "conf/test.toml:2: fencing.command: \"fence-ipmi\" must be an absolute path",
        ),
        (
            "[fencing]\ncommand = [\"/nonexistent/fence\"]\n",
            "conf/test.toml:2: fencing.command: /nonexistent/fence: No such file",
        ),
        (
            "[fencing]\n\nmax_concurrent = 0\n",
            "conf/test.toml:3: fencing.max_concurrent: must be in 1..=64, got 0",
        ),
        (
            "[fencing]\nafter = \"0s\"\n",
            "conf/test.toml:2: fencing.after: must be greater than 0",
        ),
        (
            "[fencing]\nretry_backoff = \"10m\"\nretry_backoff_max = \"1m\"\n",
            "conf/test.toml:3: fencing.retry_backoff_max: must not be shorter",
        ),
        (
            "[fencing]\nmatch_labels = { rack = \"a b\" }\n",
            "conf/test.toml:2: fencing.match_labels.rack: \"a b\" is not a label value",
        ),
        (
            "[fencing]\ncomand = [\"/bin/true\"]\n",
            "conf/test.toml:2: fencing.comand: unknown key",
        ),
    ];
    for (text, want) in cases {
        let got = error(text);
        assert!(got.starts_with(want), "{text:?}\n got: {got}\nwant: {want}");
    }

    let plain = std::env::temp_dir().join(format!("fence-not-executable-{}", std::process::id()));
    std::fs::write(&plain, "#!/bin/sh\n").unwrap();
    let got = error(&format!(
        "[fencing]\ncommand = [{:?}]\n",
        plain.display().to_string()
    ));
    std::fs::remove_file(&plain).unwrap();
    assert!(got.ends_with("is not executable"), "{got}");

    let c = parse(
        "[fencing]\nenabled = true\ncommand = [\"/bin/sh\", \"-c\", \"exit 0\"]\nafter = \"10m\"\n\
         max_concurrent = 3\nmatch_labels = { \"node-role/storage\" = \"\" }\n",
    )
    .unwrap();
    assert_eq!(c.fencing.command, ["/bin/sh", "-c", "exit 0"]);
    assert_eq!(c.fencing.max_concurrent, 3);
    assert_eq!(
        c.fencing.match_labels,
        [("node-role/storage".to_string(), String::new())]
    );
    let printed = c.to_toml();
    assert!(printed.contains("[fencing]\nenabled = true\n"), "{printed}");
    let back = Config::from_str(&printed, Path::new("<printed>")).unwrap();
    assert_eq!(back, c, "{printed}");
}

/// `skip_cordoned` (default on) and `max_pause` (default 24h) are read, rendered back and validated
/// (file, line, key).
#[test]
fn fencing_skip_cordoned_and_max_pause_are_read_rendered_and_validated() {
    let c = parse("").unwrap();
    assert!(c.fencing.skip_cordoned);
    assert_eq!(c.fencing.max_pause, Duration::from_secs(24 * 3600));
    let c = parse("[fencing]\nskip_cordoned = false\nmax_pause = \"2h\"\n").unwrap();
    assert!(!c.fencing.skip_cordoned);
    assert_eq!(c.fencing.max_pause, Duration::from_secs(7200));
    let rendered = super::render::to_toml(&c);
    assert!(rendered.contains("skip_cordoned = false"), "{rendered}");
    assert!(rendered.contains("max_pause = \"2h\""), "{rendered}");
    for (text, want) in [
        (
            "[fencing]\n\nmax_pause = \"0s\"\n",
            "conf/test.toml:3: fencing.max_pause: must be greater than 0",
        ),
        (
            "[fencing]\nskip_cordoned = \"yes\"\n",
            "conf/test.toml:2: fencing.skip_cordoned",
        ),
    ] {
        let got = error(text);
        assert!(got.starts_with(want), "{text:?}\n got: {got}\nwant: {want}");
    }
}

/// `mode`, `on_command`, `recover_timeout` and `[[fencing.step]]` are read, rendered back (the
/// rendering parses to the same config) and validated (file, line, key).
#[test]
fn fencing_power_cycle_and_steps_are_read_rendered_and_validated() {
    use super::{FenceMode, FenceStepConfig};
    let c = parse("").unwrap();
    assert_eq!(c.fencing.mode, FenceMode::PowerOff);
    assert_eq!(c.fencing.recover_timeout, Duration::from_secs(600));
    assert!(c.fencing.steps.is_empty());
    let text = "[fencing]\nmode = \"power-cycle\"\non_command = [\"/bin/true\", \"on\"]\n\
                recover_timeout = \"5m\"\n[[fencing.step]]\ncommand = [\"/bin/true\", \"soft\"]\n\
                timeout = \"30s\"\n[[fencing.step]]\ncommand = [\"/bin/false\"]\ntimeout = \"1m\"\n";
    let c = parse(text).unwrap();
    assert_eq!(c.fencing.mode, FenceMode::PowerCycle);
    assert_eq!(c.fencing.on_command, ["/bin/true", "on"]);
    assert_eq!(
        c.fencing.effective_steps(),
        [
            FenceStepConfig {
                command: vec!["/bin/true".into(), "soft".into()],
                timeout: Duration::from_secs(30)
            },
            FenceStepConfig {
                command: vec!["/bin/false".into()],
                timeout: Duration::from_secs(60)
            }
        ]
    );
    let rendered = super::render::to_toml(&c);
    let again = parse(&rendered).unwrap();
    assert_eq!(again.fencing, c.fencing, "{rendered}");
    let one = parse("[fencing]\ncommand = [\"/bin/true\"]\ntimeout = \"7s\"\n").unwrap();
    assert_eq!(one.fencing.effective_steps().len(), 1);
    assert_eq!(
        one.fencing.effective_steps()[0].timeout,
        Duration::from_secs(7)
    );
    for (text, want) in [
        (
            "[fencing]\nmode = \"power-cycle\"\n",
            "conf/test.toml:2: fencing.on_command: must be set when fencing.mode = \"power-cycle\"",
        ),
        (
            "[fencing]\nmode = \"reboot\"\n",
            "conf/test.toml:2: fencing.mode: \"reboot\": must be",
        ),
        (
            "[fencing]\n[[fencing.step]]\ncommand = [\"/bin/true\"]\n",
            "conf/test.toml:2: fencing.step[0].timeout: every step needs a timeout",
        ),
        (
            "[fencing]\n[[fencing.step]]\ntimeout = \"1m\"\n",
            "conf/test.toml:2: fencing.step[0].command: every step needs a command",
        ),
        (
            "[fencing]\n[[fencing.step]]\ncommand = [\"/nonexistent/off\"]\ntimeout = \"1m\"\n",
            "conf/test.toml:3: fencing.step[0].command: /nonexistent/off: No such file",
        ),
        (
            "[fencing]\non_command = [\"relative\"]\n",
            "conf/test.toml:2: fencing.on_command: \"relative\" must be an absolute path",
        ),
        (
            "[fencing]\ncommand = [\"/bin/true\"]\n[[fencing.step]]\ncommand = [\"/bin/true\"]\ntimeout = \"1m\"\n",
            "conf/test.toml:2: fencing.command: set either fencing.command or [[fencing.step]]",
        ),
        (
            "[fencing]\nrecover_timeout = \"0s\"\n",
            "conf/test.toml:2: fencing.recover_timeout: must be greater than 0",
        ),
    ] {
        let got = error(text);
        assert!(got.starts_with(want), "{text:?}\n got: {got}\nwant: {want}");
    }
}
