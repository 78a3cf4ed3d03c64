//! Names of the response headers Switchyard adds to inference answers.
//!
//! Why constants: `HeaderName::from_static` in a `const` is checked when
//! the crate compiles and costs nothing per response, where a name given
//! as text is parsed and copied into a new buffer on every answer.

use http::header::HeaderName;

/// Where the answer came from: `hit-l1`, `hit-l2`, `miss`, `partial`, `bypass`.
pub const X_CACHE: HeaderName = HeaderName::from_static("x-cache");
/// For a batch cached row by row: rows served from the cache, `k/n`.
pub const X_SWITCHYARD_CACHED_ROWS: HeaderName = HeaderName::from_static("x-switchyard-cached-rows");
/// The model that produced the answer.
pub const X_SWITCHYARD_MODEL: HeaderName = HeaderName::from_static("x-switchyard-model");
/// The device kind that ran it.
pub const X_SWITCHYARD_DEVICE: HeaderName = HeaderName::from_static("x-switchyard-device");
/// Why the routing policy chose that model.
pub const X_SWITCHYARD_REASON: HeaderName = HeaderName::from_static("x-switchyard-reason");
/// The latency budget the request ran under, in milliseconds.
pub const X_SWITCHYARD_BUDGET_MS: HeaderName = HeaderName::from_static("x-switchyard-budget-ms");
/// Triton's binary tensor extension: length of the JSON part of a body.
pub const INFERENCE_HEADER_CONTENT_LENGTH: HeaderName =
    HeaderName::from_static("inference-header-content-length");
/// A tenant's limits, on a refusal by one of them (IETF draft
/// ratelimit-headers; [`crate::tenants::refusal`]).
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// The limit that refused, what is left and when it resets.
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
