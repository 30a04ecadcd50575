//! What every reader of a user's file needs to point at a mistake: "did you mean" for a
//! misspelt name, and the line and column of a byte offset.
//!
//! Used by the scenario reader ([`crate::scenario`]), the catalog ([`crate::catalog`]) and the
//! readers of users' data files (lengths, traces, step-time tables); it imports nothing of the
//! crate.

/// The closest of `known` to `typed`, if it is close enough to be a typo (see [`closest`]).
pub fn did_you_mean<'k>(typed: &str, known: &[&'k str]) -> Option<&'k str> {
    closest(typed, known.iter().map(|k| (*k, *k)))
}

/// The value of the candidate whose key is closest to `typed`, if that key is close enough to
/// be a typo of it: a Damerau–Levenshtein distance of at most `max(2, key length / 4)` and less
/// than the key's length (so a one-letter key never "matches" everything). The first of equally
/// close candidates wins.
pub fn closest<K: AsRef<str>, T>(
    typed: &str,
    candidates: impl IntoIterator<Item = (K, T)>,
) -> Option<T> {
    candidates
        .into_iter()
        .filter_map(|(key, value)| {
            let key = key.as_ref();
            let d = strsim::damerau_levenshtein(typed, key);
            (d <= 2.max(key.len() / 4) && d < key.len()).then_some((d, value))
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, value)| value)
}

/// Line and column (both from 1, the column in characters) of byte offset `at` in `text`. An
/// offset past the end is read as the end; one inside a multi-byte character as that character.
/// For many offsets in one text, build [`Lines`] once.
pub fn line_col(text: &str, at: usize) -> (usize, usize) {
    Lines::new(text).line_col(at)
}

/// A text with the byte offsets of its line starts, so that each of many offsets is placed in
/// O(log lines + its line's length) — a file with many problems is not rescanned for each.
#[derive(Clone, Debug)]
pub struct Lines<'t> {
    text: &'t str,
    /// Byte offset where each line begins (the first is 0).
    starts: Vec<usize>,
}

impl<'t> Lines<'t> {
    /// Index the line starts of `text`.
    pub fn new(text: &'t str) -> Self {
        let after_newlines = text.match_indices('\n').map(|(i, _)| i + 1);
        let starts = std::iter::once(0).chain(after_newlines).collect();
        Lines { text, starts }
    }

    /// Line and column of byte offset `at`, as [`line_col`].
    pub fn line_col(&self, at: usize) -> (usize, usize) {
        let mut at = at.min(self.text.len());
        while !self.text.is_char_boundary(at) {
            at -= 1;
        }
        // The last line starting at or before `at`.
        let line = self.starts.partition_point(|&s| s <= at);
        let start = self.starts[line - 1];
        (line, self.text[start..at].chars().count() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_gets_the_closest_known_key() {
        let known = ["page_size", "max_prefill_tokens", "chunked_prefill_size"];
        assert_eq!(did_you_mean("page_sise", &known), Some("page_size"));
        assert_eq!(
            did_you_mean("max_prefil_tokens", &known),
            Some("max_prefill_tokens")
        );
        // Transposed letters count once (Damerau).
        assert_eq!(did_you_mean("pgae_size", &known), Some("page_size"));
        assert_eq!(did_you_mean("something_else", &known), None);
    }

    #[test]
    fn short_keys_need_a_close_spelling_and_ties_go_to_the_first() {
        // "ab" is at distance 2 from "xy", which equals its length: not a typo.
        assert_eq!(did_you_mean("ab", &["xy"]), None);
        // Long keys allow a quarter of their length: 3 edits on a 12-letter key.
        assert_eq!(
            did_you_mean("abcdefghiXYZ", &["abcdefghijkl"]),
            Some("abcdefghijkl")
        );
        assert_eq!(did_you_mean("abcdefghWXYZ", &["abcdefghijkl"]), None);
        assert_eq!(did_you_mean("h1000", &["h100", "h1001"]), Some("h100"));
        assert_eq!(did_you_mean("x", &[]), None);
    }

    #[test]
    fn closest_returns_the_value_of_the_best_key() {
        let candidates = [("h100-sxm", "h100"), ("a100-80gb", "a100-80gb")];
        assert_eq!(closest("h100-sxm4", candidates), Some("h100"));
        assert_eq!(closest("gpt-4", candidates), None);
    }

    #[test]
    fn line_and_column_count_from_one_in_characters() {
        let text = "ab\nμc = 1\n\nd";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 2), (1, 3), "the newline ends line 1");
        assert_eq!(line_col(text, 3), (2, 1));
        // "μ" is two bytes: "c" starts at byte 5 and is the second character of line 2.
        assert_eq!(line_col(text, 5), (2, 2));
        assert_eq!(line_col(text, 11), (3, 1), "an empty line");
        assert_eq!(line_col(text, 12), (4, 1));
    }

    #[test]
    fn offsets_past_the_end_or_inside_a_character_are_clamped() {
        let text = "ab\nμc";
        // Byte 4 is inside "μ" (bytes 3–4): read as the start of "μ".
        assert_eq!(line_col(text, 4), (2, 1));
        assert_eq!(line_col(text, 6), (2, 3), "the end");
        assert_eq!(line_col(text, 600), (2, 3));
        assert_eq!(line_col("", 5), (1, 1));
    }

    #[test]
    fn the_index_places_every_offset_as_a_scan_from_the_start_does() {
        let text = "a = 1\n\nμμ = \"x\"\n[t]\n  k = 2\n";
        let lines = Lines::new(text);
        for at in 0..=text.len() + 2 {
            let mut b = at.min(text.len());
            while !text.is_char_boundary(b) {
                b -= 1;
            }
            let before = &text[..b];
            let line = before.matches('\n').count() + 1;
            let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            assert_eq!(lines.line_col(at), (line, col), "offset {at}");
        }
    }
}
