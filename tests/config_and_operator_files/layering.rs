//! The layers hold (src/lib.rs). The layers below the daemon are crates (`crates/model`,
//! `crates/kube`, `crates/controller`), so Cargo keeps them apart: a crate can only name the
//! crates it depends on, and the first check here is that each depends on the layers below it
//! only. Inside the daemon's crate the layers are modules: every `src/**/*.rs` is read and each
//! `crate::X` path (in `use` lines and inline paths alike, `use crate::{a, b}` groups included)
//! checked against the table below. Comments are skipped, so a doc link may point anywhere. A
//! module may import only modules of a strictly lower rank: siblings of one rank (`kube`,
//! `controller`, `logging`) know nothing of each other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::tree::rust_files;

/// Top-level modules of the library by rank, lowest first.
const LAYERS: &[(&str, u8)] = &[
    // Pure data at the bottom: instants, durations, the timer heap, the token bucket, the
    // seeded random generator, the keyed name hash.
    ("time", 1),
    // Compact projections of Node, Pod, Lease; the cluster store.
    ("model", 2),
    // Speaks the Kubernetes API / decides node lifecycle / writes log lines: none knows the others.
    ("kube", 3),
    ("controller", 3),
    ("logging", 3),
    // Lease-based leader election, on the API client.
    ("leader", 4),
    // The config file, parsed into the settings types the layers below own.
    ("config", 5),
    // Renders snapshots: the state dump, metrics text, explanations.
    ("observe", 6),
    // The event loop, executor, informers, endpoints that need the loop, the daemon's wiring.
    ("runtime", 7),
    // `node-lifecycled doctor`: a command beside the daemon, built from the runtime's wiring.
    ("doctor", 8),
];

fn rank(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, r)| *r)
}

/// The top-level module a file belongs to; `None` for the crate root and the binaries, which
/// sit above everything.
fn layer_of(path: &Path, src: &Path) -> Option<String> {
    let rel = path.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let module = first.strip_suffix(".rs").unwrap_or(first);
    match module {
        "lib" | "main" | "bin" => None,
        m => Some(m.to_string()),
    }
}

/// Every top-level module a piece of source names as `crate::X`, with its line number.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        // Comments (doc links included) are not imports.
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            // `$crate::` in a macro is not ours to check; `node_lifecycled_crate::` is no path.
            let before = rest[..at].chars().next_back();
            rest = &rest[at + "crate::".len()..];
            if before.is_some_and(|c| c == '$' || c == '_' || c.is_alphanumeric()) {
                continue;
            }
            if let Some(group) = rest.strip_prefix('{') {
                // `use crate::{a::b, c};` — the top-level names of the group (one line is
                // enough for rustfmt's layout of short groups; longer ones wrap below).
                let mut depth = 0;
                let mut name = String::new();
                let mut expect_name = true;
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => expect_name = true,
                        c if expect_name && (c.is_alphanumeric() || c == '_') => name.push(c),
                        _ => {
                            if !name.is_empty() {
                                found.push((i + 1, std::mem::take(&mut name)));
                            }
                            if !c.is_whitespace() {
                                expect_name = false;
                            }
                        }
                    }
                }
                if !name.is_empty() {
                    found.push((i + 1, name));
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.push((i + 1, name));
                }
            }
        }
    }
    found
}

/// The upward (or sideways) imports of one file of layer `layer`, as messages.
fn violations(layer: &str, file: &str, text: &str) -> Vec<String> {
    let Some(own) = rank(layer) else {
        return vec![format!(
            "{file}: module `{layer}` is not in the layer table of tests/config_and_operator_files/layering.rs: give it a rank"
        )];
    };
    let allowed = || -> Vec<&str> {
        LAYERS
            .iter()
            .filter(|(_, r)| *r < own)
            .map(|(m, _)| *m)
            .collect()
    };
    crate_paths(text)
        .into_iter()
        .filter(|(_, target)| target != layer)
        .filter_map(|(line, target)| match rank(&target) {
            Some(r) if r < own => None,
            Some(_) => Some(format!(
                "{file}:{line}: `{layer}` imports `{target}`, which is not below it \
                 (`{layer}` may import: {})",
                allowed().join(", ")
            )),
            // `crate::Foo` of a re-exported item at the root: not a module, nothing to check.
            None => None,
        })
        .collect()
}

#[test]
fn no_module_imports_a_module_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(
        files.len() > 50,
        "found only {} files under src/",
        files.len()
    );
    let mut problems = Vec::new();
    let mut layers_seen = BTreeSet::new();
    for path in &files {
        let Some(layer) = layer_of(path, &src) else {
            continue;
        };
        layers_seen.insert(layer.clone());
        let text = std::fs::read_to_string(path).expect("source file");
        let file = path
            .strip_prefix(&src)
            .unwrap_or(path)
            .display()
            .to_string();
        problems.extend(violations(&layer, &format!("src/{file}"), &text));
    }
    // The table names real modules (a renamed module must not leave a stale row behind): the
    // daemon's own, or a crate's below it that `src/lib.rs` re-exports under the layer's name.
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("src/lib.rs");
    let reexported = |module: &str| {
        lib.lines().any(|l| {
            l.starts_with("pub use node_lifecycled_")
                && l.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .any(|w| w == module)
        })
    };
    for (module, _) in LAYERS {
        assert!(
            layers_seen.contains(*module) || reexported(module),
            "tests/config_and_operator_files/layering.rs names `{module}`, which is not a module of src/"
        );
    }
    assert!(
        problems.is_empty(),
        "{} import(s) point up:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The check itself can fail: an observe file reaching into the runtime, a controller file
/// reaching the API client through a `use` group, a kube file naming the controller inline.
#[test]
fn an_upward_import_is_reported_with_file_and_line() {
    let text =
        "use crate::time::Time;\n// see crate::runtime::daemon\nuse crate::runtime::LoopControl;\n";
    assert_eq!(
        violations("observe", "src/observe/x.rs", text),
        [
            "src/observe/x.rs:3: `observe` imports `runtime`, which is not below it \
          (`observe` may import: time, model, kube, controller, logging, leader, config)"
        ]
    );
    let grouped = "use crate::{model::Node, kube::ApiClient};\n";
    assert_eq!(violations("controller", "c.rs", grouped).len(), 1);
    let inline = "    let x = crate::controller::events::Event::new();\n";
    assert_eq!(violations("kube", "k.rs", inline).len(), 1);
    // Siblings of one rank are not below each other either.
    assert_eq!(
        violations("logging", "l.rs", "use crate::kube::x;\n").len(),
        1
    );
    // Downward imports and the module's own paths pass.
    let fine = "use crate::model::Node;\nuse crate::kube::x;\nuse crate::runtime::y;\n";
    assert!(violations("runtime", "r.rs", fine).is_empty());
    assert_eq!(violations("newthing", "n.rs", "").len(), 1);
}

// ---- the crates follow the layers -------------------------------------------------------------

/// The crates of the workspace's own that a manifest's `[dependencies]` name (dev-dependencies
/// are the tests', which may reach anywhere).
fn own_dependencies(manifest: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut in_dependencies = false;
    for line in manifest.lines() {
        if line.starts_with('[') {
            in_dependencies = line.trim() == "[dependencies]";
            continue;
        }
        if in_dependencies
            && let Some(name) = line.split('=').next().map(str::trim)
            && name.starts_with("node-lifecycled")
        {
            found.insert(name.to_string());
        }
    }
    found
}

#[test]
fn each_crate_depends_on_the_layers_below_it_only() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let model = "node-lifecycled-model";
    let expected: [(&str, &[&str]); 4] = [
        // time and model: the bottom, nothing of ours.
        ("crates/model", &[]),
        // kube and controller: on the model, neither knowing the other.
        ("crates/kube", &[model]),
        ("crates/controller", &[model]),
        // The daemon: on all three.
        (
            ".",
            &[model, "node-lifecycled-kube", "node-lifecycled-controller"],
        ),
    ];
    for (dir, below) in expected {
        let path = root.join(dir).join("Cargo.toml");
        let manifest = std::fs::read_to_string(&path).expect("a crate's manifest");
        let found = own_dependencies(&manifest);
        let want: BTreeSet<String> = below.iter().map(|s| s.to_string()).collect();
        assert_eq!(found, want, "{dir}/Cargo.toml: the crates it depends on");
    }
}

#[test]
fn a_dependency_on_a_crate_of_ours_is_read_and_dev_dependencies_are_not() {
    let manifest = "[package]\nname = \"x\"\n\n[dependencies]\nnode-lifecycled-model = { path = \"../model\" }\n\
                    serde = \"1\"\n\n[dev-dependencies]\nnode-lifecycled-sim = { path = \"../sim\" }\n";
    assert_eq!(
        own_dependencies(manifest),
        ["node-lifecycled-model".to_string()].into_iter().collect()
    );
}

// ---- no circle inside the controller crate ---------------------------------------------------

/// The controller's own modules (a file or a directory directly under `crates/controller/src/`)
/// that one of its files names, through `crate::X` or through as many `super::` as it takes to
/// reach the crate's root from that file. Test code (`tests` modules and files) is left out: a test
/// may reach anywhere.
fn controller_imports(rel: &[String], text: &str) -> BTreeSet<String> {
    // How many `super::` lead from this file's module to the crate's root.
    let to_controller = match rel {
        [_file] => 1,
        [.., last] if last == "mod.rs" => rel.len() - 1,
        _ => rel.len(),
    };
    let code = own_code(text);
    let mut found = BTreeSet::new();
    // After `crate::` or the `super::`s: one path, or a `{ ... }` group of them,
    // over as many lines as rustfmt gives it.
    let mut names = |after: &str| match after.strip_prefix('{') {
        Some(group) => found.extend(group_heads(group)),
        None => found.extend(head(after)),
    };
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        // `$crate::` in a macro, `node_lifecycled_crate::`: no path of this crate's.
        if !before.is_some_and(|c| c == '$' || c == '_' || c.is_alphanumeric()) {
            names(rest);
        }
    }
    let mut rest = code.as_str();
    while let Some(at) = rest.find("super::") {
        let before = rest[..at].chars().next_back();
        let mut after = &rest[at..];
        let mut supers = 0;
        while let Some(r) = after.strip_prefix("super::") {
            supers += 1;
            after = r;
        }
        rest = after;
        if supers == to_controller && !before.is_some_and(|c| c == ':' || c.is_alphanumeric()) {
            names(after);
        }
    }
    found
}

/// A file's own code: comments and test modules left out (a line count kept, so line numbers
/// hold up to the first test module).
fn own_code(text: &str) -> String {
    let mut code = String::new();
    let mut after_cfg_test = false;
    for line in text.lines() {
        let test_module = std::mem::replace(&mut after_cfg_test, line.starts_with("#[cfg(test)]"));
        if test_module && line.starts_with("mod ") {
            // `mod tests;` names a file read on its own (and skipped); `mod tests {` ends the
            // file's own code.
            if line.trim_end().ends_with('{') {
                break;
            }
            code.push('\n');
            continue;
        }
        code.push_str(line.split("//").next().unwrap_or(""));
        code.push('\n');
    }
    code
}

/// Whether a source file (relative path components) is test code: a `tests` directory or
/// file, or a `*_tests.rs` file.
fn is_test_file(rel: &[String]) -> bool {
    rel.iter()
        .any(|c| c == "tests" || c == "tests.rs" || c.ends_with("_tests.rs"))
}

/// The first name of a path (`actions` of `actions::Action`).
fn head(path: &str) -> Option<String> {
    let name: String = path
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// The first name of each path of a `{ ... }` group (`group` starts after its `{`): `a` and `c`
/// of `a::{b, d}, c}`, not the names inside a nested group.
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut at_start = true;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => at_start = true,
            c if at_start && !c.is_whitespace() => {
                at_start = false;
                heads.extend(head(&group[i..]));
            }
            _ => {}
        }
    }
    heads
}

/// The items the controller's `lib.rs` re-exports (`pub use actions::{Action, ActionId};`), by the
/// module that defines them: `super::Settings` is an import of `settings`.
fn reexported(mod_rs: &str) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    for line in mod_rs.lines() {
        let Some((module, items)) = line
            .strip_prefix("pub use ")
            .and_then(|l| l.split_once("::"))
        else {
            continue;
        };
        for item in items.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            if !item.is_empty() {
                found.insert(item.to_string(), module.to_string());
            }
        }
    }
    found
}

/// A circle among the controller's modules, if there is one, as `a -> b -> ... -> a`.
fn circle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<String> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<String> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle.join(" -> "));
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, edges, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for start in edges.keys() {
        if let Some(found) = visit(start, edges, &mut Vec::new(), &mut done) {
            return Some(found);
        }
    }
    None
}

#[test]
fn no_module_of_the_controller_imports_one_that_imports_it_back() {
    let controller = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/controller/src");
    let mut files = Vec::new();
    rust_files(&controller, &mut files);
    let is_module = |name: &str| {
        controller.join(format!("{name}.rs")).is_file() || controller.join(name).is_dir()
    };
    let reexports = reexported(&std::fs::read_to_string(controller.join("lib.rs")).unwrap());
    assert!(
        reexports.contains_key("Settings"),
        "crates/controller/src/lib.rs re-exports nothing"
    );
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let rel: Vec<String> = file
            .strip_prefix(&controller)
            .unwrap()
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if is_test_file(&rel) || rel == ["lib.rs"] {
            continue;
        }
        let unit = rel[0].trim_end_matches(".rs").to_string();
        let text = std::fs::read_to_string(file).unwrap();
        let targets: Vec<String> = controller_imports(&rel, &text)
            .into_iter()
            .filter_map(|t| match reexports.get(&t) {
                _ if is_module(&t) => Some(t),
                Some(module) => Some(module.clone()),
                None => None,
            })
            .filter(|t| *t != unit)
            .collect();
        edges.entry(unit).or_default().extend(targets);
    }
    assert!(edges.len() > 10, "read only {} modules", edges.len());
    if let Some(found) = circle(&edges) {
        panic!("crates/controller has a circle of imports: {found}");
    }
}

#[test]
fn a_circle_is_found_and_named() {
    let edges: BTreeMap<String, BTreeSet<String>> = [
        ("actions", vec!["fencing"]),
        ("fencing", vec!["zones", "actions"]),
        ("zones", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(
        circle(&edges).as_deref(),
        Some("actions -> fencing -> actions")
    );
    let rel = ["fencing".to_string(), "machine.rs".to_string()];
    let text = "use super::super::{actions::Action, zones};\nuse super::outcomes;\n\
                #[cfg(test)]\nmod tests;\npub use crate::inputs::X;\n\
                #[cfg(test)]\nmod tests {\n    use crate::pools;\n}\n";
    assert_eq!(
        controller_imports(&rel, text),
        ["actions", "inputs", "zones"]
            .map(String::from)
            .into_iter()
            .collect()
    );
}

/// rustfmt wraps a long `use` group over several lines; a nested group names no module of the
/// controller; an item re-exported by the controller's `lib.rs` stands for its module.
#[test]
fn a_use_group_over_several_lines_is_read() {
    let rel = ["node_lifecycle".to_string(), "mod.rs".to_string()];
    let text =
        "use super::{\n    actions::Action,\n    health::{self, zones},\n    Settings,\n};\n";
    assert_eq!(
        controller_imports(&rel, text),
        ["Settings", "actions", "health"]
            .map(String::from)
            .into_iter()
            .collect()
    );
    let mod_rs =
        "pub mod settings;\npub use settings::Settings;\npub use dump::{NodeDump, StateDump};\n";
    let reexports = reexported(mod_rs);
    assert_eq!(
        reexports.get("Settings").map(String::as_str),
        Some("settings")
    );
    assert_eq!(reexports.get("StateDump").map(String::as_str), Some("dump"));
    assert_eq!(reexports.len(), 3);
}

// ---- the store has one writer ----------------------------------------------------------------

/// The store's one writer is `World::apply` (`crates/controller/src/world.rs`): the compiler keeps it
/// so, as long as the `World` keeps its store private and no `&mut ClusterStore` leaves the file
/// (no field of that type elsewhere, no method handing one out). This checks the two that the
/// type system cannot: a field made public, or another holder of a store beside the world.
const WORLD: &str = "crates/controller/src/world.rs";

/// The lines of a file's own code that hold a store or a mutable borrow of one, as messages.
fn store_holders(file: &str, text: &str) -> Vec<String> {
    own_code(text)
        .lines()
        .enumerate()
        .filter(|(_, code)| {
            code.contains("&mut ClusterStore")
                || code.contains(": ClusterStore")
                || code.contains("ClusterStore::new")
                || code.contains("ClusterStore::default")
        })
        .map(|(i, _)| {
            format!(
                "{file}:{}: a store held or borrowed mutably outside the world ({WORLD})",
                i + 1
            )
        })
        .collect()
}

#[test]
fn the_world_alone_holds_the_store_and_keeps_it_private() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let world = std::fs::read_to_string(root.join(WORLD)).expect(WORLD);
    assert!(
        world.lines().any(|l| l == "    store: ClusterStore,"),
        "{WORLD}: the world's store is a private field"
    );
    assert!(
        !own_code(&world).contains("-> &mut ClusterStore"),
        "{WORLD} hands out a `&mut ClusterStore`"
    );
    // Every crate that could hold one: the model defines it.
    let mut problems = Vec::new();
    let mut read = 0;
    for dir in ["src", "crates/kube/src", "crates/controller/src"] {
        let mut files = Vec::new();
        rust_files(&root.join(dir), &mut files);
        for path in &files {
            let rel: Vec<String> = path
                .strip_prefix(root)
                .unwrap()
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let file = rel.join("/");
            if file == WORLD || is_test_file(&rel) {
                continue;
            }
            let text = std::fs::read_to_string(path).expect("source file");
            problems.extend(store_holders(&file, &text));
            read += 1;
        }
    }
    assert!(read > 200, "read only {read} files");
    assert!(
        problems.is_empty(),
        "{} store(s) outside the world:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The check can fail: a field, a parameter, a construction; a read, a comment or a test
/// module pass.
#[test]
fn a_store_held_outside_the_world_is_reported() {
    let text = "struct S {\n    store: ClusterStore,\n}\nfn f(s: &mut ClusterStore) {}\n\
                fn g() { let s = ClusterStore::new(); }\nfn h(s: &ClusterStore) {} // &mut ClusterStore\n\
                #[cfg(test)]\nmod tests {\n    fn g(s: &mut ClusterStore) {}\n}\n";
    let found = store_holders("src/x.rs", text);
    let lines: Vec<&str> = found
        .iter()
        .map(|m| m.split(": ").next().unwrap_or(""))
        .collect();
    assert_eq!(
        lines,
        ["src/x.rs:2", "src/x.rs:4", "src/x.rs:5"],
        "{found:?}"
    );
}
