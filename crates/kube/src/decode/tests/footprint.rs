//! The decoded objects' memory: strings borrowed, tolerations shared and names interned, and the
//! bytes per node and per pod with realistic objects.

use super::*;

#[test]
fn strings_without_escapes_are_borrowed_from_the_input() {
    let json = br#"{"metadata":{"name":"plain","uid":"with \"escape\""}}"#;
    let w: wire::Lease<'_> = serde_json::from_slice(json).unwrap();
    let meta = w.metadata.unwrap();
    assert!(matches!(
        meta.name.unwrap().0,
        std::borrow::Cow::Borrowed("plain")
    ));
    assert_eq!(&*meta.uid.unwrap().0, "with \"escape\"");
}

#[test]
fn identical_tolerations_are_shared_and_names_interned() {
    let mut ctx = DecodeContext::new();
    let a: Pod = decode_object(POD.as_bytes(), &mut ctx).unwrap();
    let other = POD.replace("orders-api-7d9f8b6c5d-x2kqz", "orders-api-7d9f8b6c5d-abcde");
    let b: Pod = decode_object(other.as_bytes(), &mut ctx).unwrap();
    assert!(Rc::ptr_eq(&a.tolerations, &b.tolerations));
    assert!(Rc::ptr_eq(&a.key.namespace, &b.key.namespace));
    assert!(Rc::ptr_eq(
        a.node_name.as_ref().unwrap(),
        b.node_name.as_ref().unwrap()
    ));
    assert_eq!(ctx.distinct_toleration_lists(), 1);
    drop((a, b));
    assert!(ctx.prune() > 0);
    assert_eq!(ctx.distinct_toleration_lists(), 0);
    assert_eq!(ctx.interner.len(), 0, "every name was released");
}

/// A pod's namespace is compared with the last pod's before the interner is asked: either way it
/// is the one interned copy, and pruning lets go of the last one too.
#[test]
fn namespaces_are_one_interned_copy_whether_or_not_the_last_pod_shared_it() {
    let mut ctx = DecodeContext::new();
    let in_ns = |ns: &str, name: &str| {
        POD.replace("orders-api-7d9f8b6c5d-x2kqz", name)
            .replace("\"orders\"", &format!("\"{ns}\""))
    };
    let mut pods: Vec<Pod> = Vec::new();
    for (i, ns) in ["a", "a", "b", "a", "b", "b"].into_iter().enumerate() {
        pods.push(decode_object(in_ns(ns, &format!("p{i}")).as_bytes(), &mut ctx).unwrap());
    }
    for p in &pods {
        for q in &pods {
            assert_eq!(
                p.key.namespace == q.key.namespace,
                Rc::ptr_eq(&p.key.namespace, &q.key.namespace)
            );
        }
    }
    assert_eq!(&*pods[2].key.namespace, "b");
    drop(pods);
    ctx.prune();
    assert_eq!(ctx.interner.len(), 0, "every name was released");
}

/// Heap bytes of the projections: struct sizes, vectors' capacity, and each distinct `Rc`
/// allocation once (interned names are shared between objects).
#[derive(Default)]
struct Footprint {
    seen: HashSet<usize>,
    bytes: usize,
}

const RC_HEADER: usize = 2 * size_of::<usize>();

impl Footprint {
    fn name(&mut self, n: &Rc<str>) {
        if self.seen.insert(Rc::as_ptr(n) as *const u8 as usize) {
            self.bytes += RC_HEADER + n.len();
        }
    }

    fn effect(&mut self, e: &TaintEffect) {
        if let TaintEffect::Other(n) = e {
            self.name(n);
        }
    }

    fn node(&mut self, n: &Node) {
        self.bytes += size_of::<Node>()
            + n.taints.capacity() * size_of::<Taint>()
            + n.conditions.capacity() * size_of::<NodeCondition>();
        for s in [&n.name, &n.uid, &n.resource_version] {
            self.name(s);
        }
        // The label set is shared between nodes with the same labels: counted once.
        if self.seen.insert(n.labels.as_ptr() as usize) {
            self.bytes += RC_HEADER + n.labels.len() * size_of::<(Name, Name)>();
            for (k, v) in &n.labels {
                self.name(k);
                self.name(v);
            }
        }
        for t in &n.taints {
            self.name(&t.key);
            self.name(&t.value);
            self.effect(&t.effect);
        }
        for c in &n.conditions {
            for s in c.text.reason().into_iter().chain(c.text.message()) {
                self.name(s);
            }
        }
    }

    fn pod(&mut self, p: &Pod) {
        self.bytes += size_of::<Pod>();
        for s in [&p.key.namespace, &p.key.name, &p.uid, &p.resource_version] {
            self.name(s);
        }
        if let Some(n) = &p.node_name {
            self.name(n);
        }
        if self.seen.insert(p.tolerations.as_ptr() as usize) {
            self.bytes += RC_HEADER + p.tolerations.len() * size_of::<Toleration>();
            for t in p.tolerations.iter() {
                self.name(&t.key);
                self.name(&t.value);
                if let TolerationOperator::Other(o) = &t.operator {
                    self.name(o);
                }
                if let Some(e) = &t.effect {
                    self.effect(e);
                }
            }
        }
    }
}

/// The closing-note figures: `cargo test --lib decode::tests::bytes_per -- --nocapture`.
#[test]
fn bytes_per_node_and_per_pod_with_realistic_objects() {
    let mut ctx = DecodeContext::new();
    // One kubeadm node alone: every string is its own.
    let node: Node = decode_object(NODE.as_bytes(), &mut ctx).unwrap();
    let mut single = Footprint::default();
    single.node(&node);
    // 100 such nodes (distinct names, uids, versions; labels, taints, reasons shared).
    let mut fleet = Footprint::default();
    let mut nodes = Vec::new();
    for i in 0..100 {
        let json = NODE
            .replace(
                "cp-1.k8s.example.internal",
                &format!("node-{i:03}.k8s.example.internal"),
            )
            .replace(
                "0b6d3c5e-8a7f-4f57-9d0e-2b1f0e9c6a41",
                &format!("0b6d3c5e-8a7f-4f57-9d0e-2b1f0e9c6{i:03}"),
            )
            .replace("4819203", &format!("{}", 5_000_000 + i));
        nodes.push(decode_object::<Node>(json.as_bytes(), &mut ctx).unwrap());
    }
    nodes.iter().for_each(|n| fleet.node(n));
    // One 20 KB pod alone, then 1,000 pods of one Deployment spread over those 100 nodes.
    let pod: Pod = decode_object(POD.as_bytes(), &mut ctx).unwrap();
    let mut one_pod = Footprint::default();
    one_pod.pod(&pod);
    let mut pods_fp = Footprint::default();
    // The nodes' names are already paid for by the nodes.
    nodes.iter().for_each(|n| pods_fp.name(&n.name));
    let mut pods = Vec::new();
    for i in 0..1000 {
        let json = POD
            .replace(
                "orders-api-7d9f8b6c5d-x2kqz",
                &format!("orders-api-7d9f8b6c5d-{i:05}"),
            )
            .replace(
                "5f0c3a2e-9b1d-4e7f-a6c8-0d2b4f6e8a13",
                &format!("5f0c3a2e-9b1d-4e7f-a6c8-0d2b4f6{i:05}"),
            )
            .replace("4818722", &format!("{}", 6_000_000 + i))
            .replace(
                "worker-eu-west-1a-17",
                &format!("node-{:03}.k8s.example.internal", i % 100),
            );
        pods.push(decode_object::<Pod>(json.as_bytes(), &mut ctx).unwrap());
    }
    let before = pods_fp.bytes;
    pods.iter().for_each(|p| pods_fp.pod(p));
    let per_pod = (pods_fp.bytes - before) / pods.len();
    let per_node = fleet.bytes / nodes.len();
    println!(
        "node JSON {} B -> projection {} B alone, {} B each among 100; pod JSON {} B -> {} B alone, {} B each among 1,000 (size_of Node {}, Pod {}, Toleration {})",
        NODE.trim_end().len(),
        single.bytes,
        per_node,
        POD.trim_end().len(),
        one_pod.bytes,
        per_pod,
        size_of::<Node>(),
        size_of::<Pod>(),
        size_of::<Toleration>(),
    );
    assert!(POD.trim_end().len() > 20_000, "the fixture is a 20 KB pod");
    assert!(single.bytes < 2_200, "node alone: {} B", single.bytes);
    assert!(per_node < 1_200, "node among 100: {per_node} B");
    assert!(one_pod.bytes < 700, "pod alone: {} B", one_pod.bytes);
    assert!(per_pod < 260, "pod among 1000: {per_pod} B");
}
