//! The TOML config loader and validator (`switchyard check-config`, start-up
//! and every reload run it).

use std::path::Path;

/// Parses `data` as a config file and checks the outcome: an accepted
/// config parses again to the same models and routes; a rejected one says where
/// (a field path, or `(syntax)`) and why.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // A folder that does not exist: no model file or tokenizer is found,
    // nothing on this machine is read.
    let base = Path::new("/nonexistent/switchyard-fuzz");
    match switchyard::config::parse(text, base) {
        Err(issues) => {
            assert!(!issues.is_empty(), "rejected without an issue");
            for issue in &issues {
                assert!(!issue.path.is_empty() && !issue.message.is_empty(), "issue without path or message");
            }
        }
        Ok(config) => {
            let names = |c: &switchyard::config::Config| {
                let models = c.models.iter().map(|m| (m.name.clone(), m.path.clone()));
                let routes = c.routes.iter().map(|r| (r.name.clone(), r.fingerprint.clone()));
                (models.collect::<Vec<_>>(), routes.collect::<Vec<_>>())
            };
            let again = switchyard::config::parse(text, base).map(|c| names(&c));
            assert_eq!(again.ok(), Some(names(&config)), "parsing is not deterministic");
        }
    }
}
