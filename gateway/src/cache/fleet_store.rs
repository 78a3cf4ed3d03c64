//! The L2 as the store of the tenants' fleet-wide limits
//! ([`crate::tenants::fleet`], `[fleet_limits]`): their script runs on the
//! L2's connection, under its lookup timeout (`timeout_ms`) and through its
//! breaker, so a dead Redis is skipped by the cache and the limits alike.

use super::l2::L2;
use crate::tenants::fleet::FleetStore;
use redis::{Cmd, Value};
use std::future::Future;
use std::pin::Pin;

impl FleetStore for L2 {
    fn namespace(&self) -> &str {
        &self.config().namespace
    }

    fn eval<'a>(&'a self, cmd: Cmd) -> Pin<Box<dyn Future<Output = Option<Value>> + Send + 'a>> {
        Box::pin(async move {
            if !self.allows() {
                return None;
            }
            self.run::<Value>(&cmd, self.timeouts().0).await
        })
    }
}
