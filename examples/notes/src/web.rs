//! The notes web app at `/`: the bundle `clients/typescript/packages/notes-web` builds, committed
//! in `web/` (a test of the TypeScript workspace checks it equals a fresh build), compiled into
//! the binary so that `cargo run -p example-notes` serves it with no build step of its own.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

const INDEX: &str = include_str!("../web/index.html");
const SCRIPT: &str = include_str!("../web/app.js");
const STYLE: &str = include_str!("../web/app.css");
const WORKER: &str = include_str!("../web/sw.js");

/// `GET /` (and `/index.html`), `/app.js`, `/app.css`, and the service worker `/sw.js` that
/// lets the page open offline.
pub(crate) fn routes() -> Router {
    let page = || async { ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX).into_response() };
    Router::new()
        .route("/", get(page))
        .route("/index.html", get(page))
        .route("/app.js", get(|| async { ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], SCRIPT) }))
        .route("/app.css", get(|| async { ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE) }))
        .route("/sw.js", get(|| async { ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], WORKER) }))
}
