//! Whom a stored response may answer: the credentials a request carries
//! that its cache key does not hold, and which of them a stored response
//! was allowed for (see [`super::http_cache_policy`] for the rules that set it).

/// Credentials a request carries that its cache key does not hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Credentials {
    /// An `Authorization` header, not keyed by the route.
    pub authorization: bool,
    /// A `Cookie` header, not keyed by the route.
    pub cookie: bool,
}

/// Which requests with unkeyed credentials a stored response may answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sharing {
    /// Requests with `Authorization` (`public`, `s-maxage`, `must-revalidate`).
    pub with_authorization: bool,
    /// Requests with `Cookie` (`public`).
    pub with_cookie: bool,
}

impl Sharing {
    /// Whether a response shared this way may answer a request with `creds`.
    pub fn serves(self, creds: Credentials) -> bool {
        (!creds.authorization || self.with_authorization) && (!creds.cookie || self.with_cookie)
    }
}
