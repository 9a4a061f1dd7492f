//! Process readiness: `/ready` answers 200 only once every required cache has synced.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A flag set once, when the controller's caches have synced. Cheap to clone and share.
#[derive(Clone, Debug, Default)]
pub struct ReadyFlag(Arc<AtomicBool>);

impl ReadyFlag {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn set_ready(&self) {
        self.0.store(true, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}
