use super::*;

const K0S_ON: &str = include_str!("fixtures/k0s-enabled.yaml");
const K0S_OFF: &str = include_str!("fixtures/k0s-disabled.yaml");
const MICROK8S_ON: &str = include_str!("fixtures/microk8s-enabled");
const MICROK8S_OFF: &str = include_str!("fixtures/microk8s-disabled");

fn manifest(args: &[&str]) -> String {
    let mut text = String::from(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: kube-controller-manager\n  namespace: kube-system\nspec:\n  containers:\n  - name: kube-controller-manager\n    image: registry.k8s.io/kube-controller-manager:v1.30.0\n    command:\n    - kube-controller-manager\n",
    );
    for a in args {
        text.push_str(&format!("    - \"{a}\"\n"));
    }
    text
}

#[test]
fn the_kubeadm_manifest_flag_is_found_in_either_spelling_or_absent() {
    let m = manifest(&[
        "--bind-address=127.0.0.1",
        "--controllers=*,bootstrapsigner,tokencleaner",
    ]);
    assert_eq!(
        kubeadm_controllers(&m),
        Ok(Some("*,bootstrapsigner,tokencleaner".into()))
    );
    let split = manifest(&["--controllers", "*,-nodelifecycle"]);
    assert_eq!(
        kubeadm_controllers(&split),
        Ok(Some("*,-nodelifecycle".into()))
    );
    assert_eq!(kubeadm_controllers(&manifest(&["--v=2"])), Ok(None));
    assert!(kubeadm_controllers("kind: Pod\nspec: {}\n").is_err());
    assert!(
        kubeadm_controllers("spec:\n  containers:\n  - name: etcd\n")
            .unwrap_err()
            .contains("no kube-controller-manager")
    );
    assert!(kubeadm_controllers(": [").is_err());
}

#[test]
fn k3s_and_rke2_configs_carry_it_in_kube_controller_manager_arg() {
    assert_eq!(
        k3s_controllers(
            "kube-controller-manager-arg:\n  - \"node-monitor-grace-period=20s\"\n  - \"controllers=*,-node-lifecycle-controller\"\n"
        ),
        Ok(Some("*,-node-lifecycle-controller".into()))
    );
    assert_eq!(
        k3s_controllers("kube-controller-manager-arg: \"--controllers=*\"\n"),
        Ok(Some("*".into()))
    );
    assert_eq!(
        k3s_controllers("write-kubeconfig-mode: \"0644\"\n"),
        Ok(None)
    );
    assert_eq!(k3s_controllers(""), Ok(None));
    assert!(k3s_controllers("kube-controller-manager-arg: {a: 1}\n").is_err());
    // A Kubernetes object or a flag list is not k3s' settings.
    assert!(
        k3s_controllers(&manifest(&[]))
            .unwrap_err()
            .contains("kind Pod")
    );
    assert!(k3s_controllers(MICROK8S_ON).is_err());
}

#[test]
fn k0s_reads_extra_args_controllers_and_falls_back_to_its_own_default() {
    let on = k0s_controllers(K0S_ON).unwrap();
    assert_eq!(on.value.as_deref(), Some(K0S_DEFAULT_CONTROLLERS));
    assert!(
        on.shown
            .starts_with("no controllers in spec.controllerManager.extraArgs")
    );
    let off = k0s_controllers(K0S_OFF).unwrap();
    assert_eq!(
        off.value.as_deref(),
        Some(
            "*,bootstrapsigner,tokencleaner,-node-lifecycle-controller,-taint-eviction-controller"
        )
    );
    // A partial config (k0s accepts them) without a controllerManager at all.
    let partial = "apiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\nspec:\n  api:\n    port: 6443\n";
    assert_eq!(
        k0s_controllers(partial).unwrap().value.as_deref(),
        Some(K0S_DEFAULT_CONTROLLERS)
    );
    // Other kinds: a k0sctl file, a kubeadm manifest, arguments, bad extraArgs.
    let k0sctl = "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nspec:\n  hosts: []\n";
    assert!(
        k0s_controllers(k0sctl)
            .unwrap_err()
            .contains("\"k0sctl.k0sproject.io/v1beta1\"")
    );
    assert!(k0s_controllers(&manifest(&[])).is_err());
    assert!(k0s_controllers(MICROK8S_ON).is_err());
    assert!(k0s_controllers("").is_err());
    let listed = partial.replace(
        "spec:\n",
        "spec:\n  controllerManager:\n    extraArgs: [\"--controllers=*\"]\n",
    );
    assert!(
        k0s_controllers(&listed)
            .unwrap_err()
            .contains("must be a map")
    );
}

#[test]
fn microk8s_arguments_are_read_as_kubelite_reads_them() {
    assert_eq!(microk8s_controllers(MICROK8S_ON), Ok(None));
    assert_eq!(
        microk8s_controllers(MICROK8S_OFF),
        Ok(Some(
            "*,-node-lifecycle-controller,-taint-eviction-controller".into()
        ))
    );
    // Quotes dropped, a space-separated value, and the last occurrence wins.
    assert_eq!(
        microk8s_controllers(
            "--controllers \"*\"\n  # a comment\n\n--controllers=*,-nodelifecycle\n"
        ),
        Ok(Some("*,-nodelifecycle".into()))
    );
    assert_eq!(microk8s_controllers(""), Ok(None));
    let yaml = microk8s_controllers(K0S_ON).unwrap_err();
    assert!(
        yaml.starts_with("line 3 is \"apiVersion: k0s.k0sproject.io/v1beta1\""),
        "{yaml}"
    );
    assert!(microk8s_controllers("--controllers\n").is_err());
}

/// Host files for a test: `flavour` at `path`, every other one absent.
fn only(flavour: Flavour, path: &Path) -> HostFiles {
    let absent = path.with_file_name("absent");
    let mut host = HostFiles {
        kubeadm_manifest: absent.clone(),
        k3s_config: absent.clone(),
        rke2_config: absent.clone(),
        k0s_config: absent.clone(),
        microk8s_args: absent,
    };
    let slot = match flavour {
        Flavour::Kubeadm => &mut host.kubeadm_manifest,
        Flavour::K3s => &mut host.k3s_config,
        Flavour::Rke2 => &mut host.rke2_config,
        Flavour::K0s => &mut host.k0s_config,
        Flavour::MicroK8s => &mut host.microk8s_args,
    };
    *slot = path.to_path_buf();
    host
}

#[test]
fn a_file_of_another_kind_is_one_line_naming_it_and_what_was_expected() {
    let dir = std::env::temp_dir().join(format!("nl-doctor-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let k0s = file("k0s.yaml", K0S_ON);
    let args = file("kube-controller-manager", MICROK8S_ON);
    let pod = file("kcm.yaml", &manifest(&["--controllers=*"]));
    for (flavour, path, expected) in [
        (
            Flavour::K0s,
            &args,
            "expected a k0s ClusterConfig (apiVersion k0s.k0sproject.io/v1beta1) (--k0s-config)",
        ),
        (
            Flavour::MicroK8s,
            &k0s,
            "expected MicroK8s' kube-controller-manager arguments, one --flag=value per line (--microk8s-args)",
        ),
        (
            Flavour::Kubeadm,
            &k0s,
            "expected a kubeadm static pod manifest of kube-controller-manager (--kcm-manifest)",
        ),
        (
            Flavour::K3s,
            &pod,
            "expected a k3s config.yaml (--k3s-config)",
        ),
        (
            Flavour::Rke2,
            &args,
            "expected an rke2 config.yaml (--rke2-config)",
        ),
    ] {
        let e = read(&only(flavour, path)).unwrap_err();
        assert!(
            e.starts_with(&format!("{}: {expected}: ", path.display())),
            "{flavour:?}: {e}"
        );
        assert!(!e.contains('\n'), "{e}");
    }
    // Each of the right kind is read, and absent files are skipped.
    for (flavour, path) in [
        (Flavour::K0s, &k0s),
        (Flavour::MicroK8s, &args),
        (Flavour::Kubeadm, &pod),
    ] {
        let found = read(&only(flavour, path)).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].flavour, &found[0].path), (flavour, path));
        assert!(found[0].setting.is_ok());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
