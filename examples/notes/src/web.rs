//! The notes web app at `/`: the bundle `clients/typescript/packages/notes-web` builds, committed
//! in `web/` (a test of the TypeScript workspace checks it equals a fresh build), compiled into
//! the binary so that `cargo run -p example-notes` serves it with no build step of its own. The
//! scripts, the style and SQLite's WebAssembly (which the store's worker `app-worker.js` runs)
//! are sent gzipped (the bundle's `.gz` copies) to browsers that accept it.
//!
//! Every answer here says where it may be shown (`frame-ancestors 'none'`, `X-Frame-Options`)
//! and what the page may load (`Content-Security-Policy`: this origin only, no inline script),
//! so that a note's title that slipped past escaping could run nothing and another site cannot
//! frame the app to click its buttons. With the development secret, `/dev/users` and
//! `/dev/token` give the sign-in page its "Continue as alice" buttons.

use std::time::Duration;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};

const INDEX: &str = include_str!("../web/index.html");
const SCRIPT: &[u8] = include_bytes!("../web/app.js");
const STYLE: &[u8] = include_bytes!("../web/app.css");
const WORKER: &str = include_str!("../web/sw.js");
const STORE_WORKER: &[u8] = include_bytes!("../web/app-worker.js");
const SQLITE: &[u8] = include_bytes!("../web/sqlite3.wasm");
const SCRIPT_GZIP: &[u8] = include_bytes!("../web/app.js.gz");
const STYLE_GZIP: &[u8] = include_bytes!("../web/app.css.gz");
const STORE_WORKER_GZIP: &[u8] = include_bytes!("../web/app-worker.js.gz");
const SQLITE_GZIP: &[u8] = include_bytes!("../web/sqlite3.wasm.gz");

/// What the page may load: its own script and style, and its own origin's HTTP and WebSocket
/// (`'self'` covers `ws:` of the same host), and images from `blob:` URLs, which the page makes
/// of the note images it keeps. No inline script, no plugins, no `<base>`.
/// `'wasm-unsafe-eval'` lets the store's worker compile SQLite's WebAssembly, and nothing else.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; \
     img-src 'self' data: blob:; connect-src 'self'; worker-src 'self'; object-src 'none'; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The users the development sign-in offers.
const DEVELOPMENT_USERS: [&str; 2] = ["alice", "bob"];

/// `GET /` (and `/index.html`), `/app.js`, `/app.css`, the store's worker `/app-worker.js` with
/// `/sqlite3.wasm`, and the service worker `/sw.js` that lets the page open offline.
/// `development_secret` is the public development secret when the server signs with it; only
/// then are `/dev/users` and `/dev/token/{user}` served.
pub(crate) fn routes(development_secret: Option<&'static str>) -> Router {
    let router = Router::new()
        .route("/", get(|| async { asset("text/html; charset=utf-8", INDEX) }))
        .route("/index.html", get(|| async { asset("text/html; charset=utf-8", INDEX) }))
        .route("/app.js", gzipped("text/javascript; charset=utf-8", SCRIPT, SCRIPT_GZIP))
        .route("/app.css", gzipped("text/css; charset=utf-8", STYLE, STYLE_GZIP))
        .route("/app-worker.js", gzipped("text/javascript; charset=utf-8", STORE_WORKER, STORE_WORKER_GZIP))
        .route("/sqlite3.wasm", gzipped("application/wasm", SQLITE, SQLITE_GZIP))
        .route("/sw.js", get(|| async { asset("text/javascript; charset=utf-8", WORKER) }));
    let Some(secret) = development_secret else { return router };
    router.route("/dev/users", get(|| async { axum::Json(DEVELOPMENT_USERS) })).route(
        "/dev/token/{user}",
        post(move |Path(user): Path<String>| async move { development_token(secret, &user) }),
    )
}

fn development_token(secret: &str, user: &str) -> Response {
    if !DEVELOPMENT_USERS.contains(&user) {
        return (StatusCode::NOT_FOUND, "no such development user").into_response();
    }
    match engine::auth::issue_bearer_token(user, user, secret, Duration::from_secs(24 * 3600)) {
        Ok(token) => ([(header::CACHE_CONTROL, "no-store")], token).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// `GET` of an asset the bundle has plain and gzipped: `compressed`.
fn gzipped(content_type: &'static str, plain: &'static [u8], gzip: &'static [u8]) -> MethodRouter {
    get(move |headers: HeaderMap| async move { compressed(&headers, content_type, plain, gzip) })
}

/// `gzip` when the request's `Accept-Encoding` takes gzip (and not with `q=0`), `plain` otherwise.
fn compressed(request: &HeaderMap, content_type: &'static str, plain: &'static [u8], gzip: &'static [u8]) -> Response {
    let accepts_gzip = request
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            parts.next().is_some_and(|name| name.eq_ignore_ascii_case("gzip"))
                && !parts.any(|parameter| parameter.replace(' ', "") == "q=0")
        });
    let mut response = if accepts_gzip {
        let mut response = asset(content_type, gzip);
        response.headers_mut().insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        response
    } else {
        asset(content_type, plain)
    };
    response.headers_mut().insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    response
}

fn asset(content_type: &'static str, body: impl IntoResponse) -> Response {
    let mut response = ([(header::CONTENT_TYPE, content_type)], body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}
