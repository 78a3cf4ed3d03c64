//! AWS conventions for finding S3 settings and credentials, as the AWS SDKs
//! and CLI read them, so a machine set up for `aws s3 ls` works unchanged:
//!
//! 1. Credentials: `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` (+
//!    `AWS_SESSION_TOKEN`); else the profile (`AWS_PROFILE`, else
//!    `default`) in the shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`,
//!    else `~/.aws/credentials`), then in the config file (`AWS_CONFIG_FILE`,
//!    else `~/.aws/config`, sections `[profile NAME]` / `[default]`); else
//!    `object_store`'s providers for web identity (EKS), containers (ECS)
//!    and the instance metadata service (EC2).
//! 2. Region: `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's `region`.
//! 3. Endpoint: `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, the profile's
//!    `s3 = endpoint_url`, then its `endpoint_url`.
//! 4. Addressing: the profile's `s3 = addressing_style` (`path`/`virtual`).
//!
//! Explicit [`crate::S3Settings`] win over all of these. The environment
//! is read once into an [`AwsEnv`] (tests build one by hand). Secret values
//! are kept in [`Secret`], whose `Debug` prints `***`; they are never
//! logged nor put in error messages.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// A credential value that must never be printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value, to hand to the signing client only.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Static credentials found by the conventions above.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticCredentials {
    /// Access key id.
    pub key_id: Secret,
    /// Secret access key.
    pub secret: Secret,
    /// Session token of temporary credentials.
    pub token: Option<Secret>,
    /// Where they came from, for messages (`environment`, `profile 'ci' in
    /// /root/.aws/credentials`).
    pub source: String,
}

/// The environment variables and home folder the conventions read.
#[derive(Debug, Clone, Default)]
pub struct AwsEnv {
    vars: HashMap<String, String>,
    home: Option<PathBuf>,
}

/// What the profile files say for one profile (keys lower-cased; keys of
/// an `s3 =` block prefixed with `s3.`).
type Profile = HashMap<String, String>;

/// A profile file's path and the wanted section, when both exist.
type ProfileFile = Option<(PathBuf, Profile)>;

impl AwsEnv {
    /// The process's `AWS_*` variables and `$HOME`.
    pub fn from_process() -> AwsEnv {
        let vars = std::env::vars().filter(|(k, _)| k.starts_with("AWS_")).collect();
        AwsEnv { vars, home: std::env::var_os("HOME").map(PathBuf::from) }
    }

    /// An environment given by hand (tests, embedding).
    pub fn from_vars<K: Into<String>, V: Into<String>>(
        vars: impl IntoIterator<Item = (K, V)>,
        home: Option<PathBuf>,
    ) -> AwsEnv {
        AwsEnv { vars: vars.into_iter().map(|(k, v)| (k.into(), v.into())).collect(), home }
    }

    /// A variable, when set and not empty.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str).filter(|v| !v.is_empty())
    }

    /// The `AWS_*` variables `object_store`'s own credential providers read
    /// (web identity, containers, instance metadata), to pass on.
    pub(crate) fn provider_vars(&self) -> impl Iterator<Item = (&str, &str)> {
        const KEYS: [&str; 8] = [
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "AWS_ROLE_ARN",
            "AWS_ROLE_SESSION_NAME",
            "AWS_ENDPOINT_URL_STS",
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
            "AWS_METADATA_ENDPOINT",
        ];
        KEYS.into_iter().filter_map(|k| Some((k, self.var(k)?)))
    }

    fn file(&self, var: &str, default: &str) -> Option<PathBuf> {
        match self.var(var) {
            Some(path) => Some(PathBuf::from(path)),
            None => self.home.as_ref().map(|h| h.join(".aws").join(default)),
        }
    }

    /// The profile name: `explicit`, else `AWS_PROFILE`, else `default`.
    pub fn profile_name(&self, explicit: Option<&str>) -> String {
        explicit.or_else(|| self.var("AWS_PROFILE")).unwrap_or("default").to_string()
    }

    /// The shared credentials file's section and the config file's section
    /// for `profile`, each with its path (missing files read as empty).
    fn profiles(&self, profile: &str) -> (ProfileFile, ProfileFile) {
        let creds = self.file("AWS_SHARED_CREDENTIALS_FILE", "credentials").and_then(|path| {
            let section = read_section(&path, profile)?;
            Some((path, section))
        });
        let config_section =
            if profile == "default" { "default".to_string() } else { format!("profile {profile}") };
        let config = self.file("AWS_CONFIG_FILE", "config").and_then(|path| {
            let section = read_section(&path, &config_section)?;
            Some((path, section))
        });
        (creds, config)
    }
}

/// Settings resolved from the environment and profile files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AwsResolved {
    /// Static credentials, when any were found.
    pub credentials: Option<StaticCredentials>,
    /// Region, when any was found.
    pub region: Option<String>,
    /// Endpoint URL, when any was found.
    pub endpoint: Option<String>,
    /// Path-style addressing from the profile's `s3 = addressing_style`.
    pub path_style: Option<bool>,
}

/// Applies the conventions of the module docs for `profile` (explicit
/// name, or `None` for `AWS_PROFILE`/`default`).
pub fn resolve(env: &AwsEnv, profile: Option<&str>) -> AwsResolved {
    let name = env.profile_name(profile);
    let (creds_file, config_file) = env.profiles(&name);
    let from_env = match (env.var("AWS_ACCESS_KEY_ID"), env.var("AWS_SECRET_ACCESS_KEY")) {
        (Some(id), Some(secret)) => Some(StaticCredentials {
            key_id: Secret::new(id),
            secret: Secret::new(secret),
            token: env.var("AWS_SESSION_TOKEN").map(Secret::new),
            source: "environment (AWS_ACCESS_KEY_ID)".into(),
        }),
        _ => None,
    };
    let from_file = |file: &ProfileFile| {
        let (path, section) = file.as_ref()?;
        profile_credentials(section, &name, path)
    };
    let credentials = from_env.or_else(|| from_file(&creds_file)).or_else(|| from_file(&config_file));
    let config = config_file.map(|(_, section)| section).unwrap_or_default();
    let region = env
        .var("AWS_REGION")
        .or_else(|| env.var("AWS_DEFAULT_REGION"))
        .map(str::to_string)
        .or_else(|| config.get("region").cloned());
    let endpoint = env
        .var("AWS_ENDPOINT_URL_S3")
        .or_else(|| env.var("AWS_ENDPOINT_URL"))
        .map(str::to_string)
        .or_else(|| config.get("s3.endpoint_url").cloned())
        .or_else(|| config.get("endpoint_url").cloned());
    let path_style = match config.get("s3.addressing_style").map(String::as_str) {
        Some("path") => Some(true),
        Some("virtual") => Some(false),
        _ => None,
    };
    AwsResolved { credentials, region, endpoint, path_style }
}

fn profile_credentials(section: &Profile, name: &str, path: &Path) -> Option<StaticCredentials> {
    Some(StaticCredentials {
        key_id: Secret::new(section.get("aws_access_key_id")?),
        secret: Secret::new(section.get("aws_secret_access_key")?),
        token: section.get("aws_session_token").map(Secret::new),
        source: format!("profile '{name}' in {}", path.display()),
    })
}

/// The `[section]` of an AWS INI file, or `None` when the file or the
/// section is missing.
fn read_section(path: &Path, section: &str) -> Option<Profile> {
    let text = std::fs::read_to_string(path).ok()?;
    parse_section(&text, section)
}

/// Parses the AWS INI dialect: `[section]` headers, `key = value` lines,
/// `#`/`;` comments, and indented `key = value` lines under a `key =` line
/// with no value (a nested block such as `s3 =`), returned as `key.sub`.
fn parse_section(text: &str, wanted: &str) -> Option<Profile> {
    let mut found: Option<Profile> = None;
    let mut inside = false;
    let mut block: Option<String> = None;
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == wanted;
            block = None;
            if inside {
                found.get_or_insert_with(HashMap::new);
            }
            continue;
        }
        let (Some(section), Some((key, value))) = (found.as_mut().filter(|_| inside), line.split_once('='))
        else {
            continue;
        };
        let (key, value) = (key.trim().to_ascii_lowercase(), value.trim().to_string());
        let indented = raw.starts_with(' ') || raw.starts_with('\t');
        match (&block, indented) {
            (Some(parent), true) => {
                section.insert(format!("{parent}.{key}"), value);
            }
            _ if value.is_empty() => block = Some(key),
            _ => {
                block = None;
                section.insert(key, value);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const CREDENTIALS: &str = "\
# team keys
[default]
aws_access_key_id = AKIDDEFAULT
aws_secret_access_key = default-secret

[ci]
aws_access_key_id=AKIDCI
aws_secret_access_key=ci-secret
aws_session_token = ci-token
";

    const CONFIG: &str = "\
[default]
region = eu-west-1

[profile ci]
region = us-west-2
endpoint_url = http://global:9000
s3 =
  endpoint_url = http://minio:9000
  addressing_style = path
";

    fn home() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".aws")).unwrap();
        std::fs::write(dir.path().join(".aws/credentials"), CREDENTIALS).unwrap();
        std::fs::write(dir.path().join(".aws/config"), CONFIG).unwrap();
        dir
    }

    #[test]
    fn profile_files_give_credentials_region_endpoint_and_addressing() {
        let home = home();
        let env = AwsEnv::from_vars([("AWS_PROFILE", "ci")], Some(home.path().into()));
        let got = resolve(&env, None);
        let creds = got.credentials.unwrap();
        assert_eq!((creds.key_id.expose(), creds.secret.expose()), ("AKIDCI", "ci-secret"));
        assert_eq!(creds.token.unwrap().expose(), "ci-token");
        assert!(creds.source.starts_with("profile 'ci' in "), "{}", creds.source);
        assert_eq!(got.region.as_deref(), Some("us-west-2"));
        assert_eq!(got.endpoint.as_deref(), Some("http://minio:9000"), "the s3 block wins");
        assert_eq!(got.path_style, Some(true));
        let default = resolve(&AwsEnv::from_vars::<&str, &str>([], Some(home.path().into())), None);
        assert_eq!(default.credentials.unwrap().key_id.expose(), "AKIDDEFAULT");
        assert_eq!(default.region.as_deref(), Some("eu-west-1"));
        assert_eq!(default.endpoint, None);
    }

    #[test]
    fn environment_wins_over_profiles() {
        let home = home();
        let env = AwsEnv::from_vars(
            [
                ("AWS_ACCESS_KEY_ID", "AKIDENV"),
                ("AWS_SECRET_ACCESS_KEY", "env-secret"),
                ("AWS_REGION", "ap-south-1"),
                ("AWS_ENDPOINT_URL", "http://env:9000"),
            ],
            Some(home.path().into()),
        );
        let got = resolve(&env, Some("ci"));
        assert_eq!(got.credentials.unwrap().source, "environment (AWS_ACCESS_KEY_ID)");
        assert_eq!(got.region.as_deref(), Some("ap-south-1"));
        assert_eq!(got.endpoint.as_deref(), Some("http://env:9000"));
    }

    #[test]
    fn missing_files_and_profiles_give_nothing() {
        let env = AwsEnv::from_vars([("AWS_PROFILE", "nope")], Some("/nonexistent".into()));
        assert_eq!(resolve(&env, None), AwsResolved::default());
        let home = home();
        let env = AwsEnv::from_vars::<&str, &str>([], Some(home.path().into()));
        assert!(resolve(&env, Some("absent")).credentials.is_none());
    }

    #[test]
    fn secrets_never_print() {
        let creds = StaticCredentials {
            key_id: Secret::new("AKIDSECRET"),
            secret: Secret::new("very-secret"),
            token: None,
            source: "environment".into(),
        };
        let shown = format!("{creds:?}");
        assert!(!shown.contains("AKIDSECRET") && !shown.contains("very-secret"), "{shown}");
    }
}
