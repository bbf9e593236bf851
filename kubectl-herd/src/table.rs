//! Tables as `kubectl get` prints them: a header, no borders, columns three spaces apart,
//! measured by display width (the tree's branches are one column each), no trailing spaces.

use comfy_table::{Table, presets};
use kube::ResourceExt;

/// The space between two columns.
const GAP: u16 = 3;

/// `header` and `rows` as a table, one line each.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut table = Table::new();
    table
        .load_style(presets::NOTHING)
        .set_header(header.to_vec());
    for row in rows {
        table.add_row(row.clone());
    }
    for column in table.column_iter_mut() {
        column.set_padding((0, GAP));
    }
    let mut out = String::new();
    for line in table.lines() {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A table's header: `NAMESPACE` first when the table lists every namespace (`-A`), then
/// `columns`.
pub fn namespaced_header(all_namespaces: bool, columns: &[&'static str]) -> Vec<&'static str> {
    let mut header = Vec::with_capacity(columns.len() + 1);
    if all_namespaces {
        header.push("NAMESPACE");
    }
    header.extend_from_slice(columns);
    header
}

/// The start of `object`'s row under [`namespaced_header`]: its namespace when the table lists
/// every namespace, else nothing.
pub fn namespaced_row(all_namespaces: bool, object: &impl ResourceExt) -> Vec<String> {
    if all_namespaces {
        vec![object.namespace().unwrap_or_default()]
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_by_display_width() {
        let rows = vec![
            vec!["notes".to_owned(), "Running".to_owned(), String::new()],
            vec![
                "└─ notes-a".to_owned(),
                "Succeeded".to_owned(),
                "1".to_owned(),
            ],
        ];
        assert_eq!(
            render(&["NAME", "STATUS", "N"], &rows),
            "NAME         STATUS      N\n\
             notes        Running\n\
             └─ notes-a   Succeeded   1\n"
        );
    }

    #[test]
    fn no_rows_is_the_header() {
        assert_eq!(render(&["NAME", "AGE"], &[]), "NAME   AGE\n");
    }
}
