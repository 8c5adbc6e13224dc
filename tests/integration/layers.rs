//! Modules read as layers, at every depth. Within each crate of [`CRATES`]:
//! - no module reaches back to a module that reaches it: `pull::walk` naming `pull::page` while
//!   `pull::page` names `pull::walk`, or `pull` naming `mutation` while `mutation` names `pull`;
//! - in `engine-runtime`, no top-level module names one of a layer above it ([`RUNTIME_LAYERS`]).
//!
//! A module and its own descendants may name each other: a parent holds its children, so that is
//! containment, not an import. A path from one subtree into another counts as an edge between the
//! two siblings under their nearest common ancestor (`crate::pull::cursor::Group` named in
//! `stream::hub` is an edge `stream → pull`). Test modules (`#[cfg(test)]`, `tests.rs`) are left
//! out: they drive a flow through the whole store.
//!
//! The check reads the sources as tokens, so a path inside a macro call counts and one inside a
//! comment or a string does not. Paths from the root (`crate::`), from a parent (`super::`) and
//! from the module itself (`self::`, or a child's name) are followed; a name the crate root or a
//! module re-exports resolves to the module that names it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use proc_macro2::{Delimiter, TokenStream, TokenTree};

/// The crates checked, by directory under the workspace root.
const CRATES: &[&str] =
    &["engine", "engine-kernel", "engine-macros", "engine-runtime", "engine-client", "engine-cli", "bench"];

/// The top-level modules of `engine-runtime`, from the top layer down: a module may name its own
/// layer's modules (without a cycle) and those below, never one above. Transport first, then
/// what a request does, the flows, what every flow reads, and plumbing.
const RUNTIME_LAYERS: &[&[&str]] = &[
    &["server", "http"],
    &["state"],
    &["service"],
    &["stream", "realtime", "observer", "metrics"],
    &["storage"],
    &["pull", "push", "provision", "housekeeping", "blob"],
    &["mutation"],
    &["jobs"],
    &["core"],
    &["rules"],
    &["pg", "sqlite"],
    &["row_json"],
    &["auth", "contract", "limits"],
    &["error"],
];

/// A module, by its path from the crate root (`["pull", "walk"]`).
type ModulePath = Vec<String>;

/// Edges between sibling modules, by the parent they share: which sibling names which, with a
/// file that does.
type Graph = BTreeMap<ModulePath, BTreeMap<String, BTreeMap<String, PathBuf>>>;

#[test]
fn no_module_reaches_back_to_a_module_that_reaches_it() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut problems = Vec::new();
    for krate in CRATES {
        let graph = module_graph(&workspace.join(krate).join("src"));
        let edges: usize = graph.values().flat_map(BTreeMap::values).map(BTreeMap::len).sum();
        assert!(edges > 0 || *krate == "engine", "{krate}: no module names another, so the sources were not read");
        for (parent, siblings) in &graph {
            if let Some(cycle) = find_cycle(siblings) {
                let steps: Vec<String> = cycle
                    .windows(2)
                    .map(|pair| format!("{} → {} ({})", pair[0], pair[1], siblings[&pair[0]][&pair[1]].display()))
                    .collect();
                let under = if parent.is_empty() { "the crate root".to_owned() } else { parent.join("::") };
                problems.push(format!("{krate}, under {under}: {}\n    {}", cycle.join(" → "), steps.join("\n    ")));
            }
        }
    }
    assert!(problems.is_empty(), "import cycles:\n{}", problems.join("\n"));
}

#[test]
fn no_runtime_module_names_a_layer_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine-runtime/src");
    let graph = module_graph(&src);
    let top = graph.get(&ModulePath::new()).expect("the runtime's top-level modules name each other");
    let modules = top_level_modules(&src);
    let unplaced: Vec<&String> = modules.iter().filter(|m| layer_of(RUNTIME_LAYERS, m).is_none()).collect();
    assert!(unplaced.is_empty(), "modules in no layer of RUNTIME_LAYERS (place them): {unplaced:?}");
    let upward = upward_edges(RUNTIME_LAYERS, top);
    assert!(upward.is_empty(), "modules naming a layer above their own:\n{}", upward.join("\n"));
}

#[test]
fn the_scanner_finds_paths_wherever_code_names_them() {
    let source = r#"
        use crate::{a::X, b, c::{self, D}};
        // crate::commented does not count
        const S: &str = "crate::quoted";
        fn f() { tracing::info!("{}", crate::e::name()); let _ = super::g::H; }
        mod inner { use super::super::h::I; use self::deeper::J; }
        pub use crate::Reexported;
        #[cfg(test)]
        mod tests { use crate::t::Tested; }
        fn g() { child::call(); }
    "#;
    let known: &[&[&str]] =
        &[&["a"], &["b"], &["c"], &["e"], &["m", "g"], &["m", "h"], &["m", "n", "inner", "deeper"], &["r"], &["t"]];
    let modules: BTreeSet<ModulePath> = known.iter().chain(&[&["m", "child"][..]]).map(|p| path(p)).collect();
    let reexports = BTreeMap::from([(path(&["Reexported"]), path(&["r"]))]);
    let found = referenced_modules(source, &path(&["m", "n"]), &modules, &reexports, &[]);
    let names: BTreeSet<ModulePath> = found.into_iter().map(|(_, target)| target).collect();
    let expected: BTreeSet<ModulePath> = known[..known.len() - 1].iter().map(|p| path(p)).collect();
    assert_eq!(names, expected, "a test module and a stranger's child do not count");
    let children = [path(&["m", "n", "child"])];
    let modules: BTreeSet<ModulePath> = modules.into_iter().chain(children.clone()).collect();
    let found = referenced_modules("fn g() { child::call(); }", &path(&["m", "n"]), &modules, &reexports, &[]);
    assert_eq!(found.into_iter().map(|(_, t)| t).collect::<Vec<_>>(), children, "a child by its own name");
}

#[test]
fn an_edge_counts_between_the_siblings_under_the_common_ancestor() {
    assert_eq!(
        sibling_edge(&path(&["stream", "hub"]), &path(&["pull", "cursor"])),
        Some((vec![], "stream".into(), "pull".into()))
    );
    assert_eq!(
        sibling_edge(&path(&["pull", "walk"]), &path(&["pull", "page"])),
        Some((path(&["pull"]), "walk".into(), "page".into()))
    );
    assert_eq!(sibling_edge(&path(&["pull", "walk"]), &path(&["pull"])), None, "a parent is containment");
    assert_eq!(sibling_edge(&path(&["pull"]), &path(&["pull", "walk"])), None, "a child is containment");
}

#[test]
fn a_cycle_is_found_and_named() {
    let edge = |to: &str| (to.to_owned(), PathBuf::from("f.rs"));
    let mut graph = BTreeMap::new();
    graph.insert("a".to_owned(), BTreeMap::from([edge("b")]));
    graph.insert("b".to_owned(), BTreeMap::from([edge("c")]));
    graph.insert("c".to_owned(), BTreeMap::from([edge("d")]));
    assert_eq!(find_cycle(&graph), None);
    graph.get_mut("c").unwrap().insert("b".into(), PathBuf::from("c.rs"));
    assert_eq!(find_cycle(&graph), Some(vec!["b".into(), "c".into(), "b".into()]));
}

#[test]
fn an_upward_edge_is_found_and_named() {
    let layers: &[&[&str]] = &[&["http"], &["pull", "push"], &["pg"]];
    let edge = |to: &str| (to.to_owned(), PathBuf::from("f.rs"));
    let mut graph = BTreeMap::new();
    graph.insert("http".to_owned(), BTreeMap::from([edge("pull")]));
    graph.insert("pull".to_owned(), BTreeMap::from([edge("push"), edge("pg")]));
    assert!(upward_edges(layers, &graph).is_empty(), "down and across are allowed");
    graph.insert("pg".to_owned(), BTreeMap::from([edge("pull")]));
    assert_eq!(upward_edges(layers, &graph), vec!["pg → pull (f.rs)".to_owned()]);
}

fn path(segments: &[&str]) -> ModulePath {
    segments.iter().map(|s| (*s).to_owned()).collect()
}

fn layer_of(layers: &[&[&str]], module: &str) -> Option<usize> {
    layers.iter().position(|layer| layer.contains(&module))
}

/// The edges of `graph` from a module to one in a layer above it.
fn upward_edges(layers: &[&[&str]], graph: &BTreeMap<String, BTreeMap<String, PathBuf>>) -> Vec<String> {
    let mut upward = Vec::new();
    for (from, targets) in graph {
        for (to, file) in targets {
            if let (Some(a), Some(b)) = (layer_of(layers, from), layer_of(layers, to))
                && b < a
            {
                upward.push(format!("{from} → {to} ({})", file.display()));
            }
        }
    }
    upward
}

fn top_level_modules(src: &Path) -> BTreeSet<String> {
    module_files(src).into_iter().filter_map(|(_, module)| module.first().cloned()).collect()
}

/// The edge between siblings that a path from module `from` to module `to` makes: their nearest
/// common ancestor, and the children of it on the way to each. None when one holds the other.
fn sibling_edge(from: &ModulePath, to: &ModulePath) -> Option<(ModulePath, String, String)> {
    let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    if common == from.len() || common == to.len() {
        return None;
    }
    Some((from[..common].to_vec(), from[common].clone(), to[common].clone()))
}

/// The graph of the crate whose sources are in `src`.
fn module_graph(src: &Path) -> Graph {
    let files = module_files(src);
    let modules: BTreeSet<ModulePath> = files.iter().map(|(_, module)| module.clone()).collect();
    let tests: Vec<ModulePath> = test_modules(&files);
    let mut reexports = BTreeMap::new();
    for (file, module) in &files {
        for (name, target) in module_reexports(&read(file), module, &modules) {
            reexports.insert(name, target);
        }
    }
    let mut graph = Graph::new();
    for (file, module) in &files {
        if tests.iter().any(|t| module.starts_with(t)) {
            continue;
        }
        let relative = file.strip_prefix(src).unwrap_or(file).to_owned();
        for (from, to) in referenced_modules(&read(file), module, &modules, &reexports, &tests) {
            if let Some((parent, a, b)) = sibling_edge(&from, &to) {
                graph.entry(parent).or_default().entry(a).or_default().entry(b).or_insert_with(|| relative.clone());
            }
        }
    }
    graph
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Every source file under `src`, with the module it holds (`lib.rs`: the root; `a.rs` and
/// `a/mod.rs`: `a`; `a/b.rs`: `a::b`). Binaries under `bin/` are crates of their own: left out.
fn module_files(src: &Path) -> Vec<(PathBuf, ModulePath)> {
    let mut files = Vec::new();
    let mut folders = vec![(src.to_owned(), ModulePath::new())];
    while let Some((folder, module)) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
            if path.is_dir() {
                if !(module.is_empty() && name == "bin") {
                    folders.push((path, [module.clone(), vec![name]].concat()));
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let own = match name.as_str() {
                    "mod" => module.clone(),
                    "lib" | "main" if module.is_empty() => module.clone(),
                    _ => [module.clone(), vec![name]].concat(),
                };
                files.push((path, own));
            }
        }
    }
    files.sort();
    files
}

/// The modules that are test code: `tests` and `test_*` by name, and those declared under
/// `#[cfg(test)]` as `mod name;` in their parent's file.
fn test_modules(files: &[(PathBuf, ModulePath)]) -> Vec<ModulePath> {
    let mut tests = Vec::new();
    for (file, module) in files {
        if module.last().is_some_and(|name| name == "tests" || name.starts_with("test_")) {
            tests.push(module.clone());
        }
        let tokens: Vec<TokenTree> = TokenStream::from_str(&read(file)).expect("lexes").into_iter().collect();
        for i in 0..tokens.len() {
            if is_cfg_test(&tokens, i)
                && let Some(name) = declared_module(&tokens, i + 2)
            {
                tests.push([module.clone(), vec![name]].concat());
            }
        }
    }
    tests
}

/// Whether `tokens[at..]` opens with `#[cfg(test)]`.
fn is_cfg_test(tokens: &[TokenTree], at: usize) -> bool {
    matches!(&tokens[at], TokenTree::Punct(p) if p.as_char() == '#')
        && matches!(tokens.get(at + 1), Some(TokenTree::Group(g))
            if g.delimiter() == Delimiter::Bracket && g.stream().to_string().replace(' ', "") == "cfg(test)")
}

/// The name of the module `tokens[at..]` declares (`pub(crate) mod name`), if it does.
fn declared_module(tokens: &[TokenTree], mut at: usize) -> Option<String> {
    if matches!(tokens.get(at), Some(TokenTree::Ident(i)) if i == "pub") {
        at += 1;
        if matches!(tokens.get(at), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis) {
            at += 1;
        }
    }
    match (tokens.get(at), tokens.get(at + 1)) {
        (Some(TokenTree::Ident(kw)), Some(TokenTree::Ident(name))) if kw == "mod" => Some(name.to_string()),
        _ => None,
    }
}

/// The names `source` (the file of `module`) re-exports with `pub use`, each with the module
/// the path it re-exports resolves to: `pub use page::Page` in `pull` makes `pull::Page` name
/// `pull::page`.
fn module_reexports(
    source: &str,
    module: &ModulePath,
    modules: &BTreeSet<ModulePath>,
) -> BTreeMap<ModulePath, ModulePath> {
    let tokens: Vec<TokenTree> = TokenStream::from_str(source).expect("lexes").into_iter().collect();
    let mut names = BTreeMap::new();
    for (i, token) in tokens.iter().enumerate() {
        if !matches!(token, TokenTree::Ident(ident) if ident == "pub") {
            continue;
        }
        let mut at = i + 1;
        if matches!(tokens.get(at), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis) {
            at += 1;
        }
        if !matches!(tokens.get(at), Some(TokenTree::Ident(ident)) if ident == "use") {
            continue;
        }
        let statement: Vec<TokenTree> = tokens[at + 1..].iter().take_while(|t| !is_punct(t, ';')).cloned().collect();
        for (leaf, full) in use_leaves(&statement, &[]) {
            if let Some(target) = resolve(&full, module, modules, &BTreeMap::new()) {
                names.insert([module.clone(), vec![leaf]].concat(), target);
            }
        }
    }
    names
}

/// The leaves of a use tree, each with its whole path: `a::{b, c::D as E}` gives `(b, a::b)` and
/// `(E, a::c::D)`.
fn use_leaves(tree: &[TokenTree], prefix: &[String]) -> Vec<(String, Vec<String>)> {
    let mut leaves = Vec::new();
    let mut current: Vec<String> = prefix.to_vec();
    let mut finished = false;
    let mut i = 0;
    let finish = |current: &mut Vec<String>, leaves: &mut Vec<(String, Vec<String>)>, name: Option<String>| {
        if current.len() > prefix.len() {
            let leaf = name.unwrap_or_else(|| current.last().cloned().unwrap_or_default());
            let mut full = current.clone();
            if full.last().is_some_and(|s| s == "self") {
                full.pop();
            }
            leaves.push((leaf, full));
        }
        *current = prefix.to_vec();
    };
    while i < tree.len() {
        match &tree[i] {
            TokenTree::Ident(ident) if ident == "as" => {
                if let Some(TokenTree::Ident(name)) = tree.get(i + 1) {
                    finish(&mut current, &mut leaves, Some(name.to_string()));
                    finished = true;
                }
                i += 2;
                continue;
            }
            TokenTree::Ident(ident) => current.push(ident.to_string()),
            TokenTree::Group(group) if group.delimiter() == Delimiter::Brace => {
                let inner: Vec<TokenTree> = group.stream().into_iter().collect();
                leaves.extend(use_leaves(&inner, &current));
                current = prefix.to_vec();
                finished = true;
            }
            TokenTree::Punct(p) if p.as_char() == ',' => {
                if !finished {
                    finish(&mut current, &mut leaves, None);
                }
                finished = false;
            }
            _ => {}
        }
        i += 1;
    }
    if !finished {
        finish(&mut current, &mut leaves, None);
    }
    leaves
}

/// The module a path names from `module`: the longest known module its segments lead to, after
/// `crate`, `super`, `self` or a child's name; a re-exported name resolves to its module.
fn resolve(
    segments: &[String],
    module: &ModulePath,
    modules: &BTreeSet<ModulePath>,
    reexports: &BTreeMap<ModulePath, ModulePath>,
) -> Option<ModulePath> {
    let (first, rest) = segments.split_first()?;
    let mut base = match first.as_str() {
        "crate" => ModulePath::new(),
        "self" => module.clone(),
        "super" => {
            let mut base = module.clone();
            base.pop()?;
            let mut rest = rest;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
            return walk(base, rest, modules, reexports);
        }
        child if modules.contains(&[module.clone(), vec![child.to_owned()]].concat()) => {
            [module.clone(), vec![child.to_owned()]].concat()
        }
        _ => return None,
    };
    if first == "crate" || first == "self" {
        return walk(base, rest, modules, reexports);
    }
    base.truncate(module.len() + 1);
    walk(base, rest, modules, reexports)
}

fn walk(
    mut base: ModulePath,
    rest: &[String],
    modules: &BTreeSet<ModulePath>,
    reexports: &BTreeMap<ModulePath, ModulePath>,
) -> Option<ModulePath> {
    for segment in rest {
        let next = [base.clone(), vec![segment.clone()]].concat();
        if modules.contains(&next) {
            base = next;
        } else if let Some(target) = reexports.get(&next) {
            return Some(target.clone());
        } else {
            break;
        }
    }
    Some(base)
}

/// The modules that `source`, the file of `module`, names, each with the (inline) module that
/// names it; test modules are skipped.
fn referenced_modules(
    source: &str,
    module: &ModulePath,
    modules: &BTreeSet<ModulePath>,
    reexports: &BTreeMap<ModulePath, ModulePath>,
    tests: &[ModulePath],
) -> Vec<(ModulePath, ModulePath)> {
    let tokens = TokenStream::from_str(source).expect("the source lexes");
    let mut found = BTreeSet::new();
    let mut modules = modules.clone();
    scan(tokens, module, &mut modules, reexports, tests, &mut found);
    found.into_iter().collect()
}

fn is_punct(token: &TokenTree, c: char) -> bool {
    matches!(token, TokenTree::Punct(p) if p.as_char() == c)
}

fn is_path_separator(tokens: &[TokenTree], at: usize) -> bool {
    at + 1 < tokens.len() && is_punct(&tokens[at], ':') && is_punct(&tokens[at + 1], ':')
}

fn scan(
    stream: TokenStream,
    module: &ModulePath,
    modules: &mut BTreeSet<ModulePath>,
    reexports: &BTreeMap<ModulePath, ModulePath>,
    tests: &[ModulePath],
    found: &mut BTreeSet<(ModulePath, ModulePath)>,
) {
    let tokens: Vec<TokenTree> = stream.into_iter().collect();
    // Inline modules are modules too: known before any path names them.
    for i in 0..tokens.len() {
        if let (Some(name), Some(TokenTree::Group(body))) = (declared_module(&tokens, i), tokens.get(i + 2))
            && body.delimiter() == Delimiter::Brace
        {
            modules.insert([module.clone(), vec![name]].concat());
        }
    }
    let mut i = 0;
    let mut after_cfg_test = false;
    while i < tokens.len() {
        if is_cfg_test(&tokens, i) {
            after_cfg_test = true;
            i += 2;
            continue;
        }
        if let (Some(name), Some(TokenTree::Group(body))) = (declared_module(&tokens, i), tokens.get(i + 2))
            && body.delimiter() == Delimiter::Brace
        {
            let inner = [module.clone(), vec![name]].concat();
            if !after_cfg_test && !tests.iter().any(|t| inner.starts_with(t)) {
                scan(body.stream(), &inner, modules, reexports, tests, found);
            }
            after_cfg_test = false;
            i += 3;
            continue;
        }
        if matches!(&tokens[i], TokenTree::Ident(_) | TokenTree::Group(_)) {
            after_cfg_test = after_cfg_test && matches!(&tokens[i], TokenTree::Ident(id) if id == "pub");
        }
        match &tokens[i] {
            TokenTree::Ident(ident)
                if is_path_separator(&tokens, i + 1) && (i < 2 || !is_path_separator(&tokens, i - 2)) =>
            {
                let mut segments = vec![ident.to_string()];
                let mut braced = false;
                let mut at = i + 1;
                while is_path_separator(&tokens, at) {
                    match tokens.get(at + 2) {
                        Some(TokenTree::Ident(next)) => {
                            segments.push(next.to_string());
                            at += 3;
                        }
                        Some(TokenTree::Group(group)) if group.delimiter() == Delimiter::Brace => {
                            let inner: Vec<TokenTree> = group.stream().into_iter().collect();
                            for (_, full) in use_leaves(&inner, &segments) {
                                if let Some(target) = resolve(&full, module, modules, reexports) {
                                    found.insert((module.clone(), target));
                                }
                            }
                            at += 3;
                            braced = true;
                            break;
                        }
                        _ => break,
                    }
                }
                if !braced && let Some(target) = resolve(&segments, module, modules, reexports) {
                    found.insert((module.clone(), target));
                }
                i = at;
                continue;
            }
            TokenTree::Group(group) => scan(group.stream(), module, modules, reexports, tests, found),
            _ => {}
        }
        i += 1;
    }
}

/// A cycle of `graph`, as the modules along it with the first repeated at the end.
fn find_cycle(graph: &BTreeMap<String, BTreeMap<String, PathBuf>>) -> Option<Vec<String>> {
    fn visit<'a>(
        node: &'a str,
        graph: &'a BTreeMap<String, BTreeMap<String, PathBuf>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| *n == node) {
            let mut cycle: Vec<String> = path[start..].iter().map(|n| (*n).to_owned()).collect();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if !done.insert(node) {
            return None;
        }
        path.push(node);
        for next in graph.get(node).into_iter().flat_map(BTreeMap::keys) {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}
