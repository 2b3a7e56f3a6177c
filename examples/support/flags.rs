//! The command-line flags the floor examples share (included with `#[path]`: an example is a
//! crate of its own).

/// The number after `flag`, or a one-line error naming the flag.
pub fn number(flag: &str, value: Option<String>) -> Result<usize, String> {
    value
        .ok_or_else(|| format!("{flag} needs a value"))?
        .parse()
        .map_err(|e| format!("{flag}: {e}"))
}

/// `--stage N` among the example's stages `1..=last`.
pub fn stage(value: Option<String>, last: usize) -> Result<Option<usize>, String> {
    let stage = number("--stage", value)?;
    if (1..=last).contains(&stage) {
        Ok(Some(stage))
    } else {
        Err(format!("--stage must be 1 to {last}"))
    }
}
