//! `servesim explain --out DIR`'s handout: one self-contained HTML page — the explanation,
//! the run's figures inlined as base64 PNG data, and the scenario that ran — which opens
//! offline in any browser: it references no other file and no URL.

use std::fmt::Write;

use base64::Engine;

use super::doc::escape_html;

/// A figure of the handout.
#[derive(Clone, Debug)]
pub struct Figure {
    /// What it shows (its alt text and caption).
    pub caption: String,
    /// The PNG image.
    pub png: Vec<u8>,
}

/// What the handout shows.
#[derive(Clone, Debug)]
pub struct Handout<'a> {
    /// The page's title.
    pub title: &'a str,
    /// The explanation, an HTML fragment ([`super::doc::Format::Html`]).
    pub body_html: &'a str,
    /// The run's figures.
    pub figures: &'a [Figure],
    /// The scenario's name as given (a path, or the built-in's name).
    pub scenario_name: &'a str,
    /// Its TOML text.
    pub scenario_toml: &'a str,
    /// The `--set` overrides applied to it.
    pub sets: &'a [String],
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;\
padding:0 1rem;line-height:1.5;color:#222}h1{font-size:1.6rem}h2{font-size:1.2rem;\
margin-top:2rem}pre{background:#f4f4f4;padding:.6rem;overflow-x:auto}figure{margin:1.5rem 0}\
img{max-width:100%;height:auto;border:1px solid #ddd}figcaption{font-size:.9rem;color:#555}\
footer{margin-top:3rem;font-size:.8rem;color:#777}";

/// The page.
pub fn page(h: &Handout) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>",
        escape_html(h.title)
    );
    o.push_str(h.body_html);
    if !h.figures.is_empty() {
        let _ = writeln!(o, "<h2>Figures</h2>");
    }
    for f in h.figures {
        let data = base64::engine::general_purpose::STANDARD.encode(&f.png);
        let caption = escape_html(&f.caption);
        let _ = writeln!(
            o,
            "<figure><img src=\"data:image/png;base64,{data}\" alt=\"{caption}\">\
             <figcaption>{caption}</figcaption></figure>"
        );
    }
    let _ = writeln!(
        o,
        "<h2>The scenario</h2>\n<p>{}{}:</p>\n<pre><code>{}</code></pre>",
        escape_html(h.scenario_name),
        if h.sets.is_empty() {
            String::new()
        } else {
            format!(", with --set {}", escape_html(&h.sets.join(" --set ")))
        },
        escape_html(h.scenario_toml.trim_end())
    );
    let _ = writeln!(
        o,
        "</main>\n<footer>Written by servesim {}, a simulator of LLM serving; every number \
         above comes from the run it describes.</footer>\n</body>\n</html>",
        env!("CARGO_PKG_VERSION")
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_inlines_its_figures_and_escapes_the_scenario() {
        let figures = [Figure {
            caption: "a <b> figure".into(),
            png: vec![0x89, b'P', b'N', b'G'],
        }];
        let p = page(&Handout {
            title: "T",
            body_html: "<p>x</p>\n",
            figures: &figures,
            scenario_name: "s.toml",
            scenario_toml: "name = \"<s>\"\n",
            sets: &["a=1".into()],
        });
        assert!(p.starts_with("<!DOCTYPE html>"));
        assert!(
            p.contains("<img src=\"data:image/png;base64,iVBORw==\" alt=\"a &lt;b&gt; figure\">")
        );
        assert!(p.contains("<p>s.toml, with --set a=1:</p>"));
        assert!(p.contains("name = &quot;&lt;s&gt;&quot;"));
        assert!(p.ends_with("</html>\n"));
    }
}
