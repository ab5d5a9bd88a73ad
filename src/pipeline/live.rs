//! Handles that follow their store: a long-lived retriever or pipeline that moves to the
//! newest generation between requests, by a stated policy.

use super::{Pipeline, PipelineError};
use crate::retrieve::{RetrieveError, Retriever};
use std::sync::{Arc, RwLock};

/// When a [`Live`] handle moves to the newest generation of its store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RefreshPolicy {
    /// Only when asked ([`Live::refresh`]).
    #[default]
    Manual,
    /// Before every request: one small file read (`CURRENT`) per request, and a rebuild of
    /// the handle on the new generation (models and sessions kept) when a write committed.
    Auto,
}

crate::limits::named_choices!(RefreshPolicy, "refresh policy", { Manual => "manual", Auto => "auto" });

/// A handle that can be rebuilt on the newest generation of its store.
pub trait Refreshable: Sized + Send + Sync {
    /// Its error.
    type Error;
    /// Whether its store generation is the newest committed one.
    fn is_current(&self) -> Result<bool, Self::Error>;
    /// The same handle on the newest generation (`None`: it reads the newest).
    fn refreshed(&self) -> Result<Option<Self>, Self::Error>;
}

impl Refreshable for Retriever {
    type Error = RetrieveError;
    fn is_current(&self) -> Result<bool, RetrieveError> {
        Ok(self.store().is_current()?)
    }
    fn refreshed(&self) -> Result<Option<Retriever>, RetrieveError> {
        Retriever::refreshed(self)
    }
}

impl Refreshable for Pipeline {
    type Error = PipelineError;
    fn is_current(&self) -> Result<bool, PipelineError> {
        Ok(self.retriever().store().is_current().map_err(RetrieveError::from)?)
    }
    fn refreshed(&self) -> Result<Option<Pipeline>, PipelineError> {
        Pipeline::refreshed(self)
    }
}

/// A retriever or pipeline shared by a host's threads that follows its store: every request
/// takes [`current`](Live::current) (one generation from start to end of that request), and
/// under [`RefreshPolicy::Auto`] a request after a commit gets the handle of the new
/// generation.
pub struct Live<T: Refreshable> {
    policy: RefreshPolicy,
    current: RwLock<Arc<T>>,
}

impl<T: Refreshable> Live<T> {
    /// `handle`, following its store by `policy`.
    pub fn new(handle: T, policy: RefreshPolicy) -> Live<T> {
        Live { policy, current: RwLock::new(Arc::new(handle)) }
    }

    /// The policy.
    pub fn policy(&self) -> RefreshPolicy {
        self.policy
    }

    /// The handle for the next request: under `Auto`, moved to the newest generation first.
    pub fn current(&self) -> Result<Arc<T>, T::Error> {
        let held = self.current.read().unwrap_or_else(|e| e.into_inner()).clone();
        if self.policy == RefreshPolicy::Manual || held.is_current()? {
            return Ok(held);
        }
        self.refresh()?;
        Ok(self.current.read().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// Moves to the newest generation now, whatever the policy (`true` when it moved).
    /// Requests running on the old handle finish on it.
    pub fn refresh(&self) -> Result<bool, T::Error> {
        let held = self.current.read().unwrap_or_else(|e| e.into_inner()).clone();
        match held.refreshed()? {
            Some(newer) => {
                let mut slot = self.current.write().unwrap_or_else(|e| e.into_inner());
                // Another thread may have moved it meanwhile: keep theirs if it is as new.
                if Arc::ptr_eq(&slot, &held) {
                    *slot = Arc::new(newer);
                }
                Ok(true)
            }
            None => Ok(false),
        }
    }
}
