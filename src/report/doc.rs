//! A document in one of three formats: headings, paragraphs and commands, written as plain
//! text for a terminal, Markdown, or an HTML fragment (for the handout).

use std::fmt::Write;

/// Output format of a document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Plain text for a terminal.
    Text,
    /// Markdown.
    Markdown,
    /// An HTML fragment (the body of [`crate::report::handout`]'s page).
    Html,
}

/// A document being written.
pub(crate) struct Doc {
    /// What has been written.
    pub out: String,
    /// In which format.
    pub fmt: Format,
}

/// `text` with `&`, `<`, `>` and quotes escaped for HTML.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

impl Doc {
    /// An empty document.
    pub fn new(fmt: Format) -> Self {
        Doc {
            out: String::new(),
            fmt,
        }
    }

    /// The document's title.
    pub fn title(&mut self, title: &str) {
        let _ = match self.fmt {
            Format::Text => writeln!(self.out, "{title}"),
            Format::Markdown => writeln!(self.out, "# {title}"),
            Format::Html => writeln!(self.out, "<h1>{}</h1>", escape_html(title)),
        };
    }

    /// Section `n`.
    pub fn heading(&mut self, n: usize, title: &str) {
        let _ = match self.fmt {
            Format::Text => writeln!(self.out, "\n{n}. {title}"),
            Format::Markdown => writeln!(self.out, "\n## {n}. {title}\n"),
            Format::Html => writeln!(self.out, "<h2>{n}. {}</h2>", escape_html(title)),
        };
    }

    /// A paragraph, wrapped at 96 columns in text (Markdown and HTML are left unwrapped).
    pub fn para(&mut self, text: &str) {
        match self.fmt {
            Format::Markdown => {
                let _ = writeln!(self.out, "{text}\n");
            }
            Format::Html => {
                let _ = writeln!(self.out, "<p>{}</p>", escape_html(text));
            }
            Format::Text => {
                let mut line = String::from("  ");
                for word in text.split_whitespace() {
                    if line.len() + word.len() + 1 > 96 && !line.trim().is_empty() {
                        let _ = writeln!(self.out, "{}", line.trim_end());
                        line = String::from("  ");
                    }
                    line.push_str(word);
                    line.push(' ');
                }
                if !line.trim().is_empty() {
                    let _ = writeln!(self.out, "{}", line.trim_end());
                }
            }
        }
    }

    /// A shell command to try.
    pub fn command(&mut self, cmd: &str) {
        let _ = match self.fmt {
            Format::Text => writeln!(self.out, "    {cmd}"),
            Format::Markdown => writeln!(self.out, "```sh\n{cmd}\n```\n"),
            Format::Html => writeln!(self.out, "<pre><code>{}</code></pre>", escape_html(cmd)),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_escapes_what_markup_would_read() {
        assert_eq!(
            escape_html(r#"a < b & "c" > 'd'"#),
            "a &lt; b &amp; &quot;c&quot; &gt; &#39;d&#39;"
        );
        let mut d = Doc::new(Format::Html);
        d.title("T <1>");
        d.heading(2, "x & y");
        d.para("p");
        d.command("servesim run a.toml --set x=1");
        assert_eq!(
            d.out,
            "<h1>T &lt;1&gt;</h1>\n<h2>2. x &amp; y</h2>\n<p>p</p>\n\
             <pre><code>servesim run a.toml --set x=1</code></pre>\n"
        );
    }
}
