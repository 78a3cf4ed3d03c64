//! Test tooling for the model store: a real S3-compatible server (moto,
//! from PyPI, started on a free loopback port and stopped by PID), a
//! byte-level TCP proxy in front of it that counts GETs and can corrupt
//! bodies in transit, and helpers to fill buckets.
//!
//! Python: `$SWITCHYARD_TEST_PYTHON`, else the workspace's `.venv` (set up
//! by `scripts/setup.sh test`, which installs `moto[server]` and `boto3`).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use switchyard_store::{AwsEnv, StoreSettings, StoreUri};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub const BUCKET: &str = "models";

pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn python() -> PathBuf {
    match std::env::var("SWITCHYARD_TEST_PYTHON") {
        Ok(p) if !p.is_empty() => PathBuf::from(p),
        _ => workspace().join(".venv/bin/python"),
    }
}

/// A moto S3 server with authentication on, and the one key it accepts.
pub struct Moto {
    child: Child,
    pub endpoint: String,
    pub key_id: String,
    pub secret: String,
}

impl Moto {
    /// Starts moto on a free port (it prints the port it bound), creates
    /// the `models` bucket and a key, and turns authentication on.
    pub fn start() -> Moto {
        let mut child = Command::new(python())
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e} (run scripts/setup.sh test)", python().display()));
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(at) = line.find("Running on http://") {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(line[at + "Running on ".len()..].trim().to_string());
                    }
                }
            }
        });
        let endpoint = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(e) => e,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "moto did not start: is moto[server] installed in {}? (scripts/setup.sh test)",
                    python().display()
                );
            }
        };
        let setup = Command::new(python())
            .arg(workspace().join("runtime/store/tests/store_support/moto_setup.py"))
            .args([&endpoint, BUCKET])
            .output()
            .unwrap();
        assert!(setup.status.success(), "moto_setup.py: {}", String::from_utf8_lossy(&setup.stderr));
        let keys: serde_json::Value = serde_json::from_slice(&setup.stdout).unwrap();
        Moto {
            child,
            endpoint,
            key_id: keys["key_id"].as_str().unwrap().into(),
            secret: keys["secret"].as_str().unwrap().into(),
        }
    }

    /// Stops the server (by its PID) and waits for it to exit.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The environment of a process with this key.
    pub fn env(&self) -> AwsEnv {
        AwsEnv::from_vars(
            [("AWS_ACCESS_KEY_ID", self.key_id.as_str()), ("AWS_SECRET_ACCESS_KEY", self.secret.as_str())],
            None,
        )
    }

    /// A client for filling the bucket (the same crate, used as an uploader).
    pub fn uploader(&self) -> Arc<dyn ObjectStore> {
        let s3 = AmazonS3Builder::new()
            .with_bucket_name(BUCKET)
            .with_endpoint(&self.endpoint)
            .with_allow_http(true)
            .with_region("us-east-1")
            .with_access_key_id(&self.key_id)
            .with_secret_access_key(&self.secret)
            .build()
            .unwrap();
        Arc::new(s3)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Store settings for `s3://models/<prefix>` at `endpoint`, cache in `cache`.
pub fn settings(endpoint: &str, prefix: &str, cache: &Path) -> StoreSettings {
    let uri = StoreUri::parse(&format!("s3://{BUCKET}/{prefix}"), "uri").unwrap();
    let mut s = StoreSettings::new(uri, cache);
    s.s3.endpoint = Some(endpoint.to_string());
    s.transfer.connect_timeout = Duration::from_secs(2);
    s.transfer.max_retries = 1;
    s.transfer.retry_timeout = Duration::from_secs(3);
    s
}

pub async fn put(store: &Arc<dyn ObjectStore>, key: &str, bytes: Vec<u8>) {
    store.put(&ObjectPath::from(key), PutPayload::from(bytes)).await.unwrap();
}

/// Uploads every file under `dir` to `prefix/<relative path>`.
pub async fn upload_dir(store: &Arc<dyn ObjectStore>, dir: &Path, prefix: &str) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(dir).unwrap().to_string_lossy().replace('\\', "/");
                put(store, &format!("{prefix}/{rel}"), std::fs::read(&path).unwrap()).await;
            }
        }
    }
}

/// Writes a Triton repository of `models` (version `version`) with the
/// model generator's exporter.
pub fn triton_repo(out: &Path, models: &str, version: u64, checksums: bool) {
    let mut cmd = Command::new(python());
    cmd.arg(workspace().join("models/triton_repo.py")).arg("--out").arg(out).args(["--models", models]);
    cmd.args(["--version", &version.to_string()]);
    if checksums {
        cmd.arg("--checksums");
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "triton_repo.py: {}", String::from_utf8_lossy(&out.stderr));
}

/// `size` bytes that differ from run to run of nothing (a fixed pattern
/// with `marker` placed in the middle).
pub fn payload(size: usize, marker: &[u8]) -> Vec<u8> {
    let mut data: Vec<u8> = (0..size).map(|i| ((i * 7919 + i / 251) % 251) as u8).collect();
    let at = size / 2;
    data[at..at + marker.len()].copy_from_slice(marker);
    data
}

/// A TCP proxy to `upstream` that counts requests (`GET /` at the start of
/// a request), while `corrupt` is on rewrites `MARKER` in responses into
/// `REPLACEMENT` (same length, so HTTP framing is untouched), and while
/// `cut_after` is non-zero closes each connection after sending that many
/// response bytes on it (a download interrupted half-way).
pub struct Proxy {
    pub endpoint: String,
    pub gets: Arc<AtomicUsize>,
    pub corrupt: Arc<AtomicBool>,
    pub cut_after: Arc<AtomicUsize>,
}

pub const MARKER: &[u8] = b"SWITCHYARD-INTACT-BYTES";
pub const REPLACEMENT: &[u8] = b"SWITCHYARD-FLIPPED-BITS";

impl Proxy {
    pub async fn start(upstream: &str) -> Proxy {
        let upstream = upstream.trim_start_matches("http://").to_string();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let (gets, corrupt) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let cut_after = Arc::new(AtomicUsize::new(0));
        let (g, c, k) = (Arc::clone(&gets), Arc::clone(&corrupt), Arc::clone(&cut_after));
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else { continue };
                tokio::spawn(relay(client, server, Arc::clone(&g), Arc::clone(&c), Arc::clone(&k)));
            }
        });
        Proxy { endpoint, gets, corrupt, cut_after }
    }
}

async fn relay(
    client: TcpStream,
    server: TcpStream,
    gets: Arc<AtomicUsize>,
    corrupt: Arc<AtomicBool>,
    cut_after: Arc<AtomicUsize>,
) {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let up = async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = cr.read(&mut buf).await {
            if n == 0 {
                break;
            }
            gets.fetch_add(buf[..n].windows(5).filter(|w| *w == b"GET /").count(), Ordering::SeqCst);
            if sw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = sw.shutdown().await;
    };
    let down = async move {
        let mut buf = vec![0u8; 64 * 1024];
        let mut carry: Vec<u8> = Vec::new();
        let mut sent = 0usize;
        loop {
            // Bytes held back (a possible start of the marker) are sent
            // anyway when nothing follows within 50 ms.
            let read = if carry.is_empty() {
                sr.read(&mut buf).await
            } else {
                match tokio::time::timeout(Duration::from_millis(50), sr.read(&mut buf)).await {
                    Ok(read) => read,
                    Err(_) => {
                        let held: Vec<u8> = std::mem::take(&mut carry);
                        if cw.write_all(&held).await.is_err() {
                            break;
                        }
                        continue;
                    }
                }
            };
            let n = match read {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            carry.extend_from_slice(&buf[..n]);
            if corrupt.load(Ordering::SeqCst) {
                replace_all(&mut carry);
            }
            let keep = partial_marker_suffix(&carry);
            let send: Vec<u8> = carry.drain(..carry.len() - keep).collect();
            let cut = cut_after.load(Ordering::SeqCst);
            if cut > 0 && sent + send.len() > cut {
                // Interrupt: the first `cut` bytes, then the connection drops.
                let _ = cw.write_all(&send[..cut.saturating_sub(sent)]).await;
                return;
            }
            sent += send.len();
            if cw.write_all(&send).await.is_err() {
                break;
            }
        }
        let _ = cw.write_all(&carry).await;
        let _ = cw.shutdown().await;
    };
    tokio::join!(up, down);
}

fn replace_all(data: &mut [u8]) {
    let mut i = 0;
    while i + MARKER.len() <= data.len() {
        if &data[i..i + MARKER.len()] == MARKER {
            data[i..i + MARKER.len()].copy_from_slice(REPLACEMENT);
            i += MARKER.len();
        } else {
            i += 1;
        }
    }
}

/// Length of the longest suffix of `data` that starts `MARKER` (held back
/// until the next read decides whether the marker is complete).
fn partial_marker_suffix(data: &[u8]) -> usize {
    (1..MARKER.len().min(data.len() + 1)).rev().find(|&k| data[data.len() - k..] == MARKER[..k]).unwrap_or(0)
}

/// Polls `cond` for up to 30 s.
pub fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(30), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
