//! The configuration file read, checked and printed: one module per concept.

use crate::kube::decode::proto::ContentType;
use std::path::Path;
use std::time::Duration;

use super::*;

mod fencing;
mod policies;
mod rendering;
mod shadow;
mod values;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::from_str(text, Path::new("conf/test.toml"))
}

fn error(text: &str) -> String {
    parse(text).expect_err(text).to_string()
}
