//! Modules read as layers: within each crate listed in [`CRATES`], no top-level module reaches
//! back to a module that reaches it (`a` naming `crate::b::…` while `b`, directly or through
//! others, names `crate::a::…`). State that several modules share lives in a module of its own.
//!
//! The check reads the sources as tokens, so a path inside a macro call counts and one inside a
//! comment or a string does not; `super::` paths that climb to the crate root and names the
//! crate root re-exports from a module count as naming that module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use proc_macro2::{Delimiter, TokenStream, TokenTree};

/// The crates checked, by directory under the workspace root.
const CRATES: &[&str] = &["engine-runtime", "engine-client", "engine-kernel"];

/// Which top-level modules each top-level module names, with a file that names it.
type Graph = BTreeMap<String, BTreeMap<String, PathBuf>>;

#[test]
fn no_crate_has_an_import_cycle_between_its_top_level_modules() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut cycles = Vec::new();
    for krate in CRATES {
        let graph = module_graph(&workspace.join(krate).join("src"));
        let edges: usize = graph.values().map(BTreeMap::len).sum();
        assert!(edges > 0, "{krate}: no module names another, so the sources were not read");
        if let Some(cycle) = find_cycle(&graph) {
            let steps: Vec<String> = cycle
                .windows(2)
                .map(|pair| format!("{} → {} ({})", pair[0], pair[1], graph[&pair[0]][&pair[1]].display()))
                .collect();
            cycles.push(format!("{krate}: {}\n    {}", cycle.join(" → "), steps.join("\n    ")));
        }
    }
    assert!(cycles.is_empty(), "import cycles between top-level modules:\n{}", cycles.join("\n"));
}

#[test]
fn the_scanner_finds_paths_wherever_code_names_them() {
    let source = r#"
        use crate::{a::X, b, c::{self, D}};
        // crate::commented does not count
        const S: &str = "crate::quoted";
        fn f() { tracing::info!("{}", crate::e::name()); let _ = super::super::g::H; }
        mod inner { use super::super::super::h::I; }
        pub use crate::Reexported;
    "#;
    let reexports = BTreeMap::from([("Reexported".to_owned(), "r".to_owned())]);
    let found = referenced_modules(source, 2, &reexports);
    let expected = ["a", "b", "c", "e", "g", "h", "r"].map(str::to_owned);
    assert_eq!(found, BTreeSet::from(expected));
    assert_eq!(referenced_modules("use super::x::Y;", 2, &reexports), BTreeSet::new(), "a sibling, not the root");
}

#[test]
fn a_cycle_is_found_and_named() {
    let edge = |to: &str| (to.to_owned(), PathBuf::from("f.rs"));
    let mut graph = Graph::new();
    graph.insert("a".into(), BTreeMap::from([edge("b")]));
    graph.insert("b".into(), BTreeMap::from([edge("c")]));
    graph.insert("c".into(), BTreeMap::from([edge("d")]));
    assert_eq!(find_cycle(&graph), None);
    graph.get_mut("c").unwrap().insert("b".into(), PathBuf::from("c.rs"));
    assert_eq!(find_cycle(&graph), Some(vec!["b".into(), "c".into(), "b".into()]));
}

/// The graph of the crate whose sources are in `src`.
fn module_graph(src: &Path) -> Graph {
    let root = ["lib.rs", "main.rs"].iter().map(|f| src.join(f)).find(|p| p.exists()).expect("a crate root");
    let reexports = root_reexports(&read(&root));
    let mut graph = Graph::new();
    for entry in std::fs::read_dir(src).expect("the crate's src/") {
        let path = entry.unwrap().path();
        let module = match path.file_stem().and_then(|s| s.to_str()) {
            Some(name) if path.is_dir() => name.to_owned(),
            Some(name) if path.extension().is_some_and(|e| e == "rs") && path != root => name.to_owned(),
            _ => continue,
        };
        let edges = graph.entry(module.clone()).or_default();
        for (file, depth) in module_files(&path) {
            for target in referenced_modules(&read(&file), depth, &reexports) {
                let known = src.join(format!("{target}.rs")).exists() || src.join(&target).is_dir();
                if known && target != module {
                    let relative = file.strip_prefix(src).unwrap_or(&file).to_owned();
                    edges.entry(target).or_insert(relative);
                }
            }
        }
    }
    graph
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The files of a top-level module (`a.rs`, or everything under `a/`), each with the depth of
/// the module it holds (`a.rs` and `a/mod.rs`: 1; `a/b.rs`: 2).
fn module_files(path: &Path) -> Vec<(PathBuf, usize)> {
    if path.is_file() {
        return vec![(path.to_owned(), 1)];
    }
    let mut files = Vec::new();
    let mut folders = vec![(path.to_owned(), 1)];
    while let Some((folder, depth)) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push((path, depth + 1));
            } else if path.extension().is_some_and(|e| e == "rs") {
                let is_mod = path.file_name().is_some_and(|n| n == "mod.rs");
                files.push((path, if is_mod { depth } else { depth + 1 }));
            }
        }
    }
    files
}

/// The names the crate root re-exports with `use <module>::…`, each with its module.
fn root_reexports(source: &str) -> BTreeMap<String, String> {
    let tokens: Vec<TokenTree> = TokenStream::from_str(source).expect("the crate root lexes").into_iter().collect();
    let mut names = BTreeMap::new();
    for (i, token) in tokens.iter().enumerate() {
        if !matches!(token, TokenTree::Ident(ident) if ident == "use") {
            continue;
        }
        if let Some(TokenTree::Ident(module)) = tokens.get(i + 1) {
            let statement: TokenStream = tokens[i + 2..].iter().take_while(|t| !is_punct(t, ';')).cloned().collect();
            for name in leaf_names(statement) {
                names.insert(name, module.to_string());
            }
        }
    }
    names
}

/// The names a use tree binds: each leaf, or its `as` rename.
fn leaf_names(tree: TokenStream) -> Vec<String> {
    let mut names = Vec::new();
    let mut last = None;
    for token in tree {
        match token {
            TokenTree::Ident(ident) if ident != "self" && ident != "as" => last = Some(ident.to_string()),
            TokenTree::Group(group) => names.extend(leaf_names(group.stream())),
            TokenTree::Punct(p) if p.as_char() == ',' => names.extend(last.take()),
            TokenTree::Punct(p) if p.as_char() == ':' => last = None,
            _ => {}
        }
    }
    names.extend(last);
    names
}

/// The top-level modules (or root re-exports, resolved) that `source`, a file holding a module
/// at `depth` below the crate root, names by a path from the root.
fn referenced_modules(source: &str, depth: usize, reexports: &BTreeMap<String, String>) -> BTreeSet<String> {
    let tokens = TokenStream::from_str(source).expect("the source lexes");
    let mut found = BTreeSet::new();
    scan(tokens, depth, &mut found);
    found.into_iter().map(|name| reexports.get(&name).cloned().unwrap_or(name)).collect()
}

fn is_punct(token: &TokenTree, c: char) -> bool {
    matches!(token, TokenTree::Punct(p) if p.as_char() == c)
}

fn is_path_separator(tokens: &[TokenTree], at: usize) -> bool {
    at + 1 < tokens.len() && is_punct(&tokens[at], ':') && is_punct(&tokens[at + 1], ':')
}

fn scan(stream: TokenStream, depth: usize, found: &mut BTreeSet<String>) {
    let tokens: Vec<TokenTree> = stream.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        let token = &tokens[i];
        // A path from the root: `crate::`, or as many `super::` as the module is deep.
        let mut climbed = None;
        if matches!(token, TokenTree::Ident(ident) if ident == "crate") && is_path_separator(&tokens, i + 1) {
            climbed = Some(i + 3);
        } else if matches!(token, TokenTree::Ident(ident) if ident == "super") {
            let mut at = i;
            let mut supers = 0;
            while matches!(&tokens.get(at), Some(TokenTree::Ident(ident)) if ident == "super")
                && is_path_separator(&tokens, at + 1)
            {
                supers += 1;
                at += 3;
            }
            if supers != depth {
                i = at.max(i + 1);
                continue;
            }
            climbed = Some(at);
        }
        if let Some(at) = climbed {
            match tokens.get(at) {
                Some(TokenTree::Ident(name)) => {
                    found.insert(name.to_string());
                }
                Some(TokenTree::Group(group)) if group.delimiter() == Delimiter::Brace => {
                    found.extend(first_segments(group.stream()));
                }
                _ => {}
            }
            i = at.max(i + 1);
            continue;
        }
        match token {
            // An inline `mod name { … }` is one level deeper.
            TokenTree::Ident(ident) if ident == "mod" => {
                if let (Some(TokenTree::Ident(_)), Some(TokenTree::Group(body))) =
                    (tokens.get(i + 1), tokens.get(i + 2))
                {
                    scan(body.stream(), depth + 1, found);
                    i += 3;
                    continue;
                }
            }
            TokenTree::Group(group) => scan(group.stream(), depth, found),
            _ => {}
        }
        i += 1;
    }
}

/// The first segment of each path in a brace group of a use tree: `{a::X, b, c::{self, D}}`.
fn first_segments(group: TokenStream) -> Vec<String> {
    let mut names = Vec::new();
    let mut at_start = true;
    for token in group {
        match token {
            TokenTree::Ident(ident) if at_start => {
                names.push(ident.to_string());
                at_start = false;
            }
            TokenTree::Punct(p) if p.as_char() == ',' => at_start = true,
            _ => at_start = false,
        }
    }
    names
}

/// A cycle of `graph`, as the modules along it with the first repeated at the end.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit<'a>(
        node: &'a str,
        graph: &'a Graph,
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
