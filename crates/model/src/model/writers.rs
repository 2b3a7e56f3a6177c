//! Who last wrote a node's Ready condition and its taints, as its `managedFields` tell. Read
//! only in shadow mode (the decoder skips managedFields otherwise), to tell the incumbent's
//! writes from others': a kubelet registering with a taint, another controller, a person.

/// The managers that are the incumbent: kube-controller-manager as a binary (kubeadm, rke2,
/// k0s), embedded in k3s, and MicroK8s' kubelite (a manager is the user agent's first word).
pub const INCUMBENT_MANAGERS: [&str; 3] = ["kube-controller-manager", "k3s", "kubelite"];

/// A few bits; `Writers::default()`: nothing known (no managedFields, or not read).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Writers(u8);

impl Writers {
    const KNOWN: u8 = 1;
    const READY_BY_INCUMBENT: u8 = 2;
    const TAINTS_BY_INCUMBENT: u8 = 4;
    const TAINTS_BY_OTHER: u8 = 8;

    /// The object carried managedFields and they were read.
    pub fn known(self) -> bool {
        self.0 & Self::KNOWN != 0
    }
    /// The incumbent owns the Ready condition's status.
    pub fn ready_by_incumbent(self) -> bool {
        self.0 & Self::READY_BY_INCUMBENT != 0
    }
    /// The incumbent owns `spec.taints`.
    pub fn taints_by_incumbent(self) -> bool {
        self.0 & Self::TAINTS_BY_INCUMBENT != 0
    }
    /// Another manager owns (part of) `spec.taints`.
    pub fn taints_by_other(self) -> bool {
        self.0 & Self::TAINTS_BY_OTHER != 0
    }

    /// One managedFields entry: its manager and its owned fields (`fieldsV1`, JSON).
    pub fn add_entry(&mut self, manager: &str, fields: &[u8]) {
        self.0 |= Self::KNOWN;
        if INCUMBENT_MANAGERS.contains(&manager) {
            // The incumbent's entries are small: read them whole.
            let Ok(v) = serde_json::from_slice::<serde_json::Value>(fields) else {
                return;
            };
            if v.pointer("/f:spec/f:taints").is_some() {
                self.0 |= Self::TAINTS_BY_INCUMBENT;
            }
            if v["f:status"]["f:conditions"]["k:{\"type\":\"Ready\"}"]
                .get("f:status")
                .is_some()
            {
                self.0 |= Self::READY_BY_INCUMBENT;
            }
        } else if contains(fields, b"\"f:taints\"") {
            // A kubelet's entry is kilobytes (its images): only looked through.
            self.0 |= Self::TAINTS_BY_OTHER;
        }
    }

    /// For tests and fixtures.
    pub fn from_entries<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> Writers {
        let mut w = Writers::default();
        for (manager, fields) in entries {
            w.add_entry(manager, fields.as_bytes());
        }
        w
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
