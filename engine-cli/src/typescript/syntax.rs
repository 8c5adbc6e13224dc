//! TypeScript's text: names as property keys and member accesses, string literals, doc comments
//! wrapped to a width, and JSON values as literals that stay on one line while they fit.

use std::fmt::Write as _;

use serde_json::Value;

/// `text` ending with a full stop, unless empty.
pub(super) fn sentence(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() || text.ends_with(['.', '!', '?', ':']) { text.to_owned() } else { format!("{text}.") }
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// `name` as a property key: bare when it is an identifier, quoted otherwise.
pub(super) fn property(name: &str) -> String {
    if is_identifier(name) { name.to_owned() } else { string(name) }
}

/// `name` as a member access after a dot, or in brackets.
pub(super) fn access(name: &str) -> String {
    if is_identifier(name) { name.to_owned() } else { format!("[{}]", string(name)) }
}

/// A string literal (JSON's escapes are JavaScript's).
pub(super) fn string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// Widest line a doc comment is wrapped to.
const DOC_WIDTH: usize = 100;

/// A doc comment of `text` at `indent`, its lines wrapped; nothing for empty text.
pub(super) fn doc(out: &mut String, indent: &str, text: &str) {
    let text = text.trim().replace("*/", "*\\/");
    if text.is_empty() {
        return;
    }
    if !text.contains('\n') && indent.len() + text.len() + 7 <= DOC_WIDTH {
        writeln!(out, "{indent}/** {text} */").ok();
        return;
    }
    writeln!(out, "{indent}/**").ok();
    let room = DOC_WIDTH.saturating_sub(indent.len() + 3).max(40);
    for line in text.lines() {
        let mut current = String::new();
        for word in line.split_whitespace() {
            if !current.is_empty() && current.len() + 1 + word.len() > room {
                writeln!(out, "{indent} * {current}").ok();
                current.clear();
            }
            if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(word);
        }
        if current.is_empty() {
            writeln!(out, "{indent} *").ok();
        } else {
            writeln!(out, "{indent} * {current}").ok();
        }
    }
    writeln!(out, "{indent} */").ok();
}

/// Widest line a literal is kept on before it is spread over several lines.
const LINE_WIDTH: usize = 110;

/// `value` as a TypeScript literal at `indent`: keys bare where they can be, on one line when
/// it fits.
pub(super) fn literal(value: &Value, indent: &str) -> String {
    let inline = inline_literal(value);
    if indent.len() + inline.len() <= LINE_WIDTH || !matches!(value, Value::Object(_) | Value::Array(_)) {
        return inline;
    }
    let inner = format!("{indent}  ");
    let items: Vec<String> = match value {
        Value::Object(map) => {
            map.iter().map(|(k, v)| format!("{inner}{}: {},", property(k), literal(v, &inner))).collect()
        }
        Value::Array(items) => items.iter().map(|v| format!("{inner}{},", literal(v, &inner))).collect(),
        _ => unreachable!("scalars return inline above"),
    };
    let (open, close) = if value.is_object() { ('{', '}') } else { ('[', ']') };
    format!("{open}\n{}\n{indent}{close}", items.join("\n"))
}

fn inline_literal(value: &Value) -> String {
    match value {
        Value::Object(map) if map.is_empty() => "{}".to_owned(),
        Value::Object(map) => {
            let items: Vec<String> =
                map.iter().map(|(k, v)| format!("{}: {}", property(k), inline_literal(v))).collect();
            format!("{{ {} }}", items.join(", "))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(inline_literal).collect::<Vec<_>>().join(", ")),
        scalar => scalar.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn names_and_comments_are_written_safely() {
        assert_eq!(property("list_id"), "list_id");
        assert_eq!(property("2nd"), "\"2nd\"");
        assert_eq!(access("a-b"), "[\"a-b\"]");
        let mut out = String::new();
        doc(&mut out, "  ", "ends a comment */ here");
        assert_eq!(out, "  /** ends a comment *\\/ here */\n");
        let mut out = String::new();
        doc(&mut out, "", &"word ".repeat(30));
        assert_eq!(out, format!("/**\n * {}\n * {}\n */\n", ["word"; 19].join(" "), ["word"; 11].join(" ")));
    }

    #[test]
    fn literals_stay_on_one_line_until_they_are_too_wide() {
        assert_eq!(literal(&json!({"a": [1, 2], "b c": null}), ""), "{ a: [1, 2], \"b c\": null }");
        let wide = json!({"columns": vec!["a_rather_long_column_name"; 6]});
        let written = literal(&wide, "");
        assert!(written.starts_with("{\n  columns: [\n    \"a_rather_long_column_name\",\n"), "{written}");
    }
}
