//! The model run behind a request answered row by row
//! ([`crate::cache::row_answer`]): the cache asks for some of the
//! request's rows, in an order it chooses, and this builds that smaller
//! batch and runs it through [`routing::execute`] like any other request.

use crate::cache::row_answer::RowCompute;
use crate::cache::rows;
use crate::error::GatewayError;
use crate::routing::{self, RouteRequest, RoutingContext, Strategy};
use crate::target::Target;
use crate::tenants::Admitted;
use router_policies::Budget;
use std::time::Instant;
use switchyard_runtime::InferenceRequest;

/// What a row batch runs with, besides its rows.
pub struct RowRun<'a> {
    /// Routing's view of the snapshot.
    pub routing: RoutingContext<'a>,
    /// The route addressed.
    pub target: &'a Target,
    /// The whole request (all its rows) and the outputs asked for.
    pub request: InferenceRequest,
    /// The request's budget; every batch of it counts from `received`.
    pub budget: Budget,
    /// When the request arrived.
    pub received: Instant,
    /// The tenant's admission: each batch of rows takes its compute limits.
    pub admitted: &'a Admitted,
    /// The route's sticky draw for this client, if any.
    pub draw: Option<router_policies::Draw>,
    /// The request's priority class.
    pub class: u8,
}

/// The cache's [`RowCompute`] for `run`: the given rows of the request as
/// one batch (the request as sent when every row runs, in order).
pub fn row_compute(run: RowRun<'_>) -> RowCompute<'_> {
    let RowRun { routing, target, request, budget, received, admitted, draw, class } = run;
    let total = request.inputs.first().and_then(|(_, t)| t.shape().first().copied()).unwrap_or(0);
    Box::new(move |chosen: Vec<usize>| {
        let inputs = rows::select_rows(&request.inputs, total, &chosen);
        let outputs = request.outputs.clone();
        let rows = chosen.len();
        Box::pin(async move {
            let _computing = admitted.compute(rows)?;
            let inputs = inputs.map_err(GatewayError::Internal)?;
            let req = RouteRequest {
                target,
                request: InferenceRequest { inputs, outputs },
                budget,
                received,
                draw,
                class,
            };
            Ok(routing::execute(routing, req, Strategy::Single).await?.answer)
        })
    })
}
