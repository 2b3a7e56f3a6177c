//! OS/arch label reconciliation (docs/upstream.md, "Labels", upstream `reconcileNodeLabels`): the
//! deprecated beta labels follow the stable ones.

use crate::model::{Name, Node, labels};

const RECONCILED: [(&str, &str); 2] = [
    (labels::OS, labels::OS_BETA),
    (labels::ARCH, labels::ARCH_BETA),
];

/// Labels to write so that each beta label equals its stable label; empty when nothing to do
/// (no labels, no stable label, or already equal).
pub(crate) fn labels_to_update(node: &Node) -> Vec<(Name, Name)> {
    let mut out = Vec::new();
    for (primary, secondary) in RECONCILED {
        let Some(value) = node.label(primary) else {
            continue;
        };
        if node.label(secondary) != Some(value) {
            out.push((Name::from(secondary), value.clone()));
        }
    }
    out
}
