//! The graph prior p_graph of constrained decoding (schema/gsr-decoding.md §4, DialogGSR eq. 4-6).
//!
//! The beam search scores an allowed token w as `alpha * lp(w) + (1 - alpha) * log p_graph(w)`
//! (`alpha` is the beam search's); this module gives `log p_graph(w)` over the allowed set A
//! of one step:
//!
//! - inside or at the end of an entity name, each candidate entity e still consistent with
//!   the tokens read gives its mass m(e) to the token its name continues with; an entity
//!   whose name ends here shares its mass equally among the distinct first tokens of the
//!   boundaries that continue one of its candidate paths. `mass(w)` is what w receives;
//!   - `proportional`: m(e) = S(e, M) + epsilon, p_graph(w) = mass(w) / sum of mass over A
//!     (epsilon keeps an entity with S = 0 reachable: a zero score is not a ban);
//!   - `softmax` (what the DialogGSR authors' code does): m(e) = S(e, M), p_graph(w) =
//!     exp(mass(w)) / sum over A of exp(mass);
//! - everywhere else (relation names, boundaries): uniform, 1 / |A| (log 0 when forced);
//! - `hard`: log p_graph = 0 for every allowed token (the constraint alone).
//!
//! S(e, M) is [`Informativeness`] with K = 1 (`connection`) or K = 2 (`katz`), beta and the
//! hub guard of [`KatzConfig`], M the mentioned entities; it is computed once per entity per
//! request.
//!
//! Start recency (`decoding.start_recency`, gamma; 0, the paper's prior, by default): at the
//! path's first entity, a mentioned entity mentioned `age` messages ago has its mass scaled
//! by exp(-gamma * age) (`proportional`; under `softmax`, gamma * age is subtracted from it,
//! the same factor on exp(mass)). The exponent is capped at [`MAX_RECENCY_PENALTY`], so an
//! old entity is made unlikely, never banned. Only the first entity: later ones are
//! neighbours, which have no age.

use crate::graph::informativeness::{Depth, Informativeness, KatzConfig};
use crate::ids::EntityId;
use crate::store::error::ReadError;
use crate::store::Store;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

/// How the decoder is constrained and scored (`decoding.prior` in trellis.json, `--prior`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum PriorMode {
    /// No constraint, no prior: sequences that do not parse as a path are dropped afterwards.
    None,
    /// The constraint alone: log p_graph = 0.
    Hard,
    /// S(e, M) with K = 1 (connection count).
    Connection,
    /// S(e, M) with K = 2 (the paper's Katz setting).
    #[default]
    Katz,
}

/// How entity masses become probabilities (`decoding.prior_norm`, `--prior-norm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PriorNorm {
    /// mass(w) / sum of masses, masses S(e, M) + epsilon (the paper's eq. 4).
    #[default]
    Proportional,
    /// softmax over the allowed tokens of their masses S(e, M) (the authors' code).
    Softmax,
}

crate::limits::named_choices!(PriorMode, "prior", { None => "none", Hard => "hard", Connection => "connection", Katz => "katz" });

crate::limits::named_choices!(PriorNorm, "prior normalization", { Proportional => "proportional", Softmax => "softmax" });

/// The prior of one request.
#[derive(Clone, Debug)]
pub struct PriorConfig {
    /// Which prior over the allowed tokens.
    pub mode: PriorMode,
    /// How the entity scores become a distribution.
    pub norm: PriorNorm,
    /// Added to S(e, M) under `proportional` (trellis.json `prior_epsilon`, 0.001).
    pub epsilon: f64,
    /// beta and the hub guard of S(e, M); its `k` is ignored (the mode decides it).
    pub katz: KatzConfig,
    /// gamma of the start recency (trellis.json `start_recency`, 0: off).
    pub start_recency: f64,
}

impl Default for PriorConfig {
    fn default() -> Self {
        PriorConfig { mode: PriorMode::Katz, norm: PriorNorm::Proportional, epsilon: 0.001, katz: KatzConfig::default(), start_recency: 0.0 }
    }
}

/// The largest exponent of the start recency's factor: e^-600 is still a positive f64 (and
/// far below any mass that matters), so no entity's mass becomes 0.
pub const MAX_RECENCY_PENALTY: f64 = 600.0;

/// A first entity's mass `m` under the start recency `gamma` for an entity mentioned `age`
/// messages ago (see the module documentation).
pub fn start_recency(norm: PriorNorm, gamma: f64, age: u32, m: f64) -> f64 {
    let penalty = (gamma * f64::from(age)).min(MAX_RECENCY_PENALTY);
    match norm {
        PriorNorm::Proportional => m * (-penalty).exp(),
        PriorNorm::Softmax => m - penalty,
    }
}

impl PriorConfig {
    /// A prior of `mode`, normalized by `norm`, `epsilon` added under `proportional`; the
    /// other settings the defaults.
    pub fn new(mode: PriorMode, norm: PriorNorm, epsilon: f64) -> PriorConfig {
        PriorConfig { mode, norm, epsilon, ..PriorConfig::default() }
    }

    /// K of S(e, M), `None` when the mode has no entity scores.
    pub fn depth(&self) -> Option<Depth> {
        match self.mode {
            PriorMode::Connection => Some(Depth::One),
            PriorMode::Katz => Some(Depth::Two),
            PriorMode::None | PriorMode::Hard => None,
        }
    }

    /// Entity positions get masses (connection, katz); otherwise every log p_graph is
    /// uniform (or 0 under `hard`).
    pub fn scores_entities(&self) -> bool {
        self.depth().is_some()
    }
}

/// m(e) for the entities of one request, each computed once.
pub struct EntityMass {
    cfg: PriorConfig,
    scorer: Option<Informativeness>,
    cache: HashMap<EntityId, f64>,
}

impl EntityMass {
    /// Reads the mentioned entities' neighbour lists (once) when the mode scores entities.
    pub fn new(store: Arc<Store>, mentioned: &[EntityId], cfg: PriorConfig) -> Result<EntityMass, ReadError> {
        let scorer = match cfg.depth() {
            Some(k) => {
                // M is a set: a repeated mention must not weigh twice in the mean.
                let mut m: Vec<EntityId> = Vec::with_capacity(mentioned.len());
                for &e in mentioned {
                    if !m.contains(&e) {
                        m.push(e);
                    }
                }
                Some(Informativeness::new(store, &m, KatzConfig { k, ..cfg.katz.clone() })?)
            }
            None => None,
        };
        Ok(EntityMass { cfg, scorer, cache: HashMap::new() })
    }

    /// m(e): S(e, M) + epsilon (proportional) or S(e, M) (softmax); 0 when the mode has no
    /// entity scores.
    pub fn mass(&mut self, e: EntityId) -> Result<f64, ReadError> {
        let Some(scorer) = self.scorer.as_mut() else { return Ok(0.0) };
        if let Some(&m) = self.cache.get(&e) {
            return Ok(m);
        }
        let s = scorer.score(e)?.value;
        let m = match self.cfg.norm {
            PriorNorm::Proportional => s + self.cfg.epsilon,
            PriorNorm::Softmax => s,
        };
        self.cache.insert(e, m);
        Ok(m)
    }
}

/// log p_graph of each token from its mass (same order as `masses`), written into `out`.
/// `proportional`: log(mass / total); a total of 0 (epsilon 0 and every S 0) gives the
/// uniform distribution rather than NaN. `softmax`: mass - logsumexp(masses).
pub fn log_p_from_masses(norm: PriorNorm, masses: &[f64], out: &mut Vec<f64>) {
    out.clear();
    match norm {
        PriorNorm::Proportional => {
            let total: f64 = masses.iter().sum();
            if total > 0.0 && total.is_finite() {
                out.extend(masses.iter().map(|&m| (m / total).ln()));
            } else {
                out.extend(masses.iter().map(|_| log_uniform(masses.len())));
            }
        }
        PriorNorm::Softmax => {
            let max = masses.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let lse = max + masses.iter().map(|&m| (m - max).exp()).sum::<f64>().ln();
            out.extend(masses.iter().map(|&m| m - lse));
        }
    }
}

/// log(1 / n): the uniform prior over n allowed tokens (0 for a forced token).
pub fn log_uniform(n: usize) -> f64 {
    -(n.max(1) as f64).ln()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn modes_and_norms_parse_as_trellis_json_writes_them() {
        assert_eq!("katz".parse::<PriorMode>().unwrap(), PriorMode::Katz);
        assert_eq!(serde_json::from_str::<PriorMode>("\"connection\"").unwrap(), PriorMode::Connection);
        assert_eq!(serde_json::from_str::<PriorNorm>("\"softmax\"").unwrap(), PriorNorm::Softmax);
        assert!("Katz".parse::<PriorMode>().is_err());
        assert_eq!(PriorConfig::new(PriorMode::Connection, PriorNorm::Proportional, 0.001).depth(), Some(Depth::One));
        assert_eq!(PriorConfig::new(PriorMode::Hard, PriorNorm::Proportional, 0.001).depth(), None);
    }

    #[test]
    fn worked_values() {
        // Proportional: masses 0.25 + 0.001 and 0.75 + 0.001 over a total of 1.002.
        let mut out = Vec::new();
        log_p_from_masses(PriorNorm::Proportional, &[0.251, 0.751], &mut out);
        assert!((out[0] - (0.251f64 / 1.002).ln()).abs() < 1e-15);
        assert!((out[1] - (0.751f64 / 1.002).ln()).abs() < 1e-15);
        // Softmax of (0, ln 3): 1/4 and 3/4.
        log_p_from_masses(PriorNorm::Softmax, &[0.0, 3f64.ln()], &mut out);
        assert!((out[0] - 0.25f64.ln()).abs() < 1e-15 && (out[1] - 0.75f64.ln()).abs() < 1e-15, "{out:?}");
        // All zero under proportional (epsilon 0): uniform, not NaN.
        log_p_from_masses(PriorNorm::Proportional, &[0.0, 0.0, 0.0, 0.0], &mut out);
        assert_eq!(out, vec![-(4f64.ln()); 4]);
        assert_eq!(log_uniform(1), 0.0);
    }

    proptest! {
        #[test]
        fn both_norms_give_distributions(masses in proptest::collection::vec(0.0f64..50.0, 1..40)) {
            for norm in [PriorNorm::Proportional, PriorNorm::Softmax] {
                let mut out = Vec::new();
                log_p_from_masses(norm, &masses, &mut out);
                let sum: f64 = out.iter().map(|l| l.exp()).sum();
                prop_assert!((sum - 1.0).abs() < 1e-9, "{norm:?} {sum}");
                // Order is kept: a larger mass never gets a smaller probability.
                for i in 0..masses.len() { for j in 0..masses.len() {
                    if masses[i] > masses[j] { prop_assert!(out[i] >= out[j]); }
                }}
            }
        }
    }
}
