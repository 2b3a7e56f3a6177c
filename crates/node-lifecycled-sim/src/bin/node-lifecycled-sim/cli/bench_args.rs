//! `bench`'s options.

use std::path::PathBuf;
use std::time::Duration;

use node_lifecycled_sim::bench::{BenchSize, CURVE_NODES, InitialList, Profile};

use super::BenchArgs;
use super::options::Options;

pub(super) fn bench_args(options: &mut Options) -> Result<BenchArgs, String> {
    let quick = options.flag("--quick");
    let mass_failure = match (
        options.flag("--mass-failure"),
        options.duration("--mass-failure-window")?,
    ) {
        (true, window) => Some(window.unwrap_or(Duration::from_secs(300))),
        (false, None) => None,
        (false, Some(_)) => return Err("--mass-failure-window needs --mass-failure".into()),
    };
    let nodes = options.number("--nodes")?;
    let pods_per_node = options.number("--pods-per-node")?;
    let zones = options.number("--zones")?;
    let named = options.value("--sizes")?;
    let sizes = match (nodes, named) {
        (Some(_), Some(_)) => return Err("--nodes and --sizes exclude each other".into()),
        (Some(nodes), None) => vec![BenchSize {
            nodes,
            pods_per_node: pods_per_node.unwrap_or(BenchSize::LARGE.pods_per_node),
            zones: zones.unwrap_or(BenchSize::LARGE.zones),
        }],
        (None, named) => {
            if pods_per_node.is_some() || zones.is_some() {
                return Err("--pods-per-node and --zones go with --nodes".into());
            }
            named
                .as_deref()
                .unwrap_or("small,large")
                .split(',')
                .map(|s| named_sizes(s.trim()))
                .collect::<Result<Vec<_>, _>>()?
                .concat()
        }
    };
    let qps = options
        .value("--qps")?
        .map(|v| {
            v.parse::<f64>()
                .ok()
                .filter(|q| q.is_finite() && *q > 0.0)
                .ok_or_else(|| format!("--qps: {v:?} is not a positive number"))
        })
        .transpose()?;
    let burst = options
        .number("--burst")?
        .map(|b| u32::try_from(b).map_err(|_| format!("--burst: {b} is too large")))
        .transpose()?;
    let initial_list = options
        .value("--initial-list")?
        .map(|v| {
            InitialList::parse(&v).ok_or_else(|| {
                format!("--initial-list: {v:?} is neither watch-list nor watch-cache")
            })
        })
        .transpose()?;
    let json_only = match options.value("--wire")?.as_deref() {
        None | Some("protobuf") => false,
        Some("json") => true,
        Some(other) => return Err(format!("--wire: {other:?} is neither protobuf nor json")),
    };
    let profile = match options.value("--profile")? {
        None => Profile::Plain,
        Some(v) => Profile::parse(&v)
            .ok_or_else(|| format!("--profile: {v:?} is neither plain nor every-feature"))?,
    };
    Ok(BenchArgs {
        sizes,
        quick,
        json_only,
        profile,
        csv: options.value("--csv")?.map(PathBuf::from),
        mass_failure,
        victims: options.number("--victims")?,
        burst_events: options.number("--burst-events")?,
        qps,
        burst,
        initial_list,
        daemon: options.value("--daemon")?.map(PathBuf::from),
        dir: options.value("--dir")?.map(PathBuf::from),
    })
}

/// One word of `--sizes`: small, large, curve (500, 2,000, 5,000, 15,000 and 30,000 nodes) or a node
/// count, each at 30 pods per node in 3 zones.
fn named_sizes(word: &str) -> Result<Vec<BenchSize>, String> {
    let at = |nodes| BenchSize {
        nodes,
        ..BenchSize::LARGE
    };
    match word {
        "small" => Ok(vec![BenchSize::SMALL]),
        "large" => Ok(vec![BenchSize::LARGE]),
        "curve" => Ok(CURVE_NODES.into_iter().map(at).collect()),
        n => match n.parse::<usize>() {
            Ok(nodes) if nodes >= 2 => Ok(vec![at(nodes)]),
            _ => Err(format!(
                "--sizes: {n:?} is none of small, large, curve or a node count (at least 2)"
            )),
        },
    }
}
