//! Unit tests of the command line: every command and option parsed, and malformed invocations
//! refused as usage errors.

use super::*;

fn parse(args: &[&str]) -> Result<Command, String> {
    parse_args(args.iter().map(OsString::from))
}

#[test]
fn run_is_the_default_and_config_has_a_default_path() {
    let default = PathBuf::from(DEFAULT_CONFIG_PATH);
    assert_eq!(
        parse(&[]),
        Ok(Command::Run {
            config: default.clone()
        })
    );
    assert_eq!(parse(&["run"]), Ok(Command::Run { config: default }));
    assert_eq!(
        parse(&["--config", "/x.toml"]),
        Ok(Command::Run {
            config: "/x.toml".into()
        })
    );
    assert_eq!(
        parse(&["run", "--config=/x.toml"]),
        Ok(Command::Run {
            config: "/x.toml".into()
        })
    );
}

#[test]
fn check_config_takes_the_same_config_option() {
    assert_eq!(
        parse(&["check-config", "--config", "conf/config.toml"]),
        Ok(Command::CheckConfig {
            config: "conf/config.toml".into()
        })
    );
    assert_eq!(
        parse(&["check-config"]),
        Ok(Command::CheckConfig {
            config: DEFAULT_CONFIG_PATH.into()
        })
    );
}

#[test]
fn doctor_takes_the_config_output_and_host_file_options() {
    assert_eq!(
        parse(&["doctor"]),
        Ok(Command::Doctor(doctor::Options {
            config: DEFAULT_CONFIG_PATH.into(),
            kubeconfig: None,
            output: Output::Text,
            host: HostFiles::default(),
        }))
    );
    let Ok(Command::Doctor(o)) = parse(&[
        "doctor",
        "--config",
        "c.toml",
        "--output",
        "json",
        "--kubeconfig",
        "k",
        "--kcm-manifest",
        "m.yaml",
        "--k3s-config",
        "k3s.yaml",
        "--rke2-config",
        "rke2.yaml",
        "--k0s-config",
        "k0s.yaml",
        "--microk8s-args",
        "kcm-args",
    ]) else {
        panic!("doctor options refused")
    };
    assert_eq!(o.config, PathBuf::from("c.toml"));
    assert_eq!(o.output, Output::Json);
    assert_eq!(o.kubeconfig, Some(PathBuf::from("k")));
    assert_eq!(o.host.kubeadm_manifest, PathBuf::from("m.yaml"));
    assert_eq!(o.host.k3s_config, PathBuf::from("k3s.yaml"));
    assert_eq!(o.host.rke2_config, PathBuf::from("rke2.yaml"));
    assert_eq!(o.host.k0s_config, PathBuf::from("k0s.yaml"));
    assert_eq!(o.host.microk8s_args, PathBuf::from("kcm-args"));
}

#[test]
fn status_and_explain_ask_the_daemon_over_its_socket() {
    assert_eq!(
        parse(&["status"]),
        Ok(Command::Ask {
            config: DEFAULT_CONFIG_PATH.into(),
            socket: None,
            request: "status".into()
        })
    );
    assert_eq!(
        parse(&["explain", "kube-system/coredns-1", "--socket", "/tmp/s"]),
        Ok(Command::Ask {
            config: DEFAULT_CONFIG_PATH.into(),
            socket: Some("/tmp/s".into()),
            request: "explain kube-system/coredns-1".into()
        })
    );
    assert!(parse(&["explain"]).is_err());
    assert!(parse(&["explain", "a", "b"]).is_err());
    assert!(parse(&["status", "worker-1"]).is_err());
    assert!(parse(&["run", "--socket", "/tmp/s"]).is_err());
}

#[test]
fn unknown_or_malformed_arguments_are_usage_errors() {
    assert!(parse(&["--verbose"]).is_err());
    assert!(parse(&["--config"]).is_err());
    assert!(parse(&["--config="]).is_err());
    assert!(parse(&["--config", "a", "--config", "b"]).is_err());
    assert!(parse(&["run", "run"]).is_err());
    assert!(parse(&["run", "check-config"]).is_err());
    assert!(parse(&["extra"]).is_err());
    assert_eq!(parse(&["--version"]), Ok(Command::Version));
    assert!(
        parse(&["run", "--output", "json"]).is_err(),
        "doctor options only"
    );
    assert!(parse(&["doctor", "--output", "yaml"]).is_err());
    assert!(parse(&["doctor", "--output"]).is_err());
    assert!(parse(&["doctor", "--kcm-manifest", "a", "--kcm-manifest", "b"]).is_err());
    assert_eq!(parse(&["check-config", "--help"]), Ok(Command::Help));
}

/// An option's value is the next word whatever it looks like; words the usage does not show
/// (`-hV`, `--socket=PATH`, `--`, a word not UTF-8) are refused, named.
#[test]
fn values_may_look_like_options_and_other_forms_are_refused() {
    assert_eq!(
        parse(&["--config", "--help"]),
        Ok(Command::Run {
            config: "--help".into()
        })
    );
    assert_eq!(
        parse(&["-c", "-c"]),
        Ok(Command::Run {
            config: "-c".into()
        })
    );
    assert_eq!(
        parse(&["status", "--socket", "--"]),
        Ok(Command::Ask {
            config: DEFAULT_CONFIG_PATH.into(),
            socket: Some("--".into()),
            request: "status".into()
        })
    );
    for word in ["-hV", "-cX", "--socket=/s", "--help=x", "--", "-verbose"] {
        assert_eq!(
            parse(&["status", word]),
            Err(format!("unknown argument {word:?}")),
            "{word}"
        );
    }
    let not_utf8 = {
        use std::os::unix::ffi::OsStringExt;
        OsString::from_vec(vec![b'x', 0xff])
    };
    assert_eq!(
        parse_args([OsString::from("run"), not_utf8]),
        Err("unknown argument \"x\\xFF\"".to_string())
    );
}

#[test]
fn shadow_report_asks_the_daemon_with_its_period_and_format() {
    assert_eq!(
        parse(&["shadow", "report", "--since", "24h", "--format", "markdown"]),
        Ok(Command::Ask {
            config: PathBuf::from(DEFAULT_CONFIG_PATH),
            socket: None,
            request: "shadow report --since 24h --format markdown".to_string(),
        })
    );
    assert!(parse(&["shadow"]).is_err());
    assert!(parse(&["shadow", "report", "--format", "yaml"]).is_err());
    assert!(parse(&["shadow", "report", "--since", "soon"]).is_err());
    assert!(parse(&["shadow", "report", "--since", "1h", "--since", "2h"]).is_err());
    assert!(
        parse(&["status", "--since", "1h"]).is_err(),
        "a shadow report option"
    );
}
