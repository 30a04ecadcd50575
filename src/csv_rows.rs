//! One way to write CSV: every file's rows are serde structs written through the `csv` crate.
//!
//! A row type's field names are its columns ([`header`]); a column with a fixed number of
//! decimals holds a [`Fixed`]; an empty cell is a `None`. The header is written first, also
//! when no row follows.

use std::io::Write;

use serde::{Serialize, Serializer};

/// A number written with `D` decimals (`format!("{:.D$}")`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Fixed<const D: usize>(pub f64);

impl<const D: usize> Serialize for Fixed<D> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{:.*}", D, self.0))
    }
}

/// The columns of a row type: its serde field names, in order (nested structs and sequences
/// are not allowed in a row whose header is derived this way).
pub fn header<R: Serialize + Default>() -> Vec<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.serialize(R::default())
        .expect("invariant: a row type serialises with its header");
    let bytes = w
        .into_inner()
        .expect("invariant: flushing memory cannot fail");
    let mut r = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(bytes.as_slice());
    r.records()
        .next()
        .and_then(Result::ok)
        .map(|h| h.iter().map(str::to_string).collect())
        .expect("invariant: a serialised row starts with its header")
}

/// A CSV writer into `out` that has written `header`; write rows with `serialize`.
pub fn writer<W: Write, H: AsRef<[u8]>>(out: W, header: &[H]) -> csv::Result<csv::Writer<W>> {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(out);
    w.write_record(header)?;
    Ok(w)
}

/// `header` then `rows`, as CSV bytes.
pub fn to_bytes<H: AsRef<[u8]>, R: Serialize>(
    header: &[H],
    rows: impl IntoIterator<Item = R>,
) -> Vec<u8> {
    let mut w = writer(Vec::new(), header).expect("invariant: writing to memory cannot fail");
    for r in rows {
        w.serialize(r)
            .expect("invariant: a row of plain fields serialises");
    }
    w.into_inner()
        .expect("invariant: flushing memory cannot fail")
}

/// Rows of one type under the header of their field names, as CSV bytes.
pub fn rows_to_bytes<R: Serialize + Default>(rows: impl IntoIterator<Item = R>) -> Vec<u8> {
    to_bytes(&header::<R>(), rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Serialize)]
    struct Row<'a> {
        name: &'a str,
        x_s: Fixed<3>,
        y: Option<Fixed<1>>,
        ok: bool,
    }

    #[test]
    fn fields_become_columns_and_fixed_numbers_keep_their_decimals() {
        let rows = [
            Row {
                name: "a,b",
                x_s: Fixed(1.0 / 3.0),
                y: Some(Fixed(2.26)),
                ok: true,
            },
            Row {
                name: "plain",
                x_s: Fixed(-1.5),
                y: None,
                ok: false,
            },
        ];
        let got = String::from_utf8(rows_to_bytes(rows)).unwrap();
        assert_eq!(
            got,
            "name,x_s,y,ok\n\"a,b\",0.333,2.3,true\nplain,-1.500,,false\n"
        );
    }

    #[test]
    fn the_header_is_written_without_rows() {
        let got = rows_to_bytes(Vec::<Row>::new());
        assert_eq!(got, b"name,x_s,y,ok\n");
    }
}
