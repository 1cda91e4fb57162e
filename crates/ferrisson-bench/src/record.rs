//! The flat result records the harness prints and writes as JSON.

use serde::{Deserialize, Serialize};

/// One measured figure: `{"scenario", "variant", "library", "metric", "value", "unit"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub scenario: String,
    pub variant: String,
    pub library: String,
    pub metric: String,
    pub value: f64,
    pub unit: String,
}

/// Collects records as scenarios produce them.
#[derive(Debug, Default)]
pub struct Records(pub Vec<Record>);

impl Records {
    pub fn push(
        &mut self,
        scenario: &str,
        variant: &str,
        library: &str,
        metric: &str,
        value: f64,
        unit: &str,
    ) {
        self.0.push(Record {
            scenario: scenario.to_owned(),
            variant: variant.to_owned(),
            library: library.to_owned(),
            metric: metric.to_owned(),
            value,
            unit: unit.to_owned(),
        });
    }

    /// The value of one record, if measured.
    pub fn get(&self, scenario: &str, variant: &str, library: &str, metric: &str) -> Option<f64> {
        self.0
            .iter()
            .find(|r| {
                r.scenario == scenario
                    && r.variant == variant
                    && r.library == library
                    && r.metric == metric
            })
            .map(|r| r.value)
    }
}
