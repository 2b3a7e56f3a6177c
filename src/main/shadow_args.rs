//! `shadow report [--since D] [--format F]` as the request line the control socket takes,
//! checked here so a mistake is a usage error (exit 64) and not the daemon's refusal.

/// The request for `shadow SUBJECT` with its options.
pub(crate) fn request(
    subject: Option<&str>,
    options: &[(String, String)],
) -> Result<String, String> {
    if subject != Some("report") {
        return Err("shadow needs report".to_string());
    }
    let mut request = "shadow report".to_string();
    let mut seen: Vec<&str> = Vec::new();
    for (flag, value) in options {
        if seen.contains(&flag.as_str()) {
            return Err(format!("{flag} given twice"));
        }
        seen.push(flag);
        match flag.as_str() {
            "--since" => {
                node_lifecycled::time::parse_duration(value)
                    .map_err(|e| format!("--since {value:?}: {e}"))?;
            }
            _ if matches!(value.as_str(), "text" | "json" | "markdown") => {}
            _ => return Err(format!("--format: text, json or markdown, not {value:?}")),
        }
        request.push_str(&format!(" {flag} {value}"));
    }
    Ok(request)
}
