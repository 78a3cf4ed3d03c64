//! The config file's JSON Schema, derived from the raw config types
//! ([`super::raw::RawConfig`] and the sections below it) with `schemars`:
//! every field with its type and doc comment, as `switchyard
//! config-schema` prints it. docs/src/reference/config.schema.json is this
//! output, committed (a test fails when it drifts), for editors that
//! validate TOML against a schema (taplo); a test also checks that every
//! property path it lists is on the Configuration page.

use super::raw::RawConfig;

/// The JSON Schema of the config file, pretty-printed, ending in a newline.
pub fn config_json_schema() -> Result<String, serde_json::Error> {
    let schema = schemars::schema_for!(RawConfig);
    Ok(serde_json::to_string_pretty(&schema)? + "\n")
}

#[cfg(test)]
mod tests {
    use super::config_json_schema;

    #[test]
    fn the_schema_names_every_section_and_refuses_unknown_fields() {
        let schema: serde_json::Value = serde_json::from_str(&config_json_schema().unwrap()).unwrap();
        for section in ["server", "repository", "models", "routes", "cache", "upstreams", "prefix_routes"] {
            assert!(schema["properties"][section].is_object(), "{section} missing");
        }
        assert_eq!(schema["additionalProperties"], serde_json::json!(false));
    }
}
