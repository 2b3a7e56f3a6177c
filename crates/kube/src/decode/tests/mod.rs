//! Unit tests of decoding, a module per concern, and the fixtures they share.

use std::collections::HashSet;
use std::mem::size_of;
use std::rc::Rc;
use std::time::Duration;

use super::*;
use crate::model::{Autonomy, Lease, Name, NodeConditionType, TolerationOperator};
use crate::time::Rng;

const NODE: &str = include_str!("../fixtures/node_kubeadm_control_plane.json");
const POD: &str = include_str!("../fixtures/pod_deployment_20k.json");

fn t(s: &str) -> Time {
    Time::parse_rfc3339(s).unwrap()
}

mod events_and_lists;
mod footprint;
mod objects;
