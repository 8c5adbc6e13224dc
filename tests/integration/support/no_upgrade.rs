//! An HTTP proxy that refuses WebSocket upgrades, as some corporate proxies do: a request with
//! `Upgrade: websocket` is answered `403` with a plain-text body (not a problem document: the
//! engine never saw it), every other request is forwarded and its answer passed on. A client
//! that goes away while its request is forwarded drops the forwarded request too.

use std::net::SocketAddr;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::IntoResponse;

pub(crate) struct NoUpgradeProxy {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl NoUpgradeProxy {
    /// A proxy to the server at `upstream` (`http://host:port`).
    pub(crate) async fn start(upstream: &str) -> NoUpgradeProxy {
        let upstream = upstream.trim_end_matches('/').to_owned();
        let http = reqwest::Client::new();
        let router = axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let (http, upstream) = (http.clone(), upstream.clone());
            async move {
                let upgrade = headers.get(header::UPGRADE).and_then(|v| v.to_str().ok()).unwrap_or_default();
                if upgrade.eq_ignore_ascii_case("websocket") {
                    return (StatusCode::FORBIDDEN, "WebSocket upgrades are not allowed here").into_response();
                }
                super::proxy::send(&http, &upstream, &method, &uri, &headers, &body)
                    .await
                    .unwrap_or_else(|| (StatusCode::BAD_GATEWAY, "upstream unreachable").into_response())
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        NoUpgradeProxy { addr, task }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for NoUpgradeProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
