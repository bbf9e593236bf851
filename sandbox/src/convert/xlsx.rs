//! XLSX to Markdown: one `## Sheet: <name>` section per worksheet, its used rows as a
//! Markdown table (the first row as the header). Cells are streamed (calamine's cell reader),
//! never laid out as a dense range: a sheet with one cell at A1 and one at XFD1048576 costs
//! two cells, not seventeen billion.

use std::io::Cursor;

use calamine::{DataRef, Reader, Xlsx};

use super::docx::table_cell;
use super::limits::{MAX_COLUMNS, MAX_SHEETS, Output};
use super::ooxml::Package;

/// Converts an XLSX workbook; the error is the reason it could not be.
pub(super) fn convert(bytes: &[u8]) -> Result<Output, String> {
    // calamine reads parts whole: inflate each once within the caps before it does.
    Package::open(bytes, "XLSX")?.check_all()?;
    let mut workbook = Xlsx::new(Cursor::new(bytes))
        .map_err(|error| format!("not a readable XLSX file: {error}"))?;
    let names = workbook.sheet_names();
    if names.is_empty() {
        return Err("the workbook has no sheets".to_owned());
    }
    let mut output = Output::new();
    for name in names.iter().take(MAX_SHEETS) {
        if !output.push(&format!("## Sheet: {}\n\n", table_cell(name))) {
            break;
        }
        let mut sheet = Sheet::default();
        let mut cells = workbook
            .worksheet_cells_reader(name)
            .map_err(|error| format!("sheet '{name}' is unreadable: {error}"))?;
        while let Some(cell) = cells
            .next_cell()
            .map_err(|error| format!("sheet '{name}' is unreadable: {error}"))?
        {
            let (row, column) = cell.get_position();
            if !sheet.cell(row, column, text_of(cell.get_value()), &mut output) {
                break;
            }
        }
        drop(cells);
        sheet.end(&mut output);
        if output.is_full() {
            break;
        }
    }
    if names.len() > MAX_SHEETS {
        output.left_out(format!("first {MAX_SHEETS} of {} sheets", names.len()));
        output.push(&format!(
            "[Only the first {MAX_SHEETS} of {} sheets are converted.]\n",
            names.len()
        ));
    }
    Ok(output)
}

/// The row being collected and what the table has written so far.
#[derive(Default)]
struct Sheet {
    row: Option<u32>,
    cells: Vec<String>,
    rows_written: usize,
    columns_cut: bool,
}

impl Sheet {
    /// Adds one cell (cells arrive row by row); returns `false` once the output is full.
    fn cell(&mut self, row: u32, column: u32, text: String, output: &mut Output) -> bool {
        if self.row != Some(row) {
            if !self.flush(output) {
                return false;
            }
            self.row = Some(row);
        }
        if text.is_empty() {
            return true;
        }
        let column = column as usize;
        if column >= MAX_COLUMNS {
            self.columns_cut = true;
            return true;
        }
        if self.cells.len() <= column {
            self.cells.resize(column + 1, String::new());
        }
        self.cells[column] = table_cell(&text);
        true
    }

    fn flush(&mut self, output: &mut Output) -> bool {
        if self.cells.is_empty() {
            return true;
        }
        let width = self.cells.len();
        let mut line = format!("| {} |\n", self.cells.join(" | "));
        if self.rows_written == 0 {
            line.push_str(&format!("|{}\n", " --- |".repeat(width)));
        }
        self.cells.clear();
        self.rows_written += 1;
        output.push(&line)
    }

    fn end(mut self, output: &mut Output) {
        self.flush(output);
        if self.rows_written == 0 {
            output.push("(empty sheet)\n");
        }
        if self.columns_cut {
            output.push(&format!(
                "\n[Columns past the first {MAX_COLUMNS} are left out.]\n"
            ));
        }
        output.push("\n");
    }
}

/// A cell's value as text; dates in ISO 8601 (the 1900 date system).
fn text_of(value: &DataRef<'_>) -> String {
    match value {
        DataRef::Int(number) => number.to_string(),
        DataRef::Float(number) => number.to_string(),
        DataRef::String(text) => text.clone(),
        DataRef::SharedString(text) => (*text).to_owned(),
        DataRef::Bool(flag) => flag.to_string(),
        DataRef::DateTime(date) if date.is_datetime() => {
            excel_date(date.as_f64()).unwrap_or_else(|| date.to_string())
        }
        DataRef::DateTime(date) => date.to_string(),
        DataRef::DateTimeIso(text) | DataRef::DurationIso(text) => text.clone(),
        DataRef::Error(error) => error.to_string(),
        DataRef::Empty => String::new(),
    }
}

/// An Excel serial date (days since 1899-12-30) as `2026-03-01` or `2026-03-01T12:30:00`.
fn excel_date(serial: f64) -> Option<String> {
    if !(0.0..3_000_000.0).contains(&serial) {
        return None;
    }
    let seconds = (serial * 86_400.0).round() as i64;
    let epoch = jiff::civil::date(1899, 12, 30).at(0, 0, 0, 0);
    let moment = epoch
        .checked_add(jiff::SignedDuration::from_secs(seconds))
        .ok()?;
    Some(if seconds % 86_400 == 0 {
        moment.date().to_string()
    } else {
        moment.to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn xlsx() -> Vec<u8> {
        let mut workbook = rust_xlsxwriter::Workbook::new();
        let sheet = workbook.add_worksheet();
        sheet.set_name("Sales").unwrap();
        sheet.write_string(0, 0, "Region").unwrap();
        sheet.write_string(0, 1, "Revenue").unwrap();
        sheet.write_string(1, 0, "North|East").unwrap();
        sheet.write_number(1, 1, 1250.5).unwrap();
        sheet.write_string(2, 0, "South").unwrap();
        sheet.write_number(2, 1, 980).unwrap();
        // Far apart cells stay cheap.
        sheet.write_string(1_048_575, 16_383, "corner").unwrap();
        let empty = workbook.add_worksheet();
        empty.set_name("Notes").unwrap();
        workbook.save_to_buffer().unwrap()
    }

    #[test]
    fn sheets_become_tables() {
        let (text, note) = convert(&xlsx()).unwrap().finish();
        assert!(
            text.starts_with(
                "## Sheet: Sales\n\n| Region | Revenue |\n| --- | --- |\n| North\\|East | 1250.5 |\n| South | 980 |\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("[Columns past the first 64 are left out.]"),
            "{text}"
        );
        assert!(
            text.contains("## Sheet: Notes\n\n(empty sheet)\n"),
            "{text}"
        );
        assert_eq!(note, None);
    }

    #[test]
    fn serial_dates_read_as_iso() {
        assert_eq!(excel_date(46082.0).as_deref(), Some("2026-03-01"));
        assert_eq!(excel_date(46082.5).as_deref(), Some("2026-03-01T12:00:00"));
        assert_eq!(excel_date(f64::NAN), None);
    }

    #[test]
    fn a_zip_that_is_not_a_workbook_is_refused() {
        let bytes = crate::convert::ooxml::tests::zip_of(&[("a.txt", b"a")]);
        let error = convert(&bytes).unwrap_err();
        assert!(error.starts_with("not a readable XLSX file"), "{error}");
    }
}
