//! Value parsers for flags with a closed set of values (`--format`,
//! `--durability`, `--mode`), so `--help` lists the allowed values and a bad
//! value is a usage error (exit 2) naming them. The parsing itself is the
//! library's `FromStr`.

use clap::builder::{PossibleValuesParser, TypedValueParser};
use memoir::manager::ExportFormat;
use memoir::store::Durability;
use memoir::view::RetrievalMode;

/// Export formats, as `ExportFormat::as_str` names them.
pub const EXPORT_FORMATS: [&str; 4] = ["jsonl", "openai", "markdown", "html"];
/// Durabilities, as `Durability`'s `FromStr` accepts them.
pub const DURABILITIES: [&str; 3] = ["fsync", "flush", "none"];
/// Retrieval modes, as `RetrievalMode::as_str` names them.
pub const MODES: [&str; 3] = ["hybrid", "vector", "lexical"];

/// `--format`.
pub fn export_format() -> impl TypedValueParser<Value = ExportFormat> {
    PossibleValuesParser::new(EXPORT_FORMATS).try_map(|s| s.parse::<ExportFormat>())
}

/// `--durability`.
pub fn durability() -> impl TypedValueParser<Value = Durability> {
    PossibleValuesParser::new(DURABILITIES).try_map(|s| s.parse::<Durability>())
}

/// `--mode`.
pub fn mode() -> impl TypedValueParser<Value = RetrievalMode> {
    PossibleValuesParser::new(MODES).try_map(|s| s.parse::<RetrievalMode>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_value_parses_back_to_its_name() {
        for name in EXPORT_FORMATS {
            assert_eq!(name.parse::<ExportFormat>().unwrap().as_str(), name);
        }
        for name in MODES {
            assert_eq!(name.parse::<RetrievalMode>().unwrap().as_str(), name);
        }
        for name in DURABILITIES {
            assert!(name.parse::<Durability>().is_ok(), "{name}");
        }
        assert!("nope".parse::<ExportFormat>().is_err());
    }
}
