//! [`DecodeSteps`] answers the same from a model's line of floors, from the model's closed
//! forms and from the steps' ends.

use super::*;
use crate::cost::linear::{Linear, LinearStepTime};
use crate::cost::table::{PricedTable, StepTable};
use proptest::prelude::*;

/// A model without its line of floors: [`DecodeSteps`] asks it each time (the recorder's tests
/// use it too).
pub(crate) struct Unlined<'a>(pub(crate) &'a dyn StepTimeModel);

impl StepTimeModel for Unlined<'_> {
    fn decode(&self, batch: u64, kv_tokens: u64) -> SimDuration {
        self.0.decode(batch, kv_tokens)
    }
    fn prefill(&self, seqs: u64, extend_tokens: u64) -> SimDuration {
        self.0.prefill(seqs, extend_tokens)
    }
    fn mixed(&self, step: MixedStep) -> SimDuration {
        self.0.mixed(step)
    }
    fn decode_run(&self, batch: u64, kv_first: u64, steps: u64) -> SimDuration {
        self.0.decode_run(batch, kv_first, steps)
    }
    fn decode_run_within(
        &self,
        batch: u64,
        kv_first: u64,
        most: u64,
        budget: SimDuration,
    ) -> (u64, SimDuration) {
        self.0.decode_run_within(batch, kv_first, most, budget)
    }
    fn closed_form_runs(&self) -> bool {
        self.0.closed_form_runs()
    }
    fn decode_non_decreasing(&self, batch: u64) -> bool {
        self.0.decode_non_decreasing(batch)
    }
    fn describe(&self) -> String {
        self.0.describe()
    }
}

/// Every question about a run, asked of the three ways of knowing it.
fn same_answers(model: &dyn StepTimeModel, batch: u64, kv_first: u64, steps: u64) {
    let unlined = Unlined(model);
    let mut ends = Vec::new();
    let mut t = 0u64;
    for j in 0..steps {
        t = t.saturating_add(model.decode(batch, kv_first + batch * j).as_ns());
        ends.push(t);
    }
    let runs = [
        DecodeSteps::new(model, batch, kv_first, steps, &[]),
        DecodeSteps::new(&unlined, batch, kv_first, steps, &[]),
        DecodeSteps::new(model, batch, kv_first, steps, &ends),
    ];
    let at = format!("batch {batch}, kv {kv_first}, {steps} steps");
    let answers = |run: &DecodeSteps| {
        let mut a = Vec::new();
        for j in 0..steps {
            a.push(run.duration(j));
        }
        for n in 0..=steps {
            a.push(run.elapsed(n));
        }
        for &e in ends.iter().chain(&[0, u64::MAX]) {
            for t in [e.saturating_sub(1), e, e.saturating_add(1)] {
                a.push(run.ended_by(t));
            }
        }
        a
    };
    let expect = answers(&runs[2]);
    assert_eq!(answers(&runs[0]), expect, "the model's line: {at}");
    assert_eq!(answers(&runs[1]), expect, "the model's closed forms: {at}");
    assert_eq!(
        runs[0].with_total(t).elapsed(steps),
        t,
        "with its total: {at}"
    );
}

fn linear(kv_ps: u64, base: u64) -> Linear {
    Linear::new(LinearStepTime {
        decode_base_ns: base,
        decode_per_seq_ns: 800_000,
        decode_per_kv_token_ps: kv_ps,
        prefill_base_ns: 15_000_000,
        prefill_per_token_ps: 60_000_000,
    })
}

fn b2_table() -> PricedTable {
    PricedTable::new(StepTable {
        decode_batch: vec![1, 512],
        decode_kv_tokens: vec![0, 200_000],
        decode_ps: vec![
            12_800_000_000,
            24_800_000_000,
            421_600_000_000,
            433_600_000_000,
        ],
        prefill_tokens: vec![1, 16_384],
        prefill_ps: vec![15_060_000_000, 998_040_000_000],
        source: "inline".into(),
    })
}

#[test]
fn the_b2_runs() {
    let line = linear(60_000, 12_000_000);
    assert!(line.decode_floor_line(50, 100_000, 80).is_some());
    same_answers(&line, 50, 100_000, 80);
    let table = b2_table();
    assert!(table.decode_floor_line(50, 100_000, 80).is_some());
    same_answers(&table, 50, 100_000, 80);
    // A run across a table's KV point has no line: the model is asked.
    let three = PricedTable::new(StepTable {
        decode_batch: vec![1, 512],
        decode_kv_tokens: vec![0, 100_000, 200_000],
        decode_ps: vec![
            12_800_000_000,
            15_000_000_000,
            24_800_000_000,
            421_600_000_000,
            430_000_000_000,
            433_600_000_000,
        ],
        prefill_tokens: vec![1, 16_384],
        prefill_ps: vec![15_060_000_000, 998_040_000_000],
        source: "inline".into(),
    });
    assert!(three.decode_floor_line(50, 99_000, 80).is_none());
    assert!(three.decode_floor_line(50, 101_000, 80).is_some());
    same_answers(&three, 50, 99_000, 80);
}

proptest! {
    #[test]
    fn a_linear_run_is_answered_the_same_three_ways(
        kv_ps in prop_oneof![0u64..200_000, (0u64..200).prop_map(|x| x * 1000)],
        base in prop_oneof![Just(0u64), 0u64..40_000_000],
        batch in 1u64..600, kv_first in 0u64..2_000_000, steps in 0u64..60,
    ) {
        same_answers(&linear(kv_ps, base), batch, kv_first, steps);
    }

    #[test]
    fn a_table_run_is_answered_the_same_three_ways(
        batch in 1u64..700, kv_first in 0u64..400_000, steps in 0u64..60,
    ) {
        same_answers(&b2_table(), batch, kv_first, steps);
    }
}
