//! Every sentence `servesim explain` can say, as a pattern, with the check that makes it true
//! of the run it describes: the numbers it shows are the run's (to their displayed precision),
//! the arithmetic it shows holds for the numbers shown, and its words (below, above, negative,
//! empty, far below…) fit the numbers. A sentence that matches no pattern fails the check.

use regex::{Captures, Regex};
use servesim::analysis::{Constraint, NoWindow, Regime, Window};
use servesim::metrics::StopReason;
use servesim::report::summary::{Observation, Summary};

/// A duration as `explain` prints it (`450 ms`, `7.4 s`, `3,120 s (52 min)`, `−37 s`).
const DUR: &str = r"(−?[\d,]+(?:\.\d+)? (?:s|ms)(?: \([\d.]+ (?:min|h)\))?)";
const NUM: &str = r"(−?[\d,]+(?:\.\d+)?)";

/// A number as displayed, and half a unit of its last digit.
fn num(s: &str) -> (f64, f64) {
    let t = s.replace(',', "").replace('−', "-");
    let decimals = t.split_once('.').map_or(0, |(_, d)| d.len());
    (t.parse().unwrap(), 0.5 * 10f64.powi(-(decimals as i32)))
}

/// A displayed duration in seconds, and half a unit of its last digit.
fn dur(s: &str) -> (f64, f64) {
    let s = s.split(" (").next().unwrap();
    let (n, unit) = s.rsplit_once(' ').unwrap();
    let (x, tol) = num(n);
    match unit {
        "ms" => (x / 1e3, tol / 1e3),
        "s" => (x, tol),
        _ => panic!("unit {unit}"),
    }
}

fn close(what: &str, shown: (f64, f64), truth: f64) {
    let (x, tol) = shown;
    assert!(
        (x - truth).abs() <= tol * 1.0001 + 1e-9 * truth.abs(),
        "{what}: shows {x} (±{tol}), the run has {truth}"
    );
}

/// `a` and `b` shown, `a ⊕ b` claimed: within what their rounding allows (relative `rel`).
fn holds(what: &str, claimed: (f64, f64), computed: f64, slack: f64) {
    assert!(
        (claimed.0 - computed).abs() <= claimed.1 + slack,
        "{what}: claims {} but the shown numbers give {computed}",
        claimed.0
    );
}

/// The sentences of a Markdown `explain`, paragraph by paragraph (headings and commands kept
/// apart).
pub fn sentences(md: &str) -> (Vec<String>, Vec<String>, Vec<String>) {
    let (mut out, mut headings, mut commands) = (Vec::new(), Vec::new(), Vec::new());
    let mut in_code = false;
    for line in md.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            commands.push(line.to_string());
        } else if line.starts_with('#') {
            headings.push(line.trim_start_matches('#').trim().to_string());
        } else if !line.trim().is_empty() {
            let chars: Vec<char> = line.chars().collect();
            let mut start = 0;
            for i in 0..chars.len() {
                let end_here = (chars[i] == '.'
                    || (chars[i] == ')' && i > 0 && chars[i - 1] == '.'))
                    && (i + 1 == chars.len()
                        || (chars[i + 1] == ' '
                            && chars
                                .get(i + 2)
                                .is_some_and(|c| c.is_uppercase() || *c == '(')));
                if end_here {
                    out.push(
                        chars[start..=i]
                            .iter()
                            .collect::<String>()
                            .trim()
                            .to_string(),
                    );
                    start = i + 1;
                }
            }
            let rest: String = chars[start..].iter().collect();
            assert!(
                rest.trim().is_empty(),
                "a sentence without its full stop: {rest}"
            );
        }
    }
    (out, headings, commands)
}

/// Checks every sentence of one run's explanation.
pub struct Check<'a> {
    /// The run's summary (with its analysis).
    pub s: &'a Summary,
    /// The observation the last sentence spoke of.
    obs: Option<&'a Observation>,
    forms: Vec<(Regex, Form<'a>)>,
    /// How many sentences each form matched.
    pub matched: Vec<usize>,
}

type Form<'a> = fn(&mut Check<'a>, &Captures);

impl<'a> Check<'a> {
    /// A checker for this run.
    pub fn new(s: &'a Summary) -> Self {
        let forms: Vec<(&str, Form<'a>)> = vec![
            (
                r"^At t = DUR the server logs (\d+) tok/s with (\d+) requests running and (\d+) queued \((?:token usage|KV cache usage) ([\d.]+)\)\.$",
                Check::view_server,
            ),
            (
                r"^At t = DUR the server has (\d+) requests running and (\d+) queued \((?:token usage|KV cache usage) ([\d.]+)\) and has logged no decode throughput yet\.$",
                Check::view_server_idle,
            ),
            (
                r"^The client's progress line — completions since the start ÷ time since the start — shows ([\d.]+) req/s; counting only the last DUR it is ([\d.]+) req/s\.$",
                Check::view_client,
            ),
            (
                r"^The steady state — completions per second once the start-up is over and before the last requests drain — is ([\d.]+) req/s (?:\(95 % interval ([\d.]+)–([\d.]+)\)|\(no interval: the window is too short\)), or (\d+) output tok/s\.$",
                Check::steady_rate,
            ),
            (r"^Take it as a rough figure: (.*)\.$", Check::rough),
            (
                r"^What the prefix cache bought: ([\d,]+) of the ([\d,]+) prompt tokens \((\d+) %\) were found cached when their requests were first admitted, and ([\d,]+) of ([\d,]+) requests hit\.$",
                Check::cache_bought,
            ),
            (
                r"^Those tokens needed no prefill and no new KV: shorter prefill steps, a lower time to first token, and room in the pool for more requests at once\.$",
                Check::cache_on,
            ),
            (
                r"^The cache evicted ([\d,]+) tokens to make room\.$",
                Check::cache_evicted,
            ),
            (
                r"^Without the cache every prompt is prefilled whole: to compare, vary (\S+) in a sweep\.$",
                Check::cache_sweep,
            ),
            (
                r"^The requests share prompt prefixes but the engine's prefix cache is off: each of the ([\d,]+) prompt tokens was prefilled and held once per request\.$",
                Check::cache_off,
            ),
            (
                r"^To see what the cache would save, vary (\S+) in a sweep\.$",
                Check::cache_sweep,
            ),
            (
                r"^So at t = DUR the lifetime figure is (\d+) % of the steady rate — (far below it|about half of it|below it|within 5 % of it|above it)\.$",
                Check::ratio,
            ),
            (
                r"^At t = 0 the client sent NUM requests at once \((its concurrency limit|every request of the run)\)\.$",
                Check::fired,
            ),
            (
                r"^Requests arrived from t = 0 on, ([\d.]+) req/s in the steady window\.$",
                Check::arrived,
            ),
            (r"^The first response arrived at t = DUR\.$", Check::first),
            (
                r"^In the steady window the server's (\d+) tok/s were shared by ([\d.]+) running requests on average, so each advanced at about ([\d.]+) tok/s while running: a response of the mean NUM tokens needs about DUR of running\.$",
                Check::shared,
            ),
            (
                r"^Measure the start-up by its deficit d = t − completed ÷ rate: how far the completions lag behind what the steady rate would have delivered\.$",
                Check::nothing,
            ),
            (
                r"^At t = DUR the client had NUM responses where ([\d.]+) req/s × DUR = NUM were due: d = DUR(.*)\.$",
                Check::deficit,
            ),
            (
                r"^After a deficit of d seconds the lifetime average can only reach 1 − d/T of the steady rate at time T: 1 − DUR/DUR = (\d+) % — what the progress line shows\.$",
                Check::lag,
            ),
            (
                r"^The lifetime average is 1 − d/T = 1 \+ DUR/DUR = (\d+) % of the steady rate, and falls towards it as T grows\.$",
                Check::lead,
            ),
            (
                r"^By the end of the steady window, at t = DUR, the start-up had left a deficit of d = DUR( \(negative: the lifetime average runs ahead\))?; the lifetime average is within 5 % of the steady rate once \|d\|/T ≤ 5 %, i\.e\. after about 20 × \|d\| = DUR\.$",
                Check::convergence,
            ),
            (
                r"^In this run it stays within 5 % from t = DUR on \(measured\)\.$",
                Check::converged,
            ),
            (
                r"^In this run it is not within 5 % of the steady rate when the drain begins at t = DUR\.$",
                Check::not_converged,
            ),
            (
                r"^Requests in flight = throughput × time in flight\.$",
                Check::nothing,
            ),
            (
                r"^In the steady window the client kept L = ([\d.]+) requests in flight and the requests completed in it took W = DUR each on average from send to last token, so L / W = ([\d.]+) req/s — the measured rate is ([\d.]+) req/s\.$",
                Check::little,
            ),
            (
                r"^The requests sent in the steady window waited DUR on average for their first token — DUR of it in the server's queue — and took DUR more to their last token\.$",
                Check::steady_latency,
            ),
            (
                r"^That is more than the DUR a request spends running \(([\d.]+) running ÷ ([\d.]+) req/s, Little's law on the batch\): over the run NUM (?:retractions?|preemptions?) sent a running request back to wait in the queue again\.$",
                Check::requeued,
            ),
            (
                r"^Once generating, they took DUR per token on average \(TPOT\); half of all gaps between successive tokens were at most DUR and 1 % were longer than DUR \(ITL\)\.$",
                Check::tpot_itl,
            ),
            (
                r"^There is no steady state: requests arrive at ([\d.]+) req/s but the server completes only ([\d.]+) req/s(?: \(95 % interval ([\d.]+)–([\d.]+)\))?, so the backlog of requests waiting for an answer grows by ([\d.]+) every second, and every wait grows with the run\.$",
                Check::overloaded,
            ),
            (
                r"^Requests arrive at ([\d.]+) req/s and the server completes ([\d.]+) req/s: the backlog of requests sent and not answered grew from NUM to NUM between t = DUR and t = DUR, ([\d.]+) per second\.$",
                Check::backlog,
            ),
            (
                r"^First come, first served, each request waits behind the backlog ahead of it, and each second that passes adds about ([\d.]+) s to the wait of a request arriving then: the longer the run, the longer the waits — this run's median TTFT of DUR says how long it lasted, not how fast the server is\.$",
                Check::waits,
            ),
            (
                r"^Little's law relates averages that do not settle here: L = ([\d.]+) requests in flight, W = DUR each, L / W = ([\d.]+) req/s, (close to the arrival rate, not the completion rate|close to the completion rate|neither the arrival rate nor the completion rate)\.$",
                Check::little_overloaded,
            ),
            (
                r"^What the server sustains at this workload is its completion rate, about ([\d.]+) req/s: keep the arrival rate below it for a steady state\.$",
                Check::sustains,
            ),
            (
                r"^There is no steady state: all NUM requests were sent before the first response came back(?: at t = DUR)?( \(the client's concurrency, (\d+), is not below the number of requests\))?, so no client slot was ever refilled — the run is one batch, and its makespan, the time to its last response, is DUR\.$",
                Check::one_batch,
            ),
            (
                r"^There is no steady state: the start-up — the NUM requests sent before the first response — (?:was never 99 % answered|was not 99 % answered until t = DUR), and the client sent its last request at t = DUR: no stretch of the run is past the start-up and before the drain\.$",
                Check::until_drain,
            ),
            (
                r"^Over the run the server had ([\d.]+) requests running and ([\d.]+) queued on average, and the last response came at t = DUR: NUM requests in that makespan is ([\d.]+) req/s and (\d+) output tok/s\.$",
                Check::makespan,
            ),
            (
                r"^Per request: TTFT median DUR and p99 DUR; end to end median DUR and p99 DUR; TPOT median DUR\.$",
                Check::per_request,
            ),
            (
                r"^A steady rate needs (more requests than the client's concurrency, so that slots are refilled as responses come back|a run long enough for the start-up to clear before the drain)\.$",
                Check::needs,
            ),
            (
                r"^Requests waited in the server's queue (\d+) % of (the steady window|the window|the run), yet only ([\d.]+) ran on average — (far below|below) the slot limit of NUM — with (?:token usage|KV cache usage) at ([\d.]+)\.$",
                Check::kv_bound,
            ),
            (
                r"^Over the run, admission stopped NUM times because the next request did not fit in the KV budget(?:, and running requests were (?:retracted|preempted) (once|NUM times) when they outgrew it)?\.$",
                Check::memory_stops,
            ),
            (
                r"^\((\w+) admits a request only if the free KV, minus a reservation for the running requests' future tokens, also holds the new request's prompt and clipped max_new_tokens(: memory binds before the pool is full)?\.\)$",
                Check::admits,
            ),
            (
                r"^\(vLLM admits a waiting request only if the free blocks hold its whole known sequence, with scheduler_reserve_full_isl, and when a running request cannot get a block it preempts the newest running one, which later recomputes its prompt and outputs, less the blocks it finds still cached with prefix caching on\.\)$",
                Check::admits_vllm,
            ),
            (
                r"^Requests waited in the server's queue (\d+) % of (the steady window|the window|the run) while ([\d.]+) ran on average, at the slot limit (?:max_running_requests|max_num_seqs) = NUM \((?:token usage|KV cache usage) ([\d.]+); over the run, admission stopped at the limit NUM times\)\.$",
                Check::slot_bound,
            ),
            (
                r"^The server's queue was empty (\d+) % of (the steady window|the window|the run) and (?:token usage|KV cache usage) averaged ([\d.]+): the server admits what it gets\.$",
                Check::queue_empty,
            ),
            (
                r"^The client kept ([\d.]+) requests in flight against its limit of (\d+), so the batch is as large as the client lets it be\.$",
                Check::client_bound,
            ),
            (
                r"^The server's queue was empty (\d+) % of (the steady window|the window|the run) and (?:token usage|KV cache usage) averaged ([\d.]+); the client (?:was below its limit of (\d+)|has no concurrency limit) \(([\d.]+) in flight\)\.$",
                Check::step_bound,
            ),
            (
                r"^The batch \(([\d.]+) running on average\) is the arrival rate times the time each request spends in service — which the step time sets\.$",
                Check::step_batch,
            ),
            (
                r#"^At t = DUR, ([\d.]+) req/s × NUM tokens = (\d+) "effective" tok/s, against the server's (\d+) tok/s in its latest log line\.$"#,
                Check::effective,
            ),
            (
                r"^By then the server had generated NUM tokens, (\d+) tok/s on average since the start: (\d+) % of them belong to requests not finished yet, which a completion count cannot see, and the NUM responses finished by then averaged NUM tokens, not NUM\.$",
                Check::generated,
            ),
            (
                r#"^So the "effective" figure (undercounts the work done so far|overcounts the work done so far: the first responses to finish are the short ones)\.$"#,
                Check::verdict,
            ),
            (
                r#"^At t = DUR, no response had come back: the "effective" figure \(req/s × mean tokens\) is 0, while the server had generated NUM tokens — all of them for requests not finished yet\.$"#,
                Check::none_back,
            ),
            (
                r"^A mean also hides the spread: responses had a median of NUM tokens and a p99 of NUM\.$",
                Check::spread,
            ),
            (
                r"^After the client sent its last request at t = DUR, the run took another DUR to drain\.$",
                Check::drain,
            ),
            (
                r"^Not all of the client's latency is the server's: NUM ms of every time to first token is spent off the GPU \(a network round trip of NUM ms, NUM ms of HTTP handling and tokenizer, NUM ms to stream a token\), and each later token reaches the client NUM ms after the one before it on top of the engine's step — NUM s of each response on average\.$",
                Check::off_gpu,
            ),
            (
                r"^Over the run the engine itself sees DUR to the first token and DUR to the last on average\.$",
                Check::engine_latency,
            ),
            (
                r"^(The server is overloaded|Run enough requests|The KV budget binds|The slot limit binds|The client's concurrency binds|The server keeps up)(.*)\.$",
                Check::why,
            ),
        ];
        let forms: Vec<(Regex, Form<'a>)> = forms
            .into_iter()
            .map(|(p, f)| {
                (
                    Regex::new(&p.replace("DUR", DUR).replace("NUM", NUM)).unwrap(),
                    f,
                )
            })
            .collect();
        let n = forms.len();
        Check {
            s,
            obs: None,
            forms,
            matched: vec![0; n],
        }
    }

    /// Check one sentence.
    pub fn sentence(&mut self, text: &str) {
        let found = self.forms.iter().position(|(re, _)| re.is_match(text));
        let Some(i) = found else {
            panic!("a sentence no test knows: {text}")
        };
        let caps = self.forms[i].0.captures(text).unwrap();
        self.matched[i] += 1;
        (self.forms[i].1)(self, &caps);
    }

    fn window(&self) -> &'a Window {
        self.s.analysis.window.as_ref().expect("a window")
    }

    fn steady(&self) -> &'a Window {
        self.s.analysis.steady().expect("a steady state")
    }

    fn at(&mut self, t: &str) -> &'a Observation {
        let t = dur(t);
        let o = self
            .s
            .observations
            .iter()
            .chain(&self.s.first_minutes)
            .find(|o| (o.t_s - t.0).abs() <= t.1)
            .unwrap_or_else(|| panic!("no observation at t = {t:?}"));
        self.obs = Some(o);
        o
    }

    fn nothing(&mut self, _: &Captures) {}

    fn view_server(&mut self, c: &Captures) {
        let o = self.at(&c[1]);
        assert!(o.gen_tok_per_s > 0.0);
        close("gen tok/s", num(&c[2]), o.gen_tok_per_s);
        assert_eq!(
            (c[3].parse::<u64>().unwrap(), c[4].parse::<u64>().unwrap()),
            (o.running, o.queued)
        );
        close("usage", num(&c[5]), o.token_usage);
    }

    fn view_server_idle(&mut self, c: &Captures) {
        let o = self.at(&c[1]);
        assert_eq!(o.gen_tok_per_s, 0.0);
        assert_eq!(
            (c[2].parse::<u64>().unwrap(), c[3].parse::<u64>().unwrap()),
            (o.running, o.queued)
        );
        close("usage", num(&c[4]), o.token_usage);
    }

    fn view_client(&mut self, c: &Captures) {
        let o = self.obs.expect("after the server's view");
        close("lifetime", num(&c[1]), o.lifetime_req_per_s);
        close("window", dur(&c[2]), self.s.client.window_s.min(o.t_s));
        close("windowed", num(&c[3]), o.window_req_per_s);
    }

    fn steady_rate(&mut self, c: &Captures) {
        let w = self.steady().clone();
        close("steady rate", num(&c[1]), w.span.req_per_s);
        match (c.get(2), w.ci95()) {
            (Some(lo), Some([l, h])) => {
                close("ci low", num(lo.as_str()), l);
                close("ci high", num(&c[3]), h);
                assert!(l <= w.span.req_per_s && w.span.req_per_s <= h);
            }
            (None, None) => {}
            other => panic!("interval shown and computed disagree: {other:?}"),
        }
        close("output tok/s", num(&c[4]), w.span.output_tok_per_s);
    }

    fn cache(&self) -> &'a servesim::report::summary::PrefixCacheOut {
        self.s
            .prefix_cache
            .as_ref()
            .expect("a workload that shares prefixes")
    }

    fn cache_bought(&mut self, c: &Captures) {
        let p = self.cache();
        let n = |i: usize| c[i].replace(',', "").parse::<u64>().unwrap();
        assert!(p.enabled);
        assert_eq!(
            (n(1), n(2), n(4), n(5)),
            (p.cached_tokens, p.prompt_tokens, p.hit_requests, p.requests)
        );
        assert_eq!(n(3), (100.0 * p.token_hit_rate).round() as u64);
    }

    fn cache_on(&mut self, _: &Captures) {
        assert!(self.cache().enabled && self.cache().cached_tokens > 0);
    }

    fn cache_evicted(&mut self, c: &Captures) {
        let n = c[1].replace(',', "").parse::<u64>().unwrap();
        assert_eq!(n, self.cache().evicted_tokens);
    }

    fn cache_sweep(&mut self, c: &Captures) {
        assert_eq!(&c[1], self.s.words.prefix_cache_sweep);
    }

    fn cache_off(&mut self, c: &Captures) {
        let n = c[1].replace(',', "").parse::<u64>().unwrap();
        assert!(!self.cache().enabled);
        assert_eq!(n, self.cache().prompt_tokens);
    }

    fn rough(&mut self, c: &Captures) {
        assert!(matches!(
            self.s.analysis.regime,
            Regime::Steady {
                reliable: false,
                ..
            }
        ));
        assert_eq!(Some(&c[1]), self.s.steady_state.reason.as_deref());
    }

    fn ratio(&mut self, c: &Captures) {
        let o = self.at(&c[1]);
        let r = o.lifetime_req_per_s / self.steady().span.req_per_s;
        close("ratio %", num(&c[2]), 100.0 * r);
        let words = if r < 0.35 {
            "far below it"
        } else if r < 0.65 {
            "about half of it"
        } else if r < 0.95 {
            "below it"
        } else if r <= 1.05 {
            "within 5 % of it"
        } else {
            "above it"
        };
        assert_eq!(&c[3], words, "ratio {r}");
    }

    fn fired(&mut self, c: &Captures) {
        assert_eq!(self.s.client.mode, "closed");
        let conc = u64::from(self.s.client.concurrency.unwrap());
        let n = conc.min(self.s.workload.requests);
        close("fired", num(&c[1]), n as f64);
        let all = &c[2] == "every request of the run";
        assert_eq!(all, n < conc);
    }

    fn arrived(&mut self, c: &Captures) {
        assert_ne!(self.s.client.mode, "closed");
        close("arrivals", num(&c[1]), self.window().span.arrival_req_per_s);
    }

    fn first(&mut self, c: &Captures) {
        close(
            "first response",
            dur(&c[1]),
            self.s.first_completion_s.unwrap(),
        );
    }

    fn shared(&mut self, c: &Captures) {
        let st = &self.steady().span;
        let (tok, run, each) = (num(&c[1]), num(&c[2]), num(&c[3]));
        close("tok/s", tok, st.output_tok_per_s);
        close("running", run, st.mean_running);
        let rel = (tok.1 / tok.0 + run.1 / run.0) * each.0;
        holds("tok/s ÷ running", each, tok.0 / run.0, rel);
        let (mean, t) = (num(&c[4]), dur(&c[5]));
        close("mean output", mean, self.s.workload.mean_output_tokens);
        holds(
            "mean ÷ each",
            t,
            mean.0 / each.0,
            t.0 * (each.1 / each.0 + mean.1 / mean.0),
        );
    }

    fn deficit(&mut self, c: &Captures) {
        let o = self.at(&c[1]);
        let rate = self.steady().span.req_per_s;
        close("responses", num(&c[2]), o.completed as f64);
        close("rate", num(&c[3]), rate);
        let (r, t, due) = (num(&c[3]), dur(&c[4]), num(&c[5]));
        holds("due", due, r.0 * t.0, r.1 * t.0 + r.0 * t.1);
        let d = o.t_s - o.completed as f64 / rate;
        close("d", dur(&c[6]), d);
        let tail = &c[7];
        if (d / o.t_s).abs() <= 0.05 {
            let re = Regex::new(r"^, (\d+) % of t, so the lifetime average is already within 5 % of the steady rate \((\d+) % of it\)$").unwrap();
            let k = re
                .captures(tail)
                .unwrap_or_else(|| panic!("small d told as {tail}"));
            close("|d|/t", num(&k[1]), 100.0 * (d / o.t_s).abs());
            close("lifetime share", num(&k[2]), 100.0 * (1.0 - d / o.t_s));
        } else if d > 0.0 {
            assert_eq!(tail, "", "positive d");
        } else {
            let re = Regex::new(&format!(r"^, negative — the start-up ran ahead of the steady rate(?:, because short responses finish first: the {NUM} finished by then averaged {NUM} tokens, against {NUM} over the run)?$")).unwrap();
            let k = re
                .captures(tail)
                .unwrap_or_else(|| panic!("negative d told as {tail}"));
            if let Some(n) = k.get(1) {
                close("finished", num(n.as_str()), o.completed as f64);
                close("their mean", num(&k[2]), o.completed_mean_output_tokens);
                close("run mean", num(&k[3]), self.s.workload.mean_output_tokens);
                assert!(o.completed_mean_output_tokens < self.s.workload.mean_output_tokens);
            }
        }
    }

    fn lag(&mut self, c: &Captures) {
        let o = self.obs.unwrap();
        let (d, t, p) = (dur(&c[1]), dur(&c[2]), num(&c[3]));
        assert!(d.0 > 0.0);
        let shown = 100.0 * (1.0 - d.0 / t.0);
        holds(
            "1 − d/T",
            p,
            shown,
            100.0 * (d.1 / t.0 + d.0 * t.1 / t.0 / t.0),
        );
        close(
            "= lifetime ÷ steady",
            p,
            100.0 * o.lifetime_req_per_s / self.steady().span.req_per_s,
        );
    }

    fn lead(&mut self, c: &Captures) {
        let o = self.obs.unwrap();
        let (d, t, p) = (dur(&c[1]), dur(&c[2]), num(&c[3]));
        let shown = 100.0 * (1.0 + d.0 / t.0);
        holds(
            "1 + |d|/T",
            p,
            shown,
            100.0 * (d.1 / t.0 + d.0 * t.1 / t.0 / t.0),
        );
        close(
            "= lifetime ÷ steady",
            p,
            100.0 * o.lifetime_req_per_s / self.steady().span.req_per_s,
        );
        assert!(p.0 > 100.0);
    }

    fn convergence(&mut self, c: &Captures) {
        let conv = self.s.analysis.convergence.as_ref().unwrap();
        close("end", dur(&c[1]), self.steady().span.end_s);
        close("d", dur(&c[2]), conv.deficit_s);
        assert_eq!(c.get(3).is_some(), conv.deficit_s < 0.0);
        let (d, est) = (dur(&c[2]), dur(&c[4]));
        holds("20 × |d|", est, 20.0 * d.0.abs(), 20.0 * d.1);
    }

    fn converged(&mut self, c: &Captures) {
        let at = self
            .s
            .analysis
            .convergence
            .as_ref()
            .unwrap()
            .lifetime_within_5pct_at_s;
        close("measured", dur(&c[1]), at.unwrap());
    }

    fn not_converged(&mut self, c: &Captures) {
        let conv = self.s.analysis.convergence.as_ref().unwrap();
        assert!(conv.lifetime_within_5pct_at_s.is_none());
        close("drain", dur(&c[1]), self.steady().span.end_s);
    }

    fn little(&mut self, c: &Captures) {
        let st = &self.steady().span;
        close("L", num(&c[1]), st.little_l_requests);
        close("W", dur(&c[2]), st.little_w_s);
        close("L/W", num(&c[3]), st.little_law_req_per_s);
        close("rate", num(&c[4]), st.req_per_s);
        let (l, w, z) = (num(&c[1]), dur(&c[2]), num(&c[3]));
        holds("L ÷ W", z, l.0 / w.0, z.0 * (l.1 / l.0 + w.1 / w.0));
    }

    fn off_gpu(&mut self, c: &Captures) {
        let o = self
            .s
            .overhead
            .as_ref()
            .expect("a run with off-GPU overheads");
        close("TTFT added", num(&c[1]), o.ttft_added_ms);
        close("round trip", num(&c[2]), o.network_rtt_ms);
        close("request overhead", num(&c[3]), o.request_overhead_ms);
        close("per token", num(&c[4]), o.per_token_overhead_ms);
        close("per token", num(&c[5]), o.per_token_overhead_ms);
        close("E2E added", num(&c[6]), o.e2e_added_ms_mean / 1e3);
        // What every TTFT gains: the round trip, the request overhead and one token's way.
        let (ttft, rtt, req, tok) = (num(&c[1]), num(&c[2]), num(&c[3]), num(&c[4]));
        holds(
            "rtt + request + token",
            ttft,
            rtt.0 + req.0 + tok.0,
            rtt.1 + req.1 + tok.1,
        );
    }

    fn engine_latency(&mut self, c: &Captures) {
        let o = self
            .s
            .overhead
            .as_ref()
            .expect("a run with off-GPU overheads");
        close("engine TTFT", dur(&c[1]), o.engine_ttft_ms.mean / 1e3);
        close("engine E2E", dur(&c[2]), o.engine_e2e_ms.mean / 1e3);
        // The client's latencies are the engine's plus what the overheads add.
        let l = &self.s.latency;
        assert!(
            (l.ttft_ms.mean - o.engine_ttft_ms.mean - o.ttft_added_ms).abs()
                < 1e-6 * l.ttft_ms.mean.max(1.0)
        );
    }

    fn steady_latency(&mut self, c: &Captures) {
        let l = &self.s.steady_latency.as_ref().unwrap().latency;
        let (ttft, queue, after) = (dur(&c[1]), dur(&c[2]), dur(&c[3]));
        close("TTFT", ttft, l.ttft_ms.mean / 1e3);
        close("queue", queue, l.queue_ms.mean / 1e3);
        close("after", after, (l.e2e_ms.mean - l.ttft_ms.mean) / 1e3);
        assert!(queue.0 <= ttft.0 + ttft.1, "queue time is part of TTFT");
    }

    fn requeued(&mut self, c: &Captures) {
        let st = &self.steady().span;
        let l = &self.s.steady_latency.as_ref().unwrap().latency;
        let running = st.mean_running / st.req_per_s;
        close("running time", dur(&c[1]), running);
        close("running", num(&c[2]), st.mean_running);
        close("rate", num(&c[3]), st.req_per_s);
        assert!((l.e2e_ms.mean - l.ttft_ms.mean) / 1e3 > 1.1 * running);
        close(
            "retractions",
            num(&c[4]),
            self.s.analysis.binding.retractions as f64,
        );
        assert!(self.s.analysis.binding.retractions > 0);
    }

    fn tpot_itl(&mut self, c: &Captures) {
        let l = &self.s.steady_latency.as_ref().unwrap().latency;
        close("TPOT", dur(&c[1]), l.tpot_ms.mean / 1e3);
        close("ITL p50", dur(&c[2]), l.itl_ms.p50 / 1e3);
        close("ITL p99", dur(&c[3]), l.itl_ms.p99 / 1e3);
    }

    fn overload(&self) -> &'a servesim::analysis::Overload {
        match &self.s.analysis.regime {
            Regime::Overloaded(o) => o,
            r => panic!("an overload sentence for a {r:?} run"),
        }
    }

    fn overloaded(&mut self, c: &Captures) {
        let o = self.overload();
        close("arrivals", num(&c[1]), o.arrival_req_per_s);
        close("served", num(&c[2]), o.served_req_per_s);
        if let Some(lo) = c.get(3) {
            let [l, h] = o.served_req_per_s_ci95.unwrap();
            close("ci low", num(lo.as_str()), l);
            close("ci high", num(&c[4]), h);
        }
        close("growth", num(&c[5]), o.backlog_growth_req_per_s);
        assert!(o.arrival_req_per_s > o.served_req_per_s);
    }

    fn backlog(&mut self, c: &Captures) {
        let o = self.overload();
        close("arrivals", num(&c[1]), o.arrival_req_per_s);
        close("served", num(&c[2]), o.served_req_per_s);
        close("from", num(&c[3]), o.backlog_start as f64);
        close("to", num(&c[4]), o.backlog_end as f64);
        close("start", dur(&c[5]), o.window_start_s);
        close("end", dur(&c[6]), o.window_end_s);
        close("growth", num(&c[7]), o.backlog_growth_req_per_s);
    }

    fn waits(&mut self, c: &Captures) {
        let o = self.overload();
        close("wait growth", num(&c[1]), o.wait_growth_s_per_s);
        close("TTFT p50", dur(&c[2]), self.s.latency.ttft_ms.p50 / 1e3);
    }

    fn little_overloaded(&mut self, c: &Captures) {
        let (o, st) = (self.overload(), &self.window().span);
        close("L", num(&c[1]), st.little_l_requests);
        close("W", dur(&c[2]), st.little_w_s);
        close("L/W", num(&c[3]), st.little_law_req_per_s);
        let z = st.little_law_req_per_s;
        let near = |x: f64| (z / x - 1.0).abs() <= 0.1;
        let which = if near(o.arrival_req_per_s) {
            "close to the arrival rate, not the completion rate"
        } else if near(o.served_req_per_s) {
            "close to the completion rate"
        } else {
            "neither the arrival rate nor the completion rate"
        };
        assert_eq!(&c[4], which);
    }

    fn sustains(&mut self, c: &Captures) {
        close("served", num(&c[1]), self.overload().served_req_per_s);
    }

    fn one_batch(&mut self, c: &Captures) {
        let Regime::NoSteadyWindow(NoWindow::OneBatch { requests, .. }) = self.s.analysis.regime
        else {
            panic!("one batch told of another regime")
        };
        close("requests", num(&c[1]), requests as f64);
        assert!(self.s.last_send_s.unwrap() <= self.s.first_completion_s.unwrap());
        if let Some(t) = c.get(2) {
            close(
                "first response",
                dur(t.as_str()),
                self.s.first_completion_s.unwrap(),
            );
        }
        if let Some(conc) = c.get(4) {
            assert!(conc.as_str().parse::<u64>().unwrap() >= requests);
        }
        close("makespan", dur(&c[5]), self.s.totals.totals.sim_duration_s);
    }

    fn until_drain(&mut self, _: &Captures) {
        assert!(matches!(
            self.s.analysis.regime,
            Regime::NoSteadyWindow(NoWindow::StartUpUntilDrain { .. })
        ));
    }

    fn makespan(&mut self, c: &Captures) {
        let t = &self.s.totals.totals;
        close("running", num(&c[1]), self.s.server.mean_running);
        close("queued", num(&c[2]), self.s.server.mean_queued);
        close("makespan", dur(&c[3]), t.sim_duration_s);
        close("completed", num(&c[4]), t.requests_completed as f64);
        close(
            "req/s",
            num(&c[5]),
            t.requests_completed as f64 / t.sim_duration_s,
        );
        close(
            "tok/s",
            num(&c[6]),
            t.output_tokens as f64 / t.sim_duration_s,
        );
    }

    fn per_request(&mut self, c: &Captures) {
        let l = &self.s.latency;
        for (i, v) in [
            l.ttft_ms.p50,
            l.ttft_ms.p99,
            l.e2e_ms.p50,
            l.e2e_ms.p99,
            l.tpot_ms.p50,
        ]
        .into_iter()
        .enumerate()
        {
            close("latency", dur(&c[i + 1]), v / 1e3);
        }
    }

    fn needs(&mut self, c: &Captures) {
        let one = matches!(
            self.s.analysis.regime,
            Regime::NoSteadyWindow(NoWindow::OneBatch { .. })
        );
        assert_eq!(c[1].starts_with("more requests"), one);
    }

    fn over(&self, c: &str) {
        let expected = match self.s.analysis.binding.measured_over {
            "steady window" => "the steady window",
            "overloaded window" => "the window",
            _ => "the run",
        };
        assert_eq!(c, expected);
    }

    fn kv_bound(&mut self, c: &Captures) {
        let b = &self.s.analysis.binding;
        assert_eq!(b.constraint, Constraint::KvBudget);
        close("busy", num(&c[1]), 100.0 * b.queue_busy_fraction);
        self.over(&c[2]);
        close("running", num(&c[3]), b.mean_running);
        let far = b.mean_running < 0.5 * b.max_running_requests as f64;
        assert_eq!(&c[4] == "far below", far);
        close("slots", num(&c[5]), b.max_running_requests as f64);
        close("usage", num(&c[6]), b.mean_token_usage);
    }

    fn memory_stops(&mut self, c: &Captures) {
        let b = &self.s.analysis.binding;
        close("stops", num(&c[1]), b.memory_stops as f64);
        match (c.get(2).map(|m| m.as_str()), c.get(3)) {
            (Some("once"), _) => assert_eq!(b.retractions, 1),
            (Some(_), Some(n)) => close("retractions", num(n.as_str()), b.retractions as f64),
            _ => assert_eq!(b.retractions, 0),
        }
    }

    fn admits(&mut self, c: &Captures) {
        assert_eq!(&c[1], self.s.words.engine);
        assert_eq!(
            c.get(2).is_some(),
            self.s.analysis.binding.mean_token_usage < 0.95
        );
    }

    fn admits_vllm(&mut self, _: &Captures) {
        assert_eq!(self.s.words.engine, "vLLM");
        assert_eq!(self.s.analysis.binding.constraint, Constraint::KvBudget);
    }

    fn slot_bound(&mut self, c: &Captures) {
        let b = &self.s.analysis.binding;
        assert_eq!(b.constraint, Constraint::MaxRunningRequests);
        close("busy", num(&c[1]), 100.0 * b.queue_busy_fraction);
        self.over(&c[2]);
        close("running", num(&c[3]), b.mean_running);
        assert!(b.mean_running >= 0.95 * b.max_running_requests as f64);
        close("slots", num(&c[4]), b.max_running_requests as f64);
        close("usage", num(&c[5]), b.mean_token_usage);
        close("stops", num(&c[6]), b.slot_stops as f64);
    }

    fn queue_empty(&mut self, c: &Captures) {
        let b = &self.s.analysis.binding;
        assert_eq!(b.constraint, Constraint::ClientConcurrency);
        close("empty", num(&c[1]), 100.0 * (1.0 - b.queue_busy_fraction));
        self.over(&c[2]);
        close("usage", num(&c[3]), b.mean_token_usage);
    }

    fn client_bound(&mut self, c: &Captures) {
        let b = &self.s.analysis.binding;
        close("in flight", num(&c[1]), b.mean_in_flight);
        assert_eq!(c[2].parse::<u64>().ok(), b.client_concurrency);
        assert!(b.mean_in_flight >= 0.95 * b.client_concurrency.unwrap() as f64);
    }

    fn step_bound(&mut self, c: &Captures) {
        let b = &self.s.analysis.binding;
        assert_eq!(b.constraint, Constraint::StepTime);
        close("empty", num(&c[1]), 100.0 * (1.0 - b.queue_busy_fraction));
        self.over(&c[2]);
        close("usage", num(&c[3]), b.mean_token_usage);
        assert_eq!(
            c.get(4).and_then(|x| x.as_str().parse().ok()),
            b.client_concurrency
        );
        close("in flight", num(&c[5]), b.mean_in_flight);
    }

    fn step_batch(&mut self, c: &Captures) {
        close("running", num(&c[1]), self.s.analysis.binding.mean_running);
    }

    fn effective(&mut self, c: &Captures) {
        let o = self.at(&c[1]);
        close("lifetime", num(&c[2]), o.lifetime_req_per_s);
        close("mean", num(&c[3]), self.s.workload.mean_output_tokens);
        close("effective", num(&c[4]), o.effective_tok_per_s);
        close("server", num(&c[5]), o.gen_tok_per_s);
        let (r, m, e) = (num(&c[2]), num(&c[3]), num(&c[4]));
        holds("req/s × tokens", e, r.0 * m.0, r.1 * m.0 + r.0 * m.1);
    }

    fn generated(&mut self, c: &Captures) {
        let o = self.obs.unwrap();
        close("generated", num(&c[1]), o.generated_tokens as f64);
        close("average", num(&c[2]), o.generated_tokens as f64 / o.t_s);
        close("in progress", num(&c[3]), 100.0 * o.in_progress_token_share);
        close("finished", num(&c[4]), o.completed as f64);
        close("their mean", num(&c[5]), o.completed_mean_output_tokens);
        close("run mean", num(&c[6]), self.s.workload.mean_output_tokens);
    }

    fn verdict(&mut self, c: &Captures) {
        let o = self.obs.unwrap();
        let under = o.effective_tok_per_s < o.generated_tokens as f64 / o.t_s;
        assert_eq!(c[1].starts_with("undercounts"), under);
        if !under {
            assert!(o.completed_mean_output_tokens < self.s.workload.mean_output_tokens);
        }
    }

    fn none_back(&mut self, c: &Captures) {
        let o = self.at(&c[1]);
        assert_eq!(o.completed, 0);
        close("generated", num(&c[2]), o.generated_tokens as f64);
    }

    fn spread(&mut self, c: &Captures) {
        let ot = &self.s.workload.output_tokens_stats;
        close("median", num(&c[1]), ot.p50);
        close("p99", num(&c[2]), ot.p99);
    }

    fn drain(&mut self, c: &Captures) {
        assert_eq!(self.s.totals.stop_reason, StopReason::AllAnswered);
        let last = self.s.last_send_s.unwrap();
        close("last send", dur(&c[1]), last);
        close(
            "drain",
            dur(&c[2]),
            self.s.totals.totals.sim_duration_s - last,
        );
    }

    fn why(&mut self, c: &Captures) {
        let a = &self.s.analysis;
        let expected = match (&a.regime, a.binding.constraint) {
            (Regime::Overloaded(_), _) => "The server is overloaded",
            (Regime::NoSteadyWindow(_), _) => "Run enough requests",
            (_, Constraint::KvBudget) => "The KV budget binds",
            (_, Constraint::MaxRunningRequests) => "The slot limit binds",
            (_, Constraint::ClientConcurrency) => "The client's concurrency binds",
            (_, Constraint::StepTime) => "The server keeps up",
        };
        assert_eq!(&c[1], expected);
    }
}
