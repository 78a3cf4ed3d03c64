//! What a policy decides: a [`Plan`] for the gateway to execute, and, for a
//! cascade, the [`CascadeStep`] taken once the cheap answer is in.

use std::sync::Arc;
use std::time::Duration;

use crate::fleet::Device;
use crate::predict::EstimateBasis;
use crate::reason::Reason;

/// Shortest Retry-After a shed plan carries (HTTP's resolution is seconds).
pub const MIN_RETRY_AFTER: Duration = Duration::from_secs(1);
/// Longest Retry-After a shed plan carries.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Most fallback placements a plan carries.
pub const MAX_FALLBACKS: usize = 8;

/// One model on one pool, with the prediction that got it chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The model's name (`x-switchyard-model`), shared with the view it
    /// was chosen from.
    pub model: Arc<str>,
    /// The pool's name within the model.
    pub pool: Arc<str>,
    /// The pool's device (`x-switchyard-device`).
    pub device: Device,
    /// Predicted completion time from the moment of the decision.
    pub predicted: Duration,
    /// What the prediction is based on.
    pub basis: EstimateBasis,
}

/// A policy's decision for one request.
///
/// Every runnable plan carries `fallbacks`: placements to try, in order, when
/// the chosen one errors or turns out to be unavailable. They are the chosen
/// model's other pools first (in the device-choice order), then the next
/// usable candidate models, each with its pools; at most [`MAX_FALLBACKS`].
/// Fallbacks were ranked with the budget at decision time: the gateway should
/// re-decide instead when much time has passed.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// Run one placement.
    Single {
        /// Where to run.
        placement: Placement,
        /// What to try next on failure.
        fallbacks: Vec<Placement>,
        /// Why.
        reason: Reason,
    },
    /// Run the cheap model; when its confidence is below `threshold`, ask
    /// [`CascadePolicy::after_cheap`](crate::CascadePolicy::after_cheap)
    /// whether to run the heavy one.
    Cascade {
        /// The cheap model's placement.
        cheap: Placement,
        /// The heavy model's placement as predicted now; used as-is by
        /// parallel draft mode, re-decided by `after_cheap` otherwise.
        heavy: Placement,
        /// Confidence at or above which the cheap answer is final.
        threshold: f32,
        /// What to try next when the cheap placement fails.
        fallbacks: Vec<Placement>,
        /// Why.
        reason: Reason,
    },
    /// Do not run anything: answer 503 with `Retry-After`.
    Shed {
        /// When the client may usefully retry, in [`MIN_RETRY_AFTER`,
        /// `MAX_RETRY_AFTER`]; the gateway rounds up to whole seconds.
        retry_after: Duration,
        /// Why.
        reason: Reason,
    },
}

impl Plan {
    /// The plan's reason, for the `x-switchyard-reason` header.
    pub fn reason(&self) -> Reason {
        match self {
            Plan::Single { reason, .. } | Plan::Cascade { reason, .. } | Plan::Shed { reason, .. } => *reason,
        }
    }

    /// The first placement to run (the cheap one of a cascade); `None` when shed.
    pub fn primary(&self) -> Option<&Placement> {
        match self {
            Plan::Single { placement, .. } => Some(placement),
            Plan::Cascade { cheap, .. } => Some(cheap),
            Plan::Shed { .. } => None,
        }
    }

    /// The fallback placements; empty when shed.
    pub fn fallbacks(&self) -> &[Placement] {
        match self {
            Plan::Single { fallbacks, .. } | Plan::Cascade { fallbacks, .. } => fallbacks,
            Plan::Shed { .. } => &[],
        }
    }
}

/// What to do after a cascade's cheap model answered.
#[derive(Clone, Debug, PartialEq)]
pub enum CascadeStep {
    /// The cheap answer is confident enough: it is final
    /// ([`Reason::CascadeConfident`]).
    Accept(Reason),
    /// Run the heavy model on `placement` ([`Reason::CascadeEscalate`]).
    Escalate(Placement, Reason),
    /// The cheap answer is not confident but is final anyway, because the
    /// heavy model cannot fit the remaining budget
    /// ([`Reason::CascadeNoBudget`]) or has no usable pool
    /// ([`Reason::CascadeUnavailable`]).
    AcceptUnconfident(Reason),
}

impl CascadeStep {
    /// The step's reason, for the `x-switchyard-reason` header.
    pub fn reason(&self) -> Reason {
        match self {
            CascadeStep::Accept(reason)
            | CascadeStep::Escalate(_, reason)
            | CascadeStep::AcceptUnconfident(reason) => *reason,
        }
    }
}

/// A shed plan whose Retry-After is `drain` clamped to the allowed range.
pub(crate) fn shed(drain: Duration, reason: Reason) -> Plan {
    Plan::Shed { retry_after: drain.clamp(MIN_RETRY_AFTER, MAX_RETRY_AFTER), reason }
}
