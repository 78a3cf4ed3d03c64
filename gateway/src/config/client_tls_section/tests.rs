use super::*;
use std::io::Write;

fn checked(raw: &RawClientTls, dir: &Path) -> Result<ClientTls, Vec<(String, String)>> {
    let mut issues = Issues::default();
    let tls = check(raw, dir, "upstreams[0].tls", &mut issues);
    match tls {
        Some(tls) if issues.is_empty() => Ok(tls),
        _ => Err(issues.iter().map(|i| (i.path.clone(), i.message.clone())).collect()),
    }
}

fn file(dir: &Path, name: &str, text: &str) -> String {
    let mut f = std::fs::File::create(dir.join(name)).unwrap();
    f.write_all(text.as_bytes()).unwrap();
    name.to_string()
}

#[test]
fn unreadable_and_non_pem_files_are_refused_with_their_field() {
    let dir = tempfile::tempdir().unwrap();
    let raw = RawClientTls { ca: Some("missing.pem".into()), ..Default::default() };
    let issues = checked(&raw, dir.path()).unwrap_err();
    assert_eq!(issues[0].0, "upstreams[0].tls.ca");
    assert!(issues[0].1.contains("cannot read \"missing.pem\""), "{issues:?}");

    let ca = file(dir.path(), "ca.pem", "not a certificate\n");
    let raw = RawClientTls { ca: Some(ca), ..Default::default() };
    let issues = checked(&raw, dir.path()).unwrap_err();
    assert!(issues[0].1.contains("holds no PEM certificate"), "{issues:?}");

    let key = file(dir.path(), "key.pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
    let raw = RawClientTls { client_key: Some(key), ..Default::default() };
    let issues = checked(&raw, dir.path()).unwrap_err();
    assert_eq!(issues[0].0, "upstreams[0].tls.client_cert", "{issues:?}");
}

#[test]
fn a_bad_server_name_is_refused_and_unverified_needs_no_roots() {
    let dir = tempfile::tempdir().unwrap();
    let raw = RawClientTls { server_name: Some("bad name".into()), ..Default::default() };
    let issues = checked(&raw, dir.path()).unwrap_err();
    assert_eq!(issues[0].0, "upstreams[0].tls.server_name");
    let raw = RawClientTls { verify: Some(false), ..Default::default() };
    let tls = checked(&raw, dir.path()).unwrap();
    assert!(!tls.verify);
}

#[test]
fn a_pem_block_that_is_not_a_certificate_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ca = file(dir.path(), "ca.pem", "-----BEGIN CERTIFICATE-----\nAAAAAAAA\n-----END CERTIFICATE-----\n");
    let raw = RawClientTls { ca: Some(ca), ..Default::default() };
    let issues = checked(&raw, dir.path()).unwrap_err();
    assert_eq!(issues[0].0, "upstreams[0].tls.ca");
    assert!(issues[0].1.contains("certificate 1 is not a valid X.509 certificate"), "{issues:?}");
}
