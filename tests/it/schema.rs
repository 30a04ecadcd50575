//! The scenario keys, each declared beside the code that reads it (`src/scenario/schema.rs`
//! lists the sections): the README's key reference is generated from them, and every declared
//! example is accepted where its key applies.

use servesim::scenario::schema;
use servesim::scenario::{self as sc_mod, Source};
use servesim::settings::{Ty, When};
use servesim::workload::dist::LENGTHS;

use crate::root;

const BEGIN: &str = "<!-- scenario-keys:begin (generated from the key declarations) -->\n";
const END: &str = "<!-- scenario-keys:end -->";

/// `SERVESIM_BLESS=1 cargo test --test it schema` rewrites the README's reference.
#[test]
fn the_readme_key_reference_is_generated_from_the_schema() {
    let path = root().join("README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let start = readme.find(BEGIN).expect("README.md has the begin marker") + BEGIN.len();
    let stop = readme.find(END).expect("README.md has the end marker");
    let want = schema::readme();
    if readme[start..stop] == want {
        return;
    }
    if std::env::var("SERVESIM_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(
            &path,
            format!("{}{want}{}", &readme[..start], &readme[stop..]),
        )
        .unwrap();
        return;
    }
    panic!(
        "README.md's scenario key reference differs from the key declarations; \
         rewrite it with `SERVESIM_BLESS=1 cargo test --test it schema`. Expected between the markers:\n{want}"
    );
}

#[test]
fn every_distribution_parameter_is_declared() {
    for d in LENGTHS.variants {
        for p in d.required.iter().chain(d.optional) {
            assert!(LENGTHS.param(p).is_some(), "{}: {p}", d.name);
        }
    }
}

#[test]
fn every_key_is_declared_once() {
    let mut paths: Vec<&str> = schema::keys().map(|k| k.path).collect();
    let n = paths.len();
    paths.sort();
    paths.dedup();
    assert_eq!(paths.len(), n, "a key is declared twice");
    assert!(schema::key("workload.prompt_tokens.cv").is_some());
    assert!(schema::key("engine.no_such_key").is_none());
}

/// Each key's example, set on a scenario where the key applies, raises no problem about the
/// key's value (other keys may then disagree with it; that is not this test's business).
#[test]
fn every_example_is_accepted_where_its_key_applies() {
    let read = |p: &str| Source::read(&root().join(p)).unwrap();
    for key in schema::keys().filter(|k| !matches!(k.ty, Ty::Table)) {
        let (source, mut sets) = match key.when {
            When::Engine(["vllm"], _) => (read("tests/fixtures/vllm.toml"), vec![]),
            When::If(setting, values) => (
                read("scenarios/case-study-b2-roofline.toml"),
                vec![format!("{setting}=\"{}\"", values[0])],
            ),
            _ => (read("scenarios/case-study-b2.toml"), vec![]),
        };
        sets.push(format!("{}={}", key.path, key.example));
        let Err(e) = sc_mod::load(&source, &sets) else {
            continue;
        };
        for p in e.problems.iter().filter(|p| p.key_path == key.path) {
            let about_the_value = [
                "expected",
                "must",
                "unknown",
                "is a",
                "is an",
                "does not apply",
            ];
            assert!(
                !about_the_value.iter().any(|w| p.message.starts_with(w)),
                "{}: {}",
                key.path,
                e.problem_line(p)
            );
        }
    }
}

/// A key given for the other engine is refused, naming the engine the scenario has.
#[test]
fn a_key_for_the_other_engine_says_which_engine_it_belongs_to() {
    let source = Source::read(&root().join("tests/fixtures/vllm.toml")).unwrap();
    let e = sc_mod::load(&source, &["engine.page_size=16".into()]).unwrap_err();
    let lines: Vec<String> = e.problems.iter().map(|p| e.problem_line(p)).collect();
    assert_eq!(
        lines,
        [
            "override `engine.page_size=16`: engine.page_size = 16: is an SGLang setting; \
          this scenario's engine.kind is \"vllm\""
        ]
    );
}
