//! Client authentication per route: API keys, each naming a tenant, or
//! the client certificate the listener verified (`client_ca`), by its
//! subject CN (`auth.keys[].client_cert_cn`).
//!
//! A route with `auth = { keys = [...] }` answers 401 to any request on
//! its name (infer, metadata, ready, config) without a valid key. The key
//! is read from `x-api-key`, else from `Authorization: Bearer <key>`. The
//! key's tenant scopes the response cache: two tenants sending identical
//! requests never share an entry. A request without a key, on a TLS
//! connection whose client certificate's CN a route lists, is its tenant's
//! (a presented key always wins: a wrong key is 401 whatever the
//! certificate). `/v1/` calls are authenticated by keys only.
//!
//! Models addressed directly (`/v2/models/{model}/...`, bypassing routes):
//! a model used by at least one protected route is protected too, and
//! accepts any key of those routes; a model used only by open routes (or
//! by none) stays open. Directly addressed models are never cached, so the
//! tenant does not matter there.
//!
//! The tables are built once per config snapshot ([`AccessTable::build`]),
//! keyed by the keys' digests: a lookup hashes the presented key and
//! looks the digest up, so no comparison ever runs on the secret itself.

use crate::config::secret::SecretDigest;
use crate::config::{Config, RouteAuth};
use crate::error::GatewayError;
use http::HeaderMap;
use std::collections::HashMap;
use std::sync::Arc;

/// The `WWW-Authenticate` realm of V2 routes.
pub const REALM: &str = "switchyard";

/// The keys one route (or directly addressed model) accepts.
#[derive(Debug, Default, Clone)]
pub struct KeySet {
    by_digest: HashMap<[u8; 32], Arc<str>>,
    by_cert_cn: HashMap<Arc<str>, Arc<str>>,
}

impl KeySet {
    fn add(&mut self, auth: &RouteAuth) {
        for key in &auth.keys {
            self.by_digest.entry(*key.digest.as_bytes()).or_insert_with(|| key.tenant.clone());
        }
        for cert in &auth.client_certs {
            self.by_cert_cn.entry(cert.cn.clone()).or_insert_with(|| cert.tenant.clone());
        }
    }

    /// The tenant of a client certificate whose subject CN is `cn`, if
    /// it is accepted.
    pub fn tenant_of_cert(&self, cn: &str) -> Option<&Arc<str>> {
        self.by_cert_cn.get(cn)
    }

    /// The tenant of `key`, if it is accepted.
    pub fn tenant_of(&self, key: &[u8]) -> Option<&Arc<str>> {
        self.by_digest.get(SecretDigest::of(key).as_bytes())
    }

    /// Number of accepted keys and certificates.
    pub fn len(&self) -> usize {
        self.by_digest.len() + self.by_cert_cn.len()
    }

    /// True when no key or certificate is accepted.
    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty() && self.by_cert_cn.is_empty()
    }
}

/// Who may call what, for one config snapshot.
#[derive(Debug, Default, Clone)]
pub struct AccessTable {
    routes: HashMap<String, KeySet>,
    models: HashMap<String, KeySet>,
}

impl AccessTable {
    /// The table for `config`: each protected route's keys, and for each
    /// model the keys of every protected route that uses it.
    pub fn build(config: &Config) -> AccessTable {
        let mut table = AccessTable::default();
        for route in &config.routes {
            let Some(auth) = &route.auth else { continue };
            table.routes.entry(route.name.clone()).or_default().add(auth);
            for model in &route.models {
                table.models.entry(model.clone()).or_default().add(auth);
            }
        }
        table
    }

    /// The keys that protect the V2 name `name` (a route first, as name
    /// resolution does, else a model); `None` when it is open.
    pub fn protecting(&self, config: &Config, name: &str) -> Option<&KeySet> {
        if config.route(name).is_some() {
            self.routes.get(name)
        } else {
            self.models.get(name)
        }
    }

    /// Checks the request's key for the V2 name `name`: `Ok(None)` for an
    /// open name, `Ok(Some(tenant))` for a valid key, 401 otherwise.
    pub fn authorize(
        &self,
        config: &Config,
        name: &str,
        headers: &HeaderMap,
    ) -> Result<Option<Arc<str>>, GatewayError> {
        self.authorize_peer(config, name, headers, None)
    }

    /// As [`AccessTable::authorize`], for a request whose connection
    /// presented a verified client certificate with subject CN `cert_cn`:
    /// without a key, a certificate the name's route lists gives its
    /// tenant (module docs).
    pub fn authorize_peer(
        &self,
        config: &Config,
        name: &str,
        headers: &HeaderMap,
        cert_cn: Option<&str>,
    ) -> Result<Option<Arc<str>>, GatewayError> {
        let Some(keys) = self.protecting(config, name) else { return Ok(None) };
        let Some(presented) = presented_key(headers) else {
            if let Some(cn) = cert_cn {
                return match keys.tenant_of_cert(cn) {
                    Some(tenant) => Ok(Some(tenant.clone())),
                    None => Err(unauthorized(format!(
                        "the client certificate (CN {cn:?}) is not accepted for {name:?}; send an API key"
                    ))),
                };
            }
            return Err(unauthorized(format!(
                "{name:?} needs an API key: send `x-api-key: <key>` or `Authorization: Bearer <key>`"
            )));
        };
        match keys.tenant_of(presented) {
            Some(tenant) => Ok(Some(tenant.clone())),
            None => Err(unauthorized(format!("the API key is not valid for {name:?}"))),
        }
    }
}

impl AccessTable {
    /// True when the request may see local model `model` addressed
    /// directly: no protected route uses it, or it presents a key of one
    /// that does. (Statistics use it: a model's counters are as private
    /// as the model.)
    pub fn may_see_model(&self, model: &str, headers: &HeaderMap) -> bool {
        match self.models.get(model) {
            None => true,
            Some(keys) => presented_key(headers).is_some_and(|key| keys.tenant_of(key).is_some()),
        }
    }
}

fn unauthorized(message: String) -> GatewayError {
    GatewayError::Unauthorized { realm: REALM, message }
}

/// The key a request presents: `x-api-key`, else `Authorization: Bearer`.
pub fn presented_key(headers: &HeaderMap) -> Option<&[u8]> {
    if let Some(key) = headers.get("x-api-key") {
        return Some(key.as_bytes());
    }
    bearer_token(headers)
}

/// The token of an `Authorization: Bearer <token>` header (the scheme is
/// case-insensitive, surrounding spaces are ignored).
pub fn bearer_token(headers: &HeaderMap) -> Option<&[u8]> {
    let value = headers.get(http::header::AUTHORIZATION)?.as_bytes();
    let (scheme, rest) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") || !rest.starts_with(b" ") {
        return None;
    }
    Some(rest.trim_ascii())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use std::path::Path;

    const CONFIG: &str = r#"
[[models]]
name = "cheap"
path = "c.onnx"
[[models]]
name = "heavy"
path = "h.onnx"
[[models]]
name = "lonely"
path = "l.onnx"
[[routes]]
name = "closed"
models = ["cheap", "heavy"]
auth = { keys = [{ key = "key-of-team-a-0001", tenant = "a" }, { key = "key-of-team-b-0002", tenant = "b" }, { client_cert_cn = "svc-c", tenant = "c" }] }
[[routes]]
name = "open"
models = ["heavy"]
"#;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn a_listed_client_certificate_stands_for_a_key_and_a_key_wins() {
        let config = parse(CONFIG, Path::new("/")).unwrap();
        let table = AccessTable::build(&config);
        let tenant =
            |h: &[(&'static str, &str)], cn| table.authorize_peer(&config, "closed", &headers(h), cn);
        assert_eq!(tenant(&[], Some("svc-c")).unwrap().as_deref(), Some("c"));
        assert_eq!(tenant(&[], Some("svc-x")).unwrap_err().status(), 401, "a CN the route does not list");
        assert_eq!(tenant(&[], None).unwrap_err().status(), 401);
        let key_wins = tenant(&[("x-api-key", "key-of-team-a-0001")], Some("svc-c"));
        assert_eq!(key_wins.unwrap().as_deref(), Some("a"));
        assert_eq!(tenant(&[("x-api-key", "key-of-team-a-0009")], Some("svc-c")).unwrap_err().status(), 401);
        assert_eq!(
            table.authorize(&config, "closed", &headers(&[])).unwrap_err().status(),
            401,
            "no certificate"
        );
        assert_eq!(table.authorize_peer(&config, "open", &headers(&[]), Some("svc-c")).unwrap(), None);
        assert_eq!(
            table.authorize_peer(&config, "cheap", &headers(&[]), Some("svc-c")).unwrap().as_deref(),
            Some("c")
        );
    }

    #[test]
    fn keys_map_to_tenants_and_wrong_keys_are_401() {
        let config = parse(CONFIG, Path::new("/")).unwrap();
        let table = AccessTable::build(&config);
        let tenant = |h: &[(&'static str, &str)]| table.authorize(&config, "closed", &headers(h));
        assert_eq!(tenant(&[("x-api-key", "key-of-team-a-0001")]).unwrap().as_deref(), Some("a"));
        assert_eq!(tenant(&[("authorization", "Bearer key-of-team-b-0002")]).unwrap().as_deref(), Some("b"));
        assert_eq!(
            tenant(&[("authorization", "bearer  key-of-team-b-0002 ")]).unwrap().as_deref(),
            Some("b")
        );
        for bad in [
            vec![],
            vec![("x-api-key", "key-of-team-a-0003")],
            vec![("authorization", "Basic key-of-team-a-0001")],
            vec![("authorization", "Bearerkey-of-team-a-0001")],
        ] {
            let err = tenant(&bad).unwrap_err();
            assert_eq!(err.status(), 401, "{bad:?}");
            assert!(!err.to_string().contains("0001"), "the message must not echo keys: {err}");
        }
        assert_eq!(table.authorize(&config, "open", &headers(&[])).unwrap(), None);
    }

    #[test]
    fn models_of_protected_routes_are_protected_when_addressed_directly() {
        let config = parse(CONFIG, Path::new("/")).unwrap();
        let table = AccessTable::build(&config);
        for model in ["cheap", "heavy"] {
            assert!(table.authorize(&config, model, &headers(&[])).is_err(), "{model}");
            let ok = table.authorize(&config, model, &headers(&[("x-api-key", "key-of-team-a-0001")]));
            assert!(ok.unwrap().is_some(), "{model}");
        }
        assert_eq!(table.authorize(&config, "lonely", &headers(&[])).unwrap(), None);
        assert_eq!(
            table.protecting(&config, "heavy").map(KeySet::len),
            Some(3),
            "two keys and a certificate"
        );
    }
}
