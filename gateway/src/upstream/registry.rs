//! The live upstreams of one config: each upstream's addresses (with their
//! health, breaker and latency state), its pooled client, and the models it
//! serves with what is known of their signatures.

use super::address::Address;
use super::client::HttpClient;
use super::metadata::compatible;
use super::peer_tls::PeerTls;
use crate::config::upstream_section::TensorEncoding;
use crate::config::{ProxyConfig, UpstreamConfig, UpstreamModelConfig};
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;
use switchyard_runtime::ModelSignature;

/// What is known of an upstream model's signature.
#[derive(Debug, Clone, PartialEq)]
pub enum SignatureState {
    /// Not read yet (the upstream could not be reached); the reason.
    Unknown(String),
    /// Read and usable for its routes.
    Known(Arc<ModelSignature>),
    /// Read, but it cannot stand in for its routes' other models; the
    /// model is not used. The reason.
    Incompatible(String),
}

/// A model served by an upstream.
#[derive(Debug)]
pub struct RemoteModel {
    /// Its config.
    pub config: UpstreamModelConfig,
    state: RwLock<SignatureState>,
    expected: RwLock<Option<ModelSignature>>,
}

impl RemoteModel {
    fn new(config: UpstreamModelConfig) -> RemoteModel {
        RemoteModel {
            config,
            state: RwLock::new(SignatureState::Unknown("its metadata has not been read yet".into())),
            expected: RwLock::new(None),
        }
    }

    /// The signature, when known and usable.
    pub fn signature(&self) -> Option<Arc<ModelSignature>> {
        match &*self.state.read() {
            SignatureState::Known(sig) => Some(sig.clone()),
            _ => None,
        }
    }

    /// The signature state.
    pub fn state(&self) -> SignatureState {
        self.state.read().clone()
    }

    /// Sets the signature its routes' other models have; a known signature
    /// that does not match turns [`SignatureState::Incompatible`].
    pub fn expect(&self, reference: ModelSignature) {
        *self.expected.write() = Some(reference);
        if let Some(sig) = self.signature() {
            self.record_fetch(Ok((*sig).clone()));
        }
    }

    /// Records the outcome of reading the metadata. A failed read keeps a
    /// signature already known (the upstream is briefly down, not changed).
    pub fn record_fetch(&self, result: Result<ModelSignature, String>) {
        let next = match result {
            Ok(sig) => match self.expected.read().as_ref().map(|reference| compatible(reference, &sig)) {
                Some(Err(why)) => SignatureState::Incompatible(why),
                _ => SignatureState::Known(Arc::new(sig)),
            },
            Err(why) if self.signature().is_some() => {
                tracing::debug!(model = %self.config.name, error = %why, "metadata re-read failed");
                return;
            }
            Err(why) => SignatureState::Unknown(why),
        };
        let mut state = self.state.write();
        if *state != next {
            match &next {
                SignatureState::Known(_) => {
                    tracing::info!(model = %self.config.name, "upstream model signature read")
                }
                SignatureState::Incompatible(why) => {
                    tracing::error!(model = %self.config.name, reason = %why, "upstream model does not match its route; not used")
                }
                SignatureState::Unknown(why) => {
                    tracing::warn!(model = %self.config.name, reason = %why, "upstream model signature unknown")
                }
            }
            *state = next;
        }
    }
}

/// One upstream server and its addresses.
#[derive(Debug)]
pub struct Upstream {
    /// Its config.
    pub config: UpstreamConfig,
    /// Its addresses, in config order.
    pub addresses: Vec<Arc<Address>>,
    /// Pooled client for the gateway's own calls (V2).
    pub client: HttpClient,
    /// The models it serves (V2).
    pub models: Vec<RemoteModel>,
    /// TLS of its Pingora peers, when its addresses are `https://`.
    pub peer_tls: Option<PeerTls>,
    /// Whether its requests carry binary tensors: `tensors = "binary"`, or
    /// `"auto"` and the server listed the extension ([`Upstream::learn_extensions`]).
    binary_tensors: AtomicBool,
}

impl Upstream {
    fn new(config: UpstreamConfig) -> Upstream {
        let addresses = config
            .addrs
            .iter()
            .map(|a| Arc::new(Address::new(*a, config.breaker.failures, config.breaker.cool_down)))
            .collect();
        let client = HttpClient::new(config.timeouts.connect, config.max_idle_per_addr, config.tls.as_ref());
        let models = config.models.iter().cloned().map(RemoteModel::new).collect();
        let binary_tensors = AtomicBool::new(config.tensors == TensorEncoding::Binary);
        let peer_tls = config.tls.as_ref().map(PeerTls::new);
        Upstream { config, addresses, client, models, peer_tls, binary_tensors }
    }

    /// A Pingora peer for `addr`: TLS with its settings for an `https://`
    /// upstream, else plain.
    pub fn peer(&self, addr: std::net::SocketAddr) -> pingora::upstreams::peer::HttpPeer {
        match &self.peer_tls {
            Some(tls) => tls.peer(addr),
            None => pingora::upstreams::peer::HttpPeer::new(addr, false, String::new()),
        }
    }

    /// Whether requests to it carry binary tensors (else JSON tensors).
    pub fn sends_binary_tensors(&self) -> bool {
        self.binary_tensors.load(Ordering::Relaxed)
    }

    /// Whether the server's extensions are worth reading: `tensors = "auto"`.
    pub fn detects_tensor_encoding(&self) -> bool {
        self.config.tensors == TensorEncoding::Auto
    }

    /// Takes in the extensions the server lists in `GET /v2`: with
    /// `tensors = "auto"`, binary tensors exactly when it lists
    /// `binary_tensor_data`.
    pub fn learn_extensions(&self, extensions: &[String]) {
        if self.detects_tensor_encoding() {
            let binary = extensions.iter().any(|e| e == "binary_tensor_data");
            if self.binary_tensors.swap(binary, Ordering::Relaxed) != binary {
                tracing::info!(upstream = %self.config.name, binary,
                    "upstream tensor encoding: {}", if binary { "binary" } else { "JSON" });
            }
        }
    }

    /// Whether any address can take a request now (see
    /// [`super::select::eligible`]).
    pub fn is_usable(&self) -> bool {
        super::select::eligible(&self.addresses, Instant::now()).contains(&true)
    }
}

/// Every upstream of a config, by name, and their models, by name.
#[derive(Debug, Default)]
pub struct Upstreams {
    list: Vec<Arc<Upstream>>,
    models: HashMap<String, (usize, usize)>,
}

impl Upstreams {
    /// The upstreams of `config`, every address healthy and unmeasured,
    /// every model signature unknown.
    pub fn new(config: &ProxyConfig) -> Upstreams {
        let list: Vec<Arc<Upstream>> =
            config.upstreams.iter().cloned().map(|u| Arc::new(Upstream::new(u))).collect();
        let mut models = HashMap::new();
        for (i, upstream) in list.iter().enumerate() {
            for (j, model) in upstream.models.iter().enumerate() {
                models.insert(model.config.name.clone(), (i, j));
            }
        }
        Upstreams { list, models }
    }

    /// The upstream named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Upstream>> {
        self.list.iter().find(|u| u.config.name == name)
    }

    /// The upstream model named `name` and its upstream.
    pub fn model(&self, name: &str) -> Option<(&Arc<Upstream>, &RemoteModel)> {
        let (i, j) = *self.models.get(name)?;
        let upstream = self.list.get(i)?;
        Some((upstream, upstream.models.get(j)?))
    }

    /// True when `name` is an upstream model.
    pub fn has_model(&self, name: &str) -> bool {
        self.models.contains_key(name)
    }

    /// Every upstream, in config order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Upstream>> {
        self.list.iter()
    }
}
