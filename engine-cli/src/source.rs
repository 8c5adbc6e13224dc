//! Where a contract comes from: a file, or a server over HTTP.

use serde_json::Value;

use crate::error::{Error, Result};

/// A contract read from `origin` with the name it is known by: a file path, the URL of a server
/// (`http://host:port`, whose `/engine/contract` is fetched) or of the contract itself.
#[derive(Debug)]
pub struct Contract {
    /// The file or URL it was read from.
    pub origin: String,
    /// The document.
    pub doc: Value,
}

impl Contract {
    /// The app the contract describes.
    ///
    /// # Errors
    /// [`Error::Contract`] when the contract does not describe a valid app.
    pub fn app(&self) -> Result<engine_kernel::App> {
        engine_kernel::contract::app_from_contract(&self.doc)
            .map_err(|source| Error::Contract { origin: self.origin.clone(), source })
    }
}

/// Read the contract at `origin`.
///
/// # Errors
/// [`Error::Read`] or [`Error::Fetch`] when nothing could be read, [`Error::NotJson`] when what
/// was read is not JSON.
pub async fn load_contract(origin: &str) -> Result<Contract> {
    let text = if origin.starts_with("http://") || origin.starts_with("https://") {
        fetch(origin).await?
    } else {
        std::fs::read_to_string(origin).map_err(|source| Error::Read { path: origin.to_owned(), source })?
    };
    let doc = serde_json::from_str(&text).map_err(|source| Error::NotJson { origin: origin.to_owned(), source })?;
    Ok(Contract { origin: origin.to_owned(), doc })
}

/// The body of the contract at `url`; a bare server URL means its `/engine/contract`.
async fn fetch(url: &str) -> Result<String> {
    let mut target = reqwest::Url::parse(url).map_err(|e| Error::Fetch {
        url: url.to_owned(),
        reason: "not a URL".into(),
        source: Some(Box::new(e)),
    })?;
    if target.path() == "/" || target.path().is_empty() {
        target.set_path("/engine/contract");
    }
    let failed = |reason: &str, source: Option<reqwest::Error>| Error::Fetch {
        url: target.to_string(),
        reason: reason.to_owned(),
        source: source.map(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>),
    };
    let response = reqwest::get(target.clone()).await.map_err(|e| failed("the request failed", Some(e)))?;
    let status = response.status();
    if !status.is_success() {
        return Err(failed(&format!("the server answered {status}"), None));
    }
    response.text().await.map_err(|e| failed("the answer did not arrive", Some(e)))
}
