//! What provisioning would change, as a diff (`engine migrate --plan`,
//! `PostgresStorage::plan_changes`): `+` for what it would create, `~` for what it would replace
//! or rebuild, with the changed lines of a replaced function's body.

use engine_kernel::App;
use sqlx::PgPool;

use super::apply::{Kind, Standing, standing};
use super::catalog::{Catalog, function_body};
use super::locks::concurrently;
use super::{Object, fingerprint, steps};
use crate::error::Result;

/// What provisioning `app` would change, as a diff (`+` what it creates, `~` what it replaces or
/// rebuilds, with the lines of a replaced function's body); empty when the database is current.
pub(crate) async fn changes(pool: &PgPool, app: &App) -> Result<String> {
    let mut conn = pool.acquire().await?;
    let steps = steps(app);
    let fingerprint = fingerprint(&steps);
    let changes = match standing(&mut conn, app, &steps, &fingerprint).await? {
        (Standing::Current, _) => return Ok(String::new()),
        (Standing::Older, recorded) => return Ok(recorded.unwrap_or_default().older_plan_note()),
        (Standing::Changes(changes), _) => changes,
    };
    let catalog = Catalog::read(&mut conn, app).await?;
    let mut out = String::new();
    for change in changes {
        let step = &steps[change.step];
        let sql = if change.concurrent { concurrently(&step.sql) } else { step.sql.clone() };
        match (change.kind, &step.object) {
            (Kind::Replace, Object::Function { name }) => {
                out.push_str(&format!("~ function {name}\n"));
                let old = catalog.functions.get(name).map(String::as_str).unwrap_or_default();
                out.push_str(&line_diff(old, function_body(&sql).unwrap_or_default()));
            }
            (Kind::Replace, Object::Trigger { table, name }) => {
                out.push_str(&format!("~ trigger {name} on {table}\n"));
                out.push_str(&prefixed("+ ", &sql));
            }
            (Kind::Rebuild, Object::Index { name, .. }) => {
                out.push_str(&format!("~ index {name} (invalid: dropped and built again)\n"));
                out.push_str(&prefixed("+ ", &sql));
            }
            _ => out.push_str(&prefixed("+ ", &sql)),
        }
    }
    Ok(out)
}

fn prefixed(prefix: &str, text: &str) -> String {
    text.lines().map(|l| format!("{prefix}{l}\n")).collect()
}

/// The lines that differ between `old` and `new` (`- ` removed, `+ ` added), by their longest
/// common subsequence.
fn line_diff(old: &str, new: &str) -> String {
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    // common[i][j]: the longest common subsequence of old[i..] and new[j..].
    let mut common = vec![vec![0_usize; new.len() + 1]; old.len() + 1];
    for i in (0..old.len()).rev() {
        for j in (0..new.len()).rev() {
            common[i][j] =
                if old[i] == new[j] { common[i + 1][j + 1] + 1 } else { common[i + 1][j].max(common[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < old.len() || j < new.len() {
        if i < old.len() && j < new.len() && old[i] == new[j] {
            i += 1;
            j += 1;
        } else if j < new.len() && (i == old.len() || common[i][j + 1] >= common[i + 1][j]) {
            out.push_str(&format!("+ {}\n", new[j]));
            j += 1;
        } else {
            out.push_str(&format!("- {}\n", old[i]));
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::line_diff;

    #[test]
    fn a_line_diff_shows_only_the_changed_lines() {
        assert_eq!(line_diff("a\nb\nc\n", "a\nx\nb\nc\ny\n"), "+ x\n+ y\n");
        assert_eq!(line_diff("a\nb\nc", "a\nc"), "- b\n");
        assert_eq!(line_diff("same", "same"), "");
    }
}
