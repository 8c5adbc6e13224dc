//! References resolve inside the repository: no source or document cites the documents the
//! project was first described in, and every pointer into `docs/` (a heading's anchor, a design
//! section's `§` number, a Markdown link) names something that exists, so a clone can follow
//! each one.
//!
//! The scan reads every text file of the workspace except build output and installed packages.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Directories that hold no text of the project's own.
const SKIPPED_DIRS: &[&str] = &[".git", "target", "node_modules"];

/// Citations of documents that are not in the repository. Each is written in two pieces so that
/// this file does not cite them itself.
const OUTSIDE: &[[&str; 2]] =
    &[["PROTOCOL", ".md"], ["DESIGN", ".md"], ["// PROTOCOL", ":"], ["the spec", "'s"], ["../", "shared/"]];

#[test]
fn no_file_cites_a_document_outside_the_repository() {
    let outside: Vec<String> = OUTSIDE.iter().map(|pieces| pieces.concat()).collect();
    let files = text_files();
    let mut found = Vec::new();
    for (path, text) in &files {
        for (n, line) in text.lines().enumerate() {
            if let Some(cited) = outside.iter().find(|c| line.contains(c.as_str())) {
                found.push(format!("{}:{}: cites `{cited}`: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(files.len() > 100, "only {} text files were read, so the tree was not walked", files.len());
    assert!(
        found.is_empty(),
        "point into docs/protocol.md or docs/design.md instead, or say it in place:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_pointer_into_the_documents_names_what_exists() {
    let root = workspace();
    let protocol = anchors(&read(&root.join("docs/protocol.md")));
    let design = design_sections(&read(&root.join("docs/design.md")));
    assert!(protocol.contains("post-syncpull") && design.contains(&14), "the documents' headings were not read");
    let mut broken = Vec::new();
    for (path, text) in text_files() {
        let markdown = path.extension().is_some_and(|e| e == "md");
        let own_anchors = if markdown { anchors(&text) } else { BTreeSet::new() };
        for (n, line) in text.lines().enumerate() {
            let mut problems = Vec::new();
            let cited = after(line, "docs/protocol.md#").map(|rest| head(rest, |c| c.is_alphanumeric() || c == '-'));
            for anchor in cited.filter(|a| !a.is_empty()) {
                if !protocol.contains(anchor) {
                    problems.push(format!("no heading of docs/protocol.md has the anchor `{anchor}`"));
                }
            }
            for section in section_numbers(line) {
                if !design.contains(&section) {
                    problems.push(format!("docs/design.md has no §{section}"));
                }
            }
            if markdown {
                for target in after(line, "](").map(|rest| head(rest, |c| c != ')')) {
                    if let Some(problem) = broken_link(&path, target, &own_anchors) {
                        problems.push(problem);
                    }
                }
            }
            broken.extend(problems.into_iter().map(|p| format!("{}:{}: {p}", path.display(), n + 1)));
        }
    }
    assert!(broken.is_empty(), "pointers that lead nowhere:\n{}", broken.join("\n"));
}

#[test]
fn anchors_are_those_github_gives_headings() {
    let headings = "# engine — design decisions\n## POST /sync/pull\n### Mutation ids in a pull\n\
                    ```text\n# not a heading\n```\n## 14. Defaults\n";
    let expected = ["engine--design-decisions", "post-syncpull", "mutation-ids-in-a-pull", "14-defaults"];
    assert_eq!(anchors(headings), expected.into_iter().map(str::to_owned).collect());
    assert_eq!(section_numbers("(`docs/design.md` §1–3, §7) and §14; § alone"), vec![1, 2, 3, 7, 14]);
}

/// Every file under the workspace that reads as UTF-8, by its path from the workspace root.
fn text_files() -> Vec<(PathBuf, String)> {
    let root = workspace();
    let mut files = Vec::new();
    let mut folders = vec![root.clone()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if path.is_dir() {
                if !SKIPPED_DIRS.contains(&name) {
                    folders.push(path);
                }
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                files.push((path.strip_prefix(&root).unwrap().to_owned(), text));
            }
        }
    }
    files.sort();
    files
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().unwrap()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The anchors of a Markdown document's headings, outside code blocks, as GitHub makes them:
/// lowercase, punctuation dropped, each space a hyphen.
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut in_code = false;
    let mut anchors = BTreeSet::new();
    for line in markdown.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            let title = line.trim_start_matches('#');
            if title.starts_with(' ') {
                let kept =
                    title.trim().to_lowercase().replace(|c: char| !c.is_alphanumeric() && !"-_ ".contains(c), "");
                anchors.insert(kept.replace(' ', "-"));
            }
        }
    }
    anchors
}

/// The numbers of the design document's sections (`## 4. Write authorization`).
fn design_sections(markdown: &str) -> BTreeSet<u32> {
    markdown.lines().filter_map(|line| line.strip_prefix("## ")?.split_once(". ")?.0.parse().ok()).collect()
}

/// The design sections a line names: `§4`, and every section of a range `§4–7`.
fn section_numbers(line: &str) -> Vec<u32> {
    let mut sections = Vec::new();
    for rest in after(line, "§") {
        let Ok(first) = head(rest, |c| c.is_ascii_digit()).parse::<u32>() else { continue };
        let last = rest
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .strip_prefix('–')
            .and_then(|range| head(range, |c| c.is_ascii_digit()).parse().ok())
            .unwrap_or(first);
        sections.extend(first..=last);
    }
    sections
}

/// What a Markdown link in `file` to `target` fails to reach, if anything: a file of the
/// repository, and the heading its anchor names.
fn broken_link(file: &Path, target: &str, own_anchors: &BTreeSet<String>) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let anchors = if path.is_empty() {
        own_anchors.clone()
    } else {
        let linked = workspace().join(file.parent().unwrap()).join(path);
        if !linked.exists() {
            return Some(format!("the link `{target}` names no file of the repository"));
        }
        match anchor.is_empty() {
            true => return None,
            false => anchors(&read(&linked)),
        }
    };
    (!anchor.is_empty() && !anchors.contains(anchor)).then(|| format!("the link `{target}` names no heading"))
}

/// The text after each occurrence of `marker` in `line`.
fn after<'a>(line: &'a str, marker: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    line.match_indices(marker).map(move |(at, _)| &line[at + marker.len()..])
}

/// The longest start of `text` whose characters all satisfy `keep`.
fn head(text: &str, keep: impl Fn(char) -> bool) -> &str {
    &text[..text.find(|c| !keep(c)).unwrap_or(text.len())]
}
